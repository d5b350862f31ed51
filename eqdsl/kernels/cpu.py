"""Numba CPU kernels (`parallel=True`) for the operators `eqdsl.kernels.cuda` has, same contract:
`run(op, *args)` returns what the reference semantics return (float32 rounding), `time_op(op,
args, runs)` the median of `runs` timed calls after a warm-up (which also compiles).

Convolutions with at least `GEMM_MIN_DEPTH` multiply-adds per output run as im2col + a blocked
GEMM (per image and group), the rest (depthwise) as the direct loop nest. Data movement
(transpose, concat, split, enlarge, merge, pad2d) is one strided copy kernel driven by
`eqdsl.kernels.layout`; element-wise binary operators broadcast both operands the same way."""
from __future__ import annotations

import math
import time
from typing import Any, Callable

import numpy as np
from numba import njit, prange

from eqdsl.kernels import fork_safe_threads, layout
from eqdsl.languages.tensor.codes import Act, spatial
from eqdsl.languages.tensor.ops import OPS, fixed

SIGMOID, RELU, TANH = int(Act.SIGMOID), int(Act.RELU), int(Act.TANH)  # plain ints: Numba's constants


@njit(cache=True)
def _activate(act, v):
    if act == SIGMOID:
        return 1.0 / (1.0 + math.exp(-v))
    if act == RELU:
        return max(v, 0.0)
    if act == TANH:
        return math.tanh(v)
    return v


