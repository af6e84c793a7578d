"""SINGA's model zoo for ``train_cnn.py``: cnn, alexnet, resnet and xceptionnet.

Each module defines a :class:`singa.model.Model` subclass with ``dimension`` (4: the input is
(N, C, H, W)) and ``input_size`` (the side of the square images it expects), a
``train_one_batch(x, y, dist_option='plain', spars=None)``, ``set_optimizer`` and a
``create_model(pretrained=False, **kwargs)`` factory.
"""
