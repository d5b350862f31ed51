"""The searches `cpsat` runs from its warm start, behind one protocol.

Contract: a `Strategy` has a `name` (a key of `STRATEGIES`, the `search:` values) and
`run(ctx, s, deadline)`: it improves `s` (`cpsat_model.Search`: the best acyclic program so far,
its cost, the proven bound and what the rounds did) until it is proven or `deadline`
(`time.perf_counter()`) passes, and returns it. `ctx` holds the problem, the pruned model's nodes
and the extractor's settings. Every strategy's bound is valid and its program complete and
acyclic. The strategies:
- `lp`, `core` (`ModelSearch`): CP-SAT on the model of `eqdsl.extract.cpsat_model`, with the
  threads' searches `cpsat_options.SEARCHES` names; acyclicity `order`, `lazy` (cycle cuts and
  re-solves), `hybrid` (lazy for `LAZY_SHARE` of the window, then order variables) or
  `filter-list`; with `parts`, the independent parts (`eqdsl.extract.decompose`) one model each;
- `hs` (`HittingSets`): implicit hitting sets (`eqdsl.extract.hitting`, no model; costs ≥ 0),
  then `lp` for what they left unproven;
- `auto` (`Auto`): `lp` for `LP_FIRST_SHARE` of the time left, then `core` on the independent
  parts where there are some, or `hs` where there are none and pruning left cycles — BERT's
  extraction-gym e-graph proves optimal where the model stayed 14–25 % open.
`chosen(name, ctx)` is the strategy that runs for a `search:` value: `lp` for `hs` when costs
can be negative, and for `auto` on one thread or under `CORE_FROM_S` seconds.
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass
from functools import partial
from typing import Protocol

from ortools.sat.python import cp_model, cp_model_helper

from eqdsl.diagnostics import EqdslError
from eqdsl.extract.cpsat_model import Model, Search, add_order, build, constrain, find_cycles, forbid_class_cycle, solve
from eqdsl.extract.cpsat_options import SEARCHES
from eqdsl.extract.decompose import Parts, split
from eqdsl.extract.egraph import ExtractionProblem, Selection, dag_cost, restrict
from eqdsl.extract.greedy import OutOfTime
from eqdsl.extract.hitting import hitting_set, meets_bound
from eqdsl.extract.prune import Pruned
from eqdsl.worker import Budget, Stopped, guarded

LAZY_SHARE = 1 / 3  # hybrid: of the window, for rounds without order variables
LP_FIRST_SHARE = 1 / 6  # auto: of the time left after pruning, for the lp search on the whole model
HS_SHARE = 0.75  # of the time left, for the hitting sets; unproven, lp for the rest
CORE_FROM_S = 20.0  # auto: shorter budgets run lp alone (pulsed epochs' few seconds: issues 5 and 18)


@dataclass(frozen=True)
class Settings:
    """The extractor's keys every search reads."""

    acyclic: str
    plain: bool
    prune: bool
    conflicts: bool
    parts: bool
    workers: int
    time_limit_s: float


@dataclass(frozen=True)
class SearchContext:
    problem: ExtractionProblem
    pruned: Pruned
    class_nodes: dict[int, list[int]]  # the model's nodes per class (after pruning and any filter)
    settings: Settings

    @property
    def conflicts(self) -> tuple[tuple[int, int], ...]:
        return self.pruned.conflicts if self.settings.conflicts else ()


class Strategy(Protocol):
    @property
    def name(self) -> str: ...

    def run(self, ctx: SearchContext, s: Search, deadline: float) -> Search: ...


@dataclass(frozen=True)
class ModelSearch:
    """CP-SAT on the model: the whole model, or its independent parts one by one (`by_parts`, or
    the settings' `parts` where None) where there are several."""

    name: str  # a key of `SEARCHES`: lp | core
    by_parts: bool | None = None

    def run(self, ctx: SearchContext, s: Search, deadline: float, parts: Parts | None = None) -> Search:
        """`parts`: the split, if made already; the whole model decides where a part could not be
        solved alone."""
        st = ctx.settings
        acyclic = "order" if st.plain else st.acyclic
        by_parts = st.parts if self.by_parts is None else self.by_parts
        if by_parts and st.prune and acyclic != "filter-list":
            parts = parts or split(ctx.problem, ctx.class_nodes, ctx.conflicts, deadline)
            if parts is not None and parts.solvable and _search_parts(ctx, parts, s, (acyclic, self.name), deadline):
                return s
        try:
            built = build(ctx.problem, ctx.class_nodes, st.acyclic, st.plain, ctx.pruned.acyclic, deadline=deadline)
        except OutOfTime:  # a huge model: the search so far (or the warm start) is the answer
            s.unbuilt = True
            return s
        constrain(built, ctx.problem, ctx.conflicts, self.name)
        return _search(ctx, built, (acyclic, self.name), s, (time.perf_counter(), deadline))


