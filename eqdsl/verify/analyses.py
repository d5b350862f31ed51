"""Analyses in `eqdsl verify`: random terms with their analysis values, the checks of an analysis
against the reference semantics, and the guards of rules that read analyses.

Contract:
- `TermDrawer(lang, sem).draw(sort, rng)` returns a `Drawn` term of `sort` (at most `DEPTH`
  operators deep: a leaf operator's drawn value, a literal-only operator such as `num(3)`, or an
  operator over smaller terms), its reference value and every analysis's value as egglog sets it
  bottom-up (None: not set). Terms whose value is undefined (x / 0) are drawn again.
- `analysis_value(lang, analysis, pattern, drawn, env)` is the value egglog gives `pattern` (a term
  over rule variables whose terms are `drawn`), or None where it is not set.
- `means(analysis, a, value)` says whether analysis value `a` holds of a term's value (`means`).
- `guard_values(lang, sem, rule, env, rng)`: for a rule that reads analyses, draws a term for each
  variable the analyses read (its value replaces the variable's in `env`), then computes the
  `where` values and `if` conditions that read analyses, as egglog would; returns the new `env`
  entries, or None where the rule would not match (a value unset, a condition false).
- `sized_part(rule)` is the rule without those clauses: the part `ExampleSpace` solves sizes for.
A term of a sort with shapes is drawn at a given shape (the example's size of the variable): its
operands at that shape too (element-wise operators; the shape rule must accept them) or a leaf of it;
`means` then must hold of every element. Sorts with a two-field value raise `Unverifiable`.
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from eqdsl import ir
from eqdsl.ir.builtins import EvalError
from eqdsl.ir.evaluate import ShapeViolation, application_shape, evaluate
from eqdsl.ir.exprs import analysis_reads, env_key, pattern_vars
from eqdsl.languages.base import External, Leaf
from eqdsl.verify.leaves import draw_leaf, leaf_args
from eqdsl.verify.semantics import OpSemantics, SemanticsError, apply

DEPTH = 2
INT_CHOICES = (-3, -2, -1, 0, 0, 1, 1, 2, 3, 4, 6, 12)  # literal parameters: small, zero and one often
LEAF_VALUES = (0.0, 1.0, -1.0, 2.0, 0.5, 3.0, -2.5)
TRIES = 20
SHAPES = ((3,), (2, 3), (3, 3), (2, 2, 3, 3))  # tried where a term of a sort with shapes has no given shape


class Unverifiable(Exception):
    """The analysis or rule reads values verify cannot draw terms for; the message says which."""


class Undrawable(Unverifiable):
    """Every try at a term (of an operator on top) was undefined or broke a shape rule: nothing
    is wrong with the language, these draws just found no term."""


@dataclass(frozen=True)
class Drawn:
    text: str
    value: Any
    analyses: dict[str, Any]  # analysis name → its value for this term, None where not set
    shape: tuple[int, ...] | None = None  # of a sort with shapes


class TermDrawer:
    def __init__(self, lang: ir.Language, sem: dict[str, OpSemantics]) -> None:
        self.lang, self.sem = lang, sem

    def producers(self, sort: str, leaves_only: bool) -> list[ir.Operator]:
        ops = [o for o in self.lang.ops.values()  # an External's key names another system's operator: not drawn
               if o.result == sort and o.name in self.sem and not isinstance(self.sem[o.name], External)]
        if leaves_only:
            ops = [o for o in ops if not any(isinstance(p.type, ir.SortType) for p in o.params)]
        return ops

    def draw(self, sort: str, rng: np.random.Generator, depth: int = DEPTH, root: str | None = None,
             shape: tuple[int, ...] | None = None) -> Drawn:
        """A term of `sort` (with operator `root` at the top, if given; of `shape` where given, for
        a sort with shapes: its operands have that shape too, or it is a leaf of it)."""
        shaped = self.lang.sorts[sort].shape_type is not None
        if shaped and self.lang.sorts[sort].fields:
            raise Unverifiable(f"verify draws terms of sorts with a plain shape; {sort} has a two-field value")
        tries = TRIES * (5 if root else 1)  # a given top operator: only its literals to find
        for _ in range(tries):
            ops = [self.lang.ops[root]] if root else self.producers(sort, leaves_only=depth == 0)
            if not ops:
                ops = self.producers(sort, leaves_only=False)
            if not ops:
                raise Unverifiable(f"no operator of the language makes a {sort} verify can run")
            op = ops[rng.integers(len(ops))]
            at = shape if shape is not None or not shaped else self._any_shape(sort, rng)
            try:
                drawn = self._apply(op, self._args(op, rng, depth, at, shape), rng)
            except (SemanticsError, _Misshapen):
                continue  # undefined here (x / 0), or not a term of the language: draw another
            if shape is None or drawn.shape == shape:
                return drawn
        if shape is not None and root is None:
            return self._leaf_of(sort, shape, rng)
        raise Undrawable(f"{tries} random terms of {sort} were all undefined or broke a shape rule")

    def _args(self, op: ir.Operator, rng: np.random.Generator, depth: int, at: tuple[int, ...] | None,
              want: tuple[int, ...] | None = None) -> list[Any]:
        """Arguments of `op`: a leaf's that give shape `at`, else operands of shape `at` and
        random literals; where the result must have shape `want`, the shape rule is asked before
        any operand is drawn."""
        if at is not None and not any(isinstance(p.type, ir.SortType) for p in op.params):
            args = leaf_args(self.lang, op, "x", at)
            if args is None or sum(p.type == ir.Prim.STR for p in op.params) != 1:
                raise _Misshapen  # not a leaf of that shape, or one whose other strings mean something
            return [f"x{rng.integers(1000)}" if isinstance(a, str) else a for a in args]  # a fresh leaf each time
        args = [None if isinstance(p.type, ir.SortType) else self._drawn_literal(p.type, rng, at) for p in op.params]
        if at is not None:
            placeholders = [Drawn("", None, {}, at) if a is None else a for a in args]
            if (got := self._shape(op, placeholders)) is not None and want is not None and got != want:
                raise _Misshapen
        return [self._operand(p.type, rng, depth, at) if a is None else a for p, a in zip(op.params, args)]

    def _operand(self, t: ir.ValueType, rng: np.random.Generator, depth: int, at: tuple[int, ...] | None) -> Drawn:
        assert isinstance(t, ir.SortType)
        try:
            return self.draw(t.name, rng, max(depth - 1, 0), shape=at if self.lang.sorts[t.name].shape_type else None)
        except Unverifiable:
            raise _Misshapen from None  # no term of that operand's sort here: another operator

    def _drawn_literal(self, t: ir.ValueType, rng: np.random.Generator, at: tuple[int, ...] | None) -> Any:
        match t:
            case ir.Prim.INT:
                return int(INT_CHOICES[rng.integers(len(INT_CHOICES))])
            case ir.Prim.STR:
                return "ab"[rng.integers(2)]
            case ir.Prim.INTS if at is not None:  # dims (the shape itself: a reshape to it) or a permutation
                return at if rng.random() < 0.5 else tuple(int(i) for i in rng.permutation(len(at)))
            case _:
                raise _Misshapen

    def _leaf_of(self, sort: str, shape: tuple[int, ...], rng: np.random.Generator) -> Drawn:
        for op in self.producers(sort, leaves_only=True):
            try:
                return self._apply(op, self._args(op, rng, 0, shape), rng)
            except (SemanticsError, _Misshapen):
                continue
        raise Unverifiable(f"no leaf operator of {sort} takes a name and the shape {list(shape)}")

    def _apply(self, op: ir.Operator, args: list[Any], rng: np.random.Generator) -> Drawn:
        shape = self._shape(op, args)
        values = [a.value if isinstance(a, Drawn) else a for a in args]
        semantics = self.sem[op.name]
        if isinstance(semantics, Leaf) and isinstance(shape, tuple):
            value: Any = semantics.draw(rng, shape, *values) if semantics.draw else draw_leaf(rng, shape, None)
        elif isinstance(semantics, Leaf):
            value = float(LEAF_VALUES[rng.integers(len(LEAF_VALUES))]) if rng.random() < 0.5 \
                else float(rng.standard_normal())
        else:
            value = apply(self.sem, op.name, values)
        text = f"{op.name}({', '.join(a.text if isinstance(a, Drawn) else repr(a) for a in args)})"
        analyses = {name: _rule_value(a, op, args) for name, a in self.lang.analyses.items() if a.sort == op.result}
        return Drawn(text, value, analyses, shape if isinstance(shape, tuple) else None)

    def _shape(self, op: ir.Operator, args: list[Any]) -> Any:
        """The shape `op`'s shape rule gives these arguments (None: no rule); `_Misshapen` where
        it refuses them."""
        read = [self._read(p.type, a) for p, a in zip(op.params, args)]
        try:
            shape = application_shape(self.lang, op.name, read)
        except ShapeViolation:
            raise _Misshapen from None
        return self.lang.sorts[op.result].dims(shape)

    def _read(self, t: ir.ValueType, arg: Any) -> Any:
        """What a shape rule reads of an argument: a drawn term's shape (a vector's length), a value."""
        if not isinstance(arg, Drawn):
            return tuple(arg) if isinstance(arg, list) else arg
        return self.lang.sorts[t.name].shape_of_dims(arg.shape) if arg.shape and isinstance(t, ir.SortType) \
            else arg.shape

    def _any_shape(self, sort: str, rng: np.random.Generator) -> tuple[int, ...]:
        shapes = [s for s in SHAPES if len(s) == 1] if self.lang.sorts[sort].holds_vectors else SHAPES
        return shapes[rng.integers(len(shapes))]


class _Misshapen(Exception):
    """The arguments drawn break the operator's shape rule: not a term of the language."""


