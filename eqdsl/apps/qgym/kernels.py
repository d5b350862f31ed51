"""Extracted layer expressions → Numba kernels for the whole convolution (CPU and CUDA).

The program's roots are (j, k) for offsets j = 0..tpr and channels k (as `layer_expressions`
orders them). Each kernel instance computes T = tpr + 1 horizontally adjacent output positions
(h, w0 .. w0 + T − 1): leaf x(r, s, c) reads input[c, h + r, w0 + s], weights are literals in the
code, every other node is one local. Stride 1, no padding ("valid"): out[K, H − R + 1, W − S + 1].
The input is padded on the right with zero columns and the output to whole groups (on the CPU, to
a whole number of vector iterations), so the last groups may compute past the edge; those
outputs are sliced off.

Contract: `cpu_kernel(program, spec)` returns f(x) → out for a float32 or int array x [C, H, W]
(njit, parallel over output rows, vectorized across the positions of a row, compiled per input
size); `cuda_kernel(program, spec, channel_groups)` returns a `CudaConv` computing the
same by one CUDA thread per position group and channel group (works under
NUMBA_ENABLE_CUDASIM=1), launched and timed by `eqdsl.kernels.cuda`'s shared code.
`direct_conv` is the reference NumPy convolution.
"""
from __future__ import annotations

import os
import sys
import tempfile
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Callable, Iterator

import numpy as np

from eqdsl import ir
from eqdsl.apps.qgym.baselines import reachable_nodes
from eqdsl.apps.qgym.layer import LayerSpec

Conv = Callable[[np.ndarray], np.ndarray]


Leaf = Callable[[int, int, int], str]  # x(r, s, c) → the load expression
Store = Callable[[int, int], str]  # (offset j, channel k) → the store target


def _reachable_order(program: ir.Program, roots: list[int]) -> list[int]:
    return sorted(reachable_nodes(program, roots))  # program nodes are topologically ordered


def _body(program: ir.Program, spec: LayerSpec, root_ids: list[int], indent: str,
          leaf: Leaf, store: Store) -> list[str]:
    """Statements computing the given roots (indices into program.roots) and storing them."""
    lines = []
    for i in _reachable_order(program, [program.roots[r] for r in root_ids]):
        node = program.nodes[i]
        match node.op, node.args:
            case "x", (r, s, c):
                expr = leaf(r, s, c)
            case "w", (v,):
                expr = f"np.float32({v})"
            case "add", (ir.Child(index=a), ir.Child(index=b)):
                expr = f"t{a} + t{b}"
            case "mul", (ir.Child(index=a), ir.Child(index=b)):
                expr = f"t{a} * t{b}"
            case op, _:
                raise ValueError(f"no kernel code for operator {op!r} (qgym programs only)")
        lines.append(f"{indent}t{i} = {expr}")
    for r in root_ids:
        j, k = divmod(r, spec.K)
        lines.append(f"{indent}{store(j, k)} = t{program.roots[r]}")
    return lines


# Position groups one vector iteration of the CPU kernel covers (a multiple of every vector width
# used). A row's groups are rounded up to it so no row runs a scalar remainder: with 62 positions
# a row and 16-wide vectors, the 14 scalar ones took as long as the 48 vector ones (measured:
# (3,3,16,16) Q2, 0.15 → 0.08 ms).
CPU_VECTOR = 16
# Lanes the group loop is vectorized with, by program size. LLVM picks 16 (512-bit) on this AVX-512
# machine; a large body spills thousands of temporaries, and 8-wide spills are half the bytes.
# Measured side by side (BENCHMARKS, "Q-gym CPU kernels beside ONNX Runtime"): 8 lanes win on the
# large programs ((3,3,32,32) Q3, 4,235 nodes: 0.71 → 0.41 ms), 16 on the small ones
# ((1,1,32,32) Q3, 647 nodes: 0.158 → 0.132 ms).
WIDE_PROGRAM_NODES = 1500
NARROW_LANES = 8


