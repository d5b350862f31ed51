"""The resolved, data-only IR the checker produces and every later stage consumes.

Nothing here has behaviour beyond small derived properties: passes `match` on these classes and
end with `assert_never`.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from eqdsl.diagnostics import Span


class Prim(Enum):
    INT = "Int"
    STR = "Str"
    BOOL = "Bool"
    INTS = "[Int]"


Value = int | str | bool | tuple[int, ...]  # a Prim's value: Int, Str, Bool, [Int]

MAX_RANK = 8  # shape builtins (prod, broadcasts, permute, is_perm) unroll to this many axes in egglog

@dataclass(frozen=True)
class SortType:
    name: str


ValueType = Prim | SortType


@dataclass(frozen=True)
class Sort:
    name: str
    shape_type: Prim | None  # the analysis value every e-class of this sort carries, if any
    span: Span
    # names of a two-field analysis value ([Int] each, stored as one list: see FieldOf); () for
    # the usual single `shape` field
    fields: tuple[str, ...] = ()

    @property
    def holds_vectors(self) -> bool:
        """An `Int` shape: the sort's values are vectors and its shape is their length (how verify,
        synthesize and check draw and compare them)."""
        return self.shape_type == Prim.INT

    def dims(self, shape: Any) -> Any:
        """The dimensions of a value whose shape is `shape`: a vector's length n is (n,)."""
        return (shape,) if self.holds_vectors and isinstance(shape, int) else shape

    def shape_of_dims(self, dims: tuple[int, ...]) -> Any:
        """The shape of a value of these dimensions: `dims`' inverse."""
        return dims[0] if self.holds_vectors else dims


@dataclass(frozen=True)
class Param:
    name: str
    type: ValueType


@dataclass(frozen=True)
class Operator:
    name: str
    params: tuple[Param, ...]
    result: str
    span: Span
    const: bool = False  # its values are known ahead of time (weights): see extract.live

    @property
    def arity(self) -> int:
        return len(self.params)


# ---- typed expressions (shape rules, requirements, conditions, where bindings, costs) ----
@dataclass(frozen=True)
class Const:
    value: int | str | bool
    type: Prim


@dataclass(frozen=True)
class Ref:
    """A named value in scope: an operator parameter, a child's shape, a `where` binding, `out`."""

    name: str
    type: Prim


@dataclass(frozen=True)
class ShapeOf:
    """`shape(?x)` in a rule: the analysis value of the e-class bound to ?x."""

    var: str
    type: Prim


@dataclass(frozen=True)
class ShapeOfTerm:
    """`shape(t)` in a rule, for a term t built from pattern variables (a right-side subterm)."""

    pattern: Pattern
    type: Prim


@dataclass(frozen=True)
class Builtin:
    fn: str  # len prod min max
    args: tuple[Expr, ...]
    type: Prim


@dataclass(frozen=True)
class BinOp:
    op: str  # add sub mul div mod cat and or eq ne lt le gt ge
    left: Expr
    right: Expr
    type: Prim


@dataclass(frozen=True)
class UnOp:
    op: str  # neg not
    arg: Expr
    type: Prim


@dataclass(frozen=True)
class ListOf:
    items: tuple[Expr, ...]
    type: Prim = Prim.INTS


@dataclass(frozen=True)
class IndexOf:
    base: Expr
    index: Expr
    type: Prim = Prim.INT


@dataclass(frozen=True)
class SliceOf:
    """`base[lo:hi]`; bounds are constant ints (negative counts from the end) or None."""

    base: Expr
    lo: int | None
    hi: int | None
    type: Prim = Prim.INTS


@dataclass(frozen=True)
class Replace:
    base: Expr
    index: Expr
    value: Expr
    type: Prim = Prim.INTS


@dataclass(frozen=True)
class FieldOf:
    """Field `index` (0 or 1) of a two-field analysis value (`sort A { access: [Int], compute:
    [Int] }`). Such a value is stored as one list, `[len(field 0)] ++ field 0 ++ field 1`, so field 0
    is `base[1 : 1 + base[0]]` and field 1 is `base[1 + base[0]:]`."""

    base: Expr
    index: int
    type: Prim = Prim.INTS


@dataclass(frozen=True)
class AnalysisOf:
    """`NAME(?x)` or `NAME(t)` in a rule: the value of analysis NAME of the e-class bound to ?x (or
    of a left-side term t). Reading it makes the rule match only where that value is set.
    In a cost rule, `NAME(a)` or `NAME(a, default)`: the value of the e-class of operand `a` (a
    `PVar` named after the parameter, or `out` for the node's own class), and `unset` what it reads
    where that value is not set (a cost is always defined)."""

    analysis: str
    pattern: Pattern
    type: Prim
    unset: Expr | None = None


