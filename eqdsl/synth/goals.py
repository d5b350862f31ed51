"""`eqdsl synthesize LANGUAGE --goal PATTERN`: the cheapest verified equivalent of one pattern, as
a rule (issue 61, item 4: rules that pay, for the patterns a corpus holds most often).

Contract: `cheaper_form(lang, sem, goal, costs, space)` enumerates the terms over the goal's own
variables (`eqdsl.synth.enumerate` with `Space.leaves`: each variable at a small stand-in of the
shape it has where the pattern occurs, every distinct size > 1 a distinct small size, in order, so a
kernel stays smaller than its image, and sums kept, so a concat's channels still add up; `[Int]`
parameters take those shapes with axes of size 1 added or dropped), with the goal's operators and
`space.ops`, its `Int` parameters at the values the goal
holds and `space.params`. Where the goal has a constant variable (a weight) as an operand, or any
variable as an operand of an operator of three operands or more, only that variable is
(`Space.places`: a batch norm's four vectors stay where they are, not in every order; a term may be
there): weights keep their roles, which keeps a five-operator form within minutes. The terms whose
values are the goal's (to float32 rounding), each with every operand its class's cheapest term, are
priced with `costs` (the target's cost rules) at the real shapes (`eqdsl.synth.pricing`: what only
constants compute, weights folded before the program runs, at nothing). The cheaper ones are tried
cheapest first: each becomes `goal => term` with its list literals bound in `where`s over the
variables' shapes (`[shape(?f)[0], 1, 1, 1]`) and one condition per variable that ties its shape to
the others' as they were (`shape(?g) == [shape(?s)[0], 1, 1]`); it is verified (`eqdsl.verify`),
each condition then dropped that it passes without, and the first that passes is the result (of the
`TRIES` cheapest), its literal parameters lifted to variables where it holds at every value
(`eqdsl.synth.generalize`: found at a 1×1 convolution, a rule may hold at every stride and
padding). None where no cheaper term exists within `space.size` operators or none verifies.
`stop()` ends the enumeration early (what it found is still priced and verified).
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Callable

import numpy as np

from eqdsl import ir
from eqdsl.cost.model import RuleCosts
from eqdsl.diagnostics import NO_SPAN, EqdslError, Span
from eqdsl.ir.exprs import pattern_ops, pattern_vars
from eqdsl.ir.text import pattern_text
from eqdsl.synth.candidates import Candidate, stable_name, without_cond
from eqdsl.synth.checked import confirmed, passes
from eqdsl.synth.enumerate import Enumeration, Space, Term, application, checked_shape, enumerate_terms
from eqdsl.synth.pricing import Priced, Pricing, best_version, cheapest
from eqdsl.synth.synthesize import generalized_candidate

TRIES = 20  # cheaper forms verified at most, cheapest first


@dataclass(frozen=True)
class Goal:
    pattern: ir.PApp
    shapes: tuple[tuple[str, tuple[int, ...]], ...]  # every shaped variable's shape where the pattern occurs
    constant: frozenset[str] = frozenset()  # variables known before the program runs (weights)
    origin: str = ""  # where the pattern came from (a corpus count), for the rule's comment


@dataclass(frozen=True)
class Form:
    candidate: Candidate
    goal_cost: float  # at the goal's shapes, in the cost rules' unit
    cost: float
    tried: int  # cheaper terms of the goal's class tried before one verified


def cheaper_form(lang: ir.Language, sem: dict[str, Any], goal: Goal, costs: RuleCosts, space: Space,
                 examples: int = 100, stop: Callable[[], bool] = lambda: False) -> Form | None:
    """See the module docstring."""
    small = _stand_ins(goal)
    sorts = {v: t.name for v, t in pattern_vars(goal.pattern).items() if isinstance(t, ir.SortType)}
    leaves = tuple((v, sort, tuple(small[d] for d in dict(goal.shapes)[v])) for v, sort in sorts.items())
    sized = replace(space, leaves=leaves, lists=_lists([shape for _, _, shape in leaves]),
                    ops=tuple(dict.fromkeys((*sorted(pattern_ops(goal.pattern)), *space.ops))),
                    params=_int_params(lang, goal.pattern, space), places=_places(goal.pattern, goal.constant))
    found = enumerate_terms(lang, sem, sized, stop=stop)
    target = _term_of(lang, sem, goal.pattern, found)
    pricing = Pricing(lang, costs, dict(goal.shapes), goal.constant, {s: r for r, s in small.items()})
    goal_cost = pricing.price(goal.pattern).cost
    for k, (form, term) in enumerate(_cheaper(found, target, goal.pattern, pricing, goal_cost)[:TRIES]):
        note = f"{goal.origin}; " if goal.origin else ""
        candidate = Candidate(_rule(lang, goal, form.pattern, leaves), size_of(goal.pattern) + size_of(form.pattern),
                              found.classes[term.fingerprint], note=f"{note}cost {goal_cost:,.0f} -> {form.cost:,.0f}",
                              oriented=True)
        passed = _weakest(lang, sem, candidate, examples)
        if passed is not None:
            return Form(generalized_candidate(lang, sem, passed, examples), goal_cost, form.cost, k + 1)
    return None


def _cheaper(found: Enumeration, target: Term, goal: ir.Pattern, pricing: Pricing,
             goal_cost: float) -> list[tuple[Priced, Term]]:
    """The terms of the goal's classes built from their operands' cheapest terms, each with the
    term it came from, cheaper than the goal, cheapest first."""
    best, class_of = cheapest(found, pricing)
    alike, shown = _close_classes(found, target), pattern_text(goal)
    forms: dict[str, tuple[Priced, Term]] = {}
    for term in found.terms:
        if term.fingerprint in alike and isinstance(term.pattern, ir.PApp):
            form = best_version(term.pattern, best, class_of, pricing)
            if form.cost < goal_cost and pattern_text(form.pattern) != shown:
                forms.setdefault(pattern_text(form.pattern), (form, term))
    return [forms[text] for text in sorted(forms, key=lambda text: (forms[text][0].cost, len(text), text))]


def _close_classes(found: Enumeration, target: Term) -> set[tuple]:
    """The fingerprints of the classes whose values are the goal's up to float32 rounding (the
    reference semantics compute in float32: a Conv over scaled weights differs from the scaled Conv
    in the 8th digit, where fingerprints, rounded to 9, tell them apart)."""
    alike = {target.fingerprint}
    if not isinstance(target.values, np.ndarray):
        return alike
    for index in found.classes.values():
        term = found.terms[index]
        if isinstance(term.values, np.ndarray) and term.values.shape == target.values.shape and \
                term.holes == target.holes and np.allclose(term.values, target.values, rtol=1e-5, atol=1e-6):
            alike.add(term.fingerprint)
    return alike


def _stand_ins(goal: Goal) -> dict[int, int]:
    """Real size → small size: 1 stays 1, the others the smallest sizes from 2 up, in order, that
    keep every sum of two or three real sizes that is a real size (a concat's channels: 32, 64 and
    96 become 2, 4 and 6, not 2, 3 and 4); where none within `STAND_IN_MAX` does, 2, 3, 4, ... in order."""
    sizes = sorted({d for _, shape in goal.shapes for d in shape if d != 1})
    sums = [(parts, total) for total in sizes for parts in _parts(sizes, total)]
    chosen = _smallest_keeping(sizes, sums, {}, 2, [SEARCH_STEPS]) or {d: k + 2 for k, d in enumerate(sizes)}
    return {1: 1} | chosen


STAND_IN_MAX = 24  # the largest stand-in size (a product of a few such sizes stays fast to evaluate)
SEARCH_STEPS = 20_000  # stand-ins tried at most before giving up on keeping the sums


def _parts(sizes: list[int], total: int) -> list[tuple[int, ...]]:
    """The ways `total` is a sum of two or three of `sizes` (repeats allowed), each in order."""
    below = [d for d in sizes if d < total]
    pairs = [(a, total - a) for a in below if a <= total - a and total - a in below]
    return pairs + [(a, b, total - a - b) for a in below for b in below
                    if a <= b <= total - a - b and total - a - b in below]


def _smallest_keeping(sizes: list[int], sums: list[tuple[tuple[int, ...], int]], chosen: dict[int, int],
                      lowest: int, steps: list[int]) -> dict[int, int] | None:
    """Stand-ins for `sizes` (in order, strictly increasing from `lowest`) that keep `sums`;
    the smallest such, by depth-first search; None if none within `STAND_IN_MAX` or `steps[0]` tries."""
    if len(chosen) == len(sizes):
        return dict(chosen)
    size = sizes[len(chosen)]
    for value in range(lowest, STAND_IN_MAX + 1):
        steps[0] -= 1
        if steps[0] < 0:
            return None
        chosen[size] = value
        if all(sum(chosen[p] for p in parts) == chosen[total] for parts, total in sums
               if total in chosen and all(p in chosen for p in parts)):
            found = _smallest_keeping(sizes, sums, chosen, value + 1, steps)
            if found is not None:
                return found
        del chosen[size]
    return None


def _lists(shapes: list[tuple[int, ...]]) -> tuple[tuple[int, ...], ...]:
    """The variables' shapes, with axes of size 1 dropped and added up to rank 4 (a per-channel
    [C, 1, 1] as [C] and [C, 1, 1, 1])."""
    found: dict[tuple[int, ...], None] = {}
    for shape in shapes:
        core = tuple(d for d in shape if d != 1)
        for s in (shape, core, *(core + (1,) * k for k in range(1, 4 - len(core) + 1))):
            if s:
                found.setdefault(s)
    return tuple(found)


def _int_params(lang: ir.Language, pattern: ir.Pattern, space: Space) -> tuple[tuple[str, tuple[int, ...]], ...]:
    """An `Int` parameter the goal gives a value takes its values there and those `space.params`
    names; any other those of `space.ints_for`."""
    values: dict[str, set[int]] = {name: set(v) for name, v in space.params}

    def walk(p: ir.Pattern) -> None:
        if isinstance(p, ir.PApp):
            for param, a in zip(lang.ops[p.op].params, p.args):
                if isinstance(a, ir.PLit) and a.type == ir.Prim.INT:
                    values.setdefault(param.name, set()).add(int(a.value))
                walk(a)

    walk(pattern)
    ints = {p.name for op in lang.ops.values() for p in op.params if p.type == ir.Prim.INT}
    return tuple((name, tuple(sorted(values.get(name, space.ints_for(name))))) for name in sorted(ints))


def _places(p: ir.Pattern, constant: frozenset[str]) -> tuple[tuple[str, int, str], ...]:
    """Where the goal has a constant variable as an operand, or any variable as an operand of an
    operator of three operands or more."""
    if not isinstance(p, ir.PApp):
        return ()
    many = sum(not isinstance(a, ir.PLit) for a in p.args) > 2
    own = tuple((p.op, i, a.name) for i, a in enumerate(p.args)
                if isinstance(a, ir.PVar) and (many or a.name in constant))
    return own + tuple(place for a in p.args for place in _places(a, constant))


def _term_of(lang: ir.Language, sem: dict[str, Any], p: ir.Pattern, found: Enumeration) -> Term:
    """The goal as a term over the enumeration's variables (their samples)."""
    match p:
        case ir.PVar(name=name):
            return next(t for t in found.terms if isinstance(t.pattern, ir.PVar) and t.pattern.name == name)
        case ir.PLit(value=value):
            return value  # type: ignore[return-value]
        case ir.PApp(op=op, args=args):
            term = application(lang, sem, lang.ops[op], [_term_of(lang, sem, a, found) for a in args],
                               size_of(p), found.samples)
            if term is None:
                raise EqdslError.one(f"synthesize: the goal's subterm {pattern_text(p)} is ill-shaped at the "
                                     "shapes given", path="--goal")
            return term
    raise EqdslError.one(f"synthesize: a goal holds variables, literals and operators; found {pattern_text(p)}",
                         path="--goal")


