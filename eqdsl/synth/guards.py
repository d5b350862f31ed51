"""Rules guarded by a Bool analysis, from terms equal wherever both are defined (Ruler's
conditional rules; Herbie's `x / x => 1` where x is not 0).

Contract: `guarded_candidates(lang, found)` takes each pair of `enumerate.defined_alike` (x
undefined on some samples, y defined wherever x is and equal to it there), writes `x => y` where
y's variables are among x's, and guards it with `if G(?v)` for a Bool analysis G over ?v's sort:
the first variable of x whose value, on every sample where x is undefined, G's `means` says G
cannot be true of (`means(G, true, value)` false: `nonzero` at 0), else every such variable of
that sort where together they cover those samples; no candidate where nothing does. Variables are
then renamed a, b, c as every candidate's are. Nothing is verified here (`synthesize` does it,
after trying to derive each with the rules kept, the guard assumed of its variables).
"""
from __future__ import annotations

from dataclasses import replace
from typing import Any

from eqdsl import ir
from eqdsl.ir.exprs import pattern_vars
from eqdsl.synth.candidates import Candidate, canonical, renamed, stable_name, variables
from eqdsl.synth.enumerate import VARIABLE_NAMES, Enumeration, Term, defined_alike
from eqdsl.verify.analyses import means

NOTE = "guarded: equal wherever both sides are defined"


def guarded_candidates(lang: ir.Language, found: Enumeration) -> list[Candidate]:
    analyses = [a for a in lang.analyses.values()
                if a.type == ir.Prim.BOOL and lang.sorts[a.sort].shape_type is None]
    if not analyses:
        return []
    values = {(t.pattern.name, t.sort): t.values for t in found.terms  # each variable's samples
              if isinstance(t.pattern, ir.PVar) and t.values is not None}
    out: dict[str, Candidate] = {}
    for x, y in defined_alike(found):
        if not isinstance(x.pattern, ir.PApp) or not variables(y.pattern) <= variables(x.pattern):
            continue
        guard = next((g for a in analyses if (g := _guard(a, x, values)) is not None), None)
        if guard is not None:
            rule = _named(ir.Rule("", (x.pattern,), (y.pattern,), (), guard, x.pattern.span))
            candidate = Candidate(rule, x.size + y.size, found.classes[x.fingerprint], note=NOTE)
            out.setdefault(repr(canonical(rule)), candidate)
    return list(out.values())


def _guard(analysis: ir.Analysis, x: Term, values: dict[tuple[str, str], Any]) -> tuple[ir.Cond, ...] | None:
    """The guards on x's variables of `analysis`'s sort that rule out every sample where x is
    undefined (see the contract), or None."""
    found = {v: t for v, t in pattern_vars(x.pattern).items()
             if t == ir.SortType(analysis.sort) and (v, analysis.sort) in values}
    ruled_out = {v: {k for k in x.holes if not means(analysis, True, values[v, analysis.sort][k])} for v in found}
    single = next((v for v, out in ruled_out.items() if out == x.holes), None)
    chosen = [single] if single is not None else list(ruled_out)
    if not chosen or set().union(*(ruled_out[v] for v in chosen)) != x.holes:
        return None
    return tuple(ir.ExprCond(ir.AnalysisOf(analysis.name, ir.PVar(v, found[v]), ir.Prim.BOOL)) for v in chosen)


def _named(rule: ir.Rule) -> ir.Rule:
    """`rule` with its variables renamed a, b, c in order of first appearance, and named stably."""
    names = {v: VARIABLE_NAMES[k] for k, v in enumerate(pattern_vars(rule.lhs[0]))}
    rule = renamed(rule, names)
    return replace(rule, name=stable_name(rule))
