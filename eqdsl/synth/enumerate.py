"""Terms enumerated bottom-up and fingerprinted on fixed random inputs: the candidate rules of
`eqdsl synthesize` (TASO's generator, Ruler's term enumeration).

Contract: `enumerate_terms(lang, sem, space)` returns the terms of up to `space.size` operators
over `space.variables` variables per sort, the constants `space.ints` make (`num(0)`, ...; an `Int`
parameter named in `space.params` takes the values given there instead), and the
operators `space.ops` (default: every computed operator with an operand; constants too where
named), in order of size. A
term's fingerprint is its value on `space.samples` fixed random inputs (drawn as `eqdsl verify`
draws them: edge values, small integers, equal operands), rounded to `DIGITS` significant digits,
undefined where an operator raised. Children are the first term of each fingerprint (the class
representative, as Ruler enumerates over e-classes), so the enumeration grows with the number of
distinct values, not of terms. `candidates(terms)` pairs each later term with its class's
representative: equal on every sample, so perhaps equal (`eqdsl verify` decides).
Sorts with a shape analysis (tensors): every variable has the shape given (one enumeration per
shape instance of `space.shapes`, as TASO enumerates over fixed input shapes); an application is
kept only where its shape rule accepts its operands, and a term's shape is what the rule gives. An
`[Int]` parameter takes every permutation of its first operand's axes (a transpose's `perm`) and
the lists of `space.lists` (a reshape's target); an operator with a `Str` parameter is not
enumerated. A sort with an `Int` shape holds vectors, of the shape's first dimension. Two-field
sorts are refused. With `space.leaves` the variables are those, each of its own shape
(`eqdsl.synth.goals`: the variables of one pattern), instead of `space.variables` per sort, and
with `space.places` a variable is an operand at an operator's position named there only if named
with it (a batch norm's four vectors where the goal has them, not in every order).
"""
from __future__ import annotations

import functools
import hashlib
import itertools
import math
from dataclasses import dataclass, field, replace
from typing import Any, Callable, Iterator, cast

import numpy as np

from eqdsl import ir
from eqdsl.diagnostics import NO_SPAN, EqdslError
from eqdsl.ir.evaluate import ShapeViolation, application_shape
from eqdsl.languages.base import Leaf
from eqdsl.verify.leaves import EDGE_VALUES, draw_leaf
from eqdsl.verify.semantics import SemanticsError, apply

DIGITS = 9
UNDEFINED = "undefined"
VARIABLE_NAMES = "abcdefghijklmnop"


I64 = (-2**63, 2**63 - 1)
LARGEST_SAMPLE = 2**22  # elements of one sampled value: 16 samples of it stay within 512 MiB


def checked_shape(shape: tuple[int, ...], flag: str) -> tuple[int, ...]:
    """`shape`, or the error of `flag` giving it: every dimension ≥ 1, the size samplable."""
    if min(shape, default=1) < 1 or math.prod(shape) > LARGEST_SAMPLE:
        raise EqdslError.one(f"expected a shape of dimensions ≥ 1 with at most {LARGEST_SAMPLE:,} elements, got "
                             f"{','.join(map(str, shape))}", path=flag)
    return shape


@dataclass(frozen=True)
class Space:
    """What to enumerate; see the module docstring."""

    size: int = 2
    variables: int = 3
    ints: tuple[int, ...] = (0, 1, 2)
    ops: tuple[str, ...] = ()  # empty: every computed operator with an operand
    samples: int = 64
    seed: int = 0
    shapes: tuple[tuple[int, ...], ...] = ((3, 3),)  # one enumeration per shape of every shaped variable
    params: tuple[tuple[str, tuple[int, ...]], ...] = ()  # Int parameters by name that take other values than `ints`
    leaves: tuple[tuple[str, str, tuple[int, ...]], ...] = ()  # (name, sort, shape): these variables instead
    lists: tuple[tuple[int, ...], ...] = ()  # what an `[Int]` parameter takes besides permutations
    # (op, operand index, variable): a variable is operand `index` of `op` only where given so, at an
    # (op, index) named here; a term is always
    places: tuple[tuple[str, int, str], ...] = ()

    def __post_init__(self) -> None:
        if not 1 <= self.variables <= len(VARIABLE_NAMES):
            raise EqdslError.one(f"expected 1 to {len(VARIABLE_NAMES)} variables per sort, got {self.variables}",
                                 path="--vars")
        for shape in self.shapes:
            checked_shape(shape, "--shape")
        for flag, values in (("--ints", self.ints), ("--values", [v for _, vs in self.params for v in vs])):
            if wide := [v for v in values if not I64[0] <= v <= I64[1]]:
                raise EqdslError.one(f"expected Int literals that fit 64 bits, got {wide[0]}", path=flag)

    @functools.cached_property
    def _restricted(self) -> frozenset[tuple[str, int]]:
        return frozenset((op, at) for op, at, _ in self.places)

    def placed(self, op: str, at: int, child: ir.Pattern) -> bool:
        """Whether `child` may be operand `at` of `op` (see `places`)."""
        return not isinstance(child, ir.PVar) or (op, at) not in self._restricted or \
            (op, at, child.name) in self.places

    def ints_for(self, param: str) -> tuple[int, ...]:
        """The values an `Int` parameter of this name takes."""
        return dict(self.params).get(param, self.ints)


