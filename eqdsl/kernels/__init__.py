"""Kernels for the tensor language's operators: Numba CUDA (`cuda`) and Numba CPU (`cpu`), each
checked against the reference semantics (`eqdsl.languages.tensor.semantics`); `layout` plans the
data-movement operators both run as strided copies. They are the measuring instruments of the
measured-cost targets and the executor.

`VERSION` names the kernels' current implementation: it is part of every timing-cache key, so a
change that alters kernel speed must bump it (old timings are then not reused).
"""
import functools

VERSION = 2  # 2: im2col + GEMM convolutions, strided-copy layout kernels, broadcasting element-wise


@functools.cache
def fork_safe_threads() -> None:
    """Run Numba's parallel kernels on its fork-safe workqueue layer: eqdsl forks (the worker,
    the per-iteration memory guard), and GNU OpenMP aborts a forked child that runs a parallel
    region. Call before the first parallel kernel runs (the layer is chosen then); never at
    import, which would change the threading of every program that imports eqdsl."""
    from numba import config

    config.THREADING_LAYER = "workqueue"  # type: ignore[attr-defined]
