"""Extracted layer expressions → Numba kernels for the whole convolution (CPU and CUDA).

The program's roots are (j, k) for offsets j = 0..tpr and channels k (as `layer_expressions`
orders them). Each kernel instance computes T = tpr + 1 horizontally adjacent output positions
(h, w0 .. w0 + T − 1): leaf x(r, s, c) reads input[c, h + r, w0 + s], weights are literals in the
code, every other node is one local. Stride 1, no padding ("valid"): out[K, H − R + 1, W − S + 1].
The input is padded on the right by T columns (zeros) and the output to whole groups, so the
last group may compute past the edge; those outputs are sliced off.

Contract: `cpu_kernel(program, spec)` returns f(x) → out for a float32 or int array x [C, H, W]
(njit, parallel over output rows, vectorized across the positions of a row, compiled per input
size); `cuda_kernel(program, spec, channel_groups)` returns a `CudaConv` computing the
same by one CUDA thread per position group and channel group (works under
NUMBA_ENABLE_CUDASIM=1), launched and timed by `eqdsl.kernels.cuda`'s shared code.
`direct_conv` is the reference NumPy convolution, `numba_direct_conv` the plain Numba loop nest
we time against.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

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


@dataclass(frozen=True)
class Grid:
    """One input size's layouts: xp [C, H, Wp] (the input, Wp = W + T zero columns) and out
    [K, Ho, Wg] (Wg = whole groups of T positions, sliced back to Wo after the kernel ran)."""

    spec: LayerSpec
    H: int
    W: int

    @staticmethod
    def of(x: np.ndarray, spec: LayerSpec) -> Grid:
        return Grid(spec, x.shape[1], x.shape[2])

    @property
    def t(self) -> int:
        return self.spec.tpr + 1

    @property
    def wp(self) -> int:
        return self.W + self.t

    @property
    def ho(self) -> int:
        return self.H - self.spec.R + 1

    @property
    def wo(self) -> int:
        return self.W - self.spec.S + 1

    @property
    def groups(self) -> int:
        return -(-self.wo // self.t)

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


def cpu_kernel(program: ir.Program, spec: LayerSpec) -> Conv:
    """Compiled once per input size (H, W) on first use."""
    from numba import njit, prange

    _allow_grouped_alias_checks()
    compiled: dict[Grid, Callable] = {}

    def run(x: np.ndarray) -> np.ndarray:
        grid = Grid.of(x, spec)
        if grid not in compiled:
            source = cpu_source(program, grid)
            compiled[grid] = njit(parallel=True)(_compile(source, {"prange": prange, "np": np}))
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


def numba_direct_conv() -> Callable[[np.ndarray, np.ndarray], np.ndarray]:
    """The plain loop nest (weights as an array argument), parallel over output rows × channels."""
    from numba import njit, prange

    @njit(parallel=True)
    def conv(x, w):
        k, c, r, s = w.shape
        ho, wo = x.shape[1] - r + 1, x.shape[2] - s + 1
        out = np.zeros((k, ho, wo), dtype=np.float32)
        for idx in prange(k * ho):
            kk, h = idx // ho, idx % ho
            for ww in range(wo):
                acc = np.float32(0.0)
                for cc in range(c):
                    for dr in range(r):
                        for ds in range(s):
                            acc += w[kk, cc, dr, ds] * x[cc, h + dr, ww + ds]
                out[kk, h, ww] = acc
        return out

    return conv
