"""Constant folding rules from an analysis that names a term's value (egg's constant folding,
written as rules).

Contract: `fold_rules(lang)` gives, for each analysis over a sort S that `means NAME == x` (its
value is the term's value) and a leaf operator L of S whose one parameter is that value (the
analysis rule `L(v) = v`, as `num`), one rule per other operator O the analysis has a rule for:
`O(?a, ...) => L(k) where k = NAME(O(?a, ...))`. Nothing is verified here: `synthesize` verifies
each as it verifies any candidate. Derivability cannot try them (fresh leaves carry no analysis
values: `synth.derive`), so none is dropped as derivable.
"""
from __future__ import annotations

from eqdsl import ir
from eqdsl.diagnostics import NO_SPAN
from eqdsl.synth.candidates import stable_name
from eqdsl.synth.enumerate import VARIABLE_NAMES

FOLDED = "k"  # the `where` name of the folded value


def fold_rules(lang: ir.Language) -> list[ir.Rule]:
    rules = []
    for analysis in lang.analyses.values():
        leaf = _value_leaf(lang, analysis)
        if leaf is None or not _names_the_value(analysis):
            continue
        rules += [_fold(lang, analysis, op, leaf) for op in analysis.rules if op != leaf]
    return rules


def _names_the_value(analysis: ir.Analysis) -> bool:
    """Whether the analysis `means NAME == x` (or `x == NAME`)."""
    sides = {ir.Ref(analysis.name, analysis.type), ir.Ref(analysis.param, analysis.type)}
    match analysis.means:
        case ir.BinOp(op="eq", left=ir.Ref() as left, right=ir.Ref() as right):
            return {left, right} == sides
    return False


def _value_leaf(lang: ir.Language, analysis: ir.Analysis) -> str | None:
    """The first operator of the analysis's sort whose one parameter is the analysis value."""
    for name, rule in analysis.rules.items():
        op = lang.ops[name]
        if op.result == analysis.sort and len(op.params) == 1 and op.params[0].type == analysis.type and \
                rule.body == ir.Ref(op.params[0].name, analysis.type) and not rule.requires:
            return name
    return None


def _fold(lang: ir.Language, analysis: ir.Analysis, op: str, leaf: str) -> ir.Rule:
    """`op(?a, ...) => leaf(k) where k = analysis(op(?a, ...))`, named stably."""
    params = lang.ops[op].params
    lhs = ir.PApp(op, tuple(ir.PVar(VARIABLE_NAMES[k], p.type) for k, p in enumerate(params)), NO_SPAN)
    value = ir.AnalysisOf(analysis.name, lhs, analysis.type)
    rhs = ir.PApp(leaf, (ir.PBound(FOLDED, analysis.type),), NO_SPAN)
    rule = ir.Rule("", (lhs,), (rhs,), ((FOLDED, value),), (), NO_SPAN)
    return ir.Rule(stable_name(rule), rule.lhs, rule.rhs, rule.wheres, rule.conds, rule.span)