def size_of(p: ir.Pattern) -> int:
    """The operators in `p`."""
    return 1 + sum(size_of(a) for a in p.args) if isinstance(p, ir.PApp) else 0


def _rule(lang: ir.Language, goal: Goal, rhs: ir.Pattern, leaves: tuple) -> ir.Rule:
    """`goal => rhs`: list literals bound over the variables' shapes, one condition per variable."""
    first: dict[int, ir.Expr] = {}
    shape_of = {v: ir.ShapeOf(v, lang.sorts[sort].shape_type) for v, sort, _ in leaves}  # type: ignore[arg-type]
    conds: list[ir.Cond] = []
    for v, _, shape in leaves:
        items = []
        for j, d in enumerate(shape):
            own = ir.IndexOf(shape_of[v], ir.Const(j, ir.Prim.INT), ir.Prim.INT)
            items.append(ir.Const(1, ir.Prim.INT) if d == 1 else first.setdefault(d, own))
        if not items or any(not (isinstance(i, ir.IndexOf) and i.base == shape_of[v]) for i in items):
            conds.append(ir.ExprCond(ir.BinOp("eq", shape_of[v], ir.ListOf(tuple(items)), ir.Prim.BOOL)))
    wheres: list[tuple[str, ir.Expr]] = []
    named: dict[tuple, str] = {}  # one `where` per list value

    def bound(p: ir.Pattern) -> ir.Pattern:
        match p:
            case ir.PLit(value=tuple() as small):  # a permutation holds a 0, a shape never
                if small not in named:
                    named[small] = f"q{len(wheres)}"
                    wheres.append((named[small], ir.ListOf(tuple(
                        ir.Const(d, ir.Prim.INT) if d == 1 or 0 in small else first[d] for d in small))))
                return ir.PBound(named[small], ir.Prim.INTS)
            case ir.PApp(op=op, args=args):
                return ir.PApp(op, tuple(bound(a) for a in args), NO_SPAN)
        return p

    lhs = _unspanned(goal.pattern)
    rule = ir.Rule("", (lhs,), (bound(rhs),), tuple(wheres), tuple(conds), NO_SPAN)
    return replace(rule, name=stable_name(rule))


