"""Check cost rules; build their IR.

Contract: as `declarations`: every problem goes to the sink, what could be built is returned.
A cost rule reads the operator's parameters (an operand's shape, a literal's value), the target
params, `out` (the node's own shape) and analysis values: `NAME(a)` is the value of analysis
NAME on the e-class of operand `a` (or `out`, the node's own class). A cost must be defined on
every node, so where the value is not set the rule reads the second argument, `NAME(a, v)`; a
Bool analysis may leave it out (unset reads `false`: "not known", as a guard reads it).
"""
from __future__ import annotations

from eqdsl import ir
from eqdsl.diagnostics import DiagnosticSink
from eqdsl.frontend import ast
from eqdsl.frontend.check.declarations import lookup_op, op_scope
from eqdsl.frontend.check.exprs import Scope, resolve
from eqdsl.ir import Prim
from eqdsl.ir.exprs import const_int


def check_costs(decls: list[ast.CostDecl], ops: dict[str, ir.Operator], sorts: dict[str, ir.Sort],
                sink: DiagnosticSink, params: dict[str, ir.TargetParam],
                analyses: dict[str, ir.Analysis] | None = None) -> dict[str, ir.CostRule]:
    costs: dict[str, ir.CostRule] = {}
    declared = {name for d in decls for name in d.ops}
    for d in decls:
        for op_name in d.ops:
            names = d.params if d.params is not None else tuple(p.name for p in ops[op_name].params) \
                if op_name in ops else ()
            op = lookup_op(op_name, names, d.span, ops, "cost", sink)
            if op is None:
                continue
            if op_name in costs:
                sink.error(f"duplicate cost rule for '{op_name}' (first at {costs[op_name].span})", d.span)
                continue
            rule = _cost_rule(d, op, names, sorts, sink, params, analyses or {})
            if rule is not None:
                costs[op_name] = rule
    for op in ops.values():
        if op.name not in declared:
            sink.error(f"missing cost rule for '{op.name}' (write e.g. `cost {op.name} = 1`)", op.span)
    return costs


def _cost_rule(d: ast.CostDecl, op: ir.Operator, names: tuple[str, ...], sorts: dict[str, ir.Sort],
               sink: DiagnosticSink, params: dict[str, ir.TargetParam],
               analyses: dict[str, ir.Analysis]) -> ir.CostRule | None:
    visible = names if d.params is not None else ()  # `cost a, b = …` names no operands
    scope = op_scope(op, visible, sorts, f"the cost rule of '{op.name}'")
    for p in params.values():  # an operator's own parameter names shadow target params
        scope.names.setdefault(p.name, p.type)
    out_type = sorts[op.result].shape_type
    if out_type is not None:  # `out` in the one-op form and in `cost a, b = …` alike
        scope.names.setdefault("out", out_type)
        scope.sort_fields.setdefault("out", sorts[op.result].fields)
    operands = {n: p.type.name for n, p in zip(visible, op.params) if isinstance(p.type, ir.SortType)}
    operands["out"] = op.result
    scope.analyses = {n: a.type for n, a in analyses.items()}
    scope.analysis_of = lambda call: _analysis_read(call, analyses[call.fn], operands, scope, sink)
    body = resolve(d.body, scope, sink)
    if body is None:
        return None
    if body.type != Prim.INT:
        sink.error(f"a cost must be an Int expression; found {body.type.value}", d.body.span)
        return None
    constant = const_int(body)
    if constant is not None and constant < 0:
        sink.error(f"costs are non-negative; found {constant}", d.body.span)
        return None
    return ir.CostRule(op.name, names, body, d.span)


def _analysis_read(call: ast.Call, analysis: ir.Analysis, operands: dict[str, str], scope: Scope,
                   sink: DiagnosticSink) -> ir.Expr | None:
    """`NAME(a)` / `NAME(a, v)` in a cost rule: see the module docstring."""
    usage = f"`{analysis.name}(OPERAND, VALUE_WHERE_UNSET)`"
    if not 1 <= len(call.args) <= 2 or not isinstance(call.args[0], ast.Name):
        sink.error(f"analysis '{analysis.name}' in a cost rule reads one operand by name: {usage}", call.span)
        return None
    operand = call.args[0]
    sort = operands.get(operand.name)
    if sort != analysis.sort:
        found = f"'{operand.name}' is not an operand" if sort is None else f"'{operand.name}' is a {sort}"
        sink.error(f"analysis '{analysis.name}' is over {analysis.sort}; {found} (expected one of: "
                   f"{', '.join(n for n, s in operands.items() if s == analysis.sort) or 'none here'})",
                   operand.span)
        return None
    unset = _unset_value(call, analysis, usage, scope, sink)
    if unset is None:
        return None
    return ir.AnalysisOf(analysis.name, ir.PVar(operand.name, ir.SortType(sort)), analysis.type, unset)


def _unset_value(call: ast.Call, analysis: ir.Analysis, usage: str, scope: Scope,
                 sink: DiagnosticSink) -> ir.Expr | None:
    if len(call.args) == 1:
        if analysis.type == Prim.BOOL:
            return ir.Const(False, Prim.BOOL)
        sink.error(f"analysis '{analysis.name}' may be unset on a node, and a cost must be defined: "
                   f"write {usage}", call.span)
        return None
    value = resolve(call.args[1], scope, sink)
    if value is not None and value.type != analysis.type:
        sink.error(f"the value where '{analysis.name}' is unset must be {analysis.type.value}; "
                   f"found {value.type.value}", call.args[1].span)
        return None
    return value
