"""Numba CUDA kernels for the tensor language's compute operators (float32, NCHW).

Contract: `run(op, *args)` takes an operator's arguments as the reference semantics do
(`eqdsl.languages.tensor.semantics`: ints for attributes, NumPy arrays for tensors) and returns
the result as a NumPy array equal to the reference's up to float32 rounding. `time_op(op, args,
runs)` returns the median of `runs` timed launches (CUDA events) after a warm-up, inputs already
on the device. Operators: matmul (shared-memory tiles, batched, fused activation), conv2d
(groups, strides, SAME/VALID, fused activation; implicit GEMM — the matmul's tiling with the
im2col matrix read on the fly — when an output sums at least `GEMM_MIN_DEPTH` products, the
direct one-thread-per-output kernel otherwise), poolmax, poolavg, ewadd and ewmul (NumPy
broadcasting of both operands), relu, sigmoid, tanh, any `pointwise` operator of the table
(hardswish), batchnorm, and the data-movement operators
of `eqdsl.kernels.layout` (transpose, concat, split, enlarge, merge, pad2d) as one strided copy
kernel. Under `NUMBA_ENABLE_CUDASIM=1` the same code runs on the simulator (CI).
"""
from __future__ import annotations

import math
from typing import Any, Callable

import numpy as np
from numba import cuda

from eqdsl.kernels import layout
from eqdsl.languages.tensor.codes import Act, spatial
from eqdsl.languages.tensor.ops import OPS, fixed

SIGMOID, RELU, TANH = int(Act.SIGMOID), int(Act.RELU), int(Act.TANH)  # plain ints: Numba's constants

TILE = 16  # matmul tile edge: TILE × TILE threads, two TILE × TILE float32 tiles in shared memory
GEMM_MIN_DEPTH = 16  # products per output below which (depthwise) the direct convolution runs


@cuda.jit(device=True)
def _activate(act, v):
    if act == SIGMOID:
        return 1.0 / (1.0 + math.exp(-v))
    if act == RELU:
        return max(v, 0.0)
    if act == TANH:
        return math.tanh(v)
    return v


@cuda.jit(device=True)
def _nchw(i, shape):
    """Flat index → (n, c, y, x) of an NCHW array of `shape`."""
    _, c_, h_, w_ = shape
    return i // (w_ * h_ * c_), (i // (w_ * h_)) % c_, (i // w_) % h_, i % w_