def _unspanned(p: ir.Pattern) -> Any:
    return ir.PApp(p.op, tuple(_unspanned(a) for a in p.args), NO_SPAN) if isinstance(p, ir.PApp) else p


def _weakest(lang: ir.Language, sem: dict[str, Any], candidate: Candidate, examples: int) -> Candidate | None:
    """The candidate if it passes `verify`, each condition dropped that it passes without (and the
    result confirmed, `checked.confirmed`); else None."""
    if not passes(lang, sem, candidate, examples, 0):
        return None
    for cond in candidate.rule.conds:
        weaker = without_cond(candidate, cond)
        if passes(lang, sem, weaker, examples, 0):
            candidate = weaker
    return candidate if confirmed(lang, sem, candidate, examples) else None


_GOAL_PREFIX = "rule goal: "


def _located_in_goal(err: EqdslError, goal: str) -> EqdslError:
    """`err` of the wrapped goal, its spans moved into the `--goal` text (its line 3 is the goal)."""
    moved = []
    for d in err.diagnostics:
        span = d.span
        if span is not None and span.file == "--goal":
            if span.line != 3 and not d.message.startswith("syntax error"):
                continue  # the right side repeats the left: its errors are the same
            if span.line != 3:  # the goal ended early: the parser went on into the wrapper's next line
                d = replace(d, message=d.message.split(", found ")[0] + ", found the end of the goal")
            col = max(1, span.col - len(_GOAL_PREFIX)) if span.line == 3 else len(goal) + 1
            d = replace(d, span=replace(span, line=1, col=col, end_line=1,
                                        end_col=max(col, span.end_col - len(_GOAL_PREFIX))))
        moved.append(d)
    return EqdslError(moved or err.diagnostics)


