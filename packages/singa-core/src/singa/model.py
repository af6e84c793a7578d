"""``singa.model``: the Model base class, graph-mode training and checkpoints.

With ``compile(..., use_graph=True)`` the first ``train_one_batch`` call records every device
operation (forward, backward, optimizer update) into the model's own graph and later calls
replay it without re-running the Python body; both return the same result Tensors.

Checkpoints (``save_states``) are zip files holding ``tensor_dict.npz`` and
``states_attr.json``, or safetensors files when the path ends in ``.safetensors``; either is
written to a temporary file in the target folder and renamed, so a crash mid-save never damages
an existing checkpoint. They hold the model's states, the caller's aux states and the attached
optimizer's state (its step counter and per-parameter slots such as SGD's moments), so a run
can be resumed. Loading never unpickles and checks every size before allocating.
"""

from __future__ import annotations

import functools
import gc
import json
import math
import os
import tempfile
import time
import warnings
import zipfile
import zlib
from collections.abc import Callable
from typing import Any

import numpy as np

from . import autograd
from . import tensor as tensor_mod
from ._checkpoint_optimizer import (
    OPTIMIZER_PREFIX,
    OPTIMIZER_STATE_TYPE,
    load_optimizer_states,
    optimizer_states,
)
from ._safetensors import is_safetensors, read_safetensors, write_safetensors
from ._shapes import check_shape
from ._summary import ModelSummary, record_output_shapes, summarize
from .errors import CheckpointError, GraphError, ShapeError
from .layer import Layer, LayerMeta
from .scheduler import Graph
from .tensor import Tensor

__all__ = ["Model", "ModelMeta", "ModelSummary", "TENSOR_DICT_FILENAME",
           "STATES_ATTR_FILENAME", "MODEL_STATE_TYPE", "AUX_STATE_TYPE",
           "OPTIMIZER_STATE_TYPE", "OPTIMIZER_PREFIX"]

TENSOR_DICT_FILENAME = "/tensor_dict.npz"
STATES_ATTR_FILENAME = "/states_attr.json"
MODEL_STATE_TYPE = 0
AUX_STATE_TYPE = 1
_MEMBERS = (TENSOR_DICT_FILENAME.lstrip("/"), STATES_ATTR_FILENAME.lstrip("/"))
_MAX_CHECKPOINT_BYTES = 1 << 34  # refuse archives that claim more than 16 GiB uncompressed


def _remove_creator(x) -> None:
    if isinstance(x, Tensor):
        x.creator = None
    elif isinstance(x, (list, tuple)):
        for v in x:
            _remove_creator(v)
    elif isinstance(x, dict):
        for v in x.values():
            _remove_creator(v)


def _first_device(args):
    first = args[0]
    if isinstance(first, (list, tuple)):
        first = first[0]
    if not isinstance(first, Tensor):
        raise TypeError("train_one_batch's first argument must be a Tensor (or a list of them)")
    return first.device


class ModelMeta(LayerMeta):
    """Wraps ``train_one_batch`` so that graph mode records once and replays afterwards."""

    @staticmethod
    def buffer_operation(func: Callable[..., Any]) -> Callable[..., Any]:
        """Wrap a ``train_one_batch`` so that, in graph mode, its first call records every
        device operation into the model's own graph and later calls replay that graph and
        return the recorded results (inputs must keep their shapes).

        Parameters
        ----------
        func : callable
            The class's ``train_one_batch``.

        Returns
        -------
        callable
            The wrapper (eager when graph mode is off or the model is not training).
        """
        @functools.wraps(func)
        def wrapper(self, *args, **kwargs):
            if not (self.graph_mode and self.training) or self.__dict__.get("_recording"):
                # eager, or a nested train_one_batch (super() call) inside a recording
                return func(self, *args, **kwargs)
            if not args:
                raise ValueError("train_one_batch expects at least one input tensor")
            dev = _first_device(args)
            if not self._buffered:
                # the model's own graph: two graph-mode models on one device (a GAN's
                # generator and discriminator) never append to, run or reset each other's
                graph = Graph(dev)
                with dev.record(graph):
                    self._recording = True
                    try:
                        self._results = func(self, *args, **kwargs)
                        dev.Sync()
                    finally:
                        self._recording = False
                self._graph, self._graph_device = graph, dev
                self._recorded_inputs = _input_blocks(args, kwargs)
                self._recorded_shapes = _input_shapes(args, kwargs)
                self._buffered = True
                _remove_creator(self._results)
                gc.collect()
            else:
                _check_input_shapes(self._recorded_shapes, _input_shapes(args, kwargs))
                _warn_if_new_inputs(self._recorded_inputs, _input_blocks(args, kwargs))
            self._graph.run(self.sequential)
            return self._results

        return wrapper

    def __new__(mcs, name, bases, attrs):
        if "train_one_batch" in attrs:
            attrs["train_one_batch"] = ModelMeta.buffer_operation(attrs["train_one_batch"])
        return super().__new__(mcs, name, bases, attrs)


