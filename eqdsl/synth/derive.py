"""`eqdsl derive A B`: which rules of B the rules of A prove by equality saturation (Ruler's
derivability, the yardstick of rule synthesis).

Contract: `derive(a, b, limits)` returns one `Derivation` per rule of `b`, in order. A rule is
instantiated once: its variables get sizes that meet every shape requirement of both sides and its
conditions (the sizes `eqdsl verify` draws, `verify.examples.ExampleSpace`, from distinct hints so
that no dimension coincides by chance, and at ranks `a`'s leaf operators make), each term variable
becomes a fresh leaf of its sort (a leaf operator of `a` with a name parameter, `input("?x", [2,
3])`), and its left and right sides are loaded into a fresh e-graph of `a`'s rules. The e-graph
grows under `limits` (multi-pattern rules in the first `k_multi` iterations, as `schedule.k_multi`)
until every left side shares its e-class with its right side (`DERIVED`), or a limit or saturation
ends it (`NOT_DERIVED`). A rule that cannot be instantiated (no valid sizes, no leaf operator for a
sort, an operator `a` lacks) is `NOT_INSTANTIABLE` with the reason and counts as not derived,
unless `a` holds the rule itself, up to names (`synth.candidates.canonical`): then it is `DERIVED`
in one step, by that rule (a rule that reads analysis values, as a constant fold does, has no
instance of fresh leaves). A guard `if G(?x)` of a Bool analysis is assumed instead: `a`'s analysis
G is set true on ?x's fresh leaf (the proof then holds wherever G holds of ?x); other reads of
analyses make a rule uninstantiable. Sound rules in `a` derive only sound equalities: a `DERIVED`
verdict is a proof within `a`'s rules (egglog unions nothing else).
"""
from __future__ import annotations

import time
from dataclasses import dataclass, replace
from enum import Enum
from typing import Any, Callable, Sequence

from eqdsl import ir
from eqdsl.diagnostics import EqdslError
from eqdsl.egglog.lower import Facts, lower_language, rule_command
from eqdsl.egglog.session import EGraphSession
from eqdsl.ir.builder import GraphBuilder, Tensor
from eqdsl.ir.exprs import pattern_ops
from eqdsl.schedule.runner import LimitedLoop, Limits
from eqdsl.synth.candidates import canonical
from eqdsl.verify.analyses import reads_analyses
from eqdsl.verify.examples import DISTINCT_HINTS, Assignment, Concrete, ExampleSpace
from eqdsl.verify.leaves import leaf_args


class Verdict(Enum):
    DERIVED = "derived"
    NOT_DERIVED = "not derived"
    NOT_INSTANTIABLE = "not instantiable"


@dataclass(frozen=True)
class Derivation:
    rule: str
    verdict: Verdict
    iterations: int = 0
    nodes: int = 0
    seconds: float = 0.0
    why: str = ""  # NOT_DERIVED: the limit that ended it; NOT_INSTANTIABLE: the reason


_GROUPS = ("all", "single")  # the lowered language's groups: every rule, the single-pattern ones


class _Uninstantiable(Exception):
    pass


class _UnitCosts:
    """Derivation reads no costs: every node priced 1."""

    def price(self, requests: Sequence[Any]) -> list[float]:
        return [1.0] * len(requests)


def own_rules(lang: ir.Language) -> ir.Language:
    """`lang` with only the rules written in its own file (a ruleset's, not those it includes)."""
    own = lang.lineage[-1][1] if lang.lineage else None
    return replace(lang, rules=tuple(r for r in lang.rules if own is None or r.span.file == own))


