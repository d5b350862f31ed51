"""Numba CUDA kernels for the tensor language's compute operators (float32, NCHW).

Contract: `run(op, *args)` takes an operator's arguments as the reference semantics do
(`eqdsl.languages.tensor.semantics`: ints for attributes, NumPy arrays for tensors) and returns
the result as a NumPy array equal to the reference's up to float32 rounding. `time_op(op, args,
runs)` returns the median of `runs` timed launches (CUDA events) after a warm-up, inputs already
on the device. Operators: matmul (shared-memory tiles, batched, fused activation), conv2d
(direct, groups, strides, SAME/VALID, fused activation), poolmax, poolavg, ewadd and ewmul (same
shapes; broadcasting raises `Unsupported`), relu, sigmoid, tanh, batchnorm. Under
`NUMBA_ENABLE_CUDASIM=1` the same code runs on the simulator (CI).
"""
from __future__ import annotations

import math
from typing import Any, Callable

import numpy as np
from numba import cuda

from eqdsl.kernels.shapes import Unsupported, spatial

TILE = 16  # matmul tile edge: TILE × TILE threads, two TILE × TILE float32 tiles in shared memory


@cuda.jit(device=True)
def _activate(act, v):
    if act == 1:
        return 1.0 / (1.0 + math.exp(-v))
    if act == 2:
        return max(v, 0.0)
    if act == 3:
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
def _elementwise(a, b, out, code):
    """code 0: a + b, 1: a * b, 2..4: activation (1 sigmoid, 2 relu, 3 tanh) of a, as code - 1."""
    i = cuda.grid(1)
    if i < out.size:
        if code == 0:
            out[i] = a[i] + b[i]
        elif code == 1:
            out[i] = a[i] * b[i]
        else:
            out[i] = _activate(code - 1, a[i])




@cuda.jit
def _batchnorm(x, scale, bias, mean, var, out, eps):
    """Inference batch norm over channel axis 1 of NCHW (|var|, as the reference semantics)."""
    i = cuda.grid(1)
    if i < out.size:
        n, c, y, xx = _nchw(i, x.shape)
        out[n, c, y, xx] = (x[n, c, y, xx] - mean[c]) * (scale[c] / math.sqrt(abs(var[c]) + eps)) + bias[c]


THREADS = 256


def _blocks(n: int) -> int:
    return max(1, (n + THREADS - 1) // THREADS)


def _output(out, shape: tuple[int, ...]):
    """The caller's output buffer (timing: no allocation in the timed launch) or a new one."""
    return cuda.device_array(shape, np.float32) if out is None else out


def _launch_matmul(act: int, a, b, out=None):
    batch = a.shape[:-2]
    a3 = a.reshape((-1,) + a.shape[-2:])
    b3 = b.reshape((-1,) + b.shape[-2:])
    out = _output(out, (a3.shape[0], a3.shape[1], b3.shape[2]))
    grid = ((b3.shape[2] + TILE - 1) // TILE, (a3.shape[1] + TILE - 1) // TILE, a3.shape[0])
    _matmul[grid, (TILE, TILE)](a3, b3, out, act)
    return out.reshape(batch + out.shape[1:])


def _launch_conv2d(sh: int, sw: int, pad: int, act: int, x, w, out=None):
    oh, top = spatial(x.shape[2], w.shape[2], sh, pad)
    ow, left = spatial(x.shape[3], w.shape[3], sw, pad)
    out = _output(out, (x.shape[0], w.shape[0], oh, ow))
    _conv2d[_blocks(out.size), THREADS](x, w, out, sh, sw, top, left, act)
    return out


def _launch_pool(is_max: bool) -> Callable[..., Any]:
    def launch(x, kh: int, kw: int, sh: int, sw: int, pad: int, act: int, out=None):
        oh, top = spatial(x.shape[2], kh, sh, pad)
        ow, left = spatial(x.shape[3], kw, sw, pad)
        out = _output(out, (x.shape[0], x.shape[1], oh, ow))
        _pool[_blocks(out.size), THREADS](x, out, kh, kw, sh, sw, top, left, is_max, act)
        return out
    return launch


def _launch_elementwise(code: int) -> Callable[..., Any]:
    def launch(a, b=None, out=None):
        if b is not None and b.shape != a.shape:
            raise Unsupported(f"element-wise kernel without broadcasting: {b.shape} to {a.shape}")
        flat_a = a.reshape(a.size)
        flat_b = flat_a if b is None else b.reshape(b.size)
        out = _output(None if out is None else out.reshape(out.size), (a.size,))
        _elementwise[_blocks(a.size), THREADS](flat_a, flat_b, out, code)
        return out.reshape(a.shape)
    return launch


def _launch_batchnorm(x, scale, bias, mean, var, out=None):
    out = _output(out, x.shape)
    _batchnorm[_blocks(out.size), THREADS](x, scale, bias, mean, var, out, np.float32(1e-5))
    return out


LAUNCHERS: dict[str, Callable[..., Any]] = {
    "batchnorm": _launch_batchnorm,
    "matmul": _launch_matmul,
    "conv2d": _launch_conv2d,
    "poolmax": _launch_pool(True),
    "poolavg": _launch_pool(False),
    "ewadd": _launch_elementwise(0),
    "ewmul": _launch_elementwise(1),
    "sigmoid": _launch_elementwise(2),
    "relu": _launch_elementwise(3),
    "tanh": _launch_elementwise(4),
}


def to_device(args: tuple[Any, ...]) -> tuple[Any, ...]:
    return tuple(cuda.to_device(np.ascontiguousarray(a, np.float32)) if isinstance(a, np.ndarray) else a
                 for a in args)


def run(op: str, *args: Any) -> np.ndarray:
    return LAUNCHERS[op](*to_device(args)).copy_to_host()


def time_op(op: str, device_args: tuple[Any, ...], runs: int = 20, warmup: int = 3) -> float:
    """Median seconds of one launch (CUDA events around each), inputs and output already on the
    device (the output buffer comes from a first, untimed launch)."""
    launch = LAUNCHERS[op]
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
        times.append(cuda.event_elapsed_time(start, stop) / 1e3)
    return float(np.median(times))


@cuda.jit
def _empty(x):
    pass


def time_empty_launch(runs: int = 20) -> float:
    """The floor under every `time_op`: one launch of a kernel that does nothing."""
    dummy = cuda.device_array(1, np.float32)
    LAUNCHERS["_empty"] = lambda out=None: _empty[1, 1](dummy) or dummy
    try:
        return time_op("_empty", (), runs)
    finally:
        del LAUNCHERS["_empty"]
