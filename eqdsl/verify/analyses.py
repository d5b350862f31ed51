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
Only sorts without a shape analysis are drawn here (scalar values): an analysis over a shaped sort
raises `Unverifiable`.
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from eqdsl import ir
from eqdsl.ir.builtins import EvalError
from eqdsl.ir.evaluate import evaluate
from eqdsl.ir.exprs import analysis_reads, env_key, pattern_vars
from eqdsl.languages.base import Leaf
from eqdsl.verify.semantics import OpSemantics, SemanticsError, apply

DEPTH = 2
INT_CHOICES = (-3, -2, -1, 0, 0, 1, 1, 2, 3, 4, 6, 12)  # literal parameters: small, zero and one often
LEAF_VALUES = (0.0, 1.0, -1.0, 2.0, 0.5, 3.0, -2.5)
TRIES = 20


class Unverifiable(Exception):
    """The analysis or rule reads values verify cannot draw terms for; the message says which."""


@dataclass(frozen=True)
class Drawn:
    text: str
    value: Any
    analyses: dict[str, Any]  # analysis name → its value for this term, None where not set


class TermDrawer:
    def __init__(self, lang: ir.Language, sem: dict[str, OpSemantics]) -> None:
        self.lang, self.sem = lang, sem

    def producers(self, sort: str, leaves_only: bool) -> list[ir.Operator]:
        ops = [o for o in self.lang.ops.values() if o.result == sort and o.name in self.sem]
        if leaves_only:
            ops = [o for o in ops if not any(isinstance(p.type, ir.SortType) for p in o.params)]
        return ops

    def draw(self, sort: str, rng: np.random.Generator, depth: int = DEPTH, root: str | None = None) -> Drawn:
        """A term of `sort` (with operator `root` at the top, if given)."""
        if self.lang.sorts[sort].shape_type is not None:
            raise Unverifiable(f"verify draws terms for analyses over sorts without shapes; {sort} has one")
        for _ in range(TRIES):
            ops = [self.lang.ops[root]] if root else self.producers(sort, leaves_only=depth == 0)
            if not ops:
                ops = self.producers(sort, leaves_only=False)
            if not ops:
                raise Unverifiable(f"no operator of the language makes a {sort} verify can run")
            op = ops[rng.integers(len(ops))]
            try:
                return self._apply(op, [self._arg(p.type, rng, depth) for p in op.params], rng)
            except SemanticsError:
                continue  # undefined here (x / 0): draw another
        raise Unverifiable(f"{TRIES} random terms of {sort} were all undefined")

    def _arg(self, t: ir.ValueType, rng: np.random.Generator, depth: int) -> Any:
        match t:
            case ir.SortType(name=s):
                return self.draw(s, rng, max(depth - 1, 0))
            case ir.Prim.INT:
                return int(INT_CHOICES[rng.integers(len(INT_CHOICES))])
            case ir.Prim.STR:
                return "ab"[rng.integers(2)]
            case _:
                raise Unverifiable(f"verify draws Int and Str literals in analysed terms; found {t}")

    def _apply(self, op: ir.Operator, args: list[Any], rng: np.random.Generator) -> Drawn:
        values = [a.value if isinstance(a, Drawn) else a for a in args]
        if isinstance(self.sem[op.name], Leaf):
            value: Any = float(LEAF_VALUES[rng.integers(len(LEAF_VALUES))]) if rng.random() < 0.5 \
                else float(rng.standard_normal())
        else:
            value = apply(self.sem, op.name, values)
        text = f"{op.name}({', '.join(a.text if isinstance(a, Drawn) else repr(a) for a in args)})"
        analyses = {name: _rule_value(a, op, args) for name, a in self.lang.analyses.items() if a.sort == op.result}
        return Drawn(text, value, analyses)


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
    if np.ndim(value) != 0:
        raise Unverifiable(f"`means` of '{analysis.name}' reads a term's value as a number; found an array")
    scope: dict[str, Any] = {analysis.name: a, analysis.param: float(value)}  # the checker typed it Int
    return bool(evaluate(analysis.means, scope))


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
        drawn[v] = drawer.draw(t.name, rng)
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
