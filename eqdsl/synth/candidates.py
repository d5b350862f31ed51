"""Candidate rules of `eqdsl synthesize`: how two terms of one fingerprint become a rule (oriented,
variables renamed, list values lifted, stably named), its `.eqr` text, whether it is an equation
applied both ways, and the shape conditions a law seen at one shape may need
(`shapes_alike`, then cut per axis by `synthesize._verified`)."""
from __future__ import annotations

import hashlib
from dataclasses import dataclass, fields, is_dataclass, replace
from typing import Any, Callable, cast

from eqdsl import ir
from eqdsl.diagnostics import NO_SPAN
from eqdsl.ir.exprs import pattern_vars
from eqdsl.ir.text import pattern_text
from eqdsl.synth.enumerate import VARIABLE_NAMES, Enumeration, Term, candidates


@dataclass(frozen=True)
class Candidate:
    rule: ir.Rule
    size: int  # operators on both sides
    fingerprint_class: int | None  # the index of the class's first term in the enumeration (None: not enumerated)
    shape: tuple[int, ...] | None = None  # the variables' shape in that enumeration (shaped sorts)
    note: str = ""  # more of where it came from (a goal's pattern count and costs)
    oriented: bool = False  # toward a cheaper form (`eqdsl.synth.goals`): never applied both ways

    @property
    def origin(self) -> str:
        at = f" at shape {list(self.shape)}" if self.shape is not None else ""
        note = f"; {self.note}" if self.note else ""
        found = "" if self.fingerprint_class is None else f", fingerprint class {self.fingerprint_class}"
        return f"size {self.size}{found}{at}{note}"

    @property
    def both_ways(self) -> bool:
        """An equation between two applications over the same variables, without conditions:
        written `<=>` and applied both ways (Ruler's rules are equations), unless the right side
        matches inside the left (`relu(?a) => relu(relu(?a))` would grow without end)."""
        if self.rule.is_multi or self.oriented:
            return False
        lhs, rhs = self.rule.lhs[0], self.rule.rhs[0]
        return not self.rule.wheres and all(_shapes_alike(c) for c in self.rule.conds) and \
            isinstance(rhs, ir.PApp) and variables(rhs) == variables(lhs) and \
            not any(matches(rhs, sub, {}) for sub in _subterms(lhs))

    @property
    def rules(self) -> tuple[ir.Rule, ...]:
        """The rewrites it stands for: its rule, and the rule reversed (named as `<=>` names it)."""
        if not self.both_ways:
            return (self.rule,)
        back = replace(self.rule, name=self.rule.name + "-rev", lhs=cast(tuple[ir.PApp, ...], self.rule.rhs),
                       rhs=self.rule.lhs)
        return (self.rule, back)

    @property
    def text(self) -> str:
        return rule_text(self.rule, "<=>" if self.both_ways else "=>")

    def lines(self) -> list[str]:
        """Its `.eqr` lines: one, or two `=>` rules where an equation has conditions (which
        `<=>` cannot carry)."""
        if not (self.both_ways and self.rule.conds):
            return [f"rule {self.rule.name}: {self.text}  # {self.origin}"]
        return [f"rule {r.name}: {rule_text(r)}  # {self.origin}" for r in self.rules]


def prior_candidates(rules: tuple[ir.Rule, ...], size: Callable[[ir.Rule], int], note: str) -> list[Candidate]:
    """Rules of an earlier rule set as kept candidates that mean what they meant: a `<=>` pair
    (`name`, `name-rev`) one equation where it is still written `<=>`, every other rule one way."""
    by_name = {r.name: r for r in rules}
    found = []
    for rule in rules:
        if rule.name.endswith("-rev") and rule.name.removesuffix("-rev") in by_name:
            continue  # the second half of a pair: taken with the first
        back = by_name.get(rule.name + "-rev")
        equation = Candidate(rule, size(rule), None, note=note)
        if back is not None and equation.both_ways:
            found.append(equation)
        else:
            found.extend(Candidate(r, size(r), None, note=note, oriented=True) for r in (rule, back) if r is not None)
    return found


