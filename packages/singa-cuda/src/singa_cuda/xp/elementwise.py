"""Elementwise kernels: ufuncs writing into the output view (``out=``).

Every kernel here is safe when the output aliases an input (``x += y``): each reads element i
of its inputs before writing element i of the output, and composite kernels read the input
only in their first step.
"""

from __future__ import annotations

from ._module import ArrayModule


def kernels(am: ArrayModule) -> dict:
    """``{op_name: kernel}`` for the unary, scalar and binary elementwise ops."""
    xp = am.xp

    def round_half_away(x, out):
        # |x| + 0.5 floored, sign restored: round half away from zero (SINGA's Round)
        tmp = xp.empty(x.shape, x.dtype)  # abs of a 0-d array would return a scalar
        xp.abs(x, out=tmp)
        tmp += 0.5
        xp.floor(tmp, out=tmp)
        xp.copysign(tmp, x, out=out)

    def negative(x, out):
        xp.multiply(x, -1, out=out)

    def sigmoid(x, out):
        # float16 in float32, rounded once: three half roundings (exp, +1, 1/x) drift past an
        # ulp, and cupy's half exp is not correctly rounded
        wide = am.acc_dtype(x.dtype)
        res = out if wide is None else xp.empty(x.shape, wide)
        xp.multiply(x, -1, out=res)
        xp.exp(res, out=res)
        res += 1
        xp.reciprocal(res, out=res)
        if res is not out:
            out[...] = res

    def relu(x, out):
        xp.maximum(x, 0, out=out)

    def softplus(x, out):
        xp.logaddexp(0, x, out=out, casting="unsafe")

    def softsign(x, out):
        tmp = xp.empty(x.shape, x.dtype)
        xp.abs(x, out=tmp)
        tmp += 1
        xp.divide(x, tmp, out=out)

    def logical_not(x, out):
        xp.equal(x, 0, out=out, casting="unsafe")

    def sign(x, out):
        xp.sign(x, out=out)

    unary = {
        "Abs": xp.abs, "Neg": negative, "Sign": sign, "Square": xp.square,
        "Ceil": xp.ceil, "Floor": xp.floor, "Round": round_half_away, "RoundE": xp.rint,
        "Exp": xp.exp, "Log": xp.log, "Sqrt": xp.sqrt, "Reciprocal": xp.reciprocal,
        "Erf": am.erf, "ReLU": relu, "Sigmoid": sigmoid, "Tanh": xp.tanh,
        "SoftPlus": softplus, "SoftSign": softsign, "Sin": xp.sin, "Cos": xp.cos,
        "Tan": xp.tan, "Asin": xp.arcsin, "Acos": xp.arccos, "Atan": xp.arctan,
        "Sinh": xp.sinh, "Cosh": xp.cosh, "Asinh": xp.arcsinh, "Acosh": xp.arccosh,
        "Atanh": xp.arctanh, "Not": logical_not,
    }

    alias = am.alias_outputs  # in-place calls pass the output object itself (no cupy copy)

    def unary_kernel(fn):
        def kernel(ins, outs, attrs):
            fn(alias(ins, outs)[0], out=outs[0])

        return kernel

    def scalar_kernel(ufunc, reflected=False):
        if reflected:
            def kernel(ins, outs, attrs):
                ufunc(attrs["value"], alias(ins, outs)[0], out=outs[0], casting="unsafe")
        else:
            def kernel(ins, outs, attrs):
                ufunc(alias(ins, outs)[0], attrs["value"], out=outs[0], casting="unsafe")
        return kernel

    scalar = {
        "AddScalar": (xp.add, False), "SubScalar": (xp.subtract, False),
        "RSubScalar": (xp.subtract, True), "MulScalar": (xp.multiply, False),
        "DivScalar": (xp.divide, False), "RDivScalar": (xp.divide, True),
        "PowScalar": (xp.power, False), "RPowScalar": (xp.power, True),
        "LTScalar": (xp.less, False), "LEScalar": (xp.less_equal, False),
        "GTScalar": (xp.greater, False), "GEScalar": (xp.greater_equal, False),
        "EQScalar": (xp.equal, False), "NEScalar": (xp.not_equal, False),
        "MaxScalar": (xp.maximum, False), "MinScalar": (xp.minimum, False),
    }

    def binary_kernel(ufunc):
        def kernel(ins, outs, attrs):
            a, b = alias(ins, outs)
            ufunc(a, b, out=outs[0], casting="unsafe")

        return kernel

    def int_divide(ins, outs, attrs):
        # the op table's integer Div truncates toward zero (C semantics), as the reference's
        # float division cast back to int does
        a, b, out = ins[0], ins[1], outs[0]
        if xp.dtype(out.dtype).kind == "i":
            out[...] = xp.trunc(xp.true_divide(a, b))
        else:
            xp.divide(a, b, out=out)

    binary = {
        "Add": xp.add, "Sub": xp.subtract, "Mul": xp.multiply, "Pow": xp.power,
        "LT": xp.less, "LE": xp.less_equal, "GT": xp.greater, "GE": xp.greater_equal,
        "EQ": xp.equal, "NE": xp.not_equal, "Maximum": xp.maximum, "Minimum": xp.minimum,
        "And": xp.logical_and, "Or": xp.logical_or, "Xor": xp.logical_xor,
    }

    def relu_backward(ins, outs, attrs):
        dy, x = alias(ins, outs)
        mask = x > 0  # read x before the output (which may alias dy or x) is written
        xp.multiply(dy, mask, out=outs[0], casting="unsafe")

    def clip(ins, outs, attrs):
        lo, hi = attrs.get("min"), attrs.get("max")
        x, out = ins[0], outs[0]
        if lo is None and hi is None:
            xp.copyto(out, x)
        elif lo is None:
            xp.minimum(x, hi, out=out, casting="unsafe")
        elif hi is None:
            xp.maximum(x, lo, out=out, casting="unsafe")
        else:
            xp.maximum(x, lo, out=out, casting="unsafe")
            xp.minimum(out, hi, out=out, casting="unsafe")

    def wide_copy(x):
        """x as a new array of its compute dtype (float16 in float32, rounded once at the
        end, as the CPU kernels do)."""
        return xp.array(x, dtype=am.acc_dtype(x.dtype) or x.dtype)

    def hard_sigmoid(ins, outs, attrs):
        z = wide_copy(ins[0])
        z *= attrs["alpha"]
        z += attrs["gamma"]
        xp.maximum(z, 0, out=z)
        xp.minimum(z, 1, out=z)
        outs[0][...] = z

    def hard_swish(ins, outs, attrs):
        x = wide_copy(ins[0])
        mid = x + 3
        mid *= x
        mid /= 6
        outs[0][...] = xp.where(x <= -3, 0, xp.where(x >= 3, x, mid))

    def hard_sigmoid_backward(ins, outs, attrs):
        alpha = attrs["alpha"]
        z = wide_copy(ins[1])
        z *= alpha
        z += attrs["gamma"]
        slope = xp.where((z > 0) & (z < 1), alpha, 0).astype(z.dtype)
        slope *= ins[0]
        outs[0][...] = slope

    def hard_swish_backward(ins, outs, attrs):
        x = wide_copy(ins[1])
        mid = x + x
        mid += 3
        mid /= 6
        slope = xp.where(x >= 3, 1, xp.where(x > -3, mid, 0)).astype(x.dtype)
        slope *= ins[0]
        outs[0][...] = slope

    table = {name: unary_kernel(fn) for name, fn in unary.items()}
    table.update(HardSigmoid=hard_sigmoid, HardSwish=hard_swish,
                 HardSigmoidBackward=hard_sigmoid_backward,
                 HardSwishBackward=hard_swish_backward)
    table.update({name: scalar_kernel(*spec) for name, spec in scalar.items()})
    table.update({name: binary_kernel(fn) for name, fn in binary.items()})
    table["Div"] = int_divide
    table["ReLUBackward"] = relu_backward
    table["Clip"] = clip
    add, relu_kernel = table["Add"], table["ReLU"]

    def add_relu(ins, outs, attrs):
        """The fused Add+ReLU of graph mode (singa.ops.FUSIONS): this table's Add, then its
        ReLU in place on the sum, so bitwise what the two ops give (on the GPU still two
        launches; the one-pass loop is the CPU backend's)."""
        add(ins, outs, attrs)
        relu_kernel(outs, outs, attrs)

    table["Add+ReLU"] = add_relu
    sigmoid_kernel, mul = table["Sigmoid"], table["Mul"]

    def sigmoid_mul(ins, outs, attrs):
        """The fused Sigmoid+Mul of graph mode, a * sigmoid(x): this table's Sigmoid into a
        scratch array, then its Mul, so bitwise what the two ops give."""
        x, a = ins
        s = xp.empty(x.shape, x.dtype)
        sigmoid_kernel([x], [s], attrs)
        mul([a, s], outs, attrs)

    table["Sigmoid+Mul"] = sigmoid_mul
    return table
