"""The one threading layer of eqdsl's parallel Numba CPU kernels.

eqdsl forks (the worker, the per-iteration memory guard, a sweep's tasks), and GNU OpenMP — Numba's
default layer where TBB is absent — aborts a forked child that runs a parallel region ("fork()
called from a process already using GNU OpenMP"). Every module that compiles a `parallel=True`
kernel calls `fork_safe()` first, so whichever kernel a process runs first, the layer is Numba's
fork-safe workqueue (our kernels are launched from one thread at a time, which workqueue needs).
"""
from __future__ import annotations

LAYER = "workqueue"


def fork_safe() -> None:
    from numba import config

    config.THREADING_LAYER = LAYER  # type: ignore[attr-defined]
