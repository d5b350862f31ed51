"""Rules guarded by a Bool analysis, from terms equal wherever both are defined (Ruler's
conditional rules; Herbie's `x / x => 1` where x is not 0).

Contract: `guarded_candidates(lang, found)` takes each pair of `enumerate.defined_alike` (x
undefined on some samples, y defined wherever x is and equal to it there), writes `x => y` where
y's variables are among x's, and guards it with `if G(?v)` for a Bool analysis G over ?v's sort:
the first variable of x whose value, on every sample where x is undefined, G's `means` says G
cannot be true of (`means(G, true, value)` false: `nonzero` at 0), else every such variable of
that sort where together they cover those samples; no candidate where nothing does. Variables are
then renamed a, b, c as every candidate's are. `conditioned_candidates(lang, found, shape)` does the same
over sorts with shapes, where terms are defined everywhere and a guard instead picks the samples
on which two terms must agree: `x => y if G(?v)` where G may hold of ?v's value on at least
`AT_LEAST` samples (not all), x and y agree on all of those, and y is the smallest such term. Nothing
is verified here (`synthesize` does it, after trying to derive each with the rules kept, the guard
assumed of its variables).
"""
from __future__ import annotations

from dataclasses import replace
from typing import Any

from eqdsl import ir
from eqdsl.ir.exprs import pattern_vars
from eqdsl.synth.candidates import Candidate, canonical, cheapest_first, renamed, stable_name, variables
from eqdsl.synth.enumerate import VARIABLE_NAMES, Enumeration, Term, defined_alike, key_at
from eqdsl.verify.analyses import means

NOTE = "guarded: equal wherever both sides are defined"
CONDITIONED = "guarded: equal wherever the guard holds"
AT_LEAST = 3  # samples on which a guard may hold, for a candidate it picks
MOST = 200  # conditioned candidates kept, the cheapest


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


def conditioned_candidates(lang: ir.Language, found: Enumeration,
                           shape: tuple[int, ...] | None = None) -> list[Candidate]:
    analyses = [a for a in lang.analyses.values()
                if a.type == ir.Prim.BOOL and lang.sorts[a.sort].shape_type is not None]
    firsts = [t for t in found.terms if t.values is not None and not t.holes]  # defined on every sample
    out: dict[str, Candidate] = {}
    for analysis in analyses:
        for v in (t for t in firsts if isinstance(t.pattern, ir.PVar) and t.sort == analysis.sort):
            assert isinstance(v.pattern, ir.PVar)
            where = [k for k in range(found.samples) if means(analysis, True, v.sample(k))]
            if AT_LEAST <= len(where) < found.samples:
                for x, y in _agreeing(firsts, where, v.pattern.name):
                    assert isinstance(x.pattern, ir.PApp)  # `_agreeing` pairs operator terms only
                    guard = (ir.ExprCond(ir.AnalysisOf(analysis.name, v.pattern, ir.Prim.BOOL)),)
                    rule = _named(ir.Rule("", (x.pattern,), (y.pattern,), (), guard, x.pattern.span))
                    candidate = Candidate(rule, x.size + y.size, found.classes[x.fingerprint], shape, CONDITIONED)
                    out.setdefault(repr(canonical(rule)), candidate)
    return sorted(out.values(), key=cheapest_first)[:MOST]


def _agreeing(firsts: list[Term], where: list[int], v: str) -> list[tuple[Term, Term]]:
    """(x, y): x an operator term over ?v, y the smallest other class agreeing with it on `where`
    whose variables are among x's."""
    groups: dict[tuple, list[Term]] = {}
    for t in firsts:
        groups.setdefault(key_at(t, where), []).append(t)
    pairs = []
    for members in groups.values():
        for x in members:
            if isinstance(x.pattern, ir.PApp) and v in variables(x.pattern):
                ys = [y for y in members if y is not x and y.sort == x.sort and y.size < x.size
                      and variables(y.pattern) <= variables(x.pattern)]
                if ys:
                    pairs.append((x, min(ys, key=lambda y: y.size)))
    return pairs


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