@dataclass(frozen=True)
class Term:
    pattern: ir.Pattern
    size: int  # operators in it (constants and variables: 0)
    sort: str
    # per sample (UNDEFINED where an operator raised): a tuple, or for arrays of one shape one
    # stacked array with `holes` the undefined samples; None once the term is not its class's
    # first (only those are children, and memory grows with the number of terms)
    values: Any
    fingerprint: tuple
    shape: Any = None  # its sort's analysis value (the shape rule's), None for sorts without one
    holes: frozenset[int] = frozenset()
    defined_somewhere: bool = True

    def sample(self, k: int) -> Any:
        if isinstance(self.values, np.ndarray):
            return UNDEFINED if k in self.holes else self.values[k]
        return self.values[k]


@dataclass
class Enumeration:
    terms: list[Term] = field(default_factory=list)
    samples: int = 64  # values per term (`samples`)
    classes: dict[tuple, int] = field(default_factory=dict)  # fingerprint → index of its first term
    _firsts: dict[tuple[str, int], list[Term]] = field(default_factory=dict)  # (sort, size) → first terms

    def add(self, term: Term) -> None:
        if term.fingerprint not in self.classes:
            self.classes[term.fingerprint] = len(self.terms)
            self._firsts.setdefault((term.sort, term.size), []).append(term)
        else:
            term = replace(term, values=None)
        self.terms.append(term)

    def representatives(self, sort: str, size: int) -> list[Term]:
        return self._firsts.get((sort, size), [])


def enumerate_terms(lang: ir.Language, sem: dict[str, Any], space: Space, shape: tuple[int, ...] = (3, 3),
                    stop: Callable[[], bool] = lambda: False) -> Enumeration:
    """The terms with every shaped variable of shape `shape` (one of `space.shapes`)."""
    ops = _operators(lang, sem, space)
    sorts = sorted({op.result for op in ops} | {p.type.name for op in ops for p in op.params
                                                if isinstance(p.type, ir.SortType)})
    for sort in sorts:
        if lang.sorts[sort].fields:
            raise EqdslError.one(f"synthesize: sort {sort} has a two-field analysis value; expected sorts "
                                 "with a plain shape or none")
    shaped = any(lang.sorts[sort].shape_type is not None for sort in sorts)
    largest = max((leaf[2] for leaf in space.leaves), key=math.prod, default=shape)
    found = Enumeration(samples=samples(space, largest if shaped else None))
    for term in _leaves(lang, sem, found.samples, space, shape, sorts):
        found.add(term)
    for size in range(1, space.size + 1):
        for op in ops:
            for term in _applications(lang, op, size, found, sem, space, stop):
                if stop():
                    return found
                found.add(term)
    return found


def _operators(lang: ir.Language, sem: dict[str, Any], space: Space) -> list[ir.Operator]:
    unknown = [name for name in space.ops if name not in lang.ops]
    if unknown:
        raise EqdslError.one(f"synthesize: no operator {', '.join(unknown)} in language {lang.name}; expected "
                             f"some of {', '.join(lang.ops)}", path="--ops")
    params = {p.name for op in lang.ops.values() for p in op.params if p.type == ir.Prim.INT}
    if unknown := sorted({name for name, _ in space.params} - params):
        raise EqdslError.one(f"synthesize: no Int parameter {', '.join(unknown)} in language {lang.name}; expected "
                             f"some of {', '.join(sorted(params)) or 'none'}", path="--values")
    computed = [op for op in lang.ops.values() if not isinstance(sem[op.name], Leaf)
                and any(isinstance(p.type, ir.SortType) for p in op.params)
                and all(p.type != ir.Prim.STR for p in op.params)]
    return [op for op in computed if not space.ops or op.name in space.ops]


