"""Reference semantics of Glenside's access-pattern language (rulesets/glenside.eqr), NumPy.

An access pattern is a `Split`: an array whose first `split` axes are the access dimensions and
the rest the compute dimensions. Dimension arguments index all axes (`items`). One function per
operator, in the order of the `.eqr` declarations; Glenside's definitions (MAPS 2021, Tables 1–2).
"""
from __future__ import annotations

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from eqdsl.languages.base import Leaf, Split


def tensor(t: np.ndarray) -> Split:
    return Split(np.asarray(t, dtype=float), 0)


def access(a: Split, dim: int) -> Split:
    return Split(a.array, dim)


def transpose(a: Split, perm: tuple[int, ...]) -> Split:
    return Split(np.transpose(a.array, perm), a.split)


def cart_prod(a: Split, b: Split) -> Split:
    """out[i, j, 0, c] = a[i, c] and out[i, j, 1, c] = b[j, c] for access positions i of a, j of b."""
    na, nb = a.split, b.split
    compute = a.array.shape[na:]
    left = a.array.reshape(a.array.shape[:na] + (1,) * nb + compute)
    right = b.array.reshape((1,) * na + b.array.shape[:nb] + compute)
    shape = a.array.shape[:na] + b.array.shape[:nb] + compute
    return Split(np.stack([np.broadcast_to(left, shape), np.broadcast_to(right, shape)], axis=na + nb), na + nb)


def windows(a: Split, kc: int, kh: int, kw: int, sc: int, sh: int, sw: int) -> Split:
    """Compute dims (C, H, W) → access positions (OC, OH, OW) and compute dims (kc, kh, kw)."""
    n = a.split
    win = sliding_window_view(a.array, (kc, kh, kw), axis=(n, n + 1, n + 2))
    return Split(win[..., ::sc, ::sh, ::sw, :, :, :], n + 3)


def slice_(a: Split, dim: int, lo: int, hi: int) -> Split:
    return Split(np.take(a.array, np.arange(lo, hi), axis=dim), a.split)


def concat(a: Split, b: Split, dim: int) -> Split:
    return Split(np.concatenate([a.array, b.array], axis=dim), a.split)


def pair(a: Split, b: Split) -> Split:
    return Split(np.stack([a.array, b.array], axis=a.split), a.split)


def squeeze(a: Split, dim: int) -> Split:
    return Split(np.squeeze(a.array, axis=dim), a.split - (1 if dim < a.split else 0))


def flatten(a: Split) -> Split:
    shape = a.array.shape
    return Split(a.array.reshape(int(np.prod(shape[:a.split])), int(np.prod(shape[a.split:]))), 1)


def reshape(a: Split, acc: tuple[int, ...], comp: tuple[int, ...]) -> Split:
    return Split(a.array.reshape(tuple(acc) + tuple(comp)), len(acc))


def pad(a: Split, dim: int, before: int, after: int) -> Split:
    widths = [(0, 0)] * a.array.ndim
    widths[dim] = (before, after)
    return Split(np.pad(a.array, widths), a.split)


def _compute_axes(a: Split) -> tuple[int, ...]:
    return tuple(range(a.split, a.array.ndim))


def dot_prod(a: Split) -> Split:
    products = np.prod(a.array, axis=a.split)
    return Split(products.sum(axis=tuple(range(a.split, products.ndim))), a.split)


def reduce_sum(a: Split) -> Split:
    return Split(np.sum(a.array, axis=_compute_axes(a)), a.split)


def reduce_max(a: Split) -> Split:
    return Split(np.max(a.array, axis=_compute_axes(a)), a.split)


def systolic_array(rows: int, cols: int, a: Split, b: Split) -> Split:
    """Every access position's `rows` vector times the rows × cols matrix b."""
    return Split(np.tensordot(a.array, b.array, axes=1), a.split + 1)


SEMANTICS = {
    "input": Leaf(lambda id_, dims: tuple(dims)),
    "weight": Leaf(lambda id_, dims: tuple(dims)),
    "tensor": tensor,
    "access": access,
    "transpose": transpose,
    "cartProd": cart_prod,
    "windows": windows,
    "slice": slice_,
    "concat": concat,
    "pair": pair,
    "squeeze": squeeze,
    "flatten": flatten,
    "reshape": reshape,
    "pad": pad,
    "dotProd": dot_prod,
    "reduceSum": reduce_sum,
    "reduceMax": reduce_max,
    "relu": lambda a: Split(np.maximum(a.array, 0.0), a.split),
    "elemAdd": lambda a: Split(np.sum(a.array, axis=a.split), a.split),
    "elemMul": lambda a: Split(np.prod(a.array, axis=a.split), a.split),
    "systolicArray": systolic_array,
    "systolicArrayBlocked": systolic_array,  # the same product; only its cost differs
}
