"""Layer base class: lazy initialisation from the first input and attribute-path naming."""

from __future__ import annotations

import functools
from collections import OrderedDict

from .._dtype import FLOATS
from .._dtype import name_of as _dtype_name
from ..errors import DeviceMismatchError, DtypeMismatchError, ShapeError, SingaError
from ..tensor import Tensor


def _device_of(args):
    first = args[0]
    if isinstance(first, (list, tuple)):
        if not first:
            raise ShapeError("the first input is an empty list; a layer over a sequence "
                             "needs at least one time step (skip empty sequences)")
        if not isinstance(first[0], Tensor):
            raise TypeError("the first input of a layer must be a Tensor or a list of Tensors")
        return first[0].device
    if not isinstance(first, Tensor):
        raise TypeError(f"the first input of a layer must be a Tensor, got {type(first).__name__}")
    return first.device


class LayerMeta(type):
    """Wraps ``initialize`` (runs eagerly, graph off) and ``forward`` (initialises first)."""

    @staticmethod
    def init_wrapper(func):
        """Wrap ``initialize`` so that it runs eagerly with graph buffering off.

        Parameter creation must happen once, now, even when the device is recording a graph;
        the layer is marked initialised afterwards. A call with no inputs does nothing.
        """
        @functools.wraps(func)
        def wrapper(self, *args, **kwargs):
            if not args:
                return
            with _device_of(args).record(None):
                func(self, *args, **kwargs)
            self.__dict__["_initialized"] = True

        return wrapper

    @staticmethod
    def forward_wrapper(func):
        """Wrap ``forward`` so that the first call runs ``initialize`` with the same inputs."""
        @functools.wraps(func)
        def wrapper(self, *args, **kwargs):
            if not self.__dict__.get("_initialized", False):
                self.initialize(*args, **kwargs)
                self.__dict__["_initialized"] = True
            return func(self, *args, **kwargs)

        return wrapper

    @staticmethod
    def getter_wrapper(func):
        """Parameters exist only after initialisation: report none before."""

        @functools.wraps(func)
        def wrapper(self):
            if not self.__dict__.get("_initialized", False):
                return {}
            return func(self)

        return wrapper

    @staticmethod
    def setter_wrapper(func):
        """Wrap ``set_params``/``set_states`` of built-in layers to refuse values before
        initialisation.

        A built-in layer creates its tensors from its first input, so before then there is
        nothing to copy into: the wrapper raises :class:`~singa.errors.SingaError` with the fix.
        """
        @functools.wraps(func)
        def wrapper(self, values):
            if not self.__dict__.get("_initialized", False):
                raise SingaError(
                    f"{type(self).__name__} {self.name or ''} has no parameters yet: layers "
                    "create them from their first input; run a forward pass (or "
                    "Model.compile) before setting params or states")
            return func(self, values)

        return wrapper

    def __new__(mcs, name, bases, attrs):
        if "initialize" in attrs:
            attrs["initialize"] = LayerMeta.init_wrapper(attrs["initialize"])
        if "forward" in attrs:
            attrs["forward"] = LayerMeta.forward_wrapper(attrs["forward"])
        return super().__new__(mcs, name, bases, attrs)


_GETTERS = ("get_params", "get_states")
_SETTERS = ("set_params", "set_states")


def params_from_first_input(*layer_classes) -> None:
    """Declare that ``layer_classes`` create their parameters and states in ``initialize``.

    The ``get_params``/``get_states`` each class itself defines then report ``{}`` before the
    first forward pass, and its ``set_params``/``set_states`` raise
    :class:`~singa.errors.SingaError` with the fix (:meth:`LayerMeta.getter_wrapper`,
    :meth:`LayerMeta.setter_wrapper`). Subclasses inherit the guarded methods; one that
    defines its own is not guarded. Only the built-in layers are declared
    (:mod:`singa.layer`): a user layer may create its tensors in ``__init__``, where SINGA
    lets them be read and set before any forward pass.
    """
    for cls in layer_classes:
        if not (isinstance(cls, type) and issubclass(cls, Layer)) or cls is Layer:
            raise SingaError(f"params_from_first_input takes Layer subclasses, got {cls!r}")
        own = vars(cls)
        for names, wrap in ((_GETTERS, LayerMeta.getter_wrapper),
                            (_SETTERS, LayerMeta.setter_wrapper)):
            for method in names:
                func = own.get(method)
                if func is not None and not getattr(func, "_guards_params", False):
                    guarded = wrap(func)
                    guarded._guards_params = True
                    setattr(cls, method, guarded)