Expr = (Const | Ref | ShapeOf | ShapeOfTerm | AnalysisOf | Builtin | BinOp | UnOp | ListOf | IndexOf | SliceOf
        | Replace | FieldOf)


# ---- patterns and rules ----
@dataclass(frozen=True)
class PVar:
    name: str
    type: ValueType


@dataclass(frozen=True)
class PLit:
    value: int | str
    type: Prim


@dataclass(frozen=True)
class PBound:
    """A `where` binding used on a right side."""

    name: str
    type: Prim


@dataclass(frozen=True)
class PApp:
    op: str
    args: tuple[Pattern, ...]
    span: Span


Pattern = PVar | PLit | PBound | PApp


@dataclass(frozen=True)
class ExprCond:
    expr: Expr


@dataclass(frozen=True)
class ClassCond:
    """`?x == t` / `?x != t`: e-class (in)equality. `==` holds only of equal values (sound rules
    union only those); `!=` is "not known equal now" and says nothing about values."""

    equal: bool
    left: Pattern
    right: Pattern
    span: Span | None = None


Cond = ExprCond | ClassCond


@dataclass(frozen=True)
class Rule:
    name: str
    lhs: tuple[PApp, ...]
    rhs: tuple[Pattern, ...]
    wheres: tuple[tuple[str, Expr], ...]
    conds: tuple[Cond, ...]
    span: Span

    @property
    def is_multi(self) -> bool:
        return len(self.lhs) > 1


@dataclass(frozen=True)
class ShapeRule:
    op: str
    params: tuple[str, ...]
    body: Expr
    requires: tuple[Expr, ...]
    span: Span


@dataclass(frozen=True)
class TargetParam:
    name: str
    type: Prim
    span: Span
    default: int | None = None  # the value for a target that does not give one


@dataclass(frozen=True)
class CostRule:
    op: str
    params: tuple[str, ...]
    body: Expr
    span: Span

    @property
    def constant(self) -> float | None:
        return float(self.body.value) if isinstance(self.body, Const) else None


@dataclass(frozen=True)
class Analysis:
    """An e-class analysis over one sort (egglog: a partial function with a merge). `merge` reads
    `Ref("old")` and `Ref("new")`; None means the two values must agree (two different values for
    one e-class are an error: some rule united terms whose values differ). `means` reads
    `Ref(name)` (the analysis value) and `Ref(param)` (the term's value): what a value says of the
    terms it is set for; `eqdsl verify` checks it against the reference semantics. A rule has a
    shape rule's form: the value of an `op` application from its parameters (an analysed child's
    value, a literal parameter's value), not set where a child's value is unset or a `require`
    is false."""

    name: str
    sort: str
    param: str
    type: Prim
    merge: Expr | None
    means: Expr
    rules: dict[str, ShapeRule]
    span: Span


# ---- programs ----
@dataclass(frozen=True)
class TermNode:
    """One node of a program DAG; `args` are literals or indices of earlier nodes (`Child`)."""

    op: str
    args: tuple[Child | int | str | tuple[int, ...], ...]


@dataclass(frozen=True)
class Child:
    index: int


@dataclass(frozen=True)
class Program:
    name: str
    nodes: tuple[TermNode, ...]  # topologically ordered: children before parents
    roots: tuple[int, ...]
    span: Span


@dataclass(frozen=True)
class Language:
    name: str
    sorts: dict[str, Sort]
    ops: dict[str, Operator]
    rules: tuple[Rule, ...]
    shapes: dict[str, ShapeRule]
    costs: dict[str, CostRule]
    programs: dict[str, Program] = field(default_factory=dict)
    params: dict[str, TargetParam] = field(default_factory=dict)  # set by a target
    # (language name, .eqr file) of this language and every language it includes, included first:
    # where reference semantics are looked up (eqdsl.verify.semantics)
    lineage: tuple[tuple[str, str], ...] = ()
    # `egglog { ... }` blocks: (text, the .eqr span of its first line), appended verbatim
    egglog: tuple[tuple[str, Span], ...] = ()
    analyses: dict[str, Analysis] = field(default_factory=dict)

    def holds_vectors(self, t: ValueType) -> bool:
        """`t` is a sort with an `Int` shape (Sort.holds_vectors)."""
        return isinstance(t, SortType) and self.sorts[t.name].holds_vectors

    @property
    def single_rules(self) -> tuple[Rule, ...]:
        return tuple(r for r in self.rules if not r.is_multi)

    @property
    def multi_rules(self) -> tuple[Rule, ...]:
        return tuple(r for r in self.rules if r.is_multi)