def _shapes_alike(c: ir.Cond) -> bool:
    return isinstance(c, ir.ExprCond) and isinstance(c.expr, ir.BinOp) and \
        isinstance(c.expr.left, (ir.ShapeOf, ir.IndexOf))


def shapes_alike(lang: ir.Language, candidate: Candidate) -> Candidate | None:
    """The candidate with its shaped variables of one sort required to have one shape (all the
    fingerprints saw: every variable had the enumeration's shape), as TASO writes
    `if shape(?t10) == shape(?t11)`; None where it has fewer than two such variables or has
    conditions already."""
    found: dict[str, ir.ValueType] = {}
    for pattern in candidate.rule.lhs:
        pattern_vars(pattern, found)
    typed = {v: t.name for v, t in found.items() if isinstance(t, ir.SortType)}  # term variables → sorts
    conds: list[ir.Cond] = []
    for sort in dict.fromkeys(typed.values()):
        shape_type = lang.sorts[sort].shape_type
        alike = [v for v, s in typed.items() if s == sort]
        if shape_type is None:
            continue
        conds += [ir.ExprCond(ir.BinOp("eq", ir.ShapeOf(a, shape_type), ir.ShapeOf(b, shape_type), ir.Prim.BOOL))
                  for a, b in zip(alike, alike[1:])]
    if not conds or candidate.rule.conds:
        return None
    rule = replace(candidate.rule, conds=tuple(conds))
    return replace(candidate, rule=replace(rule, name=stable_name(rule)))





def rule_text(rule: ir.Rule, arrow: str = "=>") -> str:
    """A rule as `.eqr` text after `rule NAME:`, on one line (its `where`s and `if`s being those
    synthesis writes: lifted list values, shapes alike, a merge's split point and guard)."""
    text = f"{', '.join(map(pattern_text, rule.lhs))} {arrow} {', '.join(map(pattern_text, rule.rhs))}"
    wheres = [f"{name} = {_expr_text(value)}" for name, value in rule.wheres]
    conds = [_cond_text(c) for c in rule.conds]
    return text + (" where " + ", ".join(wheres) if wheres else "") + (" if " + ", ".join(conds) if conds else "")


def _cond_text(c: ir.Cond) -> str:
    match c:
        case ir.ClassCond(equal=equal, left=left, right=right):
            return f"{pattern_text(left)} {'==' if equal else '!='} {pattern_text(right)}"
        case ir.ExprCond(expr=ir.BinOp(op="eq", left=left, right=right)):
            return f"{_expr_text(left)} == {_expr_text(right)}"
        case ir.ExprCond(expr=ir.AnalysisOf() as guard):
            return _expr_text(guard)
    raise AssertionError(c)


def _expr_text(e: ir.Expr) -> str:
    """The expressions synthesis writes: `?p0`, `[1, 0]`, `shape(?a)`, `shape(t)[1]`,
    `[shape(?f)[0], 1, 1]`."""
    match e:
        case ir.Ref(name=name):
            return name
        case ir.ListOf(items=items):
            return "[" + ", ".join(map(_expr_text, items)) + "]"
        case ir.Const(value=value):
            return str(value)
        case ir.ShapeOf(var=a):
            return f"shape(?{a})"
        case ir.ShapeOfTerm(pattern=p):
            return f"shape({pattern_text(p)})"
        case ir.IndexOf(base=base, index=ir.Const(value=i)):
            return f"{_expr_text(base)}[{i}]"
        case ir.AnalysisOf(analysis=name, pattern=p, unset=None):
            return f"{name}({pattern_text(p)})"
    raise AssertionError(e)


