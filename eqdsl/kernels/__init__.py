"""Kernels for the tensor language's operators: Numba CUDA (`cuda`) and Numba CPU (`cpu`), each
checked against the reference semantics (`eqdsl.languages.tensor.semantics`). They are the
measuring instruments of the measured-cost targets and the executor (issue 15, in progress).
"""
