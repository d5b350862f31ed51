"""Extracted layer expressions → Numba kernels for the whole convolution (CPU and CUDA).

The program's roots are (j, k) for offsets j = 0..tpr and channels k (as `layer_expressions`
orders them). Each kernel instance computes T = tpr + 1 horizontally adjacent output positions
(h, w0 .. w0 + T − 1): leaf x(r, s, c) reads input[c, h + r, w0 + s], weights are literals in the
code, every other node is one local. Stride 1, no padding ("valid"): out[K, H − R + 1, W − S + 1].
On the CPU the input is read where it lies (`CpuLayout`: the last vector block of a row is shifted
to end at the row's edge); the CUDA kernel's input is padded on the right with zero columns and
its output to whole groups, so the last groups may compute past the edge; those outputs are
sliced off.

Contract: `cpu_kernel(program, spec)` returns f(x) → out for a float32 or int array x [C, H, W]
(njit, parallel over output rows, vectorized across the positions of a row, compiled per input
size; any other shape than [C, H ≥ R, W ≥ S] is a ValueError, never an out-of-bounds read);
`tiled_cpu_kernel(tiling)` the same for a layer cut into channel tiles (`tiles.Tiling`), one
kernel per tile;
`cuda_kernel(program, spec, channel_groups)` returns a `CudaConv` computing the
same by one CUDA thread per position group and channel group (works under
NUMBA_ENABLE_CUDASIM=1), launched and timed by `eqdsl.kernels.cuda`'s shared code.
`direct_conv` is the reference NumPy convolution.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Self

import numpy as np

from eqdsl import ir
from eqdsl.apps.qgym.layer import LayerSpec
from eqdsl.apps.qgym.tiles import Tile, Tiling
from eqdsl.apps.qgym.vectors import (
    CPU_VECTOR,
    check_vector_width,
    compile_cpu,
    compile_source,
    default_vector_width,
    reachable_order,
)

Conv = Callable[[np.ndarray], np.ndarray]

Leaf = Callable[[int, int, int], str]  # x(r, s, c) → the load expression
Store = Callable[[int, int], str]  # (offset j, channel k) → the assignment up to its value: "out[i] ="


def _body(program: ir.Program, spec: LayerSpec, root_ids: list[int], indent: str,
          leaf: Leaf, store: Store) -> list[str]:
    """Statements computing the given roots (indices into program.roots) and storing them."""
    lines = []
    for i in reachable_order(program, [program.roots[r] for r in root_ids]):
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
        lines.append(f"{indent}{store(j, k)} t{program.roots[r]}")
    return lines


@dataclass(frozen=True)
class _Size:
    """One input size [C, H, W] of a layer; the valid output is [K, ho, wo]."""

    spec: LayerSpec
    H: int
    W: int

    @classmethod
    def of(cls, x: np.ndarray, spec: LayerSpec) -> Self:
        return cls(spec, x.shape[1], x.shape[2])

    @property
    def ho(self) -> int:
        return self.H - self.spec.R + 1

    @property
    def wo(self) -> int:
        return self.W - self.spec.S + 1

    def widened(self, x: np.ndarray, width: int) -> np.ndarray:
        """x with zero columns on the right up to `width`, float32 [C, H, width]."""
        xw = np.zeros((x.shape[0], self.H, width), dtype=np.float32)
        xw[:, :, :self.W] = x
        return xw


@dataclass(frozen=True)
class CpuLayout(_Size):
    """One input size's CPU layout. Each row of outputs is cut into blocks of CPU_VECTOR groups
    (`span` = CPU_VECTOR · T positions); the last block is shifted left to end at the row's last
    output, so every read is inside the input and every write inside the output, and the input
    is used as given (no padded copy: measured (1,1,32,32) Q2 0.096 → 0.043 ms). Outputs the
    last block shares with the one before it are computed twice, to the same value. A row
    narrower than one block is the only case needing a copy: the input is widened with zero
    columns to `width` and the output sliced back to `wo`."""

    @property
    def span(self) -> int:
        return CPU_VECTOR * (self.spec.tpr + 1)

    @property
    def width(self) -> int:
        """Columns the kernel reads: the input's, or one block's worth if that is more."""
        return max(self.W, self.span + self.spec.S - 1)

    @property
    def row(self) -> int:
        """Outputs the kernel writes per row (≥ span)."""
        return self.width - self.spec.S + 1

    @property
    def block_starts(self) -> tuple[int, ...]:
        """First output of each block of a row; the kernel iterates exactly these."""
        blocks = -(-self.row // self.span)
        return tuple(min(b * self.span, self.row - self.span) for b in range(blocks))

    @property
    def out_shape(self) -> tuple[int, int, int]:
        return (self.spec.K, self.ho, self.row)

    def prepared(self, x: np.ndarray) -> np.ndarray:
        """The flat float32 input the kernel reads (x itself where it already is one)."""
        if self.width == self.W:
            return np.ascontiguousarray(x, dtype=np.float32).reshape(-1)
        return self.widened(x, self.width).reshape(-1)

    def valid(self, out: np.ndarray) -> np.ndarray:
        return out if self.row == self.wo else out[:, :, :self.wo]


@dataclass(frozen=True)
class Grid(_Size):
    """The CUDA kernel's layouts for one input size: xp [C, H, Wp] (the input, Wp ≥ W + T with
    zero columns) and out [K, Ho, Wg] (Wg = whole groups of T positions, sliced back to Wo after
    the kernel ran)."""

    @property
    def t(self) -> int:
        return self.spec.tpr + 1

    @property
    def wp(self) -> int:
        """W + T columns at least (the CUDA launch reads W back from it), and every column the
        last group reads."""
        return max(self.W + self.t, self.groups * self.t + self.spec.S - 1)

    @property
    def groups(self) -> int:
        return -(-self.wo // self.t)

    @property
    def out_shape(self) -> tuple[int, int, int]:
        return (self.spec.K, self.ho, self.groups * self.t)

    def padded(self, x: np.ndarray) -> np.ndarray:
        return self.widened(x, self.wp)

    def valid(self, out: np.ndarray) -> np.ndarray:
        return out[:, :, :self.wo]


def cpu_source(tile: Tile, layout: CpuLayout, adds_partial: bool = False) -> str:
    """One tile's CPU kernel for one input size: per row (in parallel), per block, a loop over
    the block's CPU_VECTOR groups that LLVM vectorizes. `layer(x, out, partial)` writes the
    tile's outputs to `out`, plus the same outputs of `partial` if `adds_partial` (a buffer it
    does not write, so the recomputed outputs of a shifted block get the same value). Flat arrays
    with constant strides and unsigned indices (no negative-index wraparound) make every load one
    pointer group and every store another, so the vectorized loop needs one runtime alias check."""
    t, width, row, ho = layout.spec.tpr + 1, layout.width, layout.row, layout.ho
    head = ["def layer(x, out, partial):",
            f"    for h in prange({ho}):",
            f"        for start in {layout.block_starts}:",
            f"            for g in range({CPU_VECTOR}):",
            f"                xb = np.uint64(h * {width} + start + g * {t})",
            f"                ob = np.uint64(h * {row} + start + g * {t})"]
    leaf = lambda r, s, c: f"x[xb + np.uint64({((tile.c0 + c) * layout.H + r) * width + s})]"  # noqa: E731

    def store(j: int, k: int) -> str:
        at = f"ob + np.uint64({(tile.k0 + k) * ho * row + j})"
        return f"out[{at}] = partial[{at}] +" if adds_partial else f"out[{at}] ="

    roots = list(range(len(tile.program.roots)))
    return "\n".join(head + _body(tile.program, tile.spec, roots, " " * 16, leaf, store)) + "\n"


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
    store = lambda j, k: f"out[{k}, h, w0 + {j}] ="  # noqa: E731
    for g, ids in enumerate(per_group):
        lines.append(f"    {'if' if g == 0 else 'elif'} g == {g}:")
        lines += _body(program, spec, ids, " " * 8, leaf, store) if ids else ["        pass"]
    return "\n".join(lines) + "\n"


def cpu_kernel(program: ir.Program, spec: LayerSpec, vector_width: int | None = None) -> Conv:
    """The whole layer as one program (one tile): see `tiled_cpu_kernel`."""
    return tiled_cpu_kernel(Tiling.whole(spec, program), vector_width)


def tiled_cpu_kernel(tiling: Tiling, vector_width: int | None = None) -> Conv:
    """Each tile its own kernel, compiled once per input size (H, W) on first use, run one after
    another; `vector_width` lanes (0: LLVM's choice; at most CPU_VECTOR; None: each tile's
    `default_vector_width`). An output tile's input tiles alternate between two buffers, each
    adding the partial sums of the one before, so that the last one writes `out`."""
    if vector_width is not None:
        check_vector_width(vector_width)
    chains = [tiling.input_tiles(k0) for k0 in sorted({t.k0 for t in tiling.tiles})]
    steps = [(tile, i, len(chain)) for chain in chains for i, tile in enumerate(chain)]
    needs_scratch = any(len(chain) > 1 for chain in chains)
    compiled: dict[CpuLayout, list[Callable]] = {}

    def compile_steps(layout: CpuLayout) -> list[Callable]:
        return [compile_cpu(cpu_source(tile, layout, adds_partial=i > 0),
                             default_vector_width(tile.program) if vector_width is None else vector_width)
                for tile, i, _ in steps]

    def run(x: np.ndarray) -> np.ndarray:
        check_input(x, tiling.spec)
        layout = CpuLayout.of(x, tiling.spec)
        if layout not in compiled:
            compiled[layout] = compile_steps(layout)
        out = np.empty(layout.out_shape, dtype=np.float32).reshape(-1)
        buffers = (out, np.empty_like(out) if needs_scratch else out)
        xs = layout.prepared(x)
        for layer, (_, i, n) in zip(compiled[layout], steps):
            target = (n - 1 - i) % 2  # the chain's last input tile writes out
            layer(xs, buffers[target], buffers[1 - target])
        return layout.valid(out.reshape(layout.out_shape))

    return run


def check_input(x: np.ndarray, spec: LayerSpec) -> None:
    """The kernels read fixed offsets without bounds checks: anything but [C, H ≥ R, W ≥ S] is
    refused before it could read outside the array."""
    if x.ndim != 3 or x.shape[0] != spec.C or x.shape[1] < spec.R or x.shape[2] < spec.S:
        raise ValueError(f"expected an input [C={spec.C}, H ≥ {spec.R}, W ≥ {spec.S}] for this layer, "
                         f"got shape {list(x.shape)}")


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

        check_input(x, self.spec)
        return to_device((Grid.of(x, self.spec).padded(x),))[0]

    def __call__(self, x: np.ndarray) -> np.ndarray:
        return Grid.of(x, self.spec).valid(self.launch(self.device_input(x)).copy_to_host())


def cuda_kernel(program: ir.Program, spec: LayerSpec, channel_groups: int = 1,
                threads_per_block: int = 128) -> CudaConv:
    from numba import cuda

    layer = cuda.jit(compile_source(cuda_source(program, spec, channel_groups), {"cuda": cuda, "np": np}))
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