def canonical(rule: ir.Rule) -> ir.Rule:
    """`rule` with its variables named v0, v1, ... in order of first appearance on the left, its
    `where` names w0, w1, ..., no name and no positions: two rules that differ only in names and
    layout are equal."""
    found: dict[str, ir.ValueType] = {}
    for side in rule.lhs:
        pattern_vars(side, found)
    names = {v: f"v{k}" for k, v in enumerate(found)}
    bound = {name: f"w{k}" for k, (name, _) in enumerate(rule.wheres)}

    def one(node: Any) -> Any:
        match node:
            case ir.PVar(name=name):
                return replace(node, name=names.get(name, name))
            case ir.ShapeOf(var=var):
                return replace(node, var=names.get(var, var))
            case ir.PBound(name=name) | ir.Ref(name=name) if name in bound:
                return replace(node, name=bound[name])
            case ir.PApp(op=op, args=args):
                return ir.PApp(op, rewritten(args, one), NO_SPAN)
            case ir.ClassCond(equal=equal, left=left, right=right):
                return ir.ClassCond(equal, rewritten(left, one), rewritten(right, one))
        return None

    wheres = tuple((bound[name], rewritten(value, one)) for name, value in rule.wheres)
    return ir.Rule("", rewritten(rule.lhs, one), rewritten(rule.rhs, one), wheres, rewritten(rule.conds, one),
                   NO_SPAN)


def rule_candidates(found: Enumeration, shape: tuple[int, ...] | None = None) -> list[Candidate]:
    seen: dict[str, Candidate] = {}
    for term, representative in candidates(found):
        rule = _oriented(term, representative)
        if rule is None:
            continue
        candidate = Candidate(rule, term.size + representative.size, found.classes[term.fingerprint], shape)
        seen.setdefault(candidate.text, candidate)
    return sorted(seen.values(), key=cheapest_first)


def cheapest_first(c: Candidate) -> tuple:
    return (c.size, -len(set().union(*map(variables, c.rule.lhs))), c.text)


def _oriented(term: Term, representative: Term) -> ir.Rule | None:
    """`term => representative`, or the other way where only that keeps the right side's
    variables among the left's; None where neither does or the left would be a bare variable."""
    for left, right in ((term.pattern, representative.pattern), (representative.pattern, term.pattern)):
        if isinstance(left, ir.PApp) and variables(right) <= variables(left):
            rule = _lifted(*_renamed((left, right)))
            return replace(rule, name=stable_name(rule))
    return None


def stable_name(rule: ir.Rule) -> str:
    return "syn-" + hashlib.sha1(rule_text(rule).encode()).hexdigest()[:8]


def _lifted(lhs: ir.Pattern, rhs: ir.Pattern) -> ir.Rule:
    """The rule `lhs => rhs` with its list literals (a transpose's `[1, 0]`), which `.eqr`
    patterns cannot hold, lifted out: on the left each is a variable `?pN` with the condition
    `?pN == [1, 0]`, on the right the left's variable of that value, or a `where qN = [1, 0]`."""
    conds: list[ir.Cond] = []
    on_left: dict[tuple, str] = {}

    def left(p: ir.Pattern) -> ir.Pattern:
        match p:
            case ir.PLit(value=tuple() as value):
                name = f"p{len(conds)}"
                same = ir.BinOp("eq", ir.Ref("?" + name, ir.Prim.INTS), _list_of(value), ir.Prim.BOOL)
                conds.append(ir.ExprCond(same))
                on_left.setdefault(value, name)
                return ir.PVar(name, ir.Prim.INTS)
            case ir.PApp(op=op, args=args):
                return ir.PApp(op, tuple(left(a) for a in args), NO_SPAN)
            case _:
                return p

    wheres: list[tuple[str, ir.Expr]] = []

    def right(p: ir.Pattern) -> ir.Pattern:
        match p:
            case ir.PLit(value=tuple() as listed):
                if listed in on_left:
                    return ir.PVar(on_left[listed], ir.Prim.INTS)
                wheres.append((f"q{len(wheres)}", _list_of(listed)))
                return ir.PBound(wheres[-1][0], ir.Prim.INTS)
            case ir.PApp(op=op, args=args):
                return ir.PApp(op, tuple(right(a) for a in args), NO_SPAN)
            case _:
                return p

    new_lhs = left(lhs)
    return ir.Rule("", (cast(ir.PApp, new_lhs),), (right(rhs),), tuple(wheres), tuple(conds), NO_SPAN)


def _list_of(value: tuple) -> ir.ListOf:
    return ir.ListOf(tuple(ir.Const(v, ir.Prim.INT) for v in value))