class Prover:
    """An e-graph of `a`'s rules, declared once, in which rules are derived one after another
    (each in its own egglog push, undone after). `add` grows `a` by a single-pattern rule where
    `a` started without any (its `single` group is then a plain ruleset that takes rules).
    `prove(..., among=rules)` derives with only those of the rules `a` was declared with (each
    lowered rule is its own egglog ruleset: a subset is a combined ruleset, not a new e-graph)."""

    def __init__(self, a: ir.Language, limits: Limits, k_multi: int = 1) -> None:
        self.a, self.limits, self.k_multi = a, limits, k_multi
        self.session = EGraphSession(lower_language(a), _UnitCosts())  # 0.7 s for TASO's rules
        self._grows = not a.single_rules
        self._subsets = 0

    def add(self, rule: ir.Rule) -> None:
        """`a` with `rule` too (declared into the e-graph, not the whole language again)."""
        if rule.is_multi or not self._grows:
            raise ValueError(f"Prover.add: {rule.name} is multi-pattern, or the prover began with rules")
        self.a = replace(self.a, rules=(*self.a.rules, rule))
        self.session.add_rule(rule_command(self.a, rule, "single"))

    def derived_together(self, b: ir.Language, rules: Sequence[ir.Rule],
                         hints: tuple[int, ...] = DISTINCT_HINTS) -> list[bool]:
        """Which of `rules` (single-pattern, of `b`) `a` derives with all their instances in one
        e-graph (Ruler's batch: one saturation instead of one per rule; leaves of one name and
        shape are shared, which keeps every union a proof). True is a proof; False says only
        that the limits, shared by the whole batch, ended it first."""
        builder = GraphBuilder(self.a)
        roots: list[Tensor] = []
        pairs: list[tuple[int, tuple[int, int]]] = []
        for k, rule in enumerate(rules):
            try:
                sides, assumed = _instance_roots(self.a, b, rule, builder, hints)
            except _Uninstantiable:
                continue
            if len(sides) == 2 and not assumed:  # an assumption would hold for the whole batch
                pairs.append((k, (len(roots), len(roots) + 1)))
                roots += sides
        if not pairs:
            return [False] * len(rules)
        program = builder.program("derive_batch", roots)
        sorts = [self.a.ops[program.nodes[program.roots[i]].op].result for _, (i, _) in pairs]
        base = self.session.depth
        self.session.push()
        try:
            self.session.load(program)
            everything = [pair for _, pair in pairs]
            _grow_until(self.session, self.limits, self.k_multi, lambda: self.session.roots_joined(everything, sorts))
            joined = {k for (k, pair), sort in zip(pairs, sorts) if self.session.roots_joined([pair], [sort])}
        finally:
            while self.session.depth > base:
                self.session.pop()
        return [k in joined for k in range(len(rules))]

    def prove(self, b: ir.Language, rule: ir.Rule, hints: tuple[int, ...] = DISTINCT_HINTS,
              among: Sequence[ir.Rule] | None = None) -> Derivation:
        """`rule` (of language `b`) derived with `a`'s rules (only those `among`, where given), or
        why not (its instance drawn near `hints`: another instance for a second opinion)."""
        groups = _GROUPS if among is None else self._subset(among)
        base = self.session.depth
        self.session.push()
        try:
            return derive_rule(self.a, b, rule, self.session, self.limits, self.k_multi, hints, groups)
        finally:
            while self.session.depth > base:  # this rule's e-graph, and the loop's own pushes, undone
                self.session.pop()

    def _subset(self, rules: Sequence[ir.Rule]) -> tuple[str, str]:
        """(all, single): rulesets of `rules`, which `a` was declared with, as `_GROUPS` are of all."""
        if self.session.depth or any(r.name not in self.session.lowered.rulesets for r in rules):
            raise ValueError("Prover.prove(among=...): inside a push, or a rule `a` was not declared with")
        self._subsets += 1
        name = f"among_{self._subsets}"
        self.session.define_ruleset(f"{name}_all", [r.name for r in rules])
        self.session.define_ruleset(f"{name}_single", [r.name for r in rules if not r.is_multi])
        return f"{name}_all", f"{name}_single"


def derive(a: ir.Language, b: ir.Language, limits: Limits, k_multi: int = 1,
           progress: Callable[[int, int, Derivation], None] = lambda done, total, d: None) -> list[Derivation]:
    prover = Prover(a, limits, k_multi)
    found = []
    for k, rule in enumerate(b.rules):
        found.append(prover.prove(b, rule))
        progress(k + 1, len(b.rules), found[-1])
    return found


