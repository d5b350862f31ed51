"""Check sorts, operators, shape rules and cost rules; build their IR.

Contract: each function reports every problem it finds to the sink and returns what it could
build; the caller raises once at the end so a user sees all errors of a file at once.
"""
from __future__ import annotations

from eqdsl import ir
from eqdsl.diagnostics import DiagnosticSink, Span, all_present
from eqdsl.frontend import ast
from eqdsl.frontend.check.exprs import Scope, field_names, resolve
from eqdsl.ir import Prim
from eqdsl.ir.builtins import BUILTINS

PRIMS = {"Int": Prim.INT, "Str": Prim.STR}
LIST_PRIMS = {"Int": Prim.INTS}


def check_sorts(decls: list[ast.SortDecl], sink: DiagnosticSink) -> dict[str, ir.Sort]:
    sorts: dict[str, ir.Sort] = {}
    for d in decls:
        if d.name in PRIMS or d.name == "Bool":
            sink.error(f"'{d.name}' is a built-in type; expected a new sort name", d.span)
            continue
        if d.name in sorts:
            sink.error(f"duplicate sort '{d.name}' (first declared at {sorts[d.name].span})", d.span)
            continue
        if len(d.fields) == 2:
            sorts[d.name] = ir.Sort(d.name, _two_fields(d, sink), d.span, tuple(f.name for f in d.fields))
        else:
            sorts[d.name] = ir.Sort(d.name, _shape_field(d, sink), d.span)
    return sorts


def _two_fields(d: ast.SortDecl, sink: DiagnosticSink) -> Prim | None:
    """`sort A { access: [Int], compute: [Int] }`: two list fields, stored as one list."""
    a, b = d.fields
    if a.name == b.name or "shape" in (a.name, b.name) or a.name in RESERVED or b.name in RESERVED:
        sink.error(f"two analysis fields need two distinct names other than 'shape' and the builtins; "
                   f"found {a.name}, {b.name}", a.span)
        return None
    for f in d.fields:
        if not f.type.is_list or f.type.name != "Int":
            sink.error(f"a two-field analysis value has [Int] fields; found {f.name}: {f.type}", f.type.span)
            return None
    return Prim.INTS


def _shape_field(d: ast.SortDecl, sink: DiagnosticSink) -> Prim | None:
    if not d.fields:
        return None
    if len(d.fields) > 1 or d.fields[0].name != "shape":
        sink.error("a sort carries one analysis field named 'shape', or two [Int] fields; found "
                   f"{', '.join(f.name for f in d.fields)}", d.fields[0].span)
        return None
    t = d.fields[0].type
    prim = (LIST_PRIMS if t.is_list else PRIMS).get(t.name)
    if prim is None:
        sink.error(f"a shape is Int or [Int]; found {t}", t.span)
    return prim


def _value_type(t: ast.TypeRef, sorts: dict[str, ir.Sort], sink: DiagnosticSink) -> ir.ValueType | None:
    if t.is_list:
        if t.name in LIST_PRIMS:
            return LIST_PRIMS[t.name]
        sink.error(f"unknown list type {t}; expected [Int]", t.span)
        return None
    if t.name in PRIMS:
        return PRIMS[t.name]
    if t.name in sorts:
        return ir.SortType(t.name)
    sink.error(f"unknown type '{t.name}'; expected Int, Str, [Int] or one of the sorts: "
               f"{', '.join(sorted(sorts)) or '(none declared)'}", t.span)
    return None


def check_ops(decls: list[ast.OpDecl], sorts: dict[str, ir.Sort], sink: DiagnosticSink) -> dict[str, ir.Operator]:
    ops: dict[str, ir.Operator] = {}
    for d in decls:
        if d.name in ops:
            sink.error(f"duplicate operator '{d.name}' (first declared at {ops[d.name].span})", d.span)
            continue
        if d.name in ("shape",) or d.name in RESERVED:
            sink.error(f"'{d.name}' is reserved; expected another operator name", d.span)
            continue
        types: list[ir.ValueType] | None = all_present([_value_type(p.type, sorts, sink) for p in d.params])
        if d.result not in sorts:
            sink.error(f"operator result must be a declared sort; found '{d.result}'", d.result_span)
            continue
        if types is not None:
            params = tuple(ir.Param(p.name, t) for p, t in zip(d.params, types))
            ops[d.name] = ir.Operator(d.name, params, d.result, d.span, d.const)
    return ops