def _leaves(lang: ir.Language, sem: dict[str, Any], n: int, space: Space, shape: tuple[int, ...],
            sorts: list[str]) -> Iterator[Term]:
    rng = np.random.default_rng(space.seed)
    variables = space.leaves or tuple((VARIABLE_NAMES[k], sort, shape) for sort in sorts
                                      for k in range(space.variables))
    for name, sort, at in variables:
        shaped = lang.sorts[sort].shape_type is not None
        if lang.sorts[sort].holds_vectors:  # vectors of the run's first dimension
            at = at[:1]
        values = tuple(draw_leaf(rng, at, None) if shaped else _draw(rng) for _ in range(n))
        analysis = lang.sorts[sort].shape_of_dims(at) if shaped else None
        yield _term(ir.PVar(name, ir.SortType(sort)), 0, sort, values, analysis)
    for sort in sorts:
        for op in lang.ops.values():  # constants: a computed operator over Int values only (num(2))
            if op.result == sort and not isinstance(sem[op.name], Leaf) and op.params and \
                    all(p.type == ir.Prim.INT for p in op.params) and (not space.ops or op.name in space.ops):
                for ints in itertools.product(*(space.ints_for(p.name) for p in op.params)):
                    shape = _shape(lang, op, list(ints))
                    if shape is _ILL_SHAPED:
                        continue
                    value = _applied(sem, op.name, list(ints))
                    pattern = ir.PApp(op.name, tuple(ir.PLit(i, ir.Prim.INT) for i in ints), NO_SPAN)
                    yield _term(pattern, 0, sort, (value,) * n, shape)


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
    try:
        return application_shape(lang, op.name, [a.shape if isinstance(a, Term) else a for a in args])
    except ShapeViolation:
        return _ILL_SHAPED


def _applications(lang: ir.Language, op: ir.Operator, size: int, found: Enumeration, sem: dict[str, Any],
                  space: Space, stop: Callable[[], bool]) -> Iterator[Term]:
    operands = [i for i, p in enumerate(op.params) if isinstance(p.type, ir.SortType)]
    for split in _compositions(size - 1, len(operands)):
        choices = [found.representatives(op.params[i].type.name, s)  # type: ignore[union-attr]
                   for i, s in zip(operands, split)]
        for k, children in enumerate(itertools.product(*choices)):
            if k % 4096 == 0 and stop():  # a product whose every choice is refused yields nothing to stop at
                return
            if space.places and not all(space.placed(op.name, i, c.pattern) for i, c in zip(operands, children)):
                continue
            yield from _with_values(lang, op, operands, children, size, sem, space, found.samples)


def _with_values(lang: ir.Language, op: ir.Operator, operands: list[int], children: tuple[Term, ...], size: int,
                 sem: dict[str, Any], space: Space, n: int) -> Iterator[Term]:
    """`op` over `children` with every choice of its value parameters that its shape rule accepts."""
    values_at = [i for i in range(len(op.params)) if i not in operands]
    options = [_literals(op.params[i], children, space) for i in values_at]
    for chosen in itertools.product(*options):
        args: list[Any] = [None] * len(op.params)
        for i, child in zip(operands, children):
            args[i] = child
        for i, value in zip(values_at, chosen):
            args[i] = value
        term = application(lang, sem, op, args, size, n)
        if term is not None:
            yield term


def application(lang: ir.Language, sem: dict[str, Any], op: ir.Operator, args: list[Any], size: int,
                n: int) -> Term | None:
    """`op` applied to `args` (a `Term` per operand, the value of each other parameter) as a term
    of `size` operators with its `n` samples; None where its shape rule refuses them."""
    shape = _shape(lang, op, args)
    if shape is _ILL_SHAPED:
        return None
    pattern = ir.PApp(op.name, tuple(a.pattern if isinstance(a, Term) else _literal(a, op.params[i].type)
                                     for i, a in enumerate(args)), NO_SPAN)
    values = tuple(_applied(sem, op.name, [a.sample(k) if isinstance(a, Term) else a for a in args])
                   for k in range(n))
    return _term(pattern, size, op.result, values, shape)


def _literal(value: Any, t: ir.ValueType) -> ir.PLit:
    return ir.PLit(value, cast(ir.Prim, t))