def derive_rule(a: ir.Language, b: ir.Language, rule: ir.Rule, session: EGraphSession, limits: Limits,
                k_multi: int = 1, hints: tuple[int, ...] = DISTINCT_HINTS,
                groups: tuple[str, str] = _GROUPS) -> Derivation:
    """`rule` in `session`, an e-graph of `a`'s rules holding nothing yet (see the contract), grown
    by `groups` (all the rules, then the single-pattern ones: `_grow_until`)."""
    t0 = time.perf_counter()
    try:
        program, facts = instance(a, b, rule, hints)
    except _Uninstantiable as why:
        same = next((r.name for r in a.rules if canonical(r) == canonical(rule)), None)
        if same is not None:
            return Derivation(rule.name, Verdict.DERIVED, seconds=time.perf_counter() - t0,
                              why=f"{a.name}'s rule {same} is this rule; {why}")
        return Derivation(rule.name, Verdict.NOT_INSTANTIABLE, seconds=time.perf_counter() - t0, why=str(why))
    session.load(program, facts)
    pairs = [(k, k + len(rule.lhs)) for k in range(len(rule.lhs))]
    sorts = [a.ops[program.nodes[program.roots[i]].op].result for i, _ in pairs]
    iterations, stop = _grow_until(session, limits, k_multi, lambda: session.roots_joined(pairs, sorts), groups)
    verdict = Verdict.DERIVED if stop is None else Verdict.NOT_DERIVED
    return Derivation(rule.name, verdict, iterations, session.size(), time.perf_counter() - t0,
                      "" if stop is None else stop.value)


def _grow_until(session: EGraphSession, limits: Limits, k_multi: int, done: Callable[[], bool],
                groups: tuple[str, str] = _GROUPS) -> tuple[int, Any]:
    """Iterate `session`'s rules under `limits` until `done()`, the first `k_multi` iterations with
    `groups[0]` (multi-pattern rules too), then `groups[1]`: (iterations, None), or (iterations,
    the limit or saturation that ended it first)."""
    loop = LimitedLoop(session, limits, count_classes=False)
    loop.check_start()
    while not done():
        stop = loop.check_before()
        if stop is None:
            stop = loop.iterate(groups[0] if len(loop.reports) < k_multi else groups[1])
        if stop is not None:
            return len(loop.reports), None if done() else stop  # the last iteration may have done it
    return len(loop.reports), None


# ---- instantiation --------------------------------------------------------------------------------

def instance(a: ir.Language, b: ir.Language, rule: ir.Rule,
             hints: tuple[int, ...] = DISTINCT_HINTS) -> tuple[ir.Program, Facts]:
    """The program whose roots are the rule's left sides, then its right sides, over fresh leaves,
    and what its guards assume of them."""
    builder = GraphBuilder(a)
    roots, facts = _instance_roots(a, b, rule, builder, hints)
    return builder.program(f"derive_{rule.name}", roots), facts


def _instance_roots(a: ir.Language, b: ir.Language, rule: ir.Rule, builder: GraphBuilder,
                    hints: tuple[int, ...]) -> tuple[list[Tensor], Facts]:
    for op in pattern_ops(*rule.lhs, *rule.rhs):
        if op not in a.ops:
            raise _Uninstantiable(f"operator {op!r} is not in language {a.name}")
    space = ExampleSpace(b, rule)
    guards = _assumed_guards(a, rule) if space.analysed_rule is not space.rule else []
    # sizes every fresh leaf can have (a leaf operator may fix a rank the rule leaves open), else
    # any valid sizes, whose missing leaf is then the reason given
    sized = space.distinct(hints, accept=lambda sizes: _leaves_exist(a, space.vars, sizes)) or space.distinct(hints)
    if sized is None:
        raise _Uninstantiable("no sizes meet the rule's shape requirements and conditions")
    assignment, concrete = sized
    calls = _leaf_calls(a, space.vars, assignment)
    env = {var: builder.op(*calls[var]) if var in calls else _value(t, var, assignment)
           for var, t in space.vars.items()}
    try:
        roots = [_build(builder, p, env, concrete) for p in (*rule.lhs, *rule.rhs)]
    except EqdslError as err:
        raise _Uninstantiable(f"a side breaks a shape rule of {a.name}: {err.diagnostics[0].message}") from None
    if not all(isinstance(r, Tensor) for r in roots):
        raise _Uninstantiable("a side is a bare variable or value, not a term")
    return roots, tuple((analysis, env[var].index) for analysis, var in guards)


