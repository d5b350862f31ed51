"""Type and resolve value expressions (shape rules, requirements, conditions, `where`, costs).

Contract: `resolve(e, scope, sink)` returns a typed `ir.Expr`, or None after reporting at least
one diagnostic to `sink`. Types are `Prim`: Int, Str, Bool and [Int] (a shape).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, assert_never

from eqdsl import ir
from eqdsl.diagnostics import DiagnosticSink, all_present
from eqdsl.frontend import ast
from eqdsl.ir import Prim
from eqdsl.ir.builtins import BUILTINS

ARITH = {"add", "sub", "mul", "div", "mod"}
CMP_NAMES = {"==": "eq", "!=": "ne", "<": "lt", "<=": "le", ">": "gt", ">=": "ge"}


@dataclass
class Scope:
    """Names visible in an expression; `shape_vars` maps pattern vars to their shape type."""

    names: dict[str, Prim] = field(default_factory=dict)
    value_vars: dict[str, Prim] = field(default_factory=dict)  # ?k of a primitive type
    shape_vars: dict[str, Prim | None] = field(default_factory=dict)  # ?x of a user sort
    what: str = "expression"
    # resolves `shape(term)` for a term over pattern variables; None where terms are not allowed
    term_shape: Callable[[ast.Expr], ir.Expr | None] | None = None
    # field name of a two-field sort → that sort's field names (`x.access`, `{access: .., ..}`)
    fields: dict[str, tuple[str, ...]] = field(default_factory=dict)
    # the field names of what a name (`a`, `out`) or `shape(?x)` holds, where it is a sort's
    # shape: () for a one-field sort, so `x.access` on it is refused
    sort_fields: dict[str, tuple[str, ...]] = field(default_factory=dict)
    # analysis name → its value type; `analysis_of` resolves `NAME(?x)` / `NAME(term)` (None: not here)
    analyses: dict[str, Prim] = field(default_factory=dict)
    analysis_of: Callable[[ast.Call], ir.Expr | None] | None = None


def field_names(sorts: dict[str, ir.Sort]) -> dict[str, tuple[str, ...]]:
    """Each field name of a two-field sort → that sort's field names, for `x.f` and `{f: ..}`."""
    return {f: s.fields for s in sorts.values() for f in s.fields}


def resolve(e: ast.Expr, scope: Scope, sink: DiagnosticSink) -> ir.Expr | None:
    match e:
        case ast.IntLit(value=v):
            return ir.Const(v, Prim.INT)
        case ast.StrLit(value=v):
            return ir.Const(v, Prim.STR)
        case ast.Name():
            return _name(e, scope, sink)
        case ast.Var():
            return _var(e, scope, sink)
        case ast.Call():
            return _call(e, scope, sink)
        case ast.ListLit(items=items):
            args: list[ir.Expr] | None = all_present([_expect(i, Prim.INT, scope, sink) for i in items])
            return None if args is None else ir.ListOf(tuple(args))
        case ast.Index(base=b, index=i):
            base, idx = _expect(b, Prim.INTS, scope, sink), _expect(i, Prim.INT, scope, sink)
            return None if base is None or idx is None else ir.IndexOf(base, idx)
        case ast.Slice():
            return _slice(e, scope, sink)
        case ast.With(base=b, index=i, value=v):
            found = [_expect(b, Prim.INTS, scope, sink), _expect(i, Prim.INT, scope, sink),
                     _expect(v, Prim.INT, scope, sink)]
            parts: list[ir.Expr] | None = all_present(found)
            return None if parts is None else ir.Replace(parts[0], parts[1], parts[2])
        case ast.Unary(op=op, arg=a):
            want = Prim.INT if op == "neg" else Prim.BOOL
            arg = _expect(a, want, scope, sink)
            return None if arg is None else ir.UnOp(op, arg, want)
        case ast.Binary():
            return _binary(e, scope, sink)
        case ast.Compare():
            return _compare(e, scope, sink)
        case ast.Field():
            return _field(e, scope, sink)
        case ast.Record():
            return _record(e, scope, sink)
        case _:
            assert_never(e)


