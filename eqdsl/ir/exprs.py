"""Small helpers over IR expressions that every evaluator shares.

Contract: `env_key(e)` is the environment key every evaluator (egglog terms, Python values,
symbolic) binds a `Ref`, `shape(?x)` or `shape(term)` to; `const_int(e)` reads an integer
constant (a literal or its negation) or gives None; `analysis_reads(e)` lists the analysis
values `e` reads; `pattern_vars(p)` is a pattern's variables
with their types, in order of first appearance.
"""
from __future__ import annotations

from typing import assert_never

from eqdsl import ir


def shape_key(var: str) -> str:
    return f"shape(?{var})"


def term_shape_key(e: ir.ShapeOfTerm) -> str:
    return f"shape({e.pattern!r})"


def analysis_key(e: ir.AnalysisOf) -> str:
    return f"{e.analysis}({e.pattern!r})"


def env_key(e: ir.Ref | ir.ShapeOf | ir.ShapeOfTerm | ir.AnalysisOf) -> str:
    """The environment key every evaluator (egglog terms, Python values, symbolic) binds `e` to."""
    match e:
        case ir.Ref(name=n):
            return n
        case ir.ShapeOf(var=v):
            return shape_key(v)
        case ir.ShapeOfTerm():
            return term_shape_key(e)
        case ir.AnalysisOf():
            return analysis_key(e)


def const_int(e: ir.Expr) -> int | None:
    match e:
        case ir.Const(value=int() as v) if not isinstance(v, bool):
            return v
        case ir.UnOp(op="neg", arg=ir.Const(value=int() as v)):
            return -v
        case _:
            return None


def subexprs(e: ir.Expr) -> tuple[ir.Expr, ...]:
    """`e`'s direct sub-expressions, in order: the one place that knows each node's children."""
    match e:
        case ir.Const() | ir.Ref() | ir.ShapeOf() | ir.ShapeOfTerm() | ir.AnalysisOf():
            return ()
        case ir.Builtin(args=args) | ir.ListOf(items=args):
            return tuple(args)
        case ir.BinOp(left=a, right=b) | ir.IndexOf(base=a, index=b):
            return (a, b)
        case ir.UnOp(arg=a) | ir.SliceOf(base=a) | ir.FieldOf(base=a):
            return (a,)
        case ir.Replace(base=a, index=b, value=c):
            return (a, b, c)
        case _:
            assert_never(e)


def refs(e: ir.Expr) -> set[str]:
    """Names of the `Ref`s `e` reads (parameters, `where` names, `?k` values, target params)."""
    if isinstance(e, ir.Ref):
        return {e.name}
    return {n for sub in subexprs(e) for n in refs(sub)}


def term_shapes(e: ir.Expr) -> list[ir.ShapeOfTerm]:
    """The `shape(term)` nodes inside `e`, in order."""
    if isinstance(e, ir.ShapeOfTerm):
        return [e]
    return [n for sub in subexprs(e) for n in term_shapes(sub)]


def index_refs(e: ir.Expr) -> set[str]:
    """Names read where an int picks a list position or a split point (an index, `with [i]`,
    `remove(xs, i)`, the length prefix `[n] ++ xs` of `split_at`): what CP-SAT variables cannot
    stand for (`verify.examples` enumerates such Ints)."""
    match e:
        case ir.IndexOf(base=b, index=i):
            return index_refs(b) | refs(i)
        case ir.Replace(base=b, index=i, value=v):
            return index_refs(b) | refs(i) | index_refs(v)
        case ir.Builtin(fn="remove", args=(xs, i)):
            return index_refs(xs) | refs(i)
        case ir.BinOp(op="cat", left=ir.ListOf(items=(ir.Builtin(fn="len", args=(first,)),)), right=r):
            return index_refs(first) | index_refs(r)  # a record's prefix: only first's length counts
        case ir.BinOp(op="cat", left=ir.ListOf(items=(n,)), right=r):
            return refs(n) | index_refs(r)
        case _:
            return {n for sub in subexprs(e) for n in index_refs(sub)}


def analysis_reads(e: ir.Expr) -> list[ir.AnalysisOf]:
    """The analysis values `e` reads, in order."""
    if isinstance(e, ir.AnalysisOf):
        return [e]
    return [a for sub in subexprs(e) for a in analysis_reads(sub)]


def pattern_ops(*patterns: ir.Pattern) -> set[str]:
    """The operators the patterns apply."""
    found: set[str] = set()
    stack = list(patterns)
    while stack:
        p = stack.pop()
        if isinstance(p, ir.PApp):
            found.add(p.op)
            stack.extend(p.args)
    return found


def pattern_vars(p: ir.Pattern, out: dict[str, ir.ValueType] | None = None) -> dict[str, ir.ValueType]:
    """`p`'s pattern variables → their types, in order of first appearance (added to `out`)."""
    out = {} if out is None else out
    match p:
        case ir.PVar(name=name, type=t):
            out.setdefault(name, t)
        case ir.PApp(args=args):
            for a in args:
                pattern_vars(a, out)
    return out
