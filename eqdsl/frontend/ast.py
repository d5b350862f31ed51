"""Frozen AST of a `.eqr` file. Every node carries the `Span` it was parsed from.

Terms, patterns and shape/cost/condition arithmetic share one expression syntax; the checker
decides what each expression may contain where it appears.
"""
from __future__ import annotations

from dataclasses import dataclass

from eqdsl.diagnostics import Span


# ---- expressions ----
@dataclass(frozen=True)
class IntLit:
    value: int
    span: Span


@dataclass(frozen=True)
class StrLit:
    value: str
    span: Span


@dataclass(frozen=True)
class Var:
    """A pattern variable `?x` (name without the `?`)."""

    name: str
    span: Span


@dataclass(frozen=True)
class Name:
    """A bare name: a parameter, a `where`/`let` binding or a nullary operator."""

    name: str
    span: Span


@dataclass(frozen=True)
class Call:
    fn: str
    args: tuple[Expr, ...]
    span: Span
    fn_span: Span


@dataclass(frozen=True)
class ListLit:
    items: tuple[Expr, ...]
    span: Span


@dataclass(frozen=True)
class Index:
    base: Expr
    index: Expr
    span: Span


@dataclass(frozen=True)
class Slice:
    base: Expr
    lo: Expr | None
    hi: Expr | None
    span: Span


@dataclass(frozen=True)
class Unary:
    op: str  # "neg" | "not"
    arg: Expr
    span: Span


@dataclass(frozen=True)
class Binary:
    op: str  # add sub cat mul div mod and or
    left: Expr
    right: Expr
    span: Span


@dataclass(frozen=True)
class Compare:
    """A comparison chain `a < b <= c`: means `a < b and b <= c`."""

    operands: tuple[Expr, ...]
    ops: tuple[str, ...]
    span: Span


@dataclass(frozen=True)
class With:
    """`base with [index] = value`: a list with one element replaced."""

    base: Expr
    index: Expr
    value: Expr
    span: Span


@dataclass(frozen=True)
class Field:
    """`base.name`: one field of a two-field analysis value."""

    base: Expr
    name: str
    span: Span


@dataclass(frozen=True)
class Record:
    """`{access: e1, compute: e2}`: a two-field analysis value."""

    entries: tuple[tuple[str, Expr], ...]
    span: Span


Expr = IntLit | StrLit | Var | Name | Call | ListLit | Index | Slice | Unary | Binary | Compare | With | Field | Record


# ---- declarations ----
@dataclass(frozen=True)
class TypeRef:
    name: str
    is_list: bool
    span: Span

    def __str__(self) -> str:
        return f"[{self.name}]" if self.is_list else self.name


@dataclass(frozen=True)
class Param:
    name: str
    type: TypeRef
    span: Span


@dataclass(frozen=True)
class LanguageDecl:
    name: str
    span: Span


@dataclass(frozen=True)
class IncludeDecl:
    target: str
    is_path: bool
    span: Span


@dataclass(frozen=True)
class TargetParamDecl:
    """`param NAME: Int [= default]` — a number the cost rules read, given by the run's target file
    (a target that omits it gets the default)."""

    name: str
    type: TypeRef
    span: Span
    default: int | None = None


@dataclass(frozen=True)
class SortDecl:
    name: str
    fields: tuple[Param, ...]
    span: Span


@dataclass(frozen=True)
class OpDecl:
    name: str
    params: tuple[Param, ...]
    result: str
    span: Span
    result_span: Span
    const: bool = False  # `-> T const`: a value known before the program runs (a weight)


@dataclass(frozen=True)
class Binding:
    name: str
    value: Expr
    span: Span


@dataclass(frozen=True)
class RuleDecl:
    name: str
    lhs: tuple[Expr, ...]
    arrow: str  # "=>" | "<=>"
    rhs: tuple[Expr, ...]
    wheres: tuple[Binding, ...]
    conds: tuple[Expr, ...]
    span: Span
    arrow_span: Span


@dataclass(frozen=True)
class ShapeDecl:
    op: str
    params: tuple[str, ...]
    body: Expr
    requires: tuple[Expr, ...]
    span: Span


@dataclass(frozen=True)
class CostDecl:
    ops: tuple[str, ...]
    params: tuple[str, ...] | None  # None: a constant cost for every op listed
    body: Expr
    span: Span


@dataclass(frozen=True)
class AnalysisDecl:
    """`analysis NAME(x: Sort) -> Type { merge ...; means ...; OP(..) = ...; }`. `merge` is None
    when missing; the name `agree` (`merge agree`) asks that two values of one e-class be equal.
    A rule `OP(a, b) = body require ...` has a shape rule's form (a shape is one analysis)."""

    name: str
    param: str
    sort: str
    type: TypeRef
    merge: Expr | None
    means: Expr | None
    rules: tuple[ShapeDecl, ...]
    span: Span
    sort_span: Span


@dataclass(frozen=True)
class EgglogDecl:
    """`egglog { ... }`: egglog commands passed through verbatim (eqdsl's checks cannot see them)."""

    text: str
    span: Span
    text_line: int  # the line the text starts on


@dataclass(frozen=True)
class LetStmt:
    name: str
    value: Expr
    span: Span


@dataclass(frozen=True)
class RootStmt:
    value: Expr
    span: Span


@dataclass(frozen=True)
class ProgramDecl:
    name: str
    stmts: tuple[LetStmt | RootStmt, ...]
    span: Span


Item = (LanguageDecl | IncludeDecl | SortDecl | OpDecl | RuleDecl | ShapeDecl | CostDecl
        | AnalysisDecl | ProgramDecl | EgglogDecl)


@dataclass(frozen=True)
class Module:
    """One parsed file."""

    file: str
    items: tuple[Item, ...]