@dataclass(frozen=True)
class HittingSets:
    """`eqdsl.extract.hitting` for `HS_SHARE` of the time left; unproven, `lp` for the rest, from
    the best program so far, proven if it reaches the hitting sets' bound."""

    name: str = "hs"

    def run(self, ctx: SearchContext, s: Search, deadline: float, held: frozenset[int] | None = None) -> Search:
        """`held`: the classes every program holds, if a split found them."""
        outcome = hitting_set(ctx.problem, ctx.class_nodes, HS_SHARE * (deadline - time.perf_counter()), held)
        s.rounds, s.hs_cores, s.bound = s.rounds + outcome.rounds, outcome.cores, max(s.bound, outcome.bound)
        if outcome.selection is not None:
            s.take(ctx.problem, outcome.selection, meets_bound(outcome.cost, outcome.bound))
        if not s.proven and time.perf_counter() < deadline:
            ModelSearch("lp").run(ctx, s, deadline)
            s.proven = s.proven or meets_bound(s.cost, s.bound)
        return s


@dataclass(frozen=True)
class Auto:
    """`lp` on the whole model (its parts with `parts`) for `LP_FIRST_SHARE` of the time left; what it
    did not prove, from the best program so far: `core` on the independent parts where there are
    some, else `hs` where pruning left cycles. (`hs` where there are parts too was faster on
    Inception-v3 k1 and ResNeXt-50 k1, slower on NasNet-A k1: BENCHMARKS.md, issue 47.)"""

    name: str = "auto"

    def run(self, ctx: SearchContext, s: Search, deadline: float) -> Search:
        now = time.perf_counter()
        ModelSearch("lp").run(ctx, s, now + LP_FIRST_SHARE * (deadline - now))
        if s.proven or s.overran or time.perf_counter() >= deadline:
            return s
        parts = None
        if not ctx.problem.has_negative_costs and not ctx.pruned.acyclic:
            parts = split(ctx.problem, ctx.class_nodes, ctx.conflicts, deadline)
            if parts is None or not parts.solvable:
                return HittingSets().run(ctx, s, deadline, parts.required if parts else None)
        s.switched = True
        return ModelSearch("core", by_parts=True).run(ctx, s, deadline, parts)


STRATEGIES: dict[str, Strategy] = {"lp": ModelSearch("lp"), "core": ModelSearch("core"), "hs": HittingSets(),
                                   "auto": Auto()}


def chosen(name: str, ctx: SearchContext) -> Strategy:
    if name == "hs" and ctx.problem.has_negative_costs:
        return STRATEGIES["lp"]
    if name == "auto" and (ctx.settings.workers < 2 or ctx.settings.time_limit_s < CORE_FROM_S):
        return STRATEGIES["lp"]
    return STRATEGIES[name]


# ---- the model search ----------------------------------------------------------------------------

def _search(ctx: SearchContext, built: Model, how: tuple[str, str], s: Search, window: tuple[float, float],
            base: Selection | None = None) -> Search:
    """Solve until a proven or time-limited acyclic answer, updating `s`. Without order
    variables a cyclic answer gets its cycles cut and is solved again (`lazy`); `hybrid`
    instead adds the order variables once the rounds without them have used `LAZY_SHARE` of the
    window or one stopped short of optimal. Every round's bound is valid: each model relaxes
    the acyclic problem. `base`: a part's model — its choice completes `base` to a program,
    and a cycle through classes outside the model sets `s.alone_failed` and stops. `how`:
    (acyclicity, a key of `SEARCHES`)."""
    (acyclic, search), (start, deadline) = how, window
    problem, ordered = ctx.problem, acyclic == "order"
    while (remaining := deadline - time.perf_counter()) > 0:
        solver = _solver(remaining, search, ctx.settings.workers)
        _hint(built, s.best if base is None else base)
        if base is None:  # a part's cost and bound are not the problem's
            s.note_round()
        done = guarded(partial(solve, solver, built, base is None),
                       Budget(deadline=time.monotonic() + 1.1 * remaining + 1.0))
        s.rounds += 1
        if isinstance(done, Stopped):  # CP-SAT overran its own limit (presolve of huge models)
            s.overran = True
            return s
        status, found = done.value
        if found is None:  # neither optimal nor feasible
            if status == cp_model.INFEASIBLE and base is not None:
                s.alone_failed = True
            elif status == cp_model.INFEASIBLE:
                raise EqdslError.one("extraction is unsatisfiable: the roots have no acyclic choice of e-nodes")
            return s
        s.bound = max(s.bound, found[1] / built.scale)
        choice = found[0] if base is None else {**base, **found[0]}
        cycles = [] if ordered else find_cycles(problem, choice)
        if not cycles:
            s.take(problem, choice, status == cp_model.OPTIMAL)
            return s
        if base is not None and any(problem.nodes[i].eclass not in built.class_nodes for c in cycles for i in c):
            s.alone_failed = True
            return s
        s.cuts += _cut(problem, built, cycles)
        late = status != cp_model.OPTIMAL or time.perf_counter() - start > LAZY_SHARE * (deadline - start)
        if acyclic == "hybrid" and late:
            add_order(built.model, problem, built.class_nodes, built.x)
            ordered, s.ordered_late = True, s.rounds
        elif status != cp_model.OPTIMAL:
            return s
    return s