def default_vector_width(program: ir.Program) -> int:
    """0 (LLVM's choice) for programs up to WIDE_PROGRAM_NODES nodes, NARROW_LANES above."""
    return 0 if len(program.nodes) <= WIDE_PROGRAM_NODES else NARROW_LANES


@dataclass(frozen=True)
class Grid:
    """One input size's layouts: xp [C, H, Wp] (the input, Wp ≥ W + T with zero columns) and out
    [K, Ho, Wg] (Wg = whole groups of T positions, a multiple of `vector` groups, sliced back to
    Wo after the kernel ran)."""

    spec: LayerSpec
    H: int
    W: int
    vector: int = 1

    @staticmethod
    def of(x: np.ndarray, spec: LayerSpec, vector: int = 1) -> Grid:
        return Grid(spec, x.shape[1], x.shape[2], vector)

    @property
    def t(self) -> int:
        return self.spec.tpr + 1

    @property
    def wp(self) -> int:
        """W + T columns at least (the CUDA launch reads W back from it), and every column the
        last group reads."""
        return max(self.W + self.t, self.groups * self.t + self.spec.S - 1)

    @property
    def ho(self) -> int:
        return self.H - self.spec.R + 1

    @property
    def wo(self) -> int:
        return self.W - self.spec.S + 1

    @property
    def groups(self) -> int:
        return -(-self.wo // (self.t * self.vector)) * self.vector

    @property
    def out_shape(self) -> tuple[int, int, int]:
        return (self.spec.K, self.ho, self.groups * self.t)

    def padded(self, x: np.ndarray) -> np.ndarray:
        xp = np.zeros((x.shape[0], self.H, self.wp), dtype=np.float32)
        xp[:, :, :self.W] = x
        return xp

    def valid(self, out: np.ndarray) -> np.ndarray:
        return out[:, :, :self.wo]


def cpu_source(program: ir.Program, grid: Grid) -> str:
    """The CPU kernel for one input size. Flat arrays with constant strides and unsigned indices
    (no negative-index wraparound) make every load one pointer group and every store another,
    so LLVM vectorizes the inner loop across positions with one runtime alias check."""
    spec, t, wp, ho, groups = grid.spec, grid.t, grid.wp, grid.ho, grid.groups
    wg = grid.out_shape[2]
    head = ["def layer(xp, out):",
            f"    for h in prange({ho}):",
            f"        for g in range({groups}):",
            f"            xb = np.uint64(h * {wp} + g * {t})",
            f"            ob = np.uint64(h * {wg} + g * {t})"]
    leaf = lambda r, s, c: f"xp[xb + np.uint64({(c * grid.H + r) * wp + s})]"  # noqa: E731
    store = lambda j, k: f"out[ob + np.uint64({k * ho * wg + j})]"  # noqa: E731
    roots = list(range(len(program.roots)))
    return "\n".join(head + _body(program, spec, roots, " " * 12, leaf, store)) + "\n"


def cuda_source(program: ir.Program, spec: LayerSpec, channel_groups: int = 1) -> str:
    """The CUDA kernel: thread idx → (position group, channel group); any input size."""
    t = spec.tpr + 1
    roots = list(range(len(program.roots)))
    per_group = [[r for r in roots if (r % spec.K) * channel_groups // spec.K == g] for g in range(channel_groups)]
    lines = ["def layer(xp, out):",
             f"    ho, groups = out.shape[1], out.shape[2] // {t}",
             "    idx = cuda.grid(1)",
             f"    g, idx = idx % {channel_groups}, idx // {channel_groups}",
             "    if idx >= ho * groups:",
             "        return",
             f"    h, w0 = idx // groups, (idx % groups) * {t}"]
    leaf = lambda r, s, c: f"xp[{c}, h + {r}, w0 + {s}]"  # noqa: E731
    store = lambda j, k: f"out[{k}, h, w0 + {j}]"  # noqa: E731
    for g, ids in enumerate(per_group):
        lines.append(f"    {'if' if g == 0 else 'elif'} g == {g}:")
        lines += _body(program, spec, ids, " " * 8, leaf, store) if ids else ["        pass"]
    return "\n".join(lines) + "\n"


def _compile(source: str, names: dict) -> Callable:
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


def _compile_cpu(source: str, vector_width: int) -> Callable:
    from numba import njit, prange

    _allow_grouped_alias_checks()
    # an explicit signature compiles here, inside the forced width, not on the first call
    with _without_forced_width_remarks(), _forced_vector_width(vector_width):
        return njit("void(float32[::1], float32[::1])", parallel=True)(
            _compile(source, {"prange": prange, "np": np}))


def cpu_kernel(program: ir.Program, spec: LayerSpec, vector_width: int | None = None) -> Conv:
    """Compiled once per input size (H, W) on first use; `vector_width` lanes (0: LLVM's choice;
    at most CPU_VECTOR; None: `default_vector_width`)."""
    if vector_width is None:
        vector_width = default_vector_width(program)
    if not 0 <= vector_width <= CPU_VECTOR or (vector_width and CPU_VECTOR % vector_width):
        raise ValueError(f"vector_width must be 0 or a divisor of {CPU_VECTOR}, got {vector_width}")
    compiled: dict[Grid, Callable] = {}

    def run(x: np.ndarray) -> np.ndarray:
        grid = Grid.of(x, spec, CPU_VECTOR)
        if grid not in compiled:
            compiled[grid] = _compile_cpu(cpu_source(program, grid), vector_width)
        out = np.empty(grid.out_shape, dtype=np.float32)
        compiled[grid](grid.padded(x).reshape(-1), out.reshape(-1))
        return grid.valid(out)

    return run


@dataclass(frozen=True)
class CudaConv:
    """A compiled Q-gym CUDA kernel for one layer. `launch(d_x, out=None)` runs it on a padded
    device input (`Grid.padded`) into `out` (or a new device array), as `eqdsl.kernels.cuda`'s
    operator launchers do, so `kernels.cuda.time_launch` times it; calling it with a host
    array [C, H, W] returns the host result."""

    spec: LayerSpec
    channel_groups: int
    threads_per_block: int
    layer: Callable

    def launch(self, d_x, out=None):
        from eqdsl.kernels.cuda import blocks, output

        grid = Grid(self.spec, d_x.shape[1], d_x.shape[2] - self.spec.tpr - 1)  # padded width Wp = W + T
        out = output(out, grid.out_shape)
        threads = grid.ho * grid.groups * self.channel_groups
        self.layer[blocks(threads, self.threads_per_block), self.threads_per_block](d_x, out)
        return out

    def device_input(self, x: np.ndarray):
        from eqdsl.kernels.cuda import to_device

        return to_device((Grid.of(x, self.spec).padded(x),))[0]

    def __call__(self, x: np.ndarray) -> np.ndarray:
        return Grid.of(x, self.spec).valid(self.launch(self.device_input(x)).copy_to_host())


def cuda_kernel(program: ir.Program, spec: LayerSpec, channel_groups: int = 1,
                threads_per_block: int = 128) -> CudaConv:
    from numba import cuda

    layer = cuda.jit(_compile(cuda_source(program, spec, channel_groups), {"cuda": cuda, "np": np}))
    return CudaConv(spec, channel_groups, threads_per_block, layer)


def direct_conv(x: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """Reference: out[k, h, w] = Σ_{c,r,s} W[k,c,r,s] · x[c, h + r, w + s], in int64/float64."""
    k, c, r, s = weights.shape
    ho, wo = x.shape[1] - r + 1, x.shape[2] - s + 1
    out = np.zeros((k, ho, wo), dtype=np.result_type(x.dtype, weights.dtype, np.int64))
    for dr in range(r):
        for ds in range(s):
            patch = x[:, dr:dr + ho, ds:ds + wo]  # [C, Ho, Wo]
            out += np.einsum("kc,chw->khw", weights[:, :, dr, ds], patch)
    return out