def new_param(shape, like: Tensor, stores_grad: bool = True) -> Tensor:
    """An uninitialised tensor of ``shape`` on ``like``'s device, in its dtype: a trainable
    parameter (it requires and stores its gradient), or with ``stores_grad=False`` a state
    (BatchNorm's running statistics) that takes no gradient."""
    return Tensor(shape, like.device, like.dtype, requires_grad=stores_grad,
                  stores_grad=stores_grad)


class Layer(metaclass=LayerMeta):
    """Base of every layer.

    Sub-layers and tensors assigned as attributes are named by attribute path: a Linear
    assigned as ``self.fc1`` in a model owns ``fc1.W`` and ``fc1.b``; nested layers give
    ``block1.fc1.W``. Parameters are created lazily by :meth:`initialize` on the first call,
    from the shape, device and dtype of the first input.
    """

    sep = "."

    def __init__(self):
        self.__dict__["name"] = None
        self.__dict__["_initialized"] = False
        self.__dict__["_parent"] = None
        self.__dict__["_layers"] = OrderedDict()
        self.__dict__["_tensors"] = OrderedDict()

    # ------------------------------------------------------------------ lifecycle
    def initialize(self, *inputs):
        """Create parameters from the first inputs (override in parametric layers)."""

    def forward(self, *inputs):
        """Compute the layer's output from its inputs (every subclass overrides it).

        Parameters
        ----------
        *inputs : Tensor
            The layer's inputs; the first call also creates the parameters from them.

        Returns
        -------
        Tensor or tuple
            The output(s), recorded for autograd when training.
        """
        raise NotImplementedError(f"{type(self).__name__}.forward")

    def __call__(self, *args, **kwargs):
        return self.forward(*args, **kwargs)

    def __repr__(self) -> str:
        """The layer's type and settings, its parameter count and its sub-layers, nested."""
        from .._summary import layer_repr

        return layer_repr(self)

    # ------------------------------------------------------------------ naming
    def _prefix(self) -> str:
        name = self.__dict__.get("name")
        return name + Layer.sep if name and self.__dict__.get("_parent") is not None else ""

    def _rename(self, name) -> None:
        """Set this layer's full name and re-derive the names of what it owns."""
        self.__dict__["name"] = name
        prefix = self._prefix()
        for attr, t in self.__dict__["_tensors"].items():
            t.name = prefix + attr
        for attr, child in self.__dict__["_layers"].items():
            child._rename(prefix + attr)

    def __setattr__(self, name, value):
        if isinstance(value, Layer):
            self.__dict__["_layers"][name] = value
            value.__dict__["_parent"] = self
            value._rename(self._prefix() + name)
            return
        if name == "name":
            self._rename(value)
            return
        object.__setattr__(self, name, value)
        if isinstance(value, Tensor) and (value._name is None or value.is_dummy()
                                          or name in self.__dict__["_tensors"]):
            self.__dict__["_tensors"][name] = value
            value.name = self._prefix() + name

    def __getattr__(self, name):
        layers = self.__dict__.get("_layers")
        if layers is not None and name in layers:
            return layers[name]
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    def __delattr__(self, name):
        if name in self.__dict__.get("_layers", {}):
            del self.__dict__["_layers"][name]
        else:
            self.__dict__.get("_tensors", {}).pop(name, None)
            object.__delattr__(self, name)

    def register_layers(self, *args):
        """Register a list of layers (named ``<Class>_<idx>``) or one OrderedDict of them."""
        if len(args) == 1 and isinstance(args[0], OrderedDict):
            items = list(args[0].items())
        else:
            items = [(f"{type(v).__name__}_{i}", v) for i, v in enumerate(args)]
        for name, value in items:
            if not isinstance(value, Layer):
                raise TypeError(f"register_layers: {name} is a {type(value).__name__}, "
                                "not a Layer")
            self.__setattr__(name, value)

    # ------------------------------------------------------------------ params and states
    def get_params(self) -> dict:
        """Trainable parameters of this layer and its initialised sub-layers, by name."""
        params = {}
        for child in self.__dict__["_layers"].values():
            if child._initialized:
                params.update(child.get_params())
        return params

    def set_params(self, parameters: dict) -> None:
        """Copy values into the parameters of this layer's initialised sub-layers.

        Parameters
        ----------
        parameters : dict[str, Tensor or numpy.ndarray]
            Values by full parameter name (see :meth:`get_params`); absent names are skipped.
        """
        for child in self.__dict__["_layers"].values():
            if child._initialized:
                child.set_params(parameters)

    def get_states(self) -> dict:
        """Parameters plus extra state (e.g. BatchNorm running statistics), by name."""
        states = {}
        for child in self.__dict__["_layers"].values():
            if child._initialized:
                states.update(child.get_states())
        states.update(self.get_params())
        return states

    def set_states(self, states: dict) -> None:
        """Copy values into the states and parameters of this layer and its sub-layers.

        Parameters
        ----------
        states : dict[str, Tensor or numpy.ndarray]
            Values by full name (see :meth:`get_states`); absent names are skipped.
        """
        for child in self.__dict__["_layers"].values():
            if child._initialized:
                child.set_states(states)
        self.set_params(states)

    def _set_tensors(self, values: dict, names) -> None:
        """Copy ``values[t.name]`` into each owned tensor listed in ``names`` (if present)."""
        for attr in names:
            t = getattr(self, attr, None)
            if t is not None and t.name in values:
                _assign(t, values[t.name])

    # ------------------------------------------------------------------ checks
    def device_check(self, *inputs):
        """Check that every parameter/state in ``inputs[1:]`` is on the input's device.

        A layer never moves its parameters behind the user's back: moving them would leave the
        optimizer's state (momentum buffers, step counter) on the old device and the model on
        two devices. Raises :class:`~singa.errors.DeviceMismatchError` with the fix instead.
        """
        dev = inputs[0].device
        for t in inputs[1:]:
            if t.device is not dev:
                raise DeviceMismatchError(
                    f"{type(self).__name__} {self.name or ''}: the input is on {dev.name} but "
                    f"parameter {t.name} is on {t.device.name}. Move the whole model first "
                    f"(model.to_device(dev), which also moves the optimizer's state) or move "
                    f"the input with x.to_device(...) to {t.device.name}"
                )

    def float_check(self, x, what: str = "input") -> None:
        """Refuse a non-floating-point input to a layer that computes in floating point."""
        if x.dtype not in FLOATS:
            raise DtypeMismatchError(
                f"{type(self).__name__} {self.name or ''}: the {what} is "
                f"{_dtype_name(x.dtype)} but this layer computes in floating point; convert "
                "it first, e.g. x.as_type(tensor.float32) (from_numpy of uint8 images gives "
                "int32)"
            )

    def dtype_check(self, *inputs):
        """Convert every parameter in ``inputs[1:]`` in place to the first input's floating
        dtype (SINGA's mixed-precision switch, e.g. float32 -> float16); a non-float input
        is refused rather than turning float parameters into integers."""
        self.float_check(inputs[0])
        dt = inputs[0].dtype
        for t in inputs[1:]:
            if t.dtype != dt:
                t.to_type(dt)

    def to_device(self, device):
        """Move every parameter and state of this layer and its sub-layers to ``device``."""
        for t in self.get_states().values():
            t.to_device(device)
        return self



