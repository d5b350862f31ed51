"""`cpsat`: TENSAT's ILP extraction on OR-Tools CP-SAT, several roots, DAG cost.

Model (`eqdsl.extract.cpsat_model`): one Boolean per usable e-node; each root class picks exactly
one node; a picked node makes every child class pick one (at most one per class); a pruning cycle
conflict's node forces the other class to pick a node outside the conflict; minimise Σ cost·x.
This module searches it. Acyclicity:
- `order`: an integer topological position per class, `x_n ⇒ t[class] > t[child]` (TENSAT eq. 4);
- `lazy`: solve without order variables, forbid each cycle of classes the answer holds
  (`forbid_class_cycle`: ≤ k − 1 of its k edges), re-solve warm-started until acyclic;
- `hybrid` (default): `lazy` for the first third of the time limit, then order variables are
  added to the same model (cuts kept);
- `filter-list`: nodes blocked by a cycle filter are fixed to 0, then `lazy` as a safety net.
Before the model, `eqdsl.extract.prune` removes what an optimal program provably never needs (the
result's note says how many each step removed), often leaving no cyclic component. With
`parts=True` independent parts (`eqdsl.extract.decompose`: at the classes every program holds)
are solved one model each, smallest first; not the default: the whole model folds the symmetries
of repeated parts (BENCHMARKS.md, "k_multi 3, independent parts"). A greedy solution is the warm
start and the fallback, so a time limit returns the best valid program found with the proven
bound; the result is never cyclic or incomplete. `search` (`SEARCH_NAMES`): `lp`, `core`, `hs`
(`eqdsl.extract.hitting`: implicit hitting sets, no model; costs ≥ 0), or `auto` (`CpSatExtractor._solve`: `lp`
for `LP_FIRST_SHARE` of the time, then `core` on the independent parts, or where there are none
and pruning left cycles `hs` — BERT's extraction-gym e-graph proves optimal where the model stayed
14–25 % open; `lp` alone on one thread or under `CORE_FROM_S` seconds).
`workers` is CP-SAT's thread count (`DEFAULT_WORKERS`): a portfolio of two full-LP searches, the
first on the LP folded by the model's symmetries. With several threads CP-SAT is not
deterministic: a proven optimum's cost is the same every run, a time-limited result may differ.
"""
from __future__ import annotations

import math
import time
from dataclasses import replace
from functools import partial

from ortools.sat.python import cp_model, cp_model_helper

from eqdsl.diagnostics import EqdslError
from eqdsl.extract.bound import dag_lower_bound
from eqdsl.extract.cpsat_model import (
    Model,
    Search,
    add_order,
    all_nodes,
    build,
    constrain,
    find_cycles,
    forbid_class_cycle,
    solve,
)
from eqdsl.extract.cpsat_options import DEFAULT_WORKERS, SEARCH_NAMES, SEARCHES
from eqdsl.extract.dag import best_greedy
from eqdsl.extract.decompose import Parts, split
from eqdsl.extract.egraph import ExtractionProblem, Selection, dag_cost, restrict, tree_cost
from eqdsl.extract.greedy import OutOfTime
from eqdsl.extract.hitting import hitting_set, meets_bound
from eqdsl.extract.prune import Pruned, apply_filter, prune, usable_nodes
from eqdsl.extract.result import Extraction, ExtractStatus
from eqdsl.extract.starts import Start, cheapest_known, run_start
from eqdsl.worker import Budget, Stopped, guarded

PRUNE_SHARE = 0.2  # of the time limit, at most, for the cycle-closing test
LAZY_SHARE = 1 / 3  # hybrid: of the time limit, for rounds without order variables
LP_FIRST_SHARE = 1 / 6  # auto: of the time left after pruning, for the lp search on the whole model
HS_SHARE = 0.75  # of the time left, for the hitting sets; unproven, lp for the rest
CORE_FROM_S = 20.0  # auto: shorter budgets run lp alone (pulsed epochs' few seconds: issues 5 and 18)


