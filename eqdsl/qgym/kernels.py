"""Extracted layer expressions → Numba kernels for the whole convolution (CPU and CUDA).

The program's roots are (j, k) for offsets j = 0..tpr and channels k (as `layer_expressions`
orders them). Each kernel instance computes T = tpr + 1 horizontally adjacent output positions
(h, w0 .. w0 + T − 1): leaf x(r, s, c) reads input[c, h + r, w0 + s], weights are literals in the
code, every other node is one local. Stride 1, no padding ("valid"): out[K, H − R + 1, W − S + 1].
The input is padded on the right by T columns (zeros) and the output to whole groups, so the
last group may compute past the edge; those outputs are sliced off.

Contract: `cpu_kernel(program, spec)` returns f(x) → out for a float32 or int array x [C, H, W]
(njit, parallel over position groups); `cuda_kernel(program, spec, channel_groups)` returns the
same computed by one CUDA thread per position group and channel group (works under
NUMBA_ENABLE_CUDASIM=1). `direct_conv` is the reference NumPy convolution, `numba_direct_conv`
the plain Numba loop nest we time against.
"""
from __future__ import annotations

from typing import Callable

import numpy as np

from eqdsl import ir
from eqdsl.qgym.baselines import reachable_nodes
from eqdsl.qgym.layer import LayerSpec

Conv = Callable[[np.ndarray], np.ndarray]


def _reachable_order(program: ir.Program, roots: list[int]) -> list[int]:
    return sorted(reachable_nodes(program, roots))  # program nodes are topologically ordered


def _body(program: ir.Program, spec: LayerSpec, root_ids: list[int], indent: str) -> list[str]:
    """Statements computing the given roots (indices into program.roots) and storing them."""
    lines = []
    for i in _reachable_order(program, [program.roots[r] for r in root_ids]):
        node = program.nodes[i]
        match node.op, node.args:
            case "x", (r, s, c):
                expr = f"xp[{c}, h + {r}, w0 + {s}]"
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
        lines.append(f"{indent}out[{k}, h, w0 + {j}] = t{program.roots[r]}")
    return lines


def kernel_source(program: ir.Program, spec: LayerSpec, target: str, channel_groups: int = 1) -> str:
    """The generated source (printed by `eqdsl qgym --show-kernel`, compiled by the builders)."""
    t = spec.tpr + 1
    roots = list(range(len(program.roots)))
    if target == "cpu":
        # branch-free inner loop over position groups (out is padded to whole groups) so LLVM
        # can vectorize across positions
        head = ["def layer(xp, out):",
                f"    ho, groups = out.shape[1], out.shape[2] // {t}",
                "    for h in prange(ho):",
                "        for g in range(groups):",
                f"            w0 = g * {t}"]
        return "\n".join(head + _body(program, spec, roots, " " * 12)) + "\n"
    per_group = [[r for r in roots if (r % spec.K) * channel_groups // spec.K == g] for g in range(channel_groups)]
    head = ["def layer(xp, out):",
            f"    ho, groups = out.shape[1], out.shape[2] // {t}",
            "    idx = cuda.grid(1)",
            f"    g, idx = idx % {channel_groups}, idx // {channel_groups}",
            "    if idx >= ho * groups:",
            "        return",
            f"    h, w0 = idx // groups, (idx % groups) * {t}"]
    lines = head
    for g, ids in enumerate(per_group):
        lines.append(f"    {'if' if g == 0 else 'elif'} g == {g}:")
        lines += _body(program, spec, ids, " " * 8) if ids else ["        pass"]
    return "\n".join(lines) + "\n"


def _compile(source: str, names: dict) -> Callable:
    scope = dict(names)
    exec(compile(source, "<eqdsl qgym kernel>", "exec"), scope)  # noqa: S102 - our generated code
    return scope["layer"]


def _padded(x: np.ndarray, spec: LayerSpec) -> np.ndarray:
    c, h, w = x.shape
    xp = np.zeros((c, h, w + spec.tpr + 1), dtype=np.float32)
    xp[:, :, :w] = x
    return xp


def _out_shape(x: np.ndarray, spec: LayerSpec) -> tuple[int, int, int]:
    """The output, its width padded to whole groups of tpr + 1 positions (sliced off after)."""
    t = spec.tpr + 1
    wo = x.shape[2] - spec.S + 1
    return (spec.K, x.shape[1] - spec.R + 1, -(-wo // t) * t)


def _valid(out: np.ndarray, x: np.ndarray, spec: LayerSpec) -> np.ndarray:
    return out[:, :, :x.shape[2] - spec.S + 1]


def cpu_kernel(program: ir.Program, spec: LayerSpec) -> Conv:
    from numba import njit, prange

    layer = njit(parallel=True)(_compile(kernel_source(program, spec, "cpu"), {"prange": prange, "np": np}))

    def run(x: np.ndarray) -> np.ndarray:
        out = np.empty(_out_shape(x, spec), dtype=np.float32)
        layer(_padded(x, spec), out)
        return _valid(out, x, spec)

    return run


def cuda_kernel(program: ir.Program, spec: LayerSpec, channel_groups: int = 1,
                threads_per_block: int = 128) -> Conv:
    from numba import cuda

    source = kernel_source(program, spec, "cuda", channel_groups)
    layer = cuda.jit(_compile(source, {"cuda": cuda, "np": np}))

    def run(x: np.ndarray) -> np.ndarray:
        shape = _out_shape(x, spec)
        positions = shape[1] * (shape[2] // (spec.tpr + 1))
        threads = positions * channel_groups
        d_x, d_out = cuda.to_device(_padded(x, spec)), cuda.device_array(shape, dtype=np.float32)
        layer[-(-threads // threads_per_block), threads_per_block](d_x, d_out)
        return _valid(d_out.copy_to_host(), x, spec)

    return run


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
