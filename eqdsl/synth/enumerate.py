"""Terms enumerated bottom-up and fingerprinted on fixed random inputs: the candidate rules of
`eqdsl synthesize` (TASO's generator, Ruler's term enumeration).

Contract: `enumerate_terms(lang, sem, space)` returns the terms of up to `space.size` operators
over `space.variables` variables per sort, the constants `space.ints` make (`num(0)`, ...), and the
operators `space.ops` (default: every computed operator with an operand), in order of size. A
term's fingerprint is its value on `space.samples` fixed random inputs (drawn as `eqdsl verify`
draws them: edge values, small integers, equal operands), rounded to `DIGITS` significant digits,
undefined where an operator raised. Children are the first term of each fingerprint (the class
representative, as Ruler enumerates over e-classes), so the enumeration grows with the number of
distinct values, not of terms. `candidates(terms)` pairs each later term with its class's
representative: equal on every sample, so perhaps equal (`eqdsl verify` decides).
Sorts with a shape analysis (tensors): every variable has the shape `space.shape` (one shape
instance per run, as TASO enumerates over fixed input shapes); an application is kept only where
its shape rule accepts its operands, and a term's shape is what the rule gives. An `[Int]`
parameter takes every permutation of its first operand's axes (a transpose's `perm`); an
operator with a `Str` parameter is not enumerated. Two-field sorts are refused.
"""
from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator, cast

import numpy as np

from eqdsl import ir
from eqdsl.diagnostics import NO_SPAN, EqdslError
from eqdsl.ir.evaluate import EvalError, ShapeViolation, applied_shape
from eqdsl.languages.base import Leaf, Split
from eqdsl.verify.rules import EDGE_VALUES, draw_leaf
from eqdsl.verify.semantics import SemanticsError, apply

DIGITS = 9
UNDEFINED = "undefined"
VARIABLE_NAMES = "abcdefghijklmnop"


@dataclass(frozen=True)
class Space:
    """What to enumerate; see the module docstring."""

    size: int = 2
    variables: int = 3
    ints: tuple[int, ...] = (0, 1, 2)
    ops: tuple[str, ...] = ()  # empty: every computed operator with an operand
    samples: int = 64
    seed: int = 0
    shape: tuple[int, ...] = (3, 3)  # every variable of a sort with a shape analysis


@dataclass(frozen=True)
class Term:
    pattern: ir.Pattern
    size: int  # operators in it (constants and variables: 0)
    sort: str
    values: tuple[Any, ...]  # per sample; UNDEFINED where an operator raised
    fingerprint: tuple
    shape: Any = None  # its sort's analysis value (the shape rule's), None for sorts without one

    @property
    def defined_somewhere(self) -> bool:
        return any(v is not UNDEFINED for v in self.values)


@dataclass
class Enumeration:
    terms: list[Term] = field(default_factory=list)
    classes: dict[tuple, int] = field(default_factory=dict)  # fingerprint → index of its first term
    _firsts: dict[tuple[str, int], list[Term]] = field(default_factory=dict)  # (sort, size) → first terms

    def add(self, term: Term) -> None:
        if term.fingerprint not in self.classes:
            self.classes[term.fingerprint] = len(self.terms)
            self._firsts.setdefault((term.sort, term.size), []).append(term)
        self.terms.append(term)

    def representatives(self, sort: str, size: int) -> list[Term]:
        return self._firsts.get((sort, size), [])


def enumerate_terms(lang: ir.Language, sem: dict[str, Any], space: Space,
                    stop: Callable[[], bool] = lambda: False) -> Enumeration:
    ops = _operators(lang, sem, space)
    sorts = sorted({op.result for op in ops} | {p.type.name for op in ops for p in op.params
                                                if isinstance(p.type, ir.SortType)})
    for sort in sorts:
        if lang.sorts[sort].fields:
            raise EqdslError.one(f"synthesize: sort {sort} has a two-field analysis value; expected sorts "
                                 "with a plain shape or none")
    found = Enumeration()
    for term in _leaves(lang, sem, space, sorts):
        found.add(term)
    for size in range(1, space.size + 1):
        for op in ops:
            for term in _applications(lang, op, size, found, sem, space):
                if stop():
                    return found
                found.add(term)
    return found


def _operators(lang: ir.Language, sem: dict[str, Any], space: Space) -> list[ir.Operator]:
    unknown = [name for name in space.ops if name not in lang.ops]
    if unknown:
        raise EqdslError.one(f"synthesize: no operator {', '.join(unknown)} in language {lang.name}; expected "
                             f"some of {', '.join(lang.ops)}", path="--ops")
    computed = [op for op in lang.ops.values() if not isinstance(sem[op.name], Leaf)
                and any(isinstance(p.type, ir.SortType) for p in op.params)
                and all(p.type != ir.Prim.STR for p in op.params)]
    return [op for op in computed if not space.ops or op.name in space.ops]


def _leaves(lang: ir.Language, sem: dict[str, Any], space: Space, sorts: list[str]) -> Iterator[Term]:
    rng = np.random.default_rng(space.seed)
    for sort in sorts:
        shaped = lang.sorts[sort].shape_type is not None
        for k in range(space.variables):
            values = tuple(draw_leaf(rng, space.shape, None) if shaped else _draw(rng) for _ in range(space.samples))
            yield _term(ir.PVar(VARIABLE_NAMES[k], ir.SortType(sort)), 0, sort, values,
                        space.shape if shaped else None)
        for op in lang.ops.values():  # constants: a computed operator over Int values only (num(2))
            if op.result == sort and not isinstance(sem[op.name], Leaf) and op.params and \
                    all(p.type == ir.Prim.INT for p in op.params):
                for ints in itertools.product(space.ints, repeat=len(op.params)):
                    shape = _shape(lang, op, list(ints))
                    if shape is _ILL_SHAPED:
                        continue
                    value = _applied(sem, op.name, list(ints))
                    pattern = ir.PApp(op.name, tuple(ir.PLit(i, ir.Prim.INT) for i in ints), NO_SPAN)
                    yield _term(pattern, 0, sort, (value,) * space.samples, shape)