def _input_blocks(args, kwargs) -> list:
    blocks = []
    for a in list(args) + list(kwargs.values()):
        for t in (a if isinstance(a, (list, tuple)) else (a,)):
            blocks.append(t.data.block if isinstance(t, Tensor) else None)
    return blocks


def _input_shapes(args, kwargs) -> list:
    return [t.shape if isinstance(t, Tensor) else None
            for a in list(args) + list(kwargs.values())
            for t in (a if isinstance(a, (list, tuple)) else (a,))]


def _check_input_shapes(recorded: list, now: list) -> None:
    """A replay computes with the recorded shapes; other shapes (a smaller last batch) would
    return the recorded batch's outputs and train on its data, so they are refused."""
    if recorded != now:
        raise GraphError(
            f"train_one_batch was recorded with inputs of shapes {recorded} and is now called "
            f"with {now}. A graph-mode model replays the recorded graph, which has fixed "
            "shapes. Keep the batch size fixed (drop or pad the last partial batch), or train "
            "with model.graph(False) for varying shapes (or build and compile a second model "
            "for the other shape)."
        )


def _warn_if_new_inputs(recorded: list, now: list) -> None:
    if len(recorded) != len(now) or any(a is not b for a, b in zip(recorded, now)):
        warnings.warn(
            "train_one_batch replays the graph recorded at its first call, which reads the "
            "input tensors of that call; the tensors passed now are different objects and "
            "their values are ignored. Copy each batch into the same placeholders "
            "(tx.copy_from_numpy(x)) or call model.graph(False) for eager training.",
            stacklevel=3)