RESERVED = {*BUILTINS, "true", "false", "out"}  # names a declaration may not take


def op_scope(op: ir.Operator, names: tuple[str, ...], sorts: dict[str, ir.Sort], what: str) -> Scope:
    scope = Scope(what=what, fields=field_names(sorts))
    for name, param in zip(names, op.params):
        match param.type:
            case ir.SortType(name=sort_name):
                shape_type = sorts[sort_name].shape_type
                if shape_type is not None:
                    scope.names[name] = shape_type
                    scope.sort_fields[name] = sorts[sort_name].fields
            case Prim() as prim:
                scope.names[name] = prim
    return scope


def lookup_op(op_name: str, names: tuple[str, ...], span: Span, ops: dict[str, ir.Operator],
               kind: str, sink: DiagnosticSink) -> ir.Operator | None:
    op = ops.get(op_name)
    if op is None:
        sink.error(f"{kind} rule for unknown operator '{op_name}'", span)
        return None
    if len(names) != op.arity:
        sink.error(f"{kind} rule for '{op_name}' names {len(names)} parameter(s); "
                   f"'{op_name}' has {op.arity}: ({', '.join(p.name for p in op.params)})", span)
        return None
    for name in names:
        if name in ops:  # egglog refuses a rule variable named like a function ("shadowing")
            sink.error(f"{kind} rule for '{op_name}': parameter '{name}' has the name of an operator; "
                       "expected a name no operator uses (rename the parameter)", span)
            return None
    return op


def check_shapes(decls: list[ast.ShapeDecl], ops: dict[str, ir.Operator], sorts: dict[str, ir.Sort],
                 sink: DiagnosticSink) -> dict[str, ir.ShapeRule]:
    shapes: dict[str, ir.ShapeRule] = {}
    declared = {d.op for d in decls}
    for d in decls:
        op = lookup_op(d.op, d.params, d.span, ops, "shape", sink)
        if op is None:
            continue
        if d.op in shapes:
            sink.error(f"duplicate shape rule for '{d.op}' (first at {shapes[d.op].span})", d.span)
            continue
        want = sorts[op.result].shape_type
        if want is None:
            sink.error(f"shape rule for '{d.op}', but its sort {op.result} declares no shape", d.span)
            continue
        scope = op_scope(op, d.params, sorts, f"the shape rule of '{d.op}'")
        body = resolve(d.body, scope, sink)
        resolved = [resolve(r, scope, sink) for r in d.requires]
        requires: list[ir.Expr] | None = all_present(resolved)
        if body is not None and body.type != want:
            sink.error(f"shape of '{d.op}' must be {want.value}; found {body.type.value}", d.body.span)
            continue
        for r, src in zip(resolved, d.requires):
            if r is not None and r.type != Prim.BOOL:
                sink.error(f"a requirement must be a condition; found {r.type.value}", src.span)
        if body is not None and requires is not None:
            shapes[d.op] = ir.ShapeRule(d.op, d.params, body, tuple(requires), d.span)
    for op in ops.values():
        if sorts[op.result].shape_type is not None and op.name not in declared:
            sink.error(f"missing shape rule for '{op.name}': its sort {op.result} carries a shape",
                       op.span)
    return shapes


def check_params(decls: list[ast.TargetParamDecl], sink: DiagnosticSink) -> dict[str, ir.TargetParam]:
    params: dict[str, ir.TargetParam] = {}
    for d in decls:
        if d.name in params:
            sink.error(f"duplicate param '{d.name}' (first declared at {params[d.name].span})", d.span)
        elif d.name in RESERVED:
            sink.error(f"'{d.name}' is reserved; expected another param name", d.span)
        elif d.type.is_list or d.type.name != "Int":
            sink.error(f"a target param is an Int; found {d.type}", d.type.span)
        else:
            params[d.name] = ir.TargetParam(d.name, Prim.INT, d.span, d.default)
    return params