def _assumed_guards(a: ir.Language, rule: ir.Rule) -> list[tuple[str, str]]:
    """(analysis, variable) for each guard `if G(?v)` of a Bool analysis G, which the instance
    assumes of ?v's fresh leaf (a proof then holds wherever G holds of ?v); any other clause that
    reads an analysis (a `where`, a guard on a term, a negation) makes the rule uninstantiable."""
    conds = [c.expr for c in rule.conds if isinstance(c, ir.ExprCond) and reads_analyses(c.expr)]
    guards = [(g.analysis, g.pattern.name) for g in conds if isinstance(g, ir.AnalysisOf) and
              isinstance(g.pattern, ir.PVar) and _bool_analysis_of(a, g.analysis, g.pattern.type)]
    if len(guards) < len(conds) or any(reads_analyses(e) for _, e in rule.wheres):
        raise _Uninstantiable("its `where`/`if` clauses read analysis values other than a guard `if G(?x)` "
                              "of a Bool analysis, which fresh leaves do not have")
    return guards


def _bool_analysis_of(a: ir.Language, name: str, t: ir.ValueType) -> bool:
    """Whether `a` has a Bool analysis `name` over sort `t` (what a guard may assume)."""
    analysis = a.analyses.get(name)
    return analysis is not None and analysis.type == ir.Prim.BOOL and t == ir.SortType(analysis.sort)


def _leaves_exist(a: ir.Language, variables: dict[str, ir.ValueType], assignment: Assignment) -> bool:
    try:
        _leaf_calls(a, variables, assignment)
    except _Uninstantiable:
        return False
    return True


def _leaf_calls(a: ir.Language, variables: dict[str, ir.ValueType], assignment: Assignment) -> dict[str, tuple]:
    """(leaf operator, its arguments...) of a fresh leaf for each sorted variable at its drawn size;
    _Uninstantiable where one has none."""
    return {var: _leaf_call(a, var, t, assignment) for var, t in variables.items() if isinstance(t, ir.SortType)}


def _value(t: ir.ValueType, var: str, assignment: Assignment) -> Any:
    """A primitive variable's value: the drawn Int or size, its own name for a Str."""
    if t == ir.Prim.INT:
        return assignment.ints[var]
    if t == ir.Prim.INTS:
        return tuple(assignment.sizes[var])
    assert t == ir.Prim.STR, t
    return var


def _leaf_call(a: ir.Language, var: str, t: ir.SortType, assignment: Assignment) -> tuple:
    """The leaf operator and arguments of a fresh leaf of sort `t` at ?var's drawn size."""
    if t.name not in a.sorts:
        raise _Uninstantiable(f"?{var}: sort {t.name} is not in language {a.name}")
    if a.sorts[t.name].fields:
        raise _Uninstantiable(f"?{var}: sort {t.name} has a two-field analysis value (not supported)")
    size = tuple(assignment.sizes[var]) if var in assignment.sizes else None
    for op in a.ops.values():
        if op.result == t.name and not op.const and (args := leaf_args(a, op, var, size)) is not None:
            return op.name, *args
    raise _Uninstantiable(f"?{var}: no leaf operator of sort {t.name} takes a name (and the shape {size})")


def _build(builder: GraphBuilder, p: ir.Pattern, env: dict[str, Any], concrete: Concrete) -> Any:
    match p:
        case ir.PVar(name=v):
            return env[v]
        case ir.PLit(value=value):
            return value
        case ir.PBound(name=n):
            return concrete.wheres[n]
        case ir.PApp(op=op, args=args):
            return builder.op(op, *[_build(builder, arg, env, concrete) for arg in args])
    raise AssertionError(p)