def _rule_value(analysis: ir.Analysis, op: ir.Operator, args: list[Any]) -> Any:
    """The value `analysis`'s rule for `op` sets, given the arguments (children as `Drawn`)."""
    rule = analysis.rules.get(op.name)
    if rule is None:
        return None
    env = {}
    for name, arg in zip(rule.params, args):
        env[name] = arg.analyses.get(analysis.name) if isinstance(arg, Drawn) else arg
    return _set_value(rule, env)


def _set_value(rule: ir.ShapeRule, env: dict[str, Any]) -> Any:
    """The rule's value in `env`; None where a read value is unset or a requirement fails."""
    if any(env[name] is None for name in rule.params if name in env):
        return None
    try:
        if not all(evaluate(r, env) for r in rule.requires):
            return None
        return evaluate(rule.body, env)
    except EvalError:
        return None


def analysis_value(lang: ir.Language, analysis: ir.Analysis, p: ir.Pattern, drawn: dict[str, Drawn],
                   env: dict[str, Any]) -> Any:
    match p:
        case ir.PVar(name=v) if v in drawn:
            return drawn[v].analyses.get(analysis.name)
        case ir.PApp(op=op, args=args):
            rule = analysis.rules.get(op)
            if rule is None:
                return None
            values = {}
            for name, arg, param in zip(rule.params, args, lang.ops[op].params):
                analysed = param.type == ir.SortType(analysis.sort)
                values[name] = analysis_value(lang, analysis, arg, drawn, env) if analysed else _literal(arg, env)
            return _set_value(rule, values)
        case _:
            return None  # a variable without a drawn term: its analysis value is unknown