@njit(parallel=True, cache=True)
def _conv2d(x, w, oh, ow, sh, sw, top, left, act):
    n_, o_ = x.shape[0], w.shape[0]
    cin, kh, kw = w.shape[1], w.shape[2], w.shape[3]
    per_group = o_ // (x.shape[1] // cin)
    out = np.empty((n_, o_, oh, ow), np.float32)
    for no in prange(n_ * o_):
        n, o = no // o_, no % o_
        base = (o // per_group) * cin
        for oy in range(oh):
            for ox in range(ow):
                acc = np.float32(0.0)
                for c in range(cin):
                    for dy in range(kh):
                        y = oy * sh + dy - top
                        if 0 <= y < x.shape[2]:
                            for dx in range(kw):
                                xx = ox * sw + dx - left
                                if 0 <= xx < x.shape[3]:
                                    acc += x[n, base + c, y, xx] * w[o, c, dy, dx]
                out[n, o, oy, ox] = _activate(act, acc)
    return out


@njit(parallel=True, cache=True)
def _pool(x, oh, ow, kh, kw, sh, sw, top, left, is_max, act):
    n_, c_ = x.shape[0], x.shape[1]
    out = np.empty((n_, c_, oh, ow), np.float32)
    for nc in prange(n_ * c_):
        n, c = nc // c_, nc % c_
        for oy in range(oh):
            for ox in range(ow):
                best, total, count = -np.inf, np.float32(0.0), 0
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
    return out


@njit(parallel=True, cache=True)
def _unary(a, code):
    out = np.empty(a.size, np.float32)
    for i in prange(a.size):
        out[i] = _activate(code, a[i])
    return out


@njit(parallel=True, cache=True)
def _same_shape(a, b, code):
    out = np.empty(a.size, np.float32)
    for i in prange(a.size):
        out[i] = a[i] + b[i] if code == 0 else a[i] * b[i]
    return out


@njit(cache=True)
def _row_offsets(row, shape, first, first_strides, second, second_strides):
    """Offsets of index row `row` (all axes but the last) in two strided arrays."""
    row = np.int64(row)  # a prange index is unsigned: mixed with signed ints Numba would go float
    for ax in range(len(shape) - 2, -1, -1):
        i = row % shape[ax]
        row //= shape[ax]
        first += i * first_strides[ax]
        second += i * second_strides[ax]
    return first, second


@njit(parallel=True, cache=True)
def _binary(a, b, out, shape, a_strides, b_strides, code):
    """out (contiguous, `shape`) = a op b, a and b read with broadcast strides; code 0 add, 1 mul."""
    inner = shape[len(shape) - 1]
    sa, sb = a_strides[len(shape) - 1], b_strides[len(shape) - 1]
    for row in prange(out.size // max(inner, 1)):
        ia, ib = _row_offsets(row, shape, 0, a_strides, 0, b_strides)
        dst = out[np.int64(row) * inner:(np.int64(row) + 1) * inner]
        if sa == 1 and sb == 1:  # the common cases get loops LLVM vectorizes
            _binary_row(a[ia:ia + inner], b[ib:ib + inner], dst, code)
        elif sa == 1 and sb == 0:
            _binary_row(a[ia:ia + inner], np.full(inner, b[ib], np.float32), dst, code)
        else:
            for j in range(inner):
                x, y = a[ia + j * sa], b[ib + j * sb]
                dst[j] = x + y if code == 0 else x * y


@njit(cache=True, inline="always")
def _binary_row(a, b, out, code):
    if code == 0:
        for j in range(out.size):
            out[j] = a[j] + b[j]
    else:
        for j in range(out.size):
            out[j] = a[j] * b[j]


@njit(parallel=True, cache=True)
def _copy(src, dst, shape, src_offset, src_strides, dst_offset, dst_strides):
    """dst[dst_offset + Σ i·dst_strides] = src[src_offset + Σ i·src_strides] over the box `shape`."""
    inner = shape[len(shape) - 1]
    rows = 1
    for ax in range(len(shape) - 1):
        rows *= shape[ax]
    ss, ds = src_strides[len(shape) - 1], dst_strides[len(shape) - 1]
    if inner == 0:
        return
    for row in prange(rows):
        s, d = _row_offsets(row, shape, src_offset, src_strides, dst_offset, dst_strides)
        if ss == 1 and ds == 1:
            _copy_row(src[s:s + inner], dst[d:d + inner])
        else:
            for j in range(inner):
                dst[d + j * ds] = src[s + j * ss]


@njit(cache=True, inline="always")
def _copy_row(src, dst):
    for j in range(dst.size):
        dst[j] = src[j]


GEMM_MIN_DEPTH = 16  # below this many multiply-adds per output (depthwise), the direct loop wins
CHUNK = 512  # output columns accumulated at once: 4 × CHUNK accumulators stay in L1 (swept: 64–1024)


@njit(parallel=True, cache=True)
def _im2col(x, n, kh, kw, oh, ow, sh, sw, top, left, col):
    """col[g, (c, dy, dx), (oy, ox)] = x[n, g·cin + c, oy·sh + dy − top, ox·sw + dx − left] or 0,
    cin the input channels of a group."""
    groups, depth = col.shape[0], col.shape[1]
    cin = depth // (kh * kw)
    for gk in prange(groups * depth):
        g, k = gk // depth, gk % depth
        c, dy, dx = k // (kh * kw), (k // kw) % kh, k % kw
        for oy in range(oh):
            y = oy * sh + dy - top
            for ox in range(ow):
                xx = ox * sw + dx - left
                inside = 0 <= y < x.shape[2] and 0 <= xx < x.shape[3]
                col[g, k, oy * ow + ox] = x[n, g * cin + c, y, xx] if inside else np.float32(0.0)


@njit(parallel=True, cache=True)
def _gemm(a, b, out, act):
    """out[z] = act(a[z] @ b[z]) for every batch z: four rows of `a` at a time share each loaded
    row of `b` (register blocking), output columns in CHUNKs (the accumulators stay in L1). One
    parallel region for the whole batch; tasks run column chunk by column chunk, so one thread's
    consecutive row blocks reuse a chunk of `b` from cache."""
    depth, width, rows = b.shape[1], b.shape[2], a.shape[1]
    row_blocks, chunks = (rows + 3) // 4, (width + CHUNK - 1) // CHUNK
    for task in prange(a.shape[0] * chunks * row_blocks):
        z, rest = task // (chunks * row_blocks), task % (chunks * row_blocks)
        m, p0 = 4 * (rest % row_blocks), CHUNK * (rest // row_blocks)
        p1 = min(p0 + CHUNK, width)
        acc = np.zeros((4, p1 - p0), np.float32)
        for k in range(depth):
            _axpy4(a[z], m, k, b[z, k, p0:p1], acc[0], acc[1], acc[2], acc[3])
        for i in range(min(4, rows - m)):
            dst = out[z, m + i, p0:p1]
            for p in range(p1 - p0):
                dst[p] = _activate(act, acc[i, p])


@njit(cache=True, inline="always")
def _axpy4(a, m, k, x, acc0, acc1, acc2, acc3):
    """acc_i += a[m + i, k] · x for the (up to) four rows of the block; the loop LLVM vectorizes."""
    rows = a.shape[0]
    v0 = a[m, k]
    v1 = a[m + 1, k] if m + 1 < rows else np.float32(0.0)
    v2 = a[m + 2, k] if m + 2 < rows else np.float32(0.0)
    v3 = a[m + 3, k] if m + 3 < rows else np.float32(0.0)
    for p in range(x.size):
        xp = x[p]
        acc0[p] += v0 * xp
        acc1[p] += v1 * xp
        acc2[p] += v2 * xp
        acc3[p] += v3 * xp


@njit(parallel=True, cache=True)
def _batchnorm(x, scale, bias, mean, var, eps):
    n_, c_ = x.shape[0], x.shape[1]
    out = np.empty(x.shape, np.float32)
    for nc in prange(n_ * c_):
        n, c = nc // c_, nc % c_
        k = scale[c] / math.sqrt(abs(var[c]) + eps)
        out[n, c] = (x[n, c] - mean[c]) * k + bias[c]
    return out


def _run_batchnorm(x, scale, bias, mean, var) -> np.ndarray:
    return _batchnorm(x, scale, bias, mean, var, np.float32(1e-5))


def _run_matmul(act: int, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    a3, b3 = a.reshape((-1,) + a.shape[-2:]), b.reshape((-1,) + b.shape[-2:])
    out = np.empty((a3.shape[0], a3.shape[1], b3.shape[2]), np.float32)
    _gemm(a3, b3, out, act)
    return out.reshape(a.shape[:-2] + out.shape[1:])


def _run_conv2d(sh: int, sw: int, pad: int, act: int, x: np.ndarray, w: np.ndarray) -> np.ndarray:
    oh, top = spatial(x.shape[2], w.shape[2], sh, pad)
    ow, left = spatial(x.shape[3], w.shape[3], sw, pad)
    cin, kh, kw = w.shape[1], w.shape[2], w.shape[3]
    if cin * kh * kw < GEMM_MIN_DEPTH:
        return _conv2d(x, w, oh, ow, sh, sw, top, left, act)
    groups = x.shape[1] // cin
    out = np.empty((x.shape[0], groups, w.shape[0] // groups, oh * ow), np.float32)
    col = np.empty((groups, cin * kh * kw, oh * ow), np.float32)
    for n in range(x.shape[0]):
        _im2col(x, n, kh, kw, oh, ow, sh, sw, top, left, col)
        _gemm(w.reshape(groups, w.shape[0] // groups, cin * kh * kw), col, out[n], act)
    return out.reshape(x.shape[0], w.shape[0], oh, ow)


def _run_pool(is_max: bool) -> Callable[..., np.ndarray]:
    def run_pool(x: np.ndarray, kh: int, kw: int, sh: int, sw: int, pad: int, act: int) -> np.ndarray:
        oh, top = spatial(x.shape[2], kh, sh, pad)
        ow, left = spatial(x.shape[3], kw, sw, pad)
        return _pool(x, oh, ow, kh, kw, sh, sw, top, left, is_max, act)
    return run_pool


SERIAL_BELOW = 1 << 15  # elements: below this, a parallel region's start-up costs more than it saves
_SERIAL: dict[Any, Any] = {}


def _sized(kernel: Any, size: int) -> Any:
    """`kernel` for a large operand, its serial twin (compiled on first use) for a small one."""
    if size >= SERIAL_BELOW:
        return kernel
    if kernel not in _SERIAL:
        _SERIAL[kernel] = njit(kernel.py_func)  # prange runs as range; not cached (same source)
    return _SERIAL[kernel]


def _run_unary(code: int) -> Callable[..., np.ndarray]:
    def run_unary(a: np.ndarray) -> np.ndarray:
        return _sized(_unary, a.size)(a.reshape(a.size), code).reshape(a.shape)
    return run_unary


def _run_pointwise(element: Callable[[float], float]) -> Callable[..., np.ndarray]:
    """A one-input element-wise operator from its element function (the table's `pointwise` form),
    compiled on first use."""
    compiled = njit(inline="always")(element)

    @njit(parallel=True)
    def kernel(a):
        out = np.empty(a.size, np.float32)
        for i in prange(a.size):
            out[i] = compiled(a[i])
        return out

    def run_pointwise(a: np.ndarray) -> np.ndarray:
        return _sized(kernel, a.size)(a.reshape(a.size)).reshape(a.shape)
    return run_pointwise


def _run_binary(code: int) -> Callable[..., np.ndarray]:
    def run_binary(a: np.ndarray, b: np.ndarray) -> np.ndarray:
        if a.shape == b.shape:
            return _sized(_same_shape, a.size)(a.reshape(a.size), b.reshape(b.size), code).reshape(a.shape)
        shape = np.broadcast_shapes(a.shape, b.shape)
        out = np.empty(shape, np.float32)
        _sized(_binary, out.size)(a.reshape(a.size), b.reshape(b.size), out.reshape(out.size),
                                  *layout.broadcast(a.shape, b.shape), code)
        return out
    return run_binary


def run_layout(planner: str, *args: Any) -> Any:
    plan = layout.plan(planner, args)
    outs = [np.empty(shape, np.float32) if plan.fill is None else np.full(shape, plan.fill, np.float32)
            for shape in plan.outputs]
    for c in plan.copies:
        copy = _sized(_copy, int(np.prod(c.shape)))
        copy(plan.sources[c.source].reshape(-1), outs[c.output].reshape(-1), c.shape, c.src_offset, c.src_strides,
             c.dst_offset, c.dst_strides)
    return outs[0] if len(outs) == 1 else tuple(outs)




FAMILIES: dict[str, Callable[..., Callable[..., Any]]] = {
    "unary": lambda op, code: _run_unary(code), "pointwise": lambda op, element: _run_pointwise(element),
    "binary": lambda op, code: _run_binary(code),
    "product": fixed(_run_matmul), "convolution": fixed(_run_conv2d), "pool": lambda op, is_max: _run_pool(is_max),
    "normalize": fixed(_run_batchnorm), "layout": lambda op, planner: (lambda *args: run_layout(planner, *args)),
}
RUNNERS: dict[str, Callable[..., Any]] = {spec.name: FAMILIES[spec.cpu.family](spec.name, **spec.cpu.kwargs)
                                          for spec in OPS if spec.cpu is not None}


def as_float32(args: tuple[Any, ...]) -> tuple[Any, ...]:
    return tuple(np.ascontiguousarray(a, np.float32) if isinstance(a, np.ndarray) else a for a in args)


def run(op: str, *args: Any) -> np.ndarray:
    fork_safe_threads()
    return RUNNERS[op](*as_float32(args))


def time_op(op: str, args: tuple[Any, ...], runs: int = 20, warmup: int = 2) -> float:
    fork_safe_threads()
    fn, args = RUNNERS[op], as_float32(args)
    for _ in range(warmup):
        fn(*args)
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        fn(*args)
        times.append(time.perf_counter() - t0)
    return float(np.median(times))
