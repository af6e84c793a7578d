"""A small tensor program: least squares by gradient descent with singa.tensor."""

import numpy as np
from singa import device, tensor

dev = device.get_default_device()
rng = np.random.default_rng(0)
x = rng.standard_normal((256, 8)).astype(np.float32)
w_true = rng.standard_normal((8, 1)).astype(np.float32)
y = x @ w_true

tx, ty = tensor.from_numpy(x, dev), tensor.from_numpy(y, dev)
w = tensor.zeros((8, 1), dev)
for _ in range(200):
    err = tensor.mult(tx, w) - ty
    grad = tensor.mult(tx.T(), err) / x.shape[0]
    w -= grad * 0.5
print("max |w - w_true| =", float(np.abs(tensor.to_numpy(w) - w_true).max()))
