"""The functions `.eqr` expressions call (`len`, `prod`, `broadcasts`, …): one table, one entry
each, JAX `lax` style — a function and its meaning side by side.

Contract: `BUILTINS[name]` gives the signature the checker enforces (`params`, `result`), the
Python semantics the evaluator runs (`evaluate`: ints, tuples of ints and bools in, a `Value` out;
`EvalError` where a shape is out of range), whether egglog's rules can compute it (`in_egglog`:
`sum` loops over a vec, which egglog cannot, so it is for cost rules only) and a line of
documentation. `SUGAR` names the functions the checker rewrites into other expressions (two-field
values, `ir.FieldOf`), which have no evaluator of their own. The other interpretations live with
their layers and are keyed by these names — egglog's lowering (`eqdsl.egglog.terms`), the CP-SAT
example finder (`eqdsl.verify.symbolic`); `tests/test_shape_builtins.py` checks they cover this
table. Shape builtins unroll to `MAX_RANK` axes in egglog, so the evaluator refuses longer shapes.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

from eqdsl.ir.nodes import MAX_RANK, Prim, Value

INT, INTS, BOOL = Prim.INT, Prim.INTS, Prim.BOOL


class EvalError(Exception):
    """An expression that cannot be computed on these values (an index out of range, …)."""


@dataclass(frozen=True)
class BuiltinSpec:
    params: tuple[Prim, ...]
    result: Prim
    evaluate: Callable[..., Value] | None  # None: sugar the checker rewrites (`SUGAR`)
    doc: str
    in_egglog: bool = True  # egglog's rules can compute it (else: cost rules only)


def _ranked(shape: tuple[int, ...]) -> tuple[int, ...]:
    if len(shape) > MAX_RANK:
        raise EvalError(f"a shape of rank {len(shape)}: shape builtins support ranks up to {MAX_RANK}")
    return shape


def broadcasts(b: tuple[int, ...], a: tuple[int, ...]) -> bool:
    """True when b broadcasts to a's shape (numpy: right-aligned, each dim 1 or equal; a rank-0 b,
    a scalar, broadcasts to any a)."""
    _ranked(b)
    return len(b) <= len(a) and all(d in (1, a[len(a) - len(b) + i]) for i, d in enumerate(b))


def is_perm(p: tuple[int, ...]) -> bool:
    return sorted(_ranked(p)) == list(range(len(p)))


def permute(x: tuple[int, ...], p: tuple[int, ...]) -> tuple[int, ...]:
    if len(p) != len(x) or not is_perm(p):
        raise EvalError(f"{list(p)} is not a permutation of the axes of a rank-{len(x)} shape")
    return tuple(x[i] for i in p)


def prod(x: tuple[int, ...]) -> int:
    return math.prod(_ranked(x))


def positive(x: tuple[int, ...]) -> bool:
    return len(_ranked(x)) >= 1 and all(d >= 1 for d in x)


def remove(x: tuple[int, ...], i: int) -> tuple[int, ...]:
    if not 0 <= i < len(x):
        raise EvalError(f"remove({list(x)}, {i}): index out of range")
    return tuple(x[:i]) + tuple(x[i + 1:])


def stream(nbytes: int, cache_kb: int, cache_gbps: int, gbps: int) -> int:
    """ns to move `nbytes` bytes: the first `cache_kb` KiB at `cache_gbps` GB/s (bytes per ns), the
    rest at `gbps`; a `cache_kb` of 0 moves all of them at `gbps`."""
    cached = min(nbytes, 1024 * cache_kb) if cache_kb > 0 else 0
    if (cached and cache_gbps <= 0) or (nbytes > cached and gbps <= 0):
        raise EvalError(f"stream({nbytes}, {cache_kb}, {cache_gbps}, {gbps}): a bandwidth ≤ 0")
    return (cached // cache_gbps if cached else 0) + ((nbytes - cached) // gbps if nbytes > cached else 0)


BUILTINS: dict[str, BuiltinSpec] = {
    "len": BuiltinSpec((INTS,), INT, len, "the number of items"),
    "prod": BuiltinSpec((INTS,), INT, prod, "the product of the items"),
    "sum": BuiltinSpec((INTS,), INT, sum, "the sum of the items", in_egglog=False),
    "min": BuiltinSpec((INT, INT), INT, min, "the smaller"),
    "max": BuiltinSpec((INT, INT), INT, max, "the larger"),
    "select": BuiltinSpec((BOOL, INT, INT), INT, lambda c, a, b: a if c else b, "a where c holds, else b",
                          in_egglog=False),
    "stream": BuiltinSpec((INT, INT, INT, INT), INT, stream,
                          "ns to move b bytes: the first kb KiB at fast GB/s, the rest at slow (kb 0: all at slow)",
                          in_egglog=False),
    "broadcasts": BuiltinSpec((INTS, INTS), BOOL, broadcasts, "b broadcasts to a (numpy's rules)"),
    "permute": BuiltinSpec((INTS, INTS), INTS, permute, "[x[p[0]], ..., x[p[n-1]]]"),
    "is_perm": BuiltinSpec((INTS,), BOOL, is_perm, "p is a permutation of 0..len(p)-1"),
    "positive": BuiltinSpec((INTS,), BOOL, positive, "len(x) >= 1 and every x[i] >= 1"),
    "remove": BuiltinSpec((INTS, INT), INTS, remove, "x without its item i"),
    # two-field values (ir.FieldOf), stored [len(first)] ++ first ++ second
    "items": BuiltinSpec((INTS,), INTS, None, "x.first ++ x.second"),
    "split_at": BuiltinSpec((INTS, INT), INTS, None, "{first: xs[:n], second: xs[n:]}"),
}
SUGAR = frozenset(name for name, spec in BUILTINS.items() if spec.evaluate is None)
