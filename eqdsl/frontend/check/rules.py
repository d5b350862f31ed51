"""Check rewrite rules and input programs; build their IR.

Contract: as in `declarations`: report to the sink, return what could be built.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, assert_never, cast

from eqdsl import ir
from eqdsl.diagnostics import DiagnosticSink
from eqdsl.frontend import ast
from eqdsl.frontend.check.exprs import Scope, field_names, resolve
from eqdsl.ir import Prim
from eqdsl.ir.evaluate import EvalError, ShapeViolation, applied_shape, field_of

ANY_SORT = "any sort"


@dataclass
class _PatternContext:
    ops: dict[str, ir.Operator]
    sink: DiagnosticSink
    var_types: dict[str, ir.ValueType]  # filled while reading the left side
    bound: dict[str, Prim]  # `where` names usable on the right side
    binding: bool  # True on the left side: new variables get bound


def _type_name(t: ir.ValueType | str) -> str:
    match t:
        case ir.SortType(name=n):
            return n
        case Prim() as p:
            return p.value
        case str():
            return t
        case _:
            assert_never(t)


def _pattern(e: ast.Expr, want: ir.ValueType | str, ctx: _PatternContext) -> ir.Pattern | None:
    """`want` is the type the position expects; ANY_SORT at the top of a rule side."""
    match e:
        case ast.Var(name=v, span=span):
            return _pattern_var(v, span, want, ctx)
        case ast.IntLit(value=v) | ast.Unary(op="neg", arg=ast.IntLit(value=v)):
            value = -v if isinstance(e, ast.Unary) else v
            return _literal(value, Prim.INT, e, want, ctx)
        case ast.StrLit(value=v):
            return _literal(v, Prim.STR, e, want, ctx)
        case ast.Name(name=n, span=span) if n in ctx.bound:
            if want != ctx.bound[n]:
                ctx.sink.error(f"'{n}' is {ctx.bound[n].value}; expected {_type_name(want)}", span)
                return None
            return ir.PBound(n, ctx.bound[n])
        case ast.Name(name=n, span=span):
            return _application(n, (), span, span, want, ctx)
        case ast.Call(fn=fn, args=args, span=span, fn_span=fn_span):
            return _application(fn, args, span, fn_span, want, ctx)
        case _:
            ctx.sink.error(f"expected a term (an operator application, ?var or literal) of "
                           f"{_type_name(want)}", e.span)
            return None


def _pattern_var(v: str, span, want, ctx: _PatternContext) -> ir.Pattern | None:
    known = ctx.var_types.get(v)
    if known is None and not ctx.binding:
        ctx.sink.error(f"variable ?{v} is not bound by the left-hand side", span)
        return None
    if known is None:
        if want == ANY_SORT:
            ctx.sink.error(f"a left-hand side must be an operator application, found ?{v}", span)
            return None
        ctx.var_types[v] = want
        return ir.PVar(v, want)
    if want != ANY_SORT and want != known:
        ctx.sink.error(f"?{v} is {_type_name(known)} here but {_type_name(want)} elsewhere", span)
        return None
    return ir.PVar(v, known)


def _literal(value, prim: Prim, e: ast.Expr, want, ctx: _PatternContext) -> ir.Pattern | None:
    if want != prim:
        ctx.sink.error(f"sort mismatch: expected {_type_name(want)}, found {prim.value} literal", e.span)
        return None
    return ir.PLit(value, prim)


def _application(fn: str, args, span, fn_span, want, ctx: _PatternContext) -> ir.Pattern | None:
    op = ctx.ops.get(fn)
    if op is None:
        ctx.sink.error(f"unknown operator '{fn}'; expected one of: {', '.join(sorted(ctx.ops))}", fn_span)
        return None
    if len(args) != op.arity:
        ctx.sink.error(f"wrong arity: '{fn}' takes {op.arity} argument(s) "
                       f"({', '.join(p.name for p in op.params)}), found {len(args)}", span)
        return None
    if want != ANY_SORT and want != ir.SortType(op.result):
        ctx.sink.error(f"sort mismatch: expected {_type_name(want)}, found '{fn}' of sort {op.result}", span)
        return None
    children = [_pattern(a, p.type, ctx) for a, p in zip(args, op.params)]
    present = [c for c in children if c is not None]
    return ir.PApp(fn, tuple(present), span) if len(present) == len(children) else None


def pattern_sort(p: ir.Pattern, ops: dict[str, ir.Operator]) -> ir.ValueType:
    match p:
        case ir.PApp(op=op):
            return ir.SortType(ops[op].result)
        case ir.PVar(type=t) | ir.PLit(type=t) | ir.PBound(type=t):
            return t
        case _:
            assert_never(p)


def check_rules(decls: list[ast.RuleDecl], ops: dict[str, ir.Operator], sorts: dict[str, ir.Sort],
                sink: DiagnosticSink, params: dict[str, ir.TargetParam] | None = None,
                analyses: dict[str, ir.Analysis] | None = None) -> list[ir.Rule]:
    """`where`/`if` expressions may read the language's target `params` (bound before lowering:
    `eqdsl.ir.params`) and its `analyses` (`NAME(?x)`, `NAME(term)`)."""
    rules: list[ir.Rule] = []
    seen: dict[str, ast.RuleDecl] = {}
    for d in decls:
        if d.name in seen:
            sink.error(f"duplicate rule name '{d.name}' (first at {seen[d.name].span})", d.span)
            continue
        seen[d.name] = d
        if len(d.lhs) != len(d.rhs):
            sink.error(f"multi-pattern rule '{d.name}' has {len(d.lhs)} left pattern(s) and "
                       f"{len(d.rhs)} right pattern(s); expected the same number", d.arrow_span)
            continue
        if d.arrow == "<=>" and (len(d.lhs) > 1 or d.wheres or d.conds):
            sink.error("'<=>' is for plain single-pattern rules; write two '=>' rules to add "
                       "conditions or several patterns", d.arrow_span)
            continue
        directions = [(d.name, d.lhs, d.rhs)]
        if d.arrow == "<=>":
            directions.append((d.name + "-rev", d.rhs, d.lhs))
        for name, lhs, rhs in directions:
            rule = _rule(name, lhs, rhs, d, ops, sorts, sink, params or {}, analyses or {})
            if rule is not None:
                rules.append(rule)
    return rules


def _rule(name, lhs_src, rhs_src, d: ast.RuleDecl, ops, sorts, sink, params, analyses) -> ir.Rule | None:
    ctx = _PatternContext(ops, sink, {}, {}, binding=True)
    lhs_found = [_pattern(p, ANY_SORT, ctx) for p in lhs_src]
    if None in lhs_found:
        return None
    lhs = cast(list[ir.PApp], lhs_found)  # the grammar makes every left pattern an application
    scope = _rule_scope(ctx.var_types, sorts, f"rule '{name}'")
    scope.names.update({p: ir.Prim.INT for p in params})
    scope.term_shape = lambda t: _term_shape(t, ctx, sorts)
    scope.analyses = {n: a.type for n, a in analyses.items()}
    scope.analysis_of = lambda call: _analysis_of(call, ctx, analyses[call.fn])
    wheres = []
    for b in d.wheres:
        if b.name in params:
            sink.error(f"'{b.name}' is a target param; expected another name for this `where` value", b.span)
            return None
        if b.name in ctx.var_types or b.name in ctx.bound:
            sink.error(f"'{b.name}' is already bound in rule '{name}' (as ?{b.name} or an earlier "
                       "`where`); expected a new name", b.span)
            return None
        value = resolve(b.value, scope, sink)
        if value is None:
            return None
        scope.names[b.name] = value.type
        ctx.bound[b.name] = value.type
        wheres.append((b.name, value))
    ctx.binding = False
    rhs_found = [_pattern(p, ANY_SORT, ctx) for p in rhs_src]
    conds_found = [_condition(c, scope, ctx) for c in d.conds]
    rhs = [p for p in rhs_found if p is not None]
    conds = [c for c in conds_found if c is not None]
    if len(rhs) != len(rhs_found) or len(conds) != len(conds_found):
        return None
    for left, right, src in zip(lhs, rhs, rhs_src):
        ls, rs = pattern_sort(left, ops), pattern_sort(right, ops)
        if ls != rs:
            sink.error(f"sort mismatch: the left side is {_type_name(ls)}, the right side is "
                       f"{_type_name(rs)}", src.span)
            return None
    return ir.Rule(name, tuple(lhs), tuple(rhs), tuple(wheres), tuple(conds), d.span)


def _rule_scope(var_types: dict[str, ir.ValueType], sorts: dict[str, ir.Sort], what: str) -> Scope:
    scope = Scope(what=what, fields=field_names(sorts))
    for v, t in var_types.items():
        match t:
            case ir.SortType(name=s):
                scope.shape_vars[v] = sorts[s].shape_type
                scope.sort_fields["?" + v] = sorts[s].fields
            case Prim() as p:
                scope.value_vars[v] = p
    return scope


def _term_shape(t: ast.Expr, ctx: _PatternContext, sorts: dict[str, ir.Sort]) -> ir.Expr | None:
    binding, ctx.binding = ctx.binding, False
    try:
        pattern = _pattern(t, ANY_SORT, ctx)
    finally:
        ctx.binding = binding
    if pattern is None:
        return None
    sort = pattern_sort(pattern, ctx.ops)
    shape_type = sorts[sort.name].shape_type if isinstance(sort, ir.SortType) else None
    if shape_type is None:
        ctx.sink.error("shape(...) of a term whose sort declares no shape", t.span)
        return None
    return ir.ShapeOfTerm(pattern, shape_type)


def _analysis_of(call: ast.Call, ctx: _PatternContext, analysis: ir.Analysis) -> ir.Expr | None:
    """`NAME(?x)` or `NAME(term)`: the analysis value of a term over the left side's variables."""
    if len(call.args) != 1:
        ctx.sink.error(f"analysis '{analysis.name}' takes one term, found {len(call.args)} argument(s)", call.span)
        return None
    binding, ctx.binding = ctx.binding, False
    try:
        pattern = _pattern(call.args[0], ir.SortType(analysis.sort), ctx)
    finally:
        ctx.binding = binding
    return None if pattern is None else ir.AnalysisOf(analysis.name, pattern, analysis.type)


