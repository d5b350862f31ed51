"""Data-movement operators as strided copies, planned from shapes alone (shared by every backend).

Transpose, concat, split, enlarge, merge and pad2d move elements without arithmetic; each is a
fill of its output(s) plus a few copies `dst[dst_offset + Σ i_d·dst_strides_d] = src[src_offset +
Σ i_d·src_strides_d]` over an index box `shape`. A backend needs one copy kernel and one fill to
run all of them. Boxes are collapsed (`collapse`: the fewest, longest axes walking the same
elements) and padded in front to `RANK` axes (extent 1, stride 0), so a kernel's index arithmetic
has a fixed arity and a long innermost loop. The same stride vectors express broadcasting:
`broadcast(a, b)` reads each operand with stride 0 along its broadcast axes.

Contract: `plan(planner, args)` takes the planner's name (the operator's `layout` kernel form
names it: `join` for every concat) and the operator's arguments in the reference order (arrays may be
any object with `.shape`: NumPy or device arrays) and returns the `Plan`: output shapes, the fill
value (None: every element is copied), and the copies, each naming its source tensor (index into
`Plan.sources`) and output. Raises `Unsupported` past `RANK` axes.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from eqdsl.kernels.shapes import Unsupported
from eqdsl.languages.tensor.reference import LOWEST

RANK = 8  # the tensor language's transpose takes any rank up to 8
Shape = tuple[int, ...]


@dataclass(frozen=True)
class Copy:
    source: int          # index into Plan.sources
    output: int          # index into Plan.outputs
    shape: Shape         # the index box, RANK axes
    src_offset: int
    src_strides: Shape
    dst_offset: int
    dst_strides: Shape


@dataclass(frozen=True)
class Plan:
    sources: tuple[Any, ...]
    outputs: tuple[Shape, ...]
    fill: float | None
    copies: tuple[Copy, ...]


def contiguous_strides(shape: Shape) -> Shape:
    """Element strides of a C-contiguous array."""
    strides, step = [], 1
    for extent in reversed(shape):
        strides.append(step)
        step *= extent
    return tuple(reversed(strides))


def padded(values: Shape, fill: int) -> Shape:
    if len(values) > RANK:
        raise Unsupported(f"layout kernels take at most {RANK} axes, got {len(values)}")
    return (fill,) * (RANK - len(values)) + tuple(values)


def collapse(box: Shape, *strides: Shape) -> tuple[Shape, tuple[Shape, ...]]:
    """The same index walk over fewer axes: extent-1 axes dropped, and an axis merged into the
    next where every stride vector steps over it contiguously — so the innermost axis is as long
    as possible (a concat's or a bias add's inner loop runs over whole rows, not 56 elements)."""
    axes = [(extent, [s[d] for s in strides]) for d, extent in enumerate(box) if extent != 1]
    merged: list[tuple[int, list[int]]] = []
    for extent, steps in axes:
        if merged and all(outer == inner * extent for outer, inner in zip(merged[-1][1], steps)):
            merged[-1] = (merged[-1][0] * extent, steps)
        else:
            merged.append((extent, steps))
    merged = merged or [(1, [0] * len(strides))]
    return (padded(tuple(e for e, _ in merged), 1),
            tuple(padded(tuple(steps[k] for _, steps in merged), 0) for k in range(len(strides))))


def broadcast_strides(shape: Shape, out: Shape) -> Shape:
    """Strides (one per axis of `out`) reading a contiguous `shape` array at every index of `out`
    (NumPy broadcasting: axes aligned from the right, extent-1 axes repeated)."""
    own = contiguous_strides(shape)
    aligned = (1,) * (len(out) - len(shape)) + tuple(shape)
    strides = (0,) * (len(out) - len(shape)) + own
    return tuple(0 if a == 1 else s for a, s in zip(aligned, strides))


def broadcast(a: Shape, b: Shape) -> tuple[Shape, Shape, Shape]:
    """(box, a's strides, b's strides), collapsed, for an element-wise op writing a contiguous
    output of the broadcast shape of `a` and `b`."""
    out = tuple(np.broadcast_shapes(a, b))
    box, (sa, sb) = collapse(out, broadcast_strides(a, out), broadcast_strides(b, out))
    return box, sa, sb


def _box_copy(source: int, box: Shape, src_shape: Shape, src_start: Shape, out_shape: Shape,
              dst_start: Shape, output: int = 0, src_strides: Shape | None = None) -> Copy:
    """Copy `box` elements from `src_start` of a contiguous source to `dst_start` of the output."""
    sstr = contiguous_strides(src_shape) if src_strides is None else src_strides
    dstr = contiguous_strides(out_shape)
    walk, (src_walk, dst_walk) = collapse(box, sstr, dstr)
    return Copy(source, output, walk, int(np.dot(src_start, sstr)) if src_start else 0, src_walk,
                int(np.dot(dst_start, dstr)) if dst_start else 0, dst_walk)


def _at(axis: int, rank: int, value: int) -> Shape:
    return tuple(value if d == axis else 0 for d in range(rank))


def _transpose(x: Any, perm: Shape) -> Plan:
    out = tuple(x.shape[p] for p in perm)
    strides = contiguous_strides(tuple(x.shape))
    copy = _box_copy(0, out, x.shape, (), out, (), src_strides=tuple(strides[p] for p in perm))
    return Plan((x,), (out,), None, (copy,))


def _concat(axis: int, *xs: Any) -> Plan:
    out = list(xs[0].shape)
    out[axis] = sum(x.shape[axis] for x in xs)
    copies, start = [], 0
    for i, x in enumerate(xs):
        copies.append(_box_copy(i, tuple(x.shape), x.shape, (), tuple(out), _at(axis, len(out), start)))
        start += x.shape[axis]
    return Plan(tuple(xs), (tuple(out),), None, tuple(copies))


def _split(axis: int, at: int, x: Any) -> Plan:
    shape = tuple(x.shape)
    halves = (shape[:axis] + (at,) + shape[axis + 1:], shape[:axis] + (shape[axis] - at,) + shape[axis + 1:])
    copies = tuple(_box_copy(0, half, shape, _at(axis, len(shape), start), half, (), output=k)
                   for k, (half, start) in enumerate(zip(halves, (0, at))))
    return Plan((x,), halves, None, copies)


def _enlarge(w: Any, ref: Any) -> Plan:
    out = tuple(w.shape[:2]) + tuple(ref.shape[2:4])
    dh, dw = out[2] - w.shape[2], out[3] - w.shape[3]
    copy = _box_copy(0, tuple(w.shape), w.shape, (), out, (0, 0, dh // 2, dw // 2))
    return Plan((w,), (out,), 0.0, (copy,))


def _merge(w: Any, count: int) -> Plan:
    o_, cin = w.shape[0], w.shape[1]
    out, per = (o_, cin * count) + tuple(w.shape[2:]), o_ // count
    box = (per, cin) + tuple(w.shape[2:])
    copies = tuple(_box_copy(0, box, w.shape, (b * per, 0, 0, 0), out, (b * per, b * cin, 0, 0)) for b in range(count))
    return Plan((w,), (out,), 0.0, copies)


def _pad2d(x: Any, top: int, bottom: int, left: int, right: int, fill: int) -> Plan:
    n, c, h, w = x.shape
    out = (n, c, h + top + bottom, w + left + right)
    copy = _box_copy(0, tuple(x.shape), x.shape, (), out, (0, 0, top, left))
    return Plan((x,), (out,), LOWEST if fill else 0.0, (copy,))


# the planners by the name an operator's `layout` kernel form gives (`languages/tensor/ops.py`)
PLANNERS: dict[str, Callable[..., Plan]] = {
    "permute": _transpose, "join": _concat, "cut": _split, "centre": _enlarge, "regroup": _merge,
    "pad": _pad2d,
}


def plan(planner: str, args: tuple[Any, ...]) -> Plan:
    return PLANNERS[planner](*args)
