"""`cpsat`: TENSAT's ILP extraction on OR-Tools CP-SAT, several roots, DAG cost.

Model (`eqdsl.extract.cpsat_model`): one Boolean per usable e-node; each root class picks exactly
one node; a picked node makes every child class pick one (at most one per class); a pruning cycle
conflict's node forces the other class to pick a node outside the conflict; minimise Σ cost·x.
This module prunes, bounds and warm-starts it; the searches are strategies of
`eqdsl.extract.cpsat_search` (`search:` `lp`, `core`, `hs`, or `auto` choosing among them).
Acyclicity:
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
bound; the result is never cyclic or incomplete.
`workers` is CP-SAT's thread count (`DEFAULT_WORKERS`): a portfolio of two full-LP searches, the
first on the LP folded by the model's symmetries. With several threads CP-SAT is not
deterministic: a proven optimum's cost is the same every run, a time-limited result may differ.
"""
from __future__ import annotations

import math
import time
from dataclasses import replace

from eqdsl.extract.bound import dag_lower_bound
from eqdsl.extract.cpsat_model import Search, all_nodes
from eqdsl.extract.cpsat_options import DEFAULT_WORKERS, SEARCH_NAMES
from eqdsl.extract.cpsat_search import LP_FIRST_SHARE, SearchContext, Settings, chosen
from eqdsl.extract.dag import best_greedy
from eqdsl.extract.egraph import ExtractionProblem, dag_cost, restrict, tree_cost
from eqdsl.extract.greedy import OutOfTime
from eqdsl.extract.prune import Pruned, apply_filter, prune, usable_nodes
from eqdsl.extract.result import Extraction, ExtractStatus
from eqdsl.extract.starts import Start, cheapest_known, run_start

PRUNE_SHARE = 0.2  # of the time limit, at most, for the cycle-closing test


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
        ctx = SearchContext(problem, pruned, class_nodes, self._settings())
        search = chosen(self.search, ctx).run(ctx, start, deadline)
        search.note_round()
        result = self._result(problem, search.best, search.cost, search.bound, search.proven,
                              time.perf_counter() - t0, search.rounds, search.cuts, pruning)
        result = replace(result, trace=tuple((round(t, 4), c, b) for t, c, b in search.trace if math.isfinite(b)))
        return replace(result, note="; ".join([result.note, *self._notes(search, warm.method, filtered)]))

    def _settings(self) -> Settings:
        return Settings(self.acyclic, self.plain, self.prune, self.conflicts, self.parts, self.workers,
                        self.time_limit_s)

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
