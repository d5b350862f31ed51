"""How the CPU kernels of `eqdsl.apps.qgym.kernels` are vectorized and compiled: the vector
width for a program (by its size and the L1 data cache), and Numba compilation at that width
(LLVM options forced for the compile, its remarks filtered)."""
from __future__ import annotations

import os
import sys
import tempfile
from contextlib import contextmanager
from pathlib import Path
from typing import Callable, Iterator

import numpy as np

from eqdsl import ir
from eqdsl.apps.qgym.baselines import reachable_nodes


def reachable_order(program: ir.Program, roots: list[int]) -> list[int]:
    """The nodes the roots need, in program order (program nodes are topologically ordered)."""
    return sorted(reachable_nodes(program, roots))


# Position groups one vector iteration of the CPU kernel covers (a multiple of every vector width
# used). Rows are cut into blocks of this many groups, so no row runs a scalar remainder, which
# costs as much as the vector part of a short row.
CPU_VECTOR = 16


# Lanes the group loop is vectorized with, by program size. LLVM picks the widest vectors; a large
# body spills thousands of temporaries, and narrower vectors spill fewer bytes: 8 lanes for large
# programs, the widest for small ones, and 4 where only the 4-lane spill area (values live across
# the body × lanes × 4 bytes) fits the L1 data cache (BENCHMARKS, "Q-gym CPU kernels beside ONNX
# Runtime", has the timings).
WIDE_PROGRAM_NODES = 1500


NARROW_LANES = 8


NARROWEST_LANES = 4


DEFAULT_L1_DATA_BYTES = 32 * 1024


def default_vector_width(program: ir.Program, l1_data_bytes: int | None = None) -> int:
    """0 (LLVM's choice) for programs up to WIDE_PROGRAM_NODES nodes; above, NARROW_LANES, or
    NARROWEST_LANES where only that brings the spill area into the L1 data cache
    (`l1_data_bytes`, default: this machine's)."""
    if len(program.nodes) <= WIDE_PROGRAM_NODES:
        return 0
    l1 = l1_data_bytes or l1_data_cache_bytes()
    spill = mean_live_values(program) * 4  # bytes per lane
    return NARROWEST_LANES if spill * NARROW_LANES > l1 >= spill * NARROWEST_LANES else NARROW_LANES


def mean_live_values(program: ir.Program) -> float:
    """Values live at a statement of the CPU kernel's body, on average: each computed node from
    its statement to its last use, roots to the stores at the end (the order `_body` emits)."""
    order = reachable_order(program, list(program.roots))
    if not order:
        return 0.0
    position = {i: k for k, i in enumerate(order)}
    last = dict(position)
    for i in order:
        for arg in program.nodes[i].args:
            if isinstance(arg, ir.Child):
                last[arg.index] = position[i]
    for root in program.roots:
        last[root] = len(order)
    live = sum(last[i] - position[i] for i in order if program.nodes[i].op != "w")  # weights: literals
    return live / len(order)


def l1_data_cache_bytes() -> int:
    """The first CPU's L1 data cache size from Linux's sysfs, DEFAULT_L1_DATA_BYTES elsewhere."""
    index = Path("/sys/devices/system/cpu/cpu0/cache/index0")
    try:
        if (index / "type").read_text().strip() == "Data":
            size = (index / "size").read_text().strip()
            return int(size[:-1]) * 1024 if size.endswith("K") else int(size)
    except (OSError, ValueError):
        pass
    return DEFAULT_L1_DATA_BYTES


def compile_source(source: str, names: dict) -> Callable:
    scope = dict(names)
    exec(compile(source, "<eqdsl qgym kernel>", "exec"), scope)  # noqa: S102 - our generated code
    return scope["layer"]


_LLVM_TUNED = False


def _allow_grouped_alias_checks() -> None:
    """LLVM stops merging a loop's pointers into one alias-check group above 100 pointers, and
    then needs more runtime checks than it allows: a 32-channel layer's kernel stayed scalar
    (measured 4.4× slower). Raising the merge threshold (a process-wide LLVM option, set once)
    keeps our many constant-offset loads one group."""
    global _LLVM_TUNED
    if not _LLVM_TUNED:
        import llvmlite.binding as llvm

        llvm.set_option("eqdsl", "-memory-check-merge-threshold=1000000")
        _LLVM_TUNED = True


@contextmanager
def _forced_vector_width(width: int) -> Iterator[None]:
    """LLVM's loop vectorizer width for what is compiled inside (a process-wide LLVM option, so
    it is put back to 0, LLVM's own choice, when the block ends)."""
    import llvmlite.binding as llvm

    llvm.set_option("eqdsl", f"-force-vector-width={width}")
    try:
        yield
    finally:
        llvm.set_option("eqdsl", "-force-vector-width=0")


@contextmanager
def _without_forced_width_remarks() -> Iterator[None]:
    """LLVM writes "loop not vectorized" to fd 2 for every loop the forced width does not fit
    (Numba's own scheduling loops): kept from the user's terminal, any other output passed on."""
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile() as captured:
        os.dup2(captured.fileno(), 2)
        try:
            yield
        finally:
            os.dup2(saved, 2)
            os.close(saved)
            captured.seek(0)
            text = captured.read().decode(errors="replace")
    kept = [line for line in text.splitlines(keepends=True) if "loop not vectorized" not in line]
    sys.stderr.write("".join(kept))


def compile_cpu(source: str, vector_width: int) -> Callable:
    from numba import njit, prange

    from eqdsl.kernels import fork_safe_threads

    fork_safe_threads()
    _allow_grouped_alias_checks()
    # an explicit signature compiles here, inside the forced width, not on the first call
    with _without_forced_width_remarks(), _forced_vector_width(vector_width):
        return njit("void(float32[::1], float32[::1], float32[::1])", parallel=True)(
            compile_source(source, {"prange": prange, "np": np}))


def check_vector_width(width: int) -> None:
    if not 0 <= width <= CPU_VECTOR or (width and CPU_VECTOR % width):
        raise ValueError(f"vector_width must be 0 or a divisor of {CPU_VECTOR}, got {width}")