class Model(Layer, metaclass=ModelMeta):
    """Base class of models: define ``forward`` and ``train_one_batch``.

    ``model(x, y)`` runs ``train_one_batch`` while training and ``forward`` in eval mode
    (never buffered).
    """

    def __init__(self):
        super().__init__()
        self.training = True
        self.graph_mode = True
        self.sequential = False
        self._buffered = False
        self._results = None
        self._graph = None

    def compile(self, inputs, is_train=True, use_graph=False, sequential=False):
        """Initialise every layer from placeholder ``inputs`` and choose the execution mode."""
        if not isinstance(inputs, (list, tuple)) or not inputs or not all(
                isinstance(t, Tensor) for t in inputs):
            raise TypeError("compile expects a non-empty list of Tensors (input placeholders)")
        dev = inputs[0].device
        with dev.record(Graph(dev)), record_output_shapes(self):  # probe forward, dropped
            self.forward(*inputs)
        self.__dict__["_summary_input_shapes"] = [t.shape for t in inputs]
        autograd.training = bool(is_train)
        self.training = bool(is_train)
        self.graph_mode = bool(use_graph)
        self.sequential = bool(sequential)
        self._reset_graph()

    def forward(self, *input: Any) -> Any:
        """The model's forward pass, written by each subclass: inputs to outputs.

        Parameters
        ----------
        *input : Tensor
            The model's inputs.

        Returns
        -------
        Tensor or tuple of Tensor
            The outputs. The base class raises ``NotImplementedError``.
        """
        raise NotImplementedError(f"{type(self).__name__}.forward")

    def summary(self) -> ModelSummary:
        """A table of the layers (nested, depth first): name, type, output shape recorded
        by :meth:`compile`'s forward pass, parameter count; then the totals. Prints as the
        table (``print(model.summary())``); its fields (``rows``, ``total_params``,
        ``non_trainable_states``) are there for programs."""
        return summarize(self)

    def train_one_batch(self, *input: Any, **kwargs: Any) -> Any:
        """One training step, written by each subclass: forward, loss, backward and the
        optimizer update. In graph mode (:meth:`compile` with ``use_graph=True``) the first
        call records it and later calls replay it (:class:`ModelMeta`).

        Parameters
        ----------
        *input : Tensor
            The batch (the first argument is a Tensor or a list of them).
        **kwargs
            Whatever else the subclass's step takes.

        Returns
        -------
        object
            What the subclass returns (typically the output and the loss).
        """
        raise NotImplementedError(f"{type(self).__name__}.train_one_batch")

    def train(self, mode=True):
        """Training mode (``mode=False`` is eval); sets ``autograd.training`` too."""
        self.training = bool(mode)
        autograd.training = bool(mode)

    def eval(self) -> None:
        """Evaluation mode: ``train(False)``."""
        self.train(False)

    def graph(self, mode=True, sequential=False):
        """Turn graph mode on/off for ``train_one_batch`` (re-records on the next call)."""
        if self._buffered and (mode != self.graph_mode or sequential != self.sequential):
            self._reset_graph()
        self.graph_mode = bool(mode)
        self.sequential = bool(sequential)

    def _reset_graph(self):
        graph = self.__dict__.get("_graph")
        if graph is not None:
            graph.reset()
        self._graph = None
        self._buffered = False
        self._results = None

    def to_device(self, device):
        """Move the model's parameters and states, and its optimizer's state (moments, step
        counter, hyper-parameters), to ``device``; a recorded graph is dropped (re-recorded
        at the next ``train_one_batch``)."""
        from .device import get_device

        device = get_device(device) if isinstance(device, str) else device
        super().to_device(device)
        optimizer = self.__dict__.get("optimizer")
        if optimizer is not None:
            for slot in getattr(optimizer, "_slots", ()):
                for t in getattr(optimizer, slot).values():
                    t.to_device(device)
            optimizer.step_counter.to_device(device)
            for t in optimizer._values.values():
                t.to_device(device)
        self._reset_graph()
        return self

    def set_optimizer(self, optimizer):
        """Attach the optimizer that ``train_one_batch`` calls as ``self.optimizer(loss)``."""
        self.optimizer = optimizer

    def __call__(self, *input, **kwargs):
        if self.training:
            return self.train_one_batch(*input, **kwargs)
        return self.forward(*input, **kwargs)

    # ------------------------------------------------------------------ checkpoints
    def save_states(self, fpath, aux_states=None):
        """Write the model states, ``aux_states`` (a dict of Tensors) and the attached
        optimizer's state (step counter and per-parameter slots, see :meth:`load_states`) to
        ``fpath``: a zip file, or safetensors when ``fpath`` ends in ``.safetensors`` (needs
        ``pip install safetensors``).

        The file is written under a temporary name in the same folder, synced, and renamed over
        ``fpath``, so an existing checkpoint survives a crash during the save (SINGA refused to
        overwrite an existing file; here overwriting is the atomic replace).
        """
        aux_states = aux_states or {}
        states = self.get_states()
        arrays, attrs = {}, {}
        for kind, group in ((MODEL_STATE_TYPE, states), (AUX_STATE_TYPE, aux_states),
                            (OPTIMIZER_STATE_TYPE, optimizer_states(self))):
            for name, t in group.items():
                if not isinstance(t, Tensor):
                    raise TypeError(f"state {name!r} is a {type(t).__name__}; states must be "
                                    "Tensors")
                if name in arrays:
                    raise CheckpointError(f"state name {name!r} is used twice (model and aux)")
                arr = tensor_mod.to_numpy(t)
                arrays[name] = arr
                attrs[name] = {"state_type": kind, "shape": list(arr.shape),
                               "dtype": str(arr.dtype)}
        folder = os.path.dirname(os.path.abspath(fpath))
        os.makedirs(folder, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".singa-ckpt-", suffix=".tmp", dir=folder)
        try:
            with os.fdopen(fd, "wb") as fh:
                # mkstemp creates the file 0600; give the checkpoint the usual permissions
                mode = os.stat(fpath).st_mode & 0o777 if os.path.exists(fpath) else 0o644
                os.fchmod(fh.fileno(), mode)
                if not is_safetensors(fpath):
                    _write_checkpoint(fh, arrays, attrs)
                    fh.flush()
                    os.fsync(fh.fileno())
            if is_safetensors(fpath):  # the package writes by path (and recreates the file)
                write_safetensors(tmp, arrays, {n: a["state_type"] for n, a in attrs.items()})
                os.chmod(tmp, mode)
                _fsync_file(tmp)
            os.replace(tmp, fpath)
        except BaseException:
            if os.path.exists(tmp):
                os.unlink(tmp)
            raise
        _fsync_dir(folder)
        remove_stale_temp_files(folder)

    def load_states(self, fpath, max_bytes: int | None = None, *, load_optimizer=True):
        """Load states saved by :meth:`save_states` (zip, or ``.safetensors``: any
        safetensors file whose tensor names are the model's state names); returns the aux
        states as host Tensors.

        The optimizer state in the file is restored into the attached optimizer
        (``set_optimizer``) with its ``set_states``, unless ``load_optimizer`` is False or no
        optimizer is attached: its step counter, and per-parameter slots that it adopts at
        each parameter's next update. Raises :class:`singa.errors.CheckpointError` listing
        missing, unexpected and mis-shaped states, or describing a malformed/hostile file.
        Never unpickles. At most ``max_bytes`` are read; by default what the model can hold:
        3 times its states' bytes (room for aux states such as optimizer moments) plus 64 MiB.
        """
        states = self.get_states()
        if max_bytes is None:
            own = sum(t.size() * tensor_mod.sizeof(t.dtype) for t in states.values())
            max_bytes = min(_AUX_ALLOWANCE[0] * own + _AUX_ALLOWANCE[1], _MAX_CHECKPOINT_BYTES)
        arrays, attrs = read_checkpoint(fpath, max_bytes)
        model_names = {n for n, a in attrs.items() if a.get("state_type") == MODEL_STATE_TYPE}
        if not states and model_names:
            raise CheckpointError(
                f"cannot load {fpath}: the model has no states yet (layers create their "
                "parameters from the first input); call model.compile([...]) first")
        missing = sorted(set(states) - model_names)
        extra = sorted(model_names - set(states))
        bad = sorted(f"{n}: checkpoint {tuple(arrays[n].shape)} vs model {states[n].shape}"
                     for n in set(states) & model_names if tuple(arrays[n].shape) !=
                     states[n].shape)
        if missing or extra or bad:
            parts = []
            if missing:
                parts.append(f"missing from the checkpoint: {missing}")
            if extra:
                parts.append(f"not in the model: {extra}")
            if bad:
                parts.append(f"shape mismatch: {bad}")
            raise CheckpointError(f"checkpoint {fpath} does not match the model; "
                                  + "; ".join(parts))
        restore_optimizer = load_optimizer_states(
            self, fpath, {n: arrays[n] for n, a in attrs.items()
                          if a["state_type"] == OPTIMIZER_STATE_TYPE and load_optimizer})
        self.set_states({n: arrays[n] for n in model_names})
        restore_optimizer()
        return {n: tensor_mod.from_numpy(arrays[n]) for n, a in attrs.items()
                if a.get("state_type") == AUX_STATE_TYPE}


