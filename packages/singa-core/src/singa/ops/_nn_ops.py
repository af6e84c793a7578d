"""Declarations of the neural-network operators (convolution, pooling, normalisation, losses,
indexing). Filled by the NN-ops work; imported by singa.ops."""