class ParamLayer(Layer):
    """A layer whose trainable parameters are tensor attributes of its own, created by
    ``initialize`` from the first input (Linear's ``W`` and ``b``, an RNN's per-gate weights).

    A subclass says which in :meth:`_param_names`; get_params and set_params are written
    once here.
    """

    def _param_names(self) -> list:
        """The attribute names of the parameters, in the order get_params lists them."""
        raise NotImplementedError(f"{type(self).__name__}._param_names")

    def get_params(self):
        """Trainable parameters by full name (``<layer path>.<attr>``).

        Returns
        -------
        dict[str, Tensor]
            Empty before the first forward pass creates them.
        """
        return {getattr(self, a).name: getattr(self, a) for a in self._param_names()}

    def set_params(self, parameters):
        """Copy values into the parameters of the same names; absent names are left as they are.

        Parameters
        ----------
        parameters : dict[str, Tensor or numpy.ndarray]
            Values by full name, each of the parameter's shape.

        Raises
        ------
        singa.errors.SingaError
            Before the first forward pass (no parameters yet), or on a shape mismatch.
        """
        self._set_tensors(parameters, self._param_names())


def _assign(dst: Tensor, src) -> None:
    import numpy as np

    if isinstance(src, Tensor):
        if src.shape != dst.shape:
            raise SingaError(f"cannot load {dst.name}: shape {src.shape} != {dst.shape}")
        dst.copy_data(src)
    else:
        arr = np.asarray(src)
        if tuple(arr.shape) != dst.shape:
            raise SingaError(f"cannot load {dst.name}: shape {arr.shape} != {dst.shape}")
        dst.copy_from_numpy(arr)