class CpSatExtractor:
    name = "cpsat"

    def __init__(self, time_limit_s: float = 60.0, acyclic: str = "hybrid",
                 warm_start: Start = best_greedy, workers: int = DEFAULT_WORKERS, plain: bool = False,
                 prune: bool = True, conflicts: bool = True, parts: bool = False, search: str = "auto") -> None:
        """`plain`: the textbook model (no pruning, order variables on every class), the benchmark
        baseline; `prune=False`: only the `usable` step of `eqdsl.extract.prune` and no lower bound
        (the model before either existed); `conflicts=False`: pruning without cycle conflicts;
        `parts`: independent parts solved one model each (`eqdsl.extract.decompose`); `search`: a
        key of `SEARCHES`; `warm_start`: a `Start` (`eqdsl.extract.starts`)."""
        self.time_limit_s, self.acyclic = time_limit_s, acyclic
        self.warm_start, self.workers, self.plain, self.prune = warm_start, workers, plain, prune
        if search not in SEARCH_NAMES:
            raise ValueError(f"search must be one of {', '.join(SEARCH_NAMES)}, not {search!r}")
        self.conflicts, self.parts, self.search = conflicts, parts, search

    def extract(self, problem: ExtractionProblem) -> Extraction:
        t0 = time.perf_counter()
        deadline = t0 + self.time_limit_s
        warm = self._warm(problem, deadline)
        try:
            return self._improve(problem, warm, t0, deadline)
        except OutOfTime:  # pruning or the model's construction outlasted the limit on a huge e-graph
            return replace(self._result(problem, warm.selection, warm.cost, -math.inf, False,
                                        time.perf_counter() - t0, 0, 0, ""),
                           note=f"the time limit ended before CP-SAT could search: the {warm.method} warm start")

    def _improve(self, problem: ExtractionProblem, warm: Extraction, t0: float, deadline: float) -> Extraction:
        """Prune, bound and solve from the warm start; `OutOfTime` where the deadline passes
        before the solver has a model."""
        if time.perf_counter() >= deadline:
            raise OutOfTime(self.name, "the warm start took it all")
        monotonic_deadline = deadline - time.perf_counter() + time.monotonic()
        prune_by = min(monotonic_deadline, time.monotonic() + PRUNE_SHARE * self.time_limit_s)
        pruned = self._nodes(problem, warm.cost, prune_by, monotonic_deadline)
        class_nodes, pruning = pruned.class_nodes, pruned.summary() if pruned.steps else ""
        filtered = 0
        if self.acyclic == "filter-list":
            class_nodes, filtered = apply_filter(problem, class_nodes)
        floor = self._floor(problem, class_nodes, warm, cyclic=not pruned.acyclic)
        # one acyclic program only (every needed class has one usable node), or the warm start
        # meets the lower bound: nothing to solve
        if self.acyclic != "filter-list" and all(len(n) == 1 for n in class_nodes.values()):
            only = restrict(problem, {c: nodes[0] for c, nodes in class_nodes.items()})
            cost = dag_cost(problem, only)
            return self._result(problem, only, cost, cost, True, time.perf_counter() - t0, 0, 0, pruning)
        if warm.cost <= floor:
            return self._result(problem, warm.selection, warm.cost, warm.cost, True, time.perf_counter() - t0,
                                0, 0, pruning + "; the warm start meets the DAG lower bound")
        start = Search(warm.selection, warm.cost, floor or -math.inf, started=t0)
        search = self._solve(problem, pruned, class_nodes, start, deadline)
        search.note_round()
        result = self._result(problem, search.best, search.cost, search.bound, search.proven,
                              time.perf_counter() - t0, search.rounds, search.cuts, pruning)
        result = replace(result, trace=tuple((round(t, 4), c, b) for t, c, b in search.trace if math.isfinite(b)))
        return replace(result, note="; ".join([result.note, *self._notes(search, warm.method, filtered)]))

    def _notes(self, search: Search, warm: str, filtered: int) -> list[str]:
        notes = []
        if not search.from_solver and search.rounds:
            notes.append(f"CP-SAT found nothing better than the {warm} warm start")
        notes.append(f"hitting-set search: {search.hs_cores} cores" if search.hs_cores else
                     f"CP-SAT threads: {self.workers}")
        if search.ordered_late:
            notes.append(f"order variables added after {search.ordered_late} round(s) without them")
        if search.switched:
            notes.append(f"lp search unproven after {LP_FIRST_SHARE:.0%} of the time: core search on the "
                         "independent parts")
        if search.parts:
            notes.append(f"solved as {search.parts} independent parts")
        if search.overran:
            notes.append("CP-SAT overran its time limit and was stopped")
        if search.unbuilt:
            notes.append("the time limit ended while the CP-SAT model was being written")
        if self.acyclic == "filter-list":
            notes.append(f"filtered {filtered} node(s): optimal within the filtered e-graph")
        return notes

    def _solve(self, problem: ExtractionProblem, pruned: Pruned, class_nodes: dict[int, list[int]], s: Search,
               deadline: float) -> Search:
        """`auto` (with two threads or more): the `lp` search on the whole model (its parts with
        `parts`) for `LP_FIRST_SHARE` of the time left; what it did not prove, from the best program
        so far: the `core` search on the independent parts where there are some, else `hs`
        (`_hitting`) where pruning left cycles (and costs are ≥ 0). One thread, or a budget under
        `CORE_FROM_S`: `lp`. (`hs` where there are parts too was faster on Inception-v3 k1 and
        ResNeXt-50 k1, slower on NasNet-A k1: 22 → 39 s; BENCHMARKS.md, issue 47.)"""
        hitting = not problem.has_negative_costs
        if self.search == "hs" and hitting:
            return self._hitting(problem, pruned, class_nodes, s, deadline)
        if self.search != "auto" or self.workers < 2 or self.time_limit_s < CORE_FROM_S:
            search = "lp" if self.search in ("auto", "hs") else self.search
            return self._solve_with(problem, pruned, class_nodes, s, deadline, search, self.parts)
        now = time.perf_counter()
        self._solve_with(problem, pruned, class_nodes, s, now + LP_FIRST_SHARE * (deadline - now), "lp", self.parts)
        if s.proven or s.overran or time.perf_counter() >= deadline:
            return s
        parts = None
        if hitting and not pruned.acyclic:
            parts = split(problem, class_nodes, pruned.conflicts if self.conflicts else (), deadline)
            if parts is None or not parts.solvable:
                return self._hitting(problem, pruned, class_nodes, s, deadline, parts.required if parts else None)
        s.switched = True
        return self._solve_with(problem, pruned, class_nodes, s, deadline, "core", True, parts)

    def _hitting(self, problem: ExtractionProblem, pruned: Pruned, class_nodes: dict[int, list[int]], s: Search,
                 deadline: float, held: frozenset[int] | None = None) -> Search:
        """`eqdsl.extract.hitting` for `HS_SHARE` of the time left (`held`: the classes every program
        holds, if split found them); unproven, the `lp` search for the rest, from the best program
        so far, proven if it reaches the hitting sets' bound."""
        outcome = hitting_set(problem, class_nodes, HS_SHARE * (deadline - time.perf_counter()), held)
        s.rounds, s.hs_cores, s.bound = s.rounds + outcome.rounds, outcome.cores, max(s.bound, outcome.bound)
        if outcome.selection is not None:
            s.take(problem, outcome.selection, meets_bound(outcome.cost, outcome.bound))
        if not s.proven and time.perf_counter() < deadline:
            self._solve_with(problem, pruned, class_nodes, s, deadline, "lp", self.parts)
            s.proven = s.proven or meets_bound(s.cost, s.bound)
        return s

    def _solve_with(self, problem: ExtractionProblem, pruned: Pruned, class_nodes: dict[int, list[int]],
                    s: Search, deadline: float, search: str, by_parts: bool, parts: Parts | None = None) -> Search:
        """With `by_parts`, the independent parts one by one where there are several (`parts`: the
        split, if made already); the whole model otherwise, or where a part could not be solved alone."""
        acyclic = "order" if self.plain else self.acyclic
        conflicts = pruned.conflicts if self.conflicts else ()
        if by_parts and self.prune and acyclic != "filter-list":
            parts = parts or split(problem, class_nodes, conflicts, deadline)
            if parts is not None and parts.solvable and self._search_parts(problem, parts, conflicts, s,
                                                                           (acyclic, search), deadline):
                return s
        try:
            built = build(problem, class_nodes, self.acyclic, self.plain, pruned.acyclic, deadline=deadline)
        except OutOfTime:  # a huge model: the search so far (or the warm start) is the answer
            s.unbuilt = True
            return s
        constrain(built, problem, conflicts, search)
        return self._search(problem, built, (acyclic, search), s, (time.perf_counter(), deadline))

    def _search(self, problem: ExtractionProblem, built: Model, how: tuple[str, str], s: Search,
                window: tuple[float, float], base: Selection | None = None) -> Search:
        """Solve until a proven or time-limited acyclic answer, updating `s`. Without order
        variables a cyclic answer gets its cycles cut and is solved again (`lazy`); `hybrid`
        instead adds the order variables once the rounds without them have used `LAZY_SHARE` of the
        window or one stopped short of optimal. Every round's bound is valid: each model relaxes
        the acyclic problem. `base`: a part's model — its choice completes `base` to a program,
        and a cycle through classes outside the model sets `s.alone_failed` and stops. `how`:
        (acyclicity, a key of `SEARCHES`)."""
        (acyclic, search), (start, deadline) = how, window
        ordered = acyclic == "order"
        while (remaining := deadline - time.perf_counter()) > 0:
            solver = self._solver(remaining, search)
            self._hint(built, s.best if base is None else base)
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
                    raise EqdslError.one("extraction is unsatisfiable: the roots have no acyclic "
                                         "choice of e-nodes")
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
            s.cuts += self._cut(problem, built, cycles)
            late = status != cp_model.OPTIMAL or time.perf_counter() - start > LAZY_SHARE * (deadline - start)
            if acyclic == "hybrid" and late:
                add_order(built.model, problem, built.class_nodes, built.x)
                ordered, s.ordered_late = True, s.rounds
            elif status != cp_model.OPTIMAL:
                return s
        return s

    def _search_parts(self, problem: ExtractionProblem, parts: Parts, conflicts: tuple[tuple[int, int], ...],
                      s: Search, how: tuple[str, str], deadline: float) -> bool:
        """Solve `parts` one at a time, smallest first, each given its share (by nodes) of the time
        left; each part's choice replaces the program's choices for its classes. Updates `s` and
        returns True, or False (`s` untouched) where a cycle crossed two parts or a part's model
        was infeasible: then the whole model decides."""
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
            constrain(built, problem, conflicts, how[1])
            self._search(problem, built, how, p, window, base)
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

    def _nodes(self, problem: ExtractionProblem, incumbent: float, prune_by: float, deadline: float) -> Pruned:
        """The model's classes and nodes, what pruning removed (no steps: not pruned), cycle
        conflicts, and whether the class graph is known to be acyclic. The optional steps stop at
        `prune_by`; `OutOfTime` if the needed ones outlast `deadline` (`time.monotonic()` values)."""
        if self.plain:
            return Pruned(all_nodes(problem, deadline), (), True)
        if not self.prune:
            return Pruned(usable_nodes(problem, deadline), (), True)
        return prune(problem, incumbent, prune_by, deadline)

    def _floor(self, problem: ExtractionProblem, class_nodes: dict[int, list[int]], warm: Extraction,
               cyclic: bool) -> float:
        """`eqdsl.extract.bound`'s lower bound where it can be tight: the warm start shares no
        subterm (chains such as VGG-19, whose split/concat loops it sees through, and the matrix
        chain: no solve is needed), or the pruned e-graph still has cycles, which the bound sees
        through and the solver pays for in rounds (extraction-gym's TENSAT `vgg.json`: the bound
        equals the greedy start, proven in 0.2 s instead of 26 s of CP-SAT). Elsewhere, with
        sharing, the bound sums only disjoint sub-programs and stays below CP-SAT's first bound
        (ResNeXt-50 k1: 95 %), for 0.03–0.04 s per 5,000 nodes."""
        if problem.has_negative_costs:  # no bound: a program can cost less than nothing
            return -math.inf
        if self.plain or not self.prune:
            return 0.0
        if not cyclic and tree_cost(problem, warm.selection) > warm.cost:
            return 0.0
        return dag_lower_bound(problem, class_nodes)

    def _warm(self, problem: ExtractionProblem, deadline: float) -> Extraction:
        """A valid start whatever the costs' signs (the greedy extractors' own checks refuse
        negative costs; as a start their choice is still valid), or a known program if cheaper.
        `greedy.OutOfTime` if not even the start is done by the deadline: there is no program."""
        try:
            start = run_start(self.warm_start, problem, deadline - time.perf_counter() + time.monotonic())
        except OutOfTime as late:
            raise OutOfTime(self.name, f"its {late.method} warm start unfinished: no program yet") from None
        return cheapest_known(problem, start)

    def _solver(self, seconds: float, search: str) -> cp_model.CpSolver:
        solver = cp_model.CpSolver()
        solver.parameters.max_time_in_seconds = seconds
        solver.parameters.catch_sigint_signal = False  # interrupts are the supervisor's (eqdsl.worker)
        # The bound comes from the LP relaxation, and level 2 puts every constraint of the DAG
        # model in it: TENSAT's BERT/NasRNN e-graphs prove optimal in seconds instead of never.
        solver.parameters.linearization_level = 2
        solver.parameters.num_workers = self.workers
        searches = SEARCHES[search]
        if self.workers > 1:
            solver.parameters.subsolvers.extend(searches)
            solver.parameters.num_full_subsolvers = min(self.workers, len(searches))
        if search == "core":
            solver.parameters.optimize_with_core = self.workers == 1
            solver.parameters.max_sat_stratification = cp_model_helper.SatParameters.STRATIFICATION_NONE
        return solver

    @staticmethod
    def _hint(built: Model, selection: Selection) -> None:
        built.model.clear_hints()
        chosen = set(selection.values())
        hint = built.model.proto.solution_hint  # written at once: AddHint per variable took 12 ms on 3,500
        hint.vars.extend([var.index for var in built.x.values()])
        hint.values.extend([int(i in chosen) for i in built.x])

    @staticmethod
    def _cut(problem: ExtractionProblem, built: Model, cycles: list[list[int]]) -> int:
        for cycle in cycles:
            forbid_class_cycle(built.model, problem, built.class_nodes, built.x,
                                [problem.nodes[i].eclass for i in cycle])
        return len(cycles)

    def _result(self, problem, best, best_cost, bound, proven, seconds, rounds, cuts, pruning):
        restrict(problem, best)  # raises if the selection were cyclic or incomplete: never returned
        if math.isinf(bound):  # no solve finished: only the trivial bound, if costs are ≥ 0
            bound = None if problem.has_negative_costs else 0.0
        bound = None if bound is None else min(bound, best_cost)
        if proven:
            status, bound = ExtractStatus.OPTIMAL, best_cost
        else:
            status = ExtractStatus.FEASIBLE
        note = f"acyclic={self.acyclic}, rounds={rounds}, cycle cuts={cuts}" + (f"; {pruning}" if pruning else "")
        return Extraction(self.name, best, best_cost, status, seconds, bound, note)
