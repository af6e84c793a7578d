"""``singa.data``: datasets and batch iterators for the examples.

- :func:`load_digits`: scikit-learn's 8x8 handwritten digits, upsampled; needs no download.
- :func:`load_mnist`: MNIST from its four idx files (:func:`read_idx` parses one).
- :func:`load_cifar10`: CIFAR-10 from its binary batches or, through
  :class:`RestrictedUnpickler`, its python-pickle batches.
- :class:`ImageBatchIter`: SINGA's background image loader over a list file.

Every loader returns ``(train_x, train_y, val_x, val_y)`` with float32 NCHW images and int32
labels. Nothing is downloaded: a missing dataset raises :class:`DatasetNotFoundError` saying
which files to put where.
"""

from ._batch_iter import ImageBatchIter
from ._cifar import (
    CIFAR10_CLASSES,
    CIFAR10_MEAN,
    CIFAR10_STD,
    load_cifar10,
    read_cifar_bin,
    read_cifar_pickle,
)
from ._digits import load_digits
from ._files import DatasetNotFoundError
from ._idx import MNIST_FILES, load_mnist, read_idx
from ._pickle import RestrictedUnpickler, UnsafePickleError, restricted_load
from ._resize import resize_images

__all__ = [
    "CIFAR10_CLASSES", "CIFAR10_MEAN", "CIFAR10_STD", "DatasetNotFoundError", "ImageBatchIter",
    "MNIST_FILES", "RestrictedUnpickler", "UnsafePickleError", "load_cifar10", "load_digits",
    "load_mnist", "read_cifar_bin", "read_cifar_pickle", "read_idx", "resize_images",
    "restricted_load",
]
