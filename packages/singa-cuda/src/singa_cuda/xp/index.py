"""Indexing ops: ScatterAdd, Where, OneHot, ScatterElements and GatherElements.

Negative indices count from the end (the op table's convention); they are normalised once
with ``where`` so both array modules index the same way.
"""

from __future__ import annotations

from ._module import ArrayModule


def kernels(am: ArrayModule) -> dict:
    """``{op_name: kernel}`` for the indexing ops."""
    xp = am.xp

    def positive(idx, n):
        return xp.where(idx < 0, idx + n, idx)

    def element_index(idx, axis, n):
        """Index tuple addressing x at ``idx`` along ``axis`` and at the own position along
        every other axis (ONNX Gather/ScatterElements)."""
        grid = []
        for d, size in enumerate(idx.shape):
            if d == axis:
                grid.append(positive(idx, n))
            else:
                shape = [1] * idx.ndim
                shape[d] = size
                grid.append(xp.arange(size).reshape(shape))
        return tuple(grid)

    def scatter_add(ins, outs, attrs):
        idx, src = ins
        out = outs[0]
        axis = attrs.get("axis", 0) % out.ndim
        am.check_indices("ScatterAdd", idx, out.shape[axis])
        acc_dt = am.acc_dtype(src.dtype)
        acc = xp.zeros(out.shape, acc_dt or src.dtype)
        view = xp.moveaxis(acc, axis, 0)
        src_view = xp.moveaxis(src, tuple(range(axis, axis + idx.ndim)), tuple(range(idx.ndim)))
        am.add_at(view, positive(idx, out.shape[axis]),
                  src_view.astype(acc.dtype) if acc_dt is not None else src_view)
        out[...] = acc

    def where(ins, outs, attrs):
        cond, a, b = ins
        outs[0][...] = xp.where(cond != 0, a, b)

    def one_hot(ins, outs, attrs):
        idx = ins[0]
        out = outs[0]
        depth = int(attrs["depth"])
        axis = attrs.get("axis", -1) % (idx.ndim + 1)
        hot = xp.arange(depth) == positive(idx, depth)[..., None]
        hot = xp.moveaxis(hot, -1, axis)
        on, off = attrs.get("on_value", 1), attrs.get("off_value", 0)
        out.fill(off)
        out[hot] = on

    def scatter_elements(ins, outs, attrs):
        x, idx, upd = ins
        out = outs[0]
        axis = attrs.get("axis", 0) % x.ndim
        am.check_indices("ScatterElements", idx, x.shape[axis])
        where_ = element_index(idx, axis, x.shape[axis])
        if attrs.get("reduction", "none") == "add":
            acc_dt = am.acc_dtype(x.dtype)
            acc = x.astype(acc_dt or x.dtype)  # a copy: out may alias x
            am.add_at(acc, where_, upd.astype(acc.dtype))
            out[...] = acc
        else:
            vals = upd.copy()  # read before out (which may alias x) is written
            out[...] = x
            out[where_] = vals

    def gather_elements(ins, outs, attrs):
        x, idx = ins
        axis = attrs.get("axis", 0) % x.ndim
        am.check_indices("GatherElements", idx, x.shape[axis])
        outs[0][...] = x[element_index(idx, axis, x.shape[axis])]

    return {"ScatterAdd": scatter_add, "Where": where, "OneHot": one_hot,
            "ScatterElements": scatter_elements, "GatherElements": gather_elements}