def _name(e: ast.Name, scope: Scope, sink: DiagnosticSink) -> ir.Expr | None:
    if e.name in ("true", "false"):
        return ir.Const(e.name == "true", Prim.BOOL)
    if e.name not in scope.names:
        notes = ("write subtraction with spaces: `a - b`",) if "-" in e.name else ()
        sink.error(f"unknown name '{e.name}' in {scope.what}; expected one of: {_listing(scope.names)}", e.span, notes)
        return None
    return ir.Ref(e.name, scope.names[e.name])


def _var(e: ast.Var, scope: Scope, sink: DiagnosticSink) -> ir.Expr | None:
    if e.name not in scope.value_vars:
        hint = " (use shape(?%s) for its shape)" % e.name if e.name in scope.shape_vars else ""
        sink.error(f"pattern variable ?{e.name} is not an Int/Str value here{hint}", e.span)
        return None
    return ir.Ref("?" + e.name, scope.value_vars[e.name])


def _field(e: ast.Field, scope: Scope, sink: DiagnosticSink) -> ir.Expr | None:
    if e.name not in scope.fields:
        sink.error(f"unknown field '.{e.name}'; expected one of: {', '.join(sorted(scope.fields)) or '(no sort '
                   'declares two fields)'}", e.span)
        return None
    held = _held_fields(e.base, scope)
    if held is not None and e.name not in held:
        sink.error(f"'.{e.name}' reads a field of a two-field sort's value; this one has "
                   f"{'fields ' + ', '.join(held) if held else 'one shape, no fields'}", e.span)
        return None
    base = _expect(e.base, Prim.INTS, scope, sink)
    return None if base is None else ir.FieldOf(base, scope.fields[e.name].index(e.name))


def _held_fields(base: ast.Expr, scope: Scope) -> tuple[str, ...] | None:
    """The field names of the sort whose value `base` names, where that is known."""
    match base:
        case ast.Name(name=n):
            return scope.sort_fields.get(n)
        case ast.Call(fn="shape", args=(ast.Var(name=v),)):
            return scope.sort_fields.get("?" + v)
        case _:
            return None


def _record(e: ast.Record, scope: Scope, sink: DiagnosticSink) -> ir.Expr | None:
    """`{f0: a, f1: b}` is stored as `[len(a)] ++ a ++ b` (see ir.FieldOf)."""
    names = tuple(n for n, _ in e.entries)
    if names not in set(scope.fields.values()):
        expected = " or ".join("{" + ", ".join(f"{n}: ..." for n in f) + "}" for f in set(scope.fields.values()))
        sink.error(f"a record lists the fields of a two-field sort in order: expected {expected or 'none here'}; "
                   f"found {{{', '.join(names)}}}", e.span)
        return None
    first, second = (_expect(v, Prim.INTS, scope, sink) for _, v in e.entries)
    if first is None or second is None:
        return None
    head = ir.ListOf((ir.Builtin("len", (first,), Prim.INT),))
    return ir.BinOp("cat", ir.BinOp("cat", head, first, Prim.INTS), second, Prim.INTS)


def _listing(names: dict[str, Prim]) -> str:
    return ", ".join(sorted(names)) if names else "(none)"


def _expect(e: ast.Expr, want: Prim, scope: Scope, sink: DiagnosticSink) -> ir.Expr | None:
    got = resolve(e, scope, sink)
    if got is not None and got.type != want:
        sink.error(f"type mismatch: expected {want.value}, found {got.type.value}", e.span)
        return None
    return got


