"""SINGA's distributed-training package.

This release ships no communicator and no DistOpt yet (the work is not scheduled in this
repository's issues); ``singa.opt.DistOpt`` raises an error that says so.
"""