def rewritten(x: Any, f: Callable[[Any], Any]) -> Any:
    """`x` (a rule's side, `where`s or conditions: patterns, expressions, tuples of them) with each
    node for which `f` gives a value replaced by it, top-down; where `f` gives None, the node
    with its fields rewritten."""
    if (new := f(x)) is not None:
        return new
    if isinstance(x, tuple):
        return tuple(rewritten(item, f) for item in x)
    if is_dataclass(x) and not isinstance(x, type):
        return replace(x, **{fld.name: rewritten(getattr(x, fld.name), f) for fld in fields(x) if fld.init})
    return x


def renamed(x: Any, names: dict[str, str]) -> Any:
    """`x` (a pattern, a rule, a condition) with its term variables renamed by `names` (others kept)."""
    def one(node: Any) -> Any:
        if isinstance(node, ir.PVar):
            return replace(node, name=names.get(node.name, node.name))
        if isinstance(node, ir.ShapeOf):
            return replace(node, var=names.get(node.var, node.var))
        return None

    return rewritten(x, one)


def variables(p: ir.Pattern) -> set[str]:
    return set(pattern_vars(p))


def _subterms(p: ir.Pattern) -> list[ir.Pattern]:
    """The proper subterms of `p` that are applications."""
    if not isinstance(p, ir.PApp):
        return []
    return [q for a in p.args for q in ([a] if isinstance(a, ir.PApp) else []) + _subterms(a)]


def matches(pattern: ir.Pattern, term: ir.Pattern, bound: dict[str, ir.Pattern]) -> bool:
    """Whether `pattern` matches `term`, whose own variables stand for themselves."""
    match pattern:
        case ir.PVar(name=name):
            return bound.setdefault(name, term) == term
        case ir.PApp(op=op, args=args):
            return isinstance(term, ir.PApp) and term.op == op and len(term.args) == len(args) and \
                all(matches(a, b, bound) for a, b in zip(args, term.args))
        case _:
            return pattern == term


def _renamed(sides: tuple[ir.Pattern, ...]) -> tuple[ir.Pattern, ...]:
    """Variables renamed a, b, c in order of first appearance (left side first)."""
    names: dict[str, str] = {}

    def rename(p: ir.Pattern) -> ir.Pattern:
        match p:
            case ir.PVar(name=name, type=t):
                return ir.PVar(names.setdefault(name, VARIABLE_NAMES[len(names)]), t)
            case ir.PApp(op=op, args=args):
                return ir.PApp(op, tuple(rename(a) for a in args), NO_SPAN)
            case _:
                return p

    return tuple(rename(s) for s in sides)


def dimension_by_dimension(c: Candidate, cond: ir.Cond) -> tuple[Candidate, list[ir.Cond]] | None:
    """`c` with `shape(?a) == shape(?b)` replaced by `shape(?a)[i] == shape(?b)[i]` for every
    axis of the enumeration's shape (TASO's `shape(?t7)[1] == shape(?t10)[1]`), and those."""
    assert isinstance(cond, ir.ExprCond) and isinstance(cond.expr, ir.BinOp)
    left, right = cond.expr.left, cond.expr.right
    if not isinstance(left, ir.ShapeOf) or not isinstance(right, ir.ShapeOf) or not c.shape:
        return None
    dims: list[ir.Cond] = [ir.ExprCond(ir.BinOp("eq", _axis(left, i), _axis(right, i), ir.Prim.BOOL))
                           for i in range(len(c.shape))]
    conds = [d for k in c.rule.conds for d in (dims if k is cond else [k])]
    rule = replace(c.rule, conds=tuple(conds))
    return replace(c, rule=replace(rule, name=stable_name(rule))), dims


def _axis(shape: ir.ShapeOf, i: int) -> ir.IndexOf:
    return ir.IndexOf(shape, ir.Const(i, ir.Prim.INT), ir.Prim.INT)


def without_cond(candidate: Candidate, cond: ir.Cond) -> Candidate:
    rule = replace(candidate.rule, conds=tuple(c for c in candidate.rule.conds if c is not cond))
    return replace(candidate, rule=replace(rule, name=stable_name(rule)))