def _literal(p: ir.Pattern, env: dict[str, Any]) -> Any:
    match p:
        case ir.PLit(value=v):
            return v
        case ir.PVar(name=v) | ir.PBound(name=v):
            return env.get(v)
        case _:
            return None


def means(analysis: ir.Analysis, a: Any, value: Any) -> bool:
    """Whether `a` holds of `value`; of a tensor, whether it holds of every element."""
    def holds(x: float) -> bool:
        scope: dict[str, Any] = {analysis.name: a, analysis.param: x}  # the checker typed it Int: compared as a number
        return bool(evaluate(analysis.means, scope))
    return all(holds(float(x)) for x in np.ravel(np.asarray(value, dtype=float)))


def merged(analysis: ir.Analysis, old: Any, new: Any) -> Any:
    assert analysis.merge is not None  # `merge agree` has no expression to evaluate
    return evaluate(analysis.merge, {"old": old, "new": new})


# ---- rules that read analyses --------------------------------------------------------------------

def reads_analyses(e: ir.Expr) -> bool:
    return bool(analysis_reads(e))


def sized_part(rule: ir.Rule) -> ir.Rule:
    wheres = tuple((n, e) for n, e in rule.wheres if not reads_analyses(e))
    conds = tuple(c for c in rule.conds if not (isinstance(c, ir.ExprCond) and reads_analyses(c.expr)))
    return rule if len(wheres) == len(rule.wheres) and len(conds) == len(rule.conds) else \
        replace(rule, wheres=wheres, conds=conds)


def analysed_vars(rule: ir.Rule) -> list[str]:
    """The pattern variables whose terms the rule's analysis reads look into."""
    found: dict[str, ir.ValueType] = {}
    exprs = [e for _, e in rule.wheres] + [c.expr for c in rule.conds if isinstance(c, ir.ExprCond)]
    for read in (r for e in exprs for r in analysis_reads(e)):
        pattern_vars(read.pattern, found)
    return [v for v, t in found.items() if isinstance(t, ir.SortType)]


def guard_values(lang: ir.Language, sem: dict[str, OpSemantics], rule: ir.Rule, env: dict[str, Any],
                 rng: np.random.Generator) -> dict[str, Any] | None:
    types: dict[str, ir.ValueType] = {}
    for p in rule.lhs:
        pattern_vars(p, types)
    drawer = TermDrawer(lang, sem)
    drawn = {}
    for v in analysed_vars(rule):
        t = types[v]
        assert isinstance(t, ir.SortType)  # analysed_vars keeps the sort-typed ones
        shaped = lang.sorts[t.name].shape_type is not None
        drawn[v] = drawer.draw(t.name, rng, shape=tuple(np.shape(env[v])) if shaped else None)
    out: dict[str, Any] = {v: d.value for v, d in drawn.items()}
    scope = {**env, **out}
    for name, e in rule.wheres:
        if reads_analyses(e):
            value = _with_analyses(lang, e, drawn, scope)
            if value is None:
                return None
            scope[name] = out[name] = value
    for c in rule.conds:
        if isinstance(c, ir.ExprCond) and reads_analyses(c.expr) and not _with_analyses(lang, c.expr, drawn, scope):
            return None
    return out


def _with_analyses(lang: ir.Language, e: ir.Expr, drawn: dict[str, Drawn], scope: dict[str, Any]) -> Any:
    """`e`'s value, or None where an analysis value it reads is unset (the rule does not match)."""
    values = dict(scope)
    for read in analysis_reads(e):
        value = analysis_value(lang, lang.analyses[read.analysis], read.pattern, drawn, scope)
        if value is None:
            return None
        values[env_key(read)] = value
    try:
        return evaluate(e, values)
    except EvalError:
        return None