def _search_parts(ctx: SearchContext, parts: Parts, s: Search, how: tuple[str, str], deadline: float) -> bool:
    """Solve `parts` one at a time, smallest first, each given its share (by nodes) of the time
    left; each part's choice replaces the program's choices for its classes. Updates `s` and
    returns True, or False (`s` untouched) where a cycle crossed two parts or a part's model
    was infeasible: then the whole model decides."""
    problem = ctx.problem
    base = {**(s.choice or s.best), **parts.fixed}
    bounds, proven, rounds, cuts, overran = [], True, 0, 0, False
    left = sum(len(nodes) for part in parts.solvable for nodes in part.values())
    selection = restrict(problem, base)
    cost = dag_cost(problem, selection)
    for part in parts.solvable:
        size = sum(map(len, part.values()))
        now = time.perf_counter()
        window = (now, now + (deadline - now) * size / left)
        left -= size
        p = Search(selection, cost, -math.inf, choice=base)
        built = build(problem, part, how[0], required=parts.required)
        constrain(built, problem, ctx.conflicts, how[1])
        _search(ctx, built, how, p, window, base)
        rounds, cuts, overran = rounds + p.rounds, cuts + p.cuts, overran or p.overran
        if p.alone_failed:
            return False
        base, selection, cost = p.choice or base, p.best, p.cost
        bounds.append(max(p.bound, 0.0))  # costs ≥ 0: a part nothing was proven on is ≥ 0
        proven = proven and p.proven
    s.take(problem, base, proven)
    s.bound = max(s.bound, parts.fixed_cost + sum(bounds))
    s.rounds, s.cuts, s.overran, s.parts = s.rounds + rounds, s.cuts + cuts, s.overran or overran, len(bounds)
    return True


def _solver(seconds: float, search: str, workers: int) -> cp_model.CpSolver:
    solver = cp_model.CpSolver()
    solver.parameters.max_time_in_seconds = seconds
    solver.parameters.catch_sigint_signal = False  # interrupts are the supervisor's (eqdsl.worker)
    # The bound comes from the LP relaxation, and level 2 puts every constraint of the DAG
    # model in it: TENSAT's BERT/NasRNN e-graphs prove optimal in seconds instead of never.
    solver.parameters.linearization_level = 2
    solver.parameters.num_workers = workers
    searches = SEARCHES[search]
    if workers > 1:
        solver.parameters.subsolvers.extend(searches)
        solver.parameters.num_full_subsolvers = min(workers, len(searches))
    if search == "core":
        solver.parameters.optimize_with_core = workers == 1
        solver.parameters.max_sat_stratification = cp_model_helper.SatParameters.STRATIFICATION_NONE
    return solver


def _hint(built: Model, selection: Selection) -> None:
    built.model.clear_hints()
    chosen_nodes = set(selection.values())
    hint = built.model.proto.solution_hint  # written at once: AddHint per variable took 12 ms on 3,500
    hint.vars.extend([var.index for var in built.x.values()])
    hint.values.extend([int(i in chosen_nodes) for i in built.x])


def _cut(problem: ExtractionProblem, built: Model, cycles: list[list[int]]) -> int:
    for cycle in cycles:
        forbid_class_cycle(built.model, problem, built.class_nodes, built.x, [problem.nodes[i].eclass for i in cycle])
    return len(cycles)
