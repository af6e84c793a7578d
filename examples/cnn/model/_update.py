"""The optimizer call shared by the zoo's ``train_one_batch`` methods."""

from __future__ import annotations

# dist_option -> how the optimizer consumes the loss (the non-plain ones are DistOpt methods)
_UPDATES = {
    "plain": lambda o, loss, spars: o(loss),
    "half": lambda o, loss, spars: o.backward_and_update_half(loss),
    "partialUpdate": lambda o, loss, spars: o.backward_and_partial_update(loss),
    "sparseTopK": lambda o, loss, spars: o.backward_and_sparse_update(loss, topK=True,
                                                                      spars=spars),
    "sparseThreshold": lambda o, loss, spars: o.backward_and_sparse_update(loss, topK=False,
                                                                           spars=spars),
}

DIST_OPTIONS = tuple(_UPDATES)


def apply_update(optimizer, loss, dist_option="plain", spars=None):
    """Backward from ``loss`` and update the parameters as ``dist_option`` says.

    SINGA silently skipped the update for an unknown option (its benchmark passed 'fp32');
    here an unknown option is an error.
    """
    try:
        update = _UPDATES[dist_option]
    except KeyError:
        raise ValueError(f"dist_option must be one of {DIST_OPTIONS}, got "
                         f"{dist_option!r}") from None
    if dist_option != "plain" and not hasattr(optimizer, "backward_and_update_half"):
        raise TypeError(f"dist_option {dist_option!r} needs a distributed optimizer "
                        f'(singa.opt.DistOpt, pip install ".[dist]" in the singa checkout); got '
                        f"{type(optimizer).__name__}")
    update(optimizer, loss, spars)
