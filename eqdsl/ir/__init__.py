"""The IR every stage shares: frozen dataclasses for languages, rules, expressions and programs
(`nodes`), helpers over expressions (`exprs`), the concrete evaluator (`evaluate`), and a graph
builder for programs (`builder`). Nothing here knows egglog, the `.eqr` syntax or extraction.

`from eqdsl import ir` then `ir.Operator`, `ir.Program`, …: the node types are re-exported here.
"""
from eqdsl.ir.nodes import (
    MAX_RANK,
    Analysis,
    AnalysisOf,
    BinOp,
    Builtin,
    Child,
    ClassCond,
    Cond,
    Const,
    CostRule,
    Expr,
    ExprCond,
    FieldOf,
    IndexOf,
    Language,
    ListOf,
    Operator,
    PApp,
    Param,
    Pattern,
    PBound,
    PLit,
    Prim,
    Program,
    PVar,
    Ref,
    Replace,
    Rule,
    ShapeOf,
    ShapeOfTerm,
    ShapeRule,
    SliceOf,
    Sort,
    SortType,
    TargetParam,
    TermNode,
    UnOp,
    ValueType,
)

__all__ = [
    'Prim', 'MAX_RANK', 'SortType', 'ValueType', 'Sort', 'Param', 'Operator', 'Const', 'Ref',
    'ShapeOf', 'ShapeOfTerm', 'Builtin', 'BinOp', 'UnOp', 'ListOf', 'IndexOf', 'SliceOf', 'FieldOf',
    'Replace', 'Expr', 'PVar', 'PLit', 'PBound', 'PApp', 'Pattern', 'ExprCond', 'ClassCond',
    'Cond', 'Rule', 'ShapeRule', 'TargetParam', 'CostRule', 'TermNode', 'Child', 'Program',
    'Language', 'Analysis', 'AnalysisOf',
]
