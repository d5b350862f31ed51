"""Target params read by rewrite rules: which rules read them, and the rules with values bound.

A rule's `where` and `if` expressions may name a `param` of the language (`if n >= 2 *
array_rows`), so a rewrite can follow the target (a blocking size, an array's shape). Such a
rule means nothing until a target gives the values: `bind_params(lang, values)` returns the
language with every param read in a rule replaced by its value (lowering and `eqdsl verify` work
on the bound language); `params_in_rules(lang)` names, per rule, the params it reads.

Contract: `bind_params` leaves everything but rule expressions untouched; a param without a value
stays a `Ref` (lowering then says which rule needs a target).
"""
from __future__ import annotations

from dataclasses import replace
from typing import assert_never

from eqdsl import ir
from eqdsl.ir.exprs import refs


def params_in_rules(lang: ir.Language) -> dict[str, set[str]]:
    """Rule name → the target params its `where`/`if` expressions read (rules that read none are left out)."""
    out: dict[str, set[str]] = {}
    for rule in lang.rules:
        names = {n for e in _rule_exprs(rule) for n in refs(e)} & set(lang.params)
        if names:
            out[rule.name] = names
    return out


def bind_params(lang: ir.Language, values: dict[str, int]) -> ir.Language:
    if not params_in_rules(lang):
        return lang
    bound = {k: v for k, v in values.items() if k in lang.params}
    return replace(lang, rules=tuple(_bind_rule(r, bound) for r in lang.rules))


def _rule_exprs(rule: ir.Rule) -> list[ir.Expr]:
    return [e for _, e in rule.wheres] + [c.expr for c in rule.conds if isinstance(c, ir.ExprCond)]


def _bind_rule(rule: ir.Rule, values: dict[str, int]) -> ir.Rule:
    wheres = tuple((n, _bind(e, values)) for n, e in rule.wheres)
    conds = tuple(ir.ExprCond(_bind(c.expr, values)) if isinstance(c, ir.ExprCond) else c for c in rule.conds)
    return replace(rule, wheres=wheres, conds=conds)


def _bind(e: ir.Expr, values: dict[str, int]) -> ir.Expr:
    match e:
        case ir.Ref(name=n) if n in values:
            return ir.Const(values[n], ir.Prim.INT)
        case ir.Const() | ir.Ref() | ir.ShapeOf() | ir.ShapeOfTerm() | ir.AnalysisOf():
            return e
        case ir.Builtin(args=args):
            return replace(e, args=tuple(_bind(a, values) for a in args))
        case ir.ListOf(items=items):
            return replace(e, items=tuple(_bind(a, values) for a in items))
        case ir.BinOp(left=a, right=b):
            return replace(e, left=_bind(a, values), right=_bind(b, values))
        case ir.IndexOf(base=a, index=b):
            return replace(e, base=_bind(a, values), index=_bind(b, values))
        case ir.UnOp(arg=a):
            return replace(e, arg=_bind(a, values))
        case ir.SliceOf(base=a) | ir.FieldOf(base=a):
            return replace(e, base=_bind(a, values))
        case ir.Replace(base=a, index=b, value=c):
            return replace(e, base=_bind(a, values), index=_bind(b, values), value=_bind(c, values))
        case _:
            assert_never(e)
