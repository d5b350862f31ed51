"""Check `analysis` blocks; build `ir.Analysis`.

Contract: as in `declarations`: report every problem to the sink, return what could be built.
An analysis names a sort, a value type (Int, Bool or [Int]), a `merge` (an expression over `old`
and `new` of that type, or `agree`), a `means` (a Bool expression over the analysis's name, its
value, and its parameter, the term's value as a number) and at most one rule per operator of the
sort; a rule reads an analysed child's value by the parameter's name and a literal parameter's
value as it is.
"""
from __future__ import annotations

from difflib import get_close_matches

from eqdsl import ir
from eqdsl.diagnostics import DiagnosticSink
from eqdsl.frontend import ast
from eqdsl.frontend.check.declarations import RESERVED, lookup_op
from eqdsl.frontend.check.exprs import Scope, resolve
from eqdsl.ir import Prim

TYPES = {"Int": Prim.INT, "Bool": Prim.BOOL, "[Int]": Prim.INTS}


def check_analyses(decls: list[ast.AnalysisDecl], ops: dict[str, ir.Operator], sorts: dict[str, ir.Sort],
                   sink: DiagnosticSink) -> dict[str, ir.Analysis]:
    found: dict[str, ir.Analysis] = {}
    for d in decls:
        if d.name in found:
            sink.error(f"duplicate analysis '{d.name}' (first declared at {found[d.name].span})", d.span)
        elif d.name in ops or d.name in RESERVED or d.name in ("shape", "old", "new", "agree"):
            sink.error(f"'{d.name}' is an operator's or a reserved name; expected another analysis name", d.span)
        elif d.sort not in sorts:
            sink.error(f"unknown sort '{d.sort}'; expected one of: {', '.join(sorted(sorts)) or '(none)'}", d.sort_span)
        elif str(d.type) not in TYPES:
            sink.error(f"an analysis value is Int, Bool or [Int]; found {d.type}", d.type.span)
        else:
            found[d.name] = _analysis(d, TYPES[str(d.type)], ops, sink)
    return found


def _analysis(d: ast.AnalysisDecl, t: Prim, ops: dict[str, ir.Operator], sink: DiagnosticSink) -> ir.Analysis:
    merge = _merge(d, t, sink)
    means = _means(d, t, sink)
    rules: dict[str, ir.ShapeRule] = {}
    for r in d.rules:
        rule = _rule(d, t, r, ops, sink)
        if rule is not None and r.op in rules:
            sink.error(f"analysis '{d.name}' has two rules for '{r.op}' (first at {rules[r.op].span})", r.span)
        elif rule is not None:
            rules[r.op] = rule
    # after an error in either (already said, so the file is refused) the analysis is still declared,
    # with stand-ins: the rules and costs that read it get no second, misleading "unknown function"
    merge = None if isinstance(merge, bool) else merge
    means = ir.Const(True, Prim.BOOL) if means is None else means
    return ir.Analysis(d.name, d.sort, d.param, t, merge, means, rules, d.span)


def _merge(d: ast.AnalysisDecl, t: Prim, sink: DiagnosticSink) -> ir.Expr | None | bool:
    """The merge expression, None for `merge agree`, False after an error."""
    if d.merge is None:
        sink.error(f"analysis '{d.name}' needs a merge: `merge agree` (two values of one e-class must be "
                   "equal) or an expression over `old` and `new`, e.g. `merge old or new`", d.span)
        return False
    if isinstance(d.merge, ast.Name) and d.merge.name == "agree":
        return None
    if isinstance(d.merge, ast.Name) and d.merge.name not in ("old", "new"):  # `merge max`: egglog's habit
        name = d.merge.name
        example = f"old {name} new" if name in ("and", "or") else f"{name}(old, new)" if name in ("min", "max") \
            else "agree" if get_close_matches(name, ["agree"]) else "max(old, new)"
        sink.error(f"expected `merge agree` or an expression over `old` and `new` (e.g. `merge {example}`), "
                   f"found the name '{name}'", d.merge.span)
        return False
    scope = Scope(names={"old": t, "new": t}, what=f"the merge of analysis '{d.name}'")
    merge = resolve(d.merge, scope, sink)
    if merge is not None and merge.type != t:
        sink.error(f"the merge of '{d.name}' must be {t.value}; found {merge.type.value}", d.merge.span)
        return False
    return False if merge is None else merge


def _means(d: ast.AnalysisDecl, t: Prim, sink: DiagnosticSink) -> ir.Expr | None:
    if d.means is None:
        sink.error(f"analysis '{d.name}' needs `means EXPR`: what its value says of a term's value, over "
                   f"'{d.name}' and '{d.param}' (e.g. `means {d.name} == {d.param}`); `eqdsl verify` checks it",
                   d.span)
        return None
    if d.param == d.name:
        sink.error(f"the parameter of analysis '{d.name}' needs a name of its own", d.span)
        return None
    scope = Scope(names={d.name: t, d.param: Prim.INT}, what=f"the meaning of analysis '{d.name}'")
    means = resolve(d.means, scope, sink)
    if means is not None and means.type != Prim.BOOL:
        sink.error(f"`means` is a condition (Bool); found {means.type.value}", d.means.span)
        return None
    return means


def _rule(d: ast.AnalysisDecl, t: Prim, r: ast.ShapeDecl, ops: dict[str, ir.Operator],
          sink: DiagnosticSink) -> ir.ShapeRule | None:
    op = lookup_op(r.op, r.params, r.span, ops, f"analysis '{d.name}'", sink)
    if op is None:
        return None
    if op.result != d.sort:
        sink.error(f"analysis '{d.name}' is over {d.sort}; '{r.op}' makes {op.result}", r.span)
        return None
    scope = Scope(what=f"the rule of analysis '{d.name}' for '{r.op}'")
    for name, param in zip(r.params, op.params):
        if param.type == ir.SortType(d.sort):
            scope.names[name] = t
        elif isinstance(param.type, Prim):
            scope.names[name] = param.type
    body = resolve(r.body, scope, sink)
    requires = [resolve(q, scope, sink) for q in r.requires]
    if body is not None and body.type != t:
        sink.error(f"analysis '{d.name}' is {t.value}; this rule gives {body.type.value}", r.body.span)
        return None
    kept = [q for q in requires if q is not None]
    for q, src in zip(requires, r.requires):
        if q is not None and q.type != Prim.BOOL:
            sink.error(f"a requirement must be a condition; found {q.type.value}", src.span)
            return None
    if body is None or len(kept) != len(requires):
        return None
    return ir.ShapeRule(r.op, r.params, body, tuple(kept), r.span)