def _write_checkpoint(fh, arrays: dict, attrs: dict) -> None:
    """Stream the zip: ``tensor_dict.npz`` (one ``<name>.npy`` member per state, written
    without pickling) and ``states_attr.json``. Nothing is staged in memory.

    The npz is stored, not deflated: trained float weights shrink by a few percent at most
    while deflate costs ~15 MB/s of CPU; the JSON is deflated. Any zip reader handles both.
    """
    with zipfile.ZipFile(fh, "w", zipfile.ZIP_DEFLATED) as zf:
        info = zipfile.ZipInfo(_MEMBERS[0], date_time=time.localtime()[:6])
        info.compress_type = zipfile.ZIP_STORED
        info.external_attr = 0o644 << 16
        with zf.open(info, "w", force_zip64=True) as npz_stream:
            with zipfile.ZipFile(npz_stream, "w", zipfile.ZIP_STORED) as npz:
                for name, arr in arrays.items():
                    with npz.open(name + ".npy", "w", force_zip64=True) as member:
                        np.lib.format.write_array(member, np.ascontiguousarray(arr),
                                                  allow_pickle=False)
        zf.writestr(_MEMBERS[1], json.dumps(attrs, indent=1))


def _fsync_file(path: str) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _fsync_dir(folder: str) -> None:
    """Make the rename durable (POSIX); harmless where directories cannot be opened."""
    try:
        dfd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(dfd)
    except OSError:
        pass
    finally:
        os.close(dfd)