def _literals(param: ir.Param, children: tuple[Term, ...], space: Space) -> list[Any]:
    if param.type == ir.Prim.INTS:  # a permutation of the first operand's axes
        rank = len(children[0].shape) if children and isinstance(children[0].shape, tuple) else 0
        return (list(itertools.permutations(range(rank))) if rank else []) + list(space.lists)
    return list(space.ints_for(param.name))


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


def samples(space: Space, shape: Any) -> int:
    """Samples per term: `space.samples`, fewer for big tensors (at least 16, about 600 numbers
    in all: an NCHW [2, 2, 3, 3] tensor has 36 per sample, and memory grows with terms)."""
    if not isinstance(shape, tuple) or not shape:
        return space.samples
    return min(space.samples, max(16, 600 // math.prod(shape)))


def _term(pattern: ir.Pattern, size: int, sort: str, values: tuple, shape: Any = None) -> Term:
    defined = [v for v in values if v is not UNDEFINED]
    holes = frozenset(k for k, v in enumerate(values) if v is UNDEFINED)
    stored: Any = values
    if defined and all(isinstance(v, np.ndarray) and v.shape == defined[0].shape for v in defined):
        zero = np.zeros_like(defined[0], dtype=float)
        stored = np.stack([zero if v is UNDEFINED else v for v in values]).astype(float, copy=False)
    return Term(pattern, size, sort, stored, (sort, shape, _fingerprint(values, stored, holes)), shape, holes,
                bool(defined))


def _fingerprint(values: tuple, stored: Any, holes: frozenset[int]) -> bytes:
    """A digest of the values rounded to `DIGITS` significant digits (a digest, not the values:
    memory grows with the number of terms)."""
    digest = hashlib.blake2b(digest_size=16)
    if isinstance(stored, np.ndarray):
        digest.update(repr((stored.shape, sorted(holes))).encode())
        digest.update(_rounded(stored))
    elif values and all(isinstance(v, float) for v in values):
        digest.update(_rounded(np.asarray(values, dtype=float)))
    else:
        digest.update(repr(tuple(_sample_key(v) for v in values)).encode())
    return digest.digest()


def _sample_key(v: Any) -> Any:
    if v is UNDEFINED:
        return UNDEFINED
    if isinstance(v, tuple):  # a multi-output sort's value (a split's halves)
        return tuple(_sample_key(x) for x in v)
    a = np.asarray(v, dtype=float)
    return (a.shape, _rounded(a))


def _rounded(a: np.ndarray) -> bytes:
    with np.errstate(all="ignore"):
        plain = ~np.isfinite(a) | (a == 0)
        magnitude = np.floor(np.log10(np.abs(np.where(plain, 1.0, a))))
        scale = 10.0 ** (DIGITS - 1 - magnitude)
        rounded = np.round(a * scale) / scale
    rounded = np.where(plain | ~np.isfinite(rounded), a, rounded) + 0.0  # + 0.0: -0.0 and 0.0 alike
    return rounded.tobytes()


def candidates(found: Enumeration) -> Iterator[tuple[Term, Term]]:
    """(term, its class's representative) for every term after the first of its class, where
    the class is defined on some sample (a term undefined everywhere says nothing)."""
    for k, term in enumerate(found.terms):
        first = found.classes[term.fingerprint]
        if first != k and term.defined_somewhere:
            yield term, found.terms[first]


def defined_alike(found: Enumeration) -> Iterator[tuple[Term, Term]]:
    """(x, y) for each class representative x undefined on some samples (an operator raised: a
    division by 0) and the first representative y of x's sort defined wherever x is and equal to x
    there: perhaps equal where x is defined (a guard decides; `eqdsl.synth.guards`). Sorts
    without shapes only (a sample is a number)."""
    firsts = [t for t in found.terms
              if t.values is not None and t.defined_somewhere and not isinstance(t.values, np.ndarray)]
    by_holes: dict[frozenset[int], list[Term]] = {}
    for t in firsts:
        if t.holes:
            by_holes.setdefault(t.holes, []).append(t)
    for holes, partial in by_holes.items():
        kept = [k for k in range(found.samples) if k not in holes]
        alike: dict[tuple, Term] = {}
        for t in firsts:
            if t.holes < holes:
                alike.setdefault(key_at(t, kept), t)
        for x in partial:
            if (y := alike.get(key_at(x, kept))) is not None:
                yield x, y


def key_at(t: Term, samples: list[int]) -> tuple:
    """A class representative's values at `samples`, comparable by `==` (rounded)."""
    return (t.sort, tuple(_sample_key(t.values[k]) for k in samples))