def _call(e: ast.Call, scope: Scope, sink: DiagnosticSink) -> ir.Expr | None:
    if e.fn == "shape":
        return _shape_of(e, scope, sink)
    if e.fn in scope.analyses:
        if scope.analysis_of is None:
            sink.error(f"analysis '{e.fn}' is read in a rule's `where` and `if` clauses and in cost rules only; "
                       f"found it in {scope.what}", e.fn_span)
            return None
        return scope.analysis_of(e)
    if e.fn not in BUILTINS:
        sink.error(f"unknown function '{e.fn}' in {scope.what}; expected one of: shape, "
                   f"{', '.join(sorted(BUILTINS))}", e.fn_span)
        return None
    param_types, result = BUILTINS[e.fn].params, BUILTINS[e.fn].result
    if len(e.args) != len(param_types):
        sink.error(f"'{e.fn}' takes {len(param_types)} argument(s), found {len(e.args)}", e.span)
        return None
    args: list[ir.Expr] | None = all_present([_expect(a, t, scope, sink) for a, t in zip(e.args, param_types)])
    if args is None:
        return None
    match e.fn, args:  # two-field values are stored [len(first)] ++ first ++ second: see ir.FieldOf
        case "items", [x]:
            return ir.SliceOf(x, 1, None)
        case "split_at", [xs, n]:
            return ir.BinOp("cat", ir.ListOf((n,)), xs, Prim.INTS)
    return ir.Builtin(e.fn, tuple(args), result)


def _shape_of(e: ast.Call, scope: Scope, sink: DiagnosticSink) -> ir.Expr | None:
    match e.args:
        case (ast.Var(name=v, span=span),) if v in scope.shape_vars:
            shape_type = scope.shape_vars[v]
            if shape_type is None:
                sink.error(f"shape(?{v}): the sort of ?{v} declares no shape "
                           "(declare it as `sort S { shape: [Int] }`)", span)
                return None
            return ir.ShapeOf(v, shape_type)
        case (ast.Var(name=v, span=span),):
            sink.error(f"shape(?{v}): ?{v} is not bound to a term of a user sort here", span)
            return None
        case (ast.Call() as t,) if scope.term_shape is not None:
            return scope.term_shape(t)
        case _:
            sink.error("shape(...) expects one pattern variable, e.g. shape(?x)", e.span)
            return None


def _slice(e: ast.Slice, scope: Scope, sink: DiagnosticSink) -> ir.Expr | None:
    base = _expect(e.base, Prim.INTS, scope, sink)
    bounds = [_const_int(b, sink) if b is not None else None for b in (e.lo, e.hi)]
    lo, hi = (b if isinstance(b, int) else None for b in bounds)
    if base is None or BAD in bounds:
        return None
    return ir.SliceOf(base, lo, hi)


BAD = "bad"  # a slice bound that is not a constant (reported)


def _const_int(e: ast.Expr, sink: DiagnosticSink) -> int | str:
    match e:
        case ast.IntLit(value=v):
            return v
        case ast.Unary(op="neg", arg=ast.IntLit(value=v)):
            return -v
        case _:
            sink.error("slice bounds must be integer constants such as 1 or -1", e.span)
            return BAD


def _binary(e: ast.Binary, scope: Scope, sink: DiagnosticSink) -> ir.Expr | None:
    if e.op in ("and", "or"):
        want, result = Prim.BOOL, Prim.BOOL
    elif e.op == "cat":
        want, result = Prim.INTS, Prim.INTS
    else:
        want, result = Prim.INT, Prim.INT
    left, right = _expect(e.left, want, scope, sink), _expect(e.right, want, scope, sink)
    return None if left is None or right is None else ir.BinOp(e.op, left, right, result)


def _compare(e: ast.Compare, scope: Scope, sink: DiagnosticSink) -> ir.Expr | None:
    operands: list[ir.Expr] | None = all_present([resolve(o, scope, sink) for o in e.operands])
    if operands is None:
        return None
    result: ir.Expr | None = None
    for (left, right), op, node in zip(zip(operands, operands[1:]), e.ops, e.operands[1:]):
        name = CMP_NAMES[op]
        if left.type != right.type:
            sink.error(f"cannot compare {left.type.value} with {right.type.value}", node.span)
            return None
        if name not in ("eq", "ne") and left.type != Prim.INT:
            sink.error(f"'{op}' compares Int values, found {left.type.value}", node.span)
            return None
        cmp = ir.BinOp(name, left, right, Prim.BOOL)
        result = cmp if result is None else ir.BinOp("and", result, cmp, Prim.BOOL)
    return result