def _is_term(e: ast.Expr, ctx: _PatternContext) -> bool:
    match e:
        case ast.Call(fn=fn):
            return fn in ctx.ops
        case ast.Var(name=v):
            return isinstance(ctx.var_types.get(v), ir.SortType)
        case _:
            return False


def _condition(c: ast.Expr, scope: Scope, ctx: _PatternContext) -> ir.Cond | None:
    match c:
        case ast.Compare(operands=(left, right), ops=(op,)) if op in ("==", "!=") and (
                _is_term(left, ctx) or _is_term(right, ctx)):
            want = ANY_SORT
            lp = _pattern(left, want, ctx)
            rp = _pattern(right, want, ctx) if lp is None else _pattern(
                right, pattern_sort(lp, ctx.ops), ctx)
            return None if lp is None or rp is None else ir.ClassCond(op == "==", lp, rp, c.span)
        case _:
            expr = resolve(c, scope, ctx.sink)
            if expr is not None and expr.type != Prim.BOOL:
                ctx.sink.error(f"a condition must be Bool; found {expr.type.value}", c.span)
                return None
            return None if expr is None else ir.ExprCond(expr)


# ---- programs ----
def check_program(d: ast.ProgramDecl, ops: dict[str, ir.Operator], sink: DiagnosticSink,
                  shapes: dict[str, ir.ShapeRule] | None = None,
                  sorts: dict[str, ir.Sort] | None = None) -> ir.Program | None:
    """The program's DAG; with `shapes`, every node's shape is computed and a node that breaks
    its shape rule is reported at its own position."""
    builder = _DagBuilder(ops, sink, shapes or {}, sorts or {})
    roots: list[int] = []
    errors_before = len(sink.items)
    for stmt in d.stmts:
        match stmt:
            case ast.LetStmt(name=n, value=v, span=span):
                if n in builder.lets:
                    sink.error(f"'{n}' is already bound in program '{d.name}'", span)
                    continue
                index = builder.node(v, ANY_SORT)
                if index is not None:
                    builder.lets[n] = index
            case ast.RootStmt(value=v):
                index = builder.node(v, ANY_SORT)
                if index is not None:
                    roots.append(index)
            case _:
                assert_never(stmt)
    if not roots and len(sink.items) == errors_before:
        sink.error(f"program '{d.name}' has no root; expected at least one `root <term>`", d.span)
        return None
    return ir.Program(d.name, tuple(builder.nodes), tuple(roots), d.span)