#: states_attr.json holds ~100 bytes per state; 16 MiB is far above any real model's.
_MAX_ATTRS_BYTES = 1 << 24
#: Room for aux states (optimizer moments, step counters) beyond the model's own states, as a
#: multiple of the model's bytes plus a constant: a checkpoint larger than that is refused.
_AUX_ALLOWANCE = (3, 1 << 26)
_STALE_TMP_SECONDS = 3600
_CHUNK = 1 << 20


def _read_member(zf, name: str, limit: int, fpath) -> bytes:
    """Read member ``name`` in chunks, refusing it past ``limit`` bytes of output."""
    info = zf.getinfo(name)
    if info.file_size > limit:
        raise CheckpointError(
            f"{fpath}: {name} declares {info.file_size} bytes uncompressed, more than the "
            f"{limit} this model can hold; refusing an implausibly large (or zip-bomb) archive")
    out = bytearray()
    with zf.open(name) as fh:  # zipfile stops at the declared size and checks the CRC
        while chunk := fh.read(_CHUNK):
            out += chunk
            if len(out) > limit:
                raise CheckpointError(f"{fpath}: {name} inflates past {limit} bytes; refusing "
                                      "a zip bomb")
    return bytes(out)


def _read_npy(member, size: int, name: str, fpath) -> np.ndarray:
    """One ``.npy`` member, its header checked against the member size before allocating."""
    fmt = np.lib.format
    try:
        version = fmt.read_magic(member)
        shape, fortran, dtype = (fmt.read_array_header_1_0(member) if version == (1, 0)
                                 else fmt.read_array_header_2_0(member))
    except ValueError as exc:
        raise CheckpointError(f"{fpath}: state {name!r} is not a .npy array ({exc})") from None
    if dtype.hasobject or dtype.kind not in "fiub":
        raise CheckpointError(f"{fpath}: state {name!r} has unsupported dtype {dtype} "
                              "(pickled objects are refused)")
    try:  # numpy's header parser lets (-4, -3) and (True, 12) through
        shape = check_shape(shape, f"state {name!r}: its .npy header's shape")
    except ShapeError as exc:
        raise CheckpointError(f"{fpath}: {exc}; the checkpoint is damaged or was not written "
                              "by save_states") from None
    nbytes = math.prod(shape) * dtype.itemsize
    if nbytes > size:
        raise CheckpointError(f"{fpath}: state {name!r} claims shape {shape} ({nbytes} bytes) "
                              f"but its member holds only {size} bytes")
    raw = member.read(nbytes)
    if len(raw) != nbytes:
        raise CheckpointError(f"{fpath}: state {name!r} is truncated")
    arr = np.frombuffer(raw, dtype).reshape(shape, order="F" if fortran else "C")
    return arr.copy()


def _check_attrs(fpath, attrs) -> None:
    if not isinstance(attrs, dict):
        raise CheckpointError(f"{fpath}: states_attr.json must hold an object, got "
                              f"{type(attrs).__name__}")
    for name, a in attrs.items():
        if not isinstance(a, dict) or a.get("state_type") not in (
                MODEL_STATE_TYPE, AUX_STATE_TYPE, OPTIMIZER_STATE_TYPE):
            raise CheckpointError(
                f"{fpath}: states_attr.json entry {name!r} is {a!r}; each entry must be an "
                f"object with \"state_type\": {MODEL_STATE_TYPE} (model), {AUX_STATE_TYPE} "
                f"(aux) or {OPTIMIZER_STATE_TYPE} (optimizer). The file is damaged or was not "
                "written by save_states")


