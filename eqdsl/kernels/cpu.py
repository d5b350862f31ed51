"""Numba CPU kernels (`parallel=True`) for the operators `eqdsl.kernels.cuda` has (element-wise
ones broadcast their second operand here), same contract:
`run(op, *args)` returns what the reference semantics return (float32 rounding), `time_op(op,
args, runs)` the median of `runs` timed calls after a warm-up (which also compiles)."""
from __future__ import annotations

import math
import time
from typing import Any, Callable

import numpy as np
from numba import config, njit, prange

from eqdsl.kernels.shapes import spatial

# eqdsl forks (the worker, the per-iteration memory guard): GNU OpenMP aborts a forked child that
# runs a parallel region, so the parallel kernels use Numba's fork-safe workqueue layer.
config.THREADING_LAYER = "workqueue"  # type: ignore[attr-defined]


@njit(cache=True)
def _activate(act, v):
    if act == 1:
        return 1.0 / (1.0 + math.exp(-v))
    if act == 2:
        return max(v, 0.0)
    if act == 3:
        return math.tanh(v)
    return v


@njit(parallel=True, cache=True)
def _matmul(a, b, act):
    z_, m, k = a.shape
    n = b.shape[2]
    out = np.empty((z_, m, n), np.float32)
    for zi in prange(z_ * m):
        z, i = zi // m, zi % m
        row = np.zeros(n, np.float32)
        for kk in range(k):
            v = a[z, i, kk]
            for j in range(n):
                row[j] += v * b[z, kk, j]
        for j in range(n):
            out[z, i, j] = _activate(act, row[j])
    return out


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
def _elementwise(a, b, code):
    out = np.empty(a.size, np.float32)
    for i in prange(a.size):
        if code == 0:
            out[i] = a[i] + b[i]
        elif code == 1:
            out[i] = a[i] * b[i]
        else:
            out[i] = _activate(code - 1, a[i])
    return out


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
    out = _matmul(a.reshape((-1,) + a.shape[-2:]), b.reshape((-1,) + b.shape[-2:]), act)
    return out.reshape(a.shape[:-2] + out.shape[1:])


def _run_conv2d(sh: int, sw: int, pad: int, act: int, x: np.ndarray, w: np.ndarray) -> np.ndarray:
    oh, top = spatial(x.shape[2], w.shape[2], sh, pad)
    ow, left = spatial(x.shape[3], w.shape[3], sw, pad)
    return _conv2d(x, w, oh, ow, sh, sw, top, left, act)


def _run_pool(is_max: bool) -> Callable[..., np.ndarray]:
    def run_pool(x: np.ndarray, kh: int, kw: int, sh: int, sw: int, pad: int, act: int) -> np.ndarray:
        oh, top = spatial(x.shape[2], kh, sh, pad)
        ow, left = spatial(x.shape[3], kw, sw, pad)
        return _pool(x, oh, ow, kh, kw, sh, sw, top, left, is_max, act)
    return run_pool


def _run_elementwise(code: int) -> Callable[..., np.ndarray]:
    def run_elementwise(a: np.ndarray, b: np.ndarray | None = None) -> np.ndarray:
        if b is not None and b.shape != a.shape:  # numpy broadcasting of b to a's shape, materialized
            b = np.ascontiguousarray(np.broadcast_to(b, a.shape))
        flat = a.reshape(a.size)
        return _elementwise(flat, flat if b is None else b.reshape(b.size), code).reshape(a.shape)
    return run_elementwise


RUNNERS: dict[str, Callable[..., np.ndarray]] = {
    "batchnorm": _run_batchnorm,
    "matmul": _run_matmul, "conv2d": _run_conv2d, "poolmax": _run_pool(True), "poolavg": _run_pool(False),
    "ewadd": _run_elementwise(0), "ewmul": _run_elementwise(1), "sigmoid": _run_elementwise(2),
    "relu": _run_elementwise(3), "tanh": _run_elementwise(4),
}


def as_float32(args: tuple[Any, ...]) -> tuple[Any, ...]:
    return tuple(np.ascontiguousarray(a, np.float32) if isinstance(a, np.ndarray) else a for a in args)


def run(op: str, *args: Any) -> np.ndarray:
    return RUNNERS[op](*as_float32(args))


def time_op(op: str, args: tuple[Any, ...], runs: int = 20, warmup: int = 2) -> float:
    fn, args = RUNNERS[op], as_float32(args)
    for _ in range(warmup):
        fn(*args)
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        fn(*args)
        times.append(time.perf_counter() - t0)
    return float(np.median(times))