def _is_negative_literal(e: ast.Expr) -> bool:
    return isinstance(e, ast.Unary) and e.op == "neg" and isinstance(e.arg, ast.IntLit)


def _int_literal(e: ast.Expr) -> int:
    """The value of an int literal, or of a negated one (`_is_negative_literal`)."""
    match e:
        case ast.IntLit(value=v):
            return v
        case ast.Unary(op="neg", arg=ast.IntLit(value=v)):
            return -v
    raise AssertionError(f"not an int literal: {e}")


class _DagBuilder:
    """Builds a hash-consed term DAG; `let` names share nodes."""

    def __init__(self, ops: dict[str, ir.Operator], sink: DiagnosticSink,
                 shapes: dict[str, ir.ShapeRule], sorts: dict[str, ir.Sort]) -> None:
        self.ops, self.sink, self.shapes, self.sorts = ops, sink, shapes, sorts
        self.node_shapes: dict[int, Any] = {}  # node index → its shape (absent: unknown or bad)
        self.nodes: list[ir.TermNode] = []
        self.index: dict[ir.TermNode, int] = {}
        self.lets: dict[str, int] = {}

    def node(self, e: ast.Expr, want) -> int | None:
        match e:
            case ast.Name(name=n) if n in self.lets:
                return self._check_sort(self.lets[n], want, e)
            case ast.Name(name=n, span=span):
                return self._app(n, (), span, span, want)
            case ast.Call(fn=fn, args=args, span=span, fn_span=fn_span):
                return self._app(fn, args, span, fn_span, want)
            case _:
                self.sink.error(f"expected a term of {_type_name(want)} (an operator application "
                                "or a let name)", e.span)
                return None

    def _check_sort(self, index: int, want, e: ast.Expr) -> int | None:
        have = self.ops[self.nodes[index].op].result
        if want not in (ANY_SORT, ir.SortType(have)):
            self.sink.error(f"sort mismatch: expected {_type_name(want)}, found {have}", e.span)
            return None
        return index

    def _app(self, fn, args, span, fn_span, want) -> int | None:
        op = self.ops.get(fn)
        if op is None:
            self.sink.error(f"unknown operator or name '{fn}'", fn_span)
            return None
        if len(args) != op.arity:
            self.sink.error(f"wrong arity: '{fn}' takes {op.arity} argument(s), found {len(args)}", span)
            return None
        values = [self._arg(a, p.type) for a, p in zip(args, op.params)]
        if any(v is None for v in values):
            return None
        node = ir.TermNode(fn, tuple(values))
        if node not in self.index:
            self.index[node] = len(self.nodes)
            self.nodes.append(node)
            self._shape(self.index[node], op, span)
        return self._check_sort(self.index[node], want, ast.Name(fn, span))

    def _show(self, value: Any, t: ir.ValueType) -> str:
        sort = self.sorts.get(t.name) if isinstance(t, ir.SortType) else None
        if sort is not None and sort.fields:  # stored [len(first)] ++ first ++ second: see ir.FieldOf
            first, second = (list(field_of(value, k)) for k in (0, 1))
            return f"{{{sort.fields[0]}: {first}, {sort.fields[1]}: {second}}}"
        return str(list(value)) if isinstance(value, tuple) else str(value)

    def _shape(self, index: int, op: ir.Operator, span) -> None:
        rule = self.shapes.get(op.name)
        args = self.nodes[index].args
        if rule is None or any(isinstance(a, ir.Child) and a.index not in self.node_shapes for a in args):
            return
        env = {n: self.node_shapes[a.index] if isinstance(a, ir.Child) else a for n, a in zip(rule.params, args)}
        try:
            self.node_shapes[index] = applied_shape(rule, env)
            return
        except ShapeViolation:
            problem = "breaks a requirement of"
        except EvalError as err:
            problem = f"cannot be computed by ({err})"
        shown = ", ".join(f"{n}={self._show(v, p.type)}" for (n, v), p in zip(env.items(), op.params))
        self.sink.error(f"ill-shaped '{op.name}': with {shown} it {problem} its shape rule; expected "
                        f"arguments that meet the rule at {rule.span}", span)

    def _arg(self, a: ast.Expr, want: ir.ValueType):
        match want, a:
            case Prim.INT, ast.IntLit(value=v):
                return v
            case Prim.INT, ast.Unary(op="neg", arg=ast.IntLit(value=v)):
                return -v
            case Prim.STR, ast.StrLit(value=v):
                return v
            case Prim.INTS, ast.ListLit(items=items) if all(
                    isinstance(i, ast.IntLit) or _is_negative_literal(i) for i in items):
                return tuple(_int_literal(i) for i in items)
            case ir.SortType(), _:
                index = self.node(a, want)
                return None if index is None else ir.Child(index)
            case _:
                self.sink.error(f"expected a {_type_name(want)} literal", a.span)
                return None