def read_checkpoint(fpath, max_bytes: int = _MAX_CHECKPOINT_BYTES):
    """Validate and read a checkpoint zip: ``(arrays by name, attributes by name)``.

    Nothing is inflated past ``max_bytes`` (``load_states`` passes what the model can hold)
    and every member is streamed: a small file that inflates to gigabytes (a zip bomb), a
    member failing its CRC, or an array header that claims more than its member holds raises
    :class:`~singa.errors.CheckpointError` naming the file.
    """
    if os.path.isdir(fpath):
        raise CheckpointError(f"checkpoint {fpath!r} is a directory; pass the checkpoint file "
                              "that save_states wrote (e.g. os.path.join(folder, 'model.zip'))")
    if not os.path.isfile(fpath):
        raise CheckpointError(f"checkpoint {fpath!r} does not exist")
    if is_safetensors(fpath):
        arrays, attrs = read_safetensors(fpath, max_bytes, _MAX_ATTRS_BYTES)
        _check_attrs(fpath, attrs)
        return arrays, attrs
    try:
        zf = zipfile.ZipFile(fpath)
    except (zipfile.BadZipFile, OSError) as exc:
        raise CheckpointError(f"{fpath} is not a SINGA checkpoint (not a zip file: {exc})") \
            from None
    try:
        with zf:
            return _read_zip(zf, fpath, max_bytes)
    except (zipfile.BadZipFile, EOFError, zlib.error, OSError) as exc:
        raise CheckpointError(f"{fpath} is damaged ({type(exc).__name__}: {exc}); restore it "
                              "from a good copy or save it again") from None


def _read_zip(zf, fpath, max_bytes: int):
    names = zf.namelist()
    unexpected = [n for n in names if n not in _MEMBERS]
    if unexpected or sorted(names) != sorted(_MEMBERS):
        raise CheckpointError(
            f"{fpath} is not a SINGA checkpoint: expected exactly {list(_MEMBERS)}, found "
            f"{names} (refusing unknown or path-traversal members)")
    if sum(i.file_size for i in zf.infolist()) > max_bytes + _MAX_ATTRS_BYTES:
        raise CheckpointError(f"{fpath}: declared uncompressed size is implausibly large "
                              f"(over {max_bytes} bytes; a zip bomb?)")
    raw_attrs = _read_member(zf, _MEMBERS[1], _MAX_ATTRS_BYTES, fpath)
    try:
        attrs = json.loads(raw_attrs.decode("utf-8"))
    except (ValueError, UnicodeDecodeError, RecursionError) as exc:
        raise CheckpointError(f"{fpath}: states_attr.json is not valid JSON ({exc})") \
            from None
    _check_attrs(fpath, attrs)
    if zf.getinfo(_MEMBERS[0]).file_size > max_bytes:
        raise CheckpointError(f"{fpath}: tensor_dict.npz declares "
                              f"{zf.getinfo(_MEMBERS[0]).file_size} bytes, more than the "
                              f"{max_bytes} allowed; refusing an implausibly large (or "
                              "zip-bomb) archive")
    arrays = {}
    with zf.open(_MEMBERS[0]) as outer:  # stored: seekable without re-inflating
        try:
            inner = zipfile.ZipFile(outer)
        except zipfile.BadZipFile as exc:
            raise CheckpointError(f"{fpath}: tensor_dict.npz is damaged or not an npz archive "
                                  f"({exc})") from None
        with inner:
            infos = inner.infolist()
            declared = sum(i.file_size for i in infos)
            if declared > max_bytes:
                raise CheckpointError(
                    f"{fpath}: tensor_dict.npz declares {declared} bytes of arrays (limit "
                    f"{max_bytes}); refusing an implausibly large (or zip-bomb) archive")
            for info in infos:
                if not info.filename.endswith(".npy"):
                    raise CheckpointError(f"{fpath}: tensor_dict.npz holds {info.filename!r}, "
                                          "not a .npy array")
                name = info.filename[:-4]
                with inner.open(info) as member:
                    arrays[name] = _read_npy(member, info.file_size, name, fpath)
    if set(attrs) != set(arrays):
        raise CheckpointError(f"{fpath}: states_attr.json and tensor_dict.npz list different "
                              "states")
    return arrays, attrs


def remove_stale_temp_files(folder, older_than: float = _STALE_TMP_SECONDS) -> list:
    """Delete ``.singa-ckpt-*.tmp`` files in ``folder`` left by saves killed more than
    ``older_than`` seconds ago (a live save keeps touching its file); returns their paths."""
    removed: list[str] = []
    now = time.time()
    try:
        entries = list(os.scandir(folder))
    except OSError:
        return removed
    for e in entries:
        if e.name.startswith(".singa-ckpt-") and e.name.endswith(".tmp"):
            try:
                if now - e.stat().st_mtime > older_than:
                    os.unlink(e.path)
                    removed.append(e.path)
            except OSError:
                pass
    return removed