def read_goal(lang: ir.Language, text: str, shapes: dict[str, tuple[int, ...]], constant: set[str]) -> Goal:
    """`--goal TEXT` in `lang`, checked as a rule's left side is, with its variables' shapes."""
    from pathlib import Path

    from eqdsl.frontend import check_modules, load_modules
    from eqdsl.frontend.parse import parse_text

    if (at := text.find("=>")) >= 0 or (at := text.find("\n")) >= 0:
        raise EqdslError.one(f"syntax error: expected one pattern on one line, found {text[at:at + 2]!r}",
                             Span("--goal", 1, at + 1))
    file = lang.lineage[-1][1]
    source = f'language goal-of-{lang.name}\ninclude "{file}"\n{_GOAL_PREFIX}{text}\n=> {text}\n'
    try:
        checked = check_modules([*load_modules(Path(file)), parse_text(source, "--goal")])
    except EqdslError as err:
        raise _located_in_goal(err, text) from None
    pattern = next(r for r in checked.rules if r.name == "goal").lhs[0]
    typed = pattern_vars(pattern)
    shaped = [v for v, t in typed.items() if isinstance(t, ir.SortType) and lang.sorts[t.name].shape_type]
    missing, unknown = [v for v in shaped if v not in shapes], sorted(set(shapes) - set(typed))
    if not shaped:
        raise EqdslError.one(f"synthesize --goal: expected a goal with a variable of a sort with shapes (the goal's "
                             f"cost depends on them), found none in {text}; without --goal, synthesize "
                             f"enumerates {lang.name}'s rules", path="--goal")
    if missing or unknown:
        found = f"missing ?{', ?'.join(missing)}" if missing else \
            f"?{', ?'.join(unknown)} not in the goal"
        raise EqdslError.one(f"synthesize --goal: expected --at NAME=d0,d1,... for every variable of the goal "
                             f"with a shape ({', '.join('?' + v for v in shaped) or 'none'}); {found}", path="--at")
    if not constant <= set(typed):
        raise EqdslError.one(f"synthesize --goal: --constant names ?{', ?'.join(sorted(constant - set(typed)))}, "
                             f"not a variable of the goal", path="--constant")
    return Goal(pattern, tuple((v, checked_shape(shapes[v], "--at")) for v in shaped), frozenset(constant))