@cuda.jit
def _matmul(a, b, c, act):
    """c[z] = act(a[z] @ b[z]) for 3-D (batch, m, k) × (batch, k, n)."""
    sa = cuda.shared.array((TILE, TILE), dtype=np.float32)
    sb = cuda.shared.array((TILE, TILE), dtype=np.float32)
    tx, ty = cuda.threadIdx.x, cuda.threadIdx.y
    col = cuda.blockIdx.x * TILE + tx
    row = cuda.blockIdx.y * TILE + ty
    z = cuda.blockIdx.z
    m, k, n = a.shape[1], a.shape[2], b.shape[2]
    acc = np.float32(0.0)
    for t in range((k + TILE - 1) // TILE):
        kk = t * TILE
        sa[ty, tx] = a[z, row, kk + tx] if row < m and kk + tx < k else np.float32(0.0)
        sb[ty, tx] = b[z, kk + ty, col] if col < n and kk + ty < k else np.float32(0.0)
        cuda.syncthreads()
        for i in range(TILE):
            acc += sa[ty, i] * sb[i, tx]
        cuda.syncthreads()
    if row < m and col < n:
        c[z, row, col] = _activate(act, acc)


@cuda.jit
def _conv2d(x, w, out, sh, sw, top, left, act):
    """One thread per output element; `top`/`left`: the input's zero padding (SAME)."""
    i = cuda.grid(1)
    if i >= out.size:
        return
    n, o, oy, ox = _nchw(i, out.shape)
    o_ = out.shape[1]
    cin, kh, kw = w.shape[1], w.shape[2], w.shape[3]
    group = o // (o_ // (x.shape[1] // cin))
    acc = np.float32(0.0)
    for c in range(cin):
        xc = group * cin + c
        for dy in range(kh):
            y = oy * sh + dy - top
            if 0 <= y < x.shape[2]:
                for dx in range(kw):
                    xx = ox * sw + dx - left
                    if 0 <= xx < x.shape[3]:
                        acc += x[n, xc, y, xx] * w[o, c, dy, dx]
    out[n, o, oy, ox] = _activate(act, acc)


@cuda.jit
def _pool(x, out, kh, kw, sh, sw, top, left, is_max, act):
    """Max, or the average over the window's real (unpadded) elements."""
    i = cuda.grid(1)
    if i >= out.size:
        return
    n, c, oy, ox = _nchw(i, out.shape)
    best = -math.inf
    total = np.float32(0.0)
    count = 0
    for dy in range(kh):
        y = oy * sh + dy - top
        for dx in range(kw):
            xx = ox * sw + dx - left
            if 0 <= y < x.shape[2] and 0 <= xx < x.shape[3]:
                v = x[n, c, y, xx]
                best = max(best, v)
                total += v
                count += 1
    out[n, c, oy, ox] = _activate(act, best if is_max else total / max(count, 1))


@cuda.jit
def _unary(a, out, act):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = _activate(act, a[i])


@cuda.jit(device=True)
def _offsets(i, shape, first_strides, second_strides):
    """Offsets of flat index `i` of the box `shape` under two stride vectors."""
    first, second = 0, 0
    for ax in range(len(shape) - 1, -1, -1):
        k = i % shape[ax]
        i //= shape[ax]
        first += k * first_strides[ax]
        second += k * second_strides[ax]
    return first, second


@cuda.jit
def _binary(a, b, out, shape, a_strides, b_strides, code):
    """out (contiguous) = a op b, both read with broadcast strides; code 0 add, 1 mul."""
    i = cuda.grid(1)
    if i < out.size:
        ia, ib = _offsets(i, shape, a_strides, b_strides)
        out[i] = a[ia] + b[ib] if code == 0 else a[ia] * b[ib]


@cuda.jit
def _copy(src, dst, shape, count, src_offset, src_strides, dst_offset, dst_strides):
    """dst[dst_offset + Σ k·dst_strides] = src[src_offset + Σ k·src_strides], `count` box elements."""
    i = cuda.grid(1)
    if i < count:
        s, d = _offsets(i, shape, src_strides, dst_strides)
        dst[dst_offset + d] = src[src_offset + s]


@cuda.jit
def _fill(dst, value):
    i = cuda.grid(1)
    if i < dst.size:
        dst[i] = value


@cuda.jit
def _conv2d_gemm(x, w, out, sh, sw, top, left, act):
    """Implicit GEMM, one group per blockIdx.z: out[n, g·M + m, oy, ox] = act(Σ_k A[m, k] B[k, p])
    with A the group's weights [M, cin·kh·kw] and B the im2col matrix [cin·kh·kw, n·oh·ow] read
    from x on the fly (zero outside the image); tiles as in `_matmul`."""
    sa = cuda.shared.array((TILE, TILE), dtype=np.float32)
    sb = cuda.shared.array((TILE, TILE), dtype=np.float32)
    tx, ty, g = cuda.threadIdx.x, cuda.threadIdx.y, cuda.blockIdx.z
    cin, kh, kw = w.shape[1], w.shape[2], w.shape[3]
    oh, ow = out.shape[2], out.shape[3]
    rows, depth, cols = out.shape[1] // cuda.gridDim.z, cin * kh * kw, out.shape[0] * oh * ow
    m, p = cuda.blockIdx.y * TILE + ty, cuda.blockIdx.x * TILE + tx
    n, oy, ox = p // (oh * ow), (p // ow) % oh, p % ow
    acc = np.float32(0.0)
    for t in range((depth + TILE - 1) // TILE):
        ka, kb = t * TILE + tx, t * TILE + ty
        in_a = m < rows and ka < depth
        sa[ty, tx] = w[g * rows + m, ka // (kh * kw), (ka // kw) % kh, ka % kw] if in_a else np.float32(0.0)
        y, xx = oy * sh + (kb // kw) % kh - top, ox * sw + kb % kw - left
        inside = p < cols and kb < depth and 0 <= y < x.shape[2] and 0 <= xx < x.shape[3]
        sb[ty, tx] = x[n, g * cin + kb // (kh * kw), y, xx] if inside else np.float32(0.0)
        cuda.syncthreads()
        for i in range(TILE):
            acc += sa[ty, i] * sb[i, tx]
        cuda.syncthreads()
    if m < rows and p < cols:
        out[n, g * rows + m, oy, ox] = _activate(act, acc)


@cuda.jit
def _batchnorm(x, scale, bias, mean, var, out, eps):
    """Inference batch norm over channel axis 1 of NCHW (|var|, as the reference semantics)."""
    i = cuda.grid(1)
    if i < out.size:
        n, c, y, xx = _nchw(i, x.shape)
        out[n, c, y, xx] = (x[n, c, y, xx] - mean[c]) * (scale[c] / math.sqrt(abs(var[c]) + eps)) + bias[c]


THREADS = 256


def blocks(n: int, threads: int = THREADS) -> int:
    """Blocks of `threads` covering `n` one-thread-per-element work items."""
    return max(1, (n + threads - 1) // threads)


def output(out, shape: tuple[int, ...]):
    """The caller's output buffer (timing: no allocation in the timed launch) or a new one."""
    return cuda.device_array(shape, np.float32) if out is None else out


def _launch_matmul(act: int, a, b, out=None):
    batch = a.shape[:-2]
    a3 = a.reshape((-1,) + a.shape[-2:])
    b3 = b.reshape((-1,) + b.shape[-2:])
    out = output(out, (a3.shape[0], a3.shape[1], b3.shape[2]))
    grid = ((b3.shape[2] + TILE - 1) // TILE, (a3.shape[1] + TILE - 1) // TILE, a3.shape[0])
    _matmul[grid, (TILE, TILE)](a3, b3, out, act)
    return out.reshape(batch + out.shape[1:])


def _launch_conv2d(sh: int, sw: int, pad: int, act: int, x, w, out=None):
    oh, top = spatial(x.shape[2], w.shape[2], sh, pad)
    ow, left = spatial(x.shape[3], w.shape[3], sw, pad)
    out = output(out, (x.shape[0], w.shape[0], oh, ow))
    cin, kh, kw = w.shape[1], w.shape[2], w.shape[3]
    if cin * kh * kw < GEMM_MIN_DEPTH:
        _conv2d[blocks(out.size), THREADS](x, w, out, sh, sw, top, left, act)
        return out
    groups = x.shape[1] // cin
    grid = (-(-x.shape[0] * oh * ow // TILE), -(-(w.shape[0] // groups) // TILE), groups)
    _conv2d_gemm[grid, (TILE, TILE)](x, w, out, sh, sw, top, left, act)
    return out


def _launch_pool(is_max: bool) -> Callable[..., Any]:
    def launch(x, kh: int, kw: int, sh: int, sw: int, pad: int, act: int, out=None):
        oh, top = spatial(x.shape[2], kh, sh, pad)
        ow, left = spatial(x.shape[3], kw, sw, pad)
        out = output(out, (x.shape[0], x.shape[1], oh, ow))
        _pool[blocks(out.size), THREADS](x, out, kh, kw, sh, sw, top, left, is_max, act)
        return out
    return launch


def _launch_unary(act: int) -> Callable[..., Any]:
    def launch(a, out=None):
        out = output(None if out is None else out.reshape(out.size), (a.size,))
        _unary[blocks(a.size), THREADS](a.reshape(a.size), out, act)
        return out.reshape(a.shape)
    return launch


def _launch_pointwise(element: Callable[[float], float]) -> Callable[..., Any]:
    """A one-input element-wise operator from its element function (the table's `pointwise` form),
    compiled on first launch."""
    compiled = cuda.jit(device=True)(element)

    @cuda.jit
    def kernel(a, out):
        i = cuda.grid(1)
        if i < a.size:
            out[i] = compiled(a[i])

    def launch(a, out=None):
        out = output(None if out is None else out.reshape(out.size), (a.size,))
        kernel[blocks(a.size), THREADS](a.reshape(a.size), out)
        return out.reshape(a.shape)
    return launch


def _launch_binary(code: int) -> Callable[..., Any]:
    def launch(a, b, out=None):
        shape = np.broadcast_shapes(a.shape, b.shape)
        size = int(np.prod(shape))
        out = output(None if out is None else out.reshape(out.size), (size,))
        walk = layout.broadcast(a.shape, b.shape)
        _binary[blocks(size), THREADS](a.reshape(a.size), b.reshape(b.size), out, *walk, code)
        return out.reshape(shape)
    return launch


def launch_layout(planner: str, *args: Any, out=None) -> Any:
    """A data-movement operator: fill (where the plan has one), then the plan's strided copies."""
    plan = layout.plan(planner, args)
    if out is None:
        outs = [output(None, shape) for shape in plan.outputs]
    else:  # the timing path: the buffers of an earlier launch
        outs = list(out) if isinstance(out, tuple) else [out]
    if plan.fill is not None:
        for dst in outs:
            _fill[blocks(dst.size), THREADS](dst.reshape(dst.size), np.float32(plan.fill))
    for c in plan.copies:
        dst, count = outs[c.output], int(np.prod(c.shape))
        _copy[blocks(count), THREADS](plan.sources[c.source].reshape(plan.sources[c.source].size),
                                       dst.reshape(dst.size), c.shape, count, c.src_offset, c.src_strides,
                                       c.dst_offset, c.dst_strides)
    return outs[0] if len(outs) == 1 else tuple(outs)


def _launch_batchnorm(x, scale, bias, mean, var, out=None):
    out = output(out, x.shape)
    _batchnorm[blocks(out.size), THREADS](x, scale, bias, mean, var, out, np.float32(1e-5))
    return out




FAMILIES: dict[str, Callable[..., Callable[..., Any]]] = {
    "unary": lambda op, code: _launch_unary(code), "pointwise": lambda op, element: _launch_pointwise(element),
    "binary": lambda op, code: _launch_binary(code),
    "product": fixed(_launch_matmul), "convolution": fixed(_launch_conv2d),
    "pool": lambda op, is_max: _launch_pool(is_max), "normalize": fixed(_launch_batchnorm),
    "layout": lambda op, planner: (lambda *args, out=None: launch_layout(planner, *args, out=out)),
}
LAUNCHERS: dict[str, Callable[..., Any]] = {spec.name: FAMILIES[spec.cuda.family](spec.name, **spec.cuda.kwargs)
                                            for spec in OPS if spec.cuda is not None}


def to_device(args: tuple[Any, ...]) -> tuple[Any, ...]:
    return tuple(cuda.to_device(np.ascontiguousarray(a, np.float32)) if isinstance(a, np.ndarray) else a
                 for a in args)


def run(op: str, *args: Any) -> Any:
    out = LAUNCHERS[op](*to_device(args))
    return tuple(o.copy_to_host() for o in out) if isinstance(out, tuple) else out.copy_to_host()


def time_op(op: str, device_args: tuple[Any, ...], runs: int = 20, warmup: int = 3) -> float:
    """Median seconds of one launch of `op`'s kernel: `time_launch` of its launcher."""
    return time_launch(LAUNCHERS[op], device_args, runs, warmup)


def time_launch(launch: Callable[..., Any], device_args: tuple[Any, ...], runs: int = 20, warmup: int = 3) -> float:
    """Median seconds of `launch(*device_args, out=out)` (CUDA events around each) after `warmup`
    untimed ones; inputs already on the device, the output buffer from a first, untimed launch.
    Every eqdsl CUDA kernel — the operator kernels and Q-gym's generated ones — is timed here."""
    out = launch(*device_args)
    for _ in range(warmup):
        launch(*device_args, out=out)
    cuda.synchronize()
    times = []
    for _ in range(runs):
        start, stop = cuda.event(), cuda.event()
        start.record()
        launch(*device_args, out=out)
        stop.record()
        stop.synchronize()
        times.append(start.elapsed_time(stop) / 1e3)  # ms between the two events
    return float(np.median(times))


@cuda.jit
def _empty(x):
    pass


def time_empty_launch(runs: int = 20) -> float:
    """The floor under every `time_launch`: one launch of a kernel that does nothing."""
    dummy = cuda.device_array(1, np.float32)
    return time_launch(lambda out=None: _empty[1, 1](dummy) or dummy, (), runs)
