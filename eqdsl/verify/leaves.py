"""Leaves of random examples: their values, and the arguments that give a leaf operator a shape.

Contract: `draw_leaf(rng, shape, earlier)` is a float array of `shape` with a fixed share of edge
cases (`EDGE_VALUES`, small integers, an earlier leaf's value again); `leaf_args(lang, op, name,
size)` is the argument list of a leaf operator (no operands, a `Str` parameter, which gets `?name`)
whose shape rule gives `size`, or None where it cannot (`eqdsl derive`'s fresh leaves, `verify`'s
drawn terms of a shaped sort).
"""
from __future__ import annotations

from typing import Any

import numpy as np

from eqdsl import ir

EDGE_VALUES = (0.0, 1.0, -1.0, 2.0, 0.5, 1e-8, -1e8)


def draw_leaf(rng: np.random.Generator, shape: tuple[int, ...], earlier: Any) -> np.ndarray:
    """A leaf value: mostly standard normal, but a fixed share of edge cases that normal draws
    never hit: a constant edge value (0, ±1, tiny, huge), small integers, and the same value as
    an earlier leaf of the same shape (equal operands)."""
    r = rng.random()
    if r < 0.15 and earlier is not None:
        return np.array(earlier, dtype=float)
    if r < 0.35:
        return np.full(shape, EDGE_VALUES[rng.integers(len(EDGE_VALUES))], dtype=float)
    if r < 0.45:
        return rng.integers(-3, 4, shape).astype(float)
    return rng.standard_normal(shape)


def leaf_args(lang: ir.Language, op: ir.Operator, name: str, size: tuple[int, ...] | None) -> list | None:
    """Arguments of a leaf operator (no operands, a `Str` parameter for the name) that give
    `size`: its shape rule returns an `[Int]` parameter, or a list of `Int` parameters."""
    types = [p.type for p in op.params]
    if any(isinstance(t, ir.SortType) for t in types) or ir.Prim.STR not in types:
        return None
    args: dict[str, Any] = {p.name: "?" + name for p in op.params if p.type == ir.Prim.STR}
    rule = lang.shapes.get(op.name)
    if size is None or rule is None:
        return [args.get(p.name, 0) for p in op.params] if size is None and rule is None else None
    local = dict(zip(rule.params, (p.name for p in op.params)))
    match rule.body:
        case ir.Ref(name=ref) if local.get(ref) and _type_of(op, local[ref]) == ir.Prim.INTS:
            args[local[ref]] = size
        case ir.Ref(name=ref) if local.get(ref) and _type_of(op, local[ref]) == ir.Prim.INT and len(size) == 1:
            args[local[ref]] = size[0]  # an `Int` shape: a vector's length
        case ir.ListOf(items=items) if len(items) == len(size) and all(
                isinstance(i, ir.Ref) and _type_of(op, local.get(i.name, "")) == ir.Prim.INT for i in items):
            args.update({local[i.name]: d for i, d in zip(items, size)})  # type: ignore[union-attr]
        case _:
            return None
    return [args[p.name] for p in op.params] if all(p.name in args for p in op.params) else None


def _type_of(op: ir.Operator, param: str) -> ir.ValueType | None:
    return next((p.type for p in op.params if p.name == param), None)