def _draw(rng: np.random.Generator) -> float:
    """One sample of a scalar variable: as `verify` draws leaves (edge values, small integers,
    normal values), so that laws true only of typical values (x / x = 1) fall apart."""
    r = rng.random()
    if r < 0.3:
        return float(EDGE_VALUES[rng.integers(len(EDGE_VALUES))])
    if r < 0.5:
        return float(rng.integers(-3, 4))
    return float(rng.standard_normal())


_ILL_SHAPED = object()


def _shape(lang: ir.Language, op: ir.Operator, args: list[Any]) -> Any:
    """What `op`'s shape rule gives these arguments (operands as their shapes), `_ILL_SHAPED`
    where a requirement fails, None where the operator has no shape rule."""
    rule = lang.shapes.get(op.name)
    if rule is None:
        return None
    env = {name: (a.shape if isinstance(a, Term) else a) for name, a in zip(rule.params, args)}
    try:
        return applied_shape(rule, env)
    except (ShapeViolation, EvalError, TypeError, IndexError):
        return _ILL_SHAPED


def _applications(lang: ir.Language, op: ir.Operator, size: int, found: Enumeration, sem: dict[str, Any],
                  space: Space) -> Iterator[Term]:
    operands = [i for i, p in enumerate(op.params) if isinstance(p.type, ir.SortType)]
    for split in _compositions(size - 1, len(operands)):
        choices = [found.representatives(op.params[i].type.name, s)  # type: ignore[union-attr]
                   for i, s in zip(operands, split)]
        for children in itertools.product(*choices):
            yield from _with_values(lang, op, operands, children, size, sem, space)


def _with_values(lang: ir.Language, op: ir.Operator, operands: list[int], children: tuple[Term, ...], size: int,
                 sem: dict[str, Any], space: Space) -> Iterator[Term]:
    """`op` over `children` with every choice of its value parameters that its shape rule accepts."""
    values_at = [i for i in range(len(op.params)) if i not in operands]
    options = [_literals(op.params[i].type, children, space) for i in values_at]
    for chosen in itertools.product(*options):
        args: list[Any] = [None] * len(op.params)
        for i, child in zip(operands, children):
            args[i] = child
        for i, value in zip(values_at, chosen):
            args[i] = value
        shape = _shape(lang, op, args)
        if shape is _ILL_SHAPED:
            continue
        pattern = ir.PApp(op.name, tuple(a.pattern if isinstance(a, Term) else _literal(a, op.params[i].type)
                                         for i, a in enumerate(args)), NO_SPAN)
        values = tuple(_applied(sem, op.name, [a.values[k] if isinstance(a, Term) else a for a in args])
                       for k in range(space.samples))
        yield _term(pattern, size, op.result, values, shape)


def _literal(value: Any, t: ir.ValueType) -> ir.PLit:
    return ir.PLit(value, cast(ir.Prim, t))


def _literals(t: ir.ValueType, children: tuple[Term, ...], space: Space) -> list[Any]:
    if t == ir.Prim.INTS:  # a permutation of the first operand's axes
        rank = len(children[0].shape) if children and isinstance(children[0].shape, tuple) else 0
        return list(itertools.permutations(range(rank))) if rank else []
    return list(space.ints)


def _compositions(total: int, parts: int) -> Iterator[tuple[int, ...]]:
    if parts == 0:
        if total == 0:
            yield ()
        return
    for first in range(total + 1):
        for rest in _compositions(total - first, parts - 1):
            yield (first, *rest)


def _applied(sem: dict[str, Any], op: str, args: list[Any]) -> Any:
    if any(a is UNDEFINED for a in args):
        return UNDEFINED
    try:
        return apply(sem, op, args)
    except SemanticsError:
        return UNDEFINED


def _term(pattern: ir.Pattern, size: int, sort: str, values: tuple, shape: Any = None) -> Term:
    return Term(pattern, size, sort, values, (sort, shape, tuple(_rounded(v) for v in values)), shape)


def _rounded(v: Any) -> Any:
    if v is UNDEFINED:
        return UNDEFINED
    if isinstance(v, tuple):  # a multi-output sort's value (a split's halves)
        return tuple(_rounded(x) for x in v)
    if isinstance(v, np.ndarray) or isinstance(v, Split):
        a = np.asarray(v, dtype=float)
        return (a.shape, tuple(_number(x) for x in a.ravel()))
    return _number(float(v))


def _number(x: float) -> float:
    if x == 0 or not math.isfinite(x):
        return float(x)
    return float(f"{x:.{DIGITS}g}")


def candidates(found: Enumeration) -> Iterator[tuple[Term, Term]]:
    """(term, its class's representative) for every term after the first of its class, where
    the class is defined on some sample (a term undefined everywhere says nothing)."""
    for k, term in enumerate(found.terms):
        first = found.classes[term.fingerprint]
        if first != k and term.defined_somewhere:
            yield term, found.terms[first]
