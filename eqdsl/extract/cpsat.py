"""`cpsat`: TENSAT's ILP extraction on OR-Tools CP-SAT, several roots, DAG cost.

Model: one Boolean per usable e-node; each root class picks exactly one node; a picked node makes
every child class pick one (at most one per class); a pruning cycle conflict's node forces the
other class to pick a node outside the conflict (`_forbid_pairs`); minimise Σ cost·x. Acyclicity:
- `order`: an integer topological position per class, `x_n ⇒ t[class] > t[child]` (TENSAT eq. 4);
- `lazy`: solve without order variables, forbid each cycle of classes the answer holds
  (`_forbid_class_cycle`: ≤ k − 1 of its k edges), re-solve warm-started until acyclic;
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
(`eqdsl.extract.hitting`: implicit hitting sets, no model; costs ≥ 0), or `auto` (`_solve`: `lp`
for `LP_FIRST_SHARE` of the time, then `core` on the independent parts, or where there are none
and pruning left cycles `hs` — BERT's extraction-gym e-graph proves optimal where the model stayed
14–25 % open; `lp` alone on one thread or under `CORE_FROM_S` seconds).
`workers` is CP-SAT's thread count (`DEFAULT_WORKERS`): a portfolio of two full-LP searches, the
first on the LP folded by the model's symmetries. With several threads CP-SAT is not
deterministic: a proven optimum's cost is the same every run, a time-limited result may differ.
"""
from __future__ import annotations

import math
import os
import time
from dataclasses import dataclass, field, replace
from functools import partial

from ortools.sat.python import cp_model, cp_model_helper

from eqdsl import graphs
from eqdsl import status as live_status
from eqdsl.diagnostics import EqdslError
from eqdsl.extract.bound import dag_lower_bound
from eqdsl.extract.dag import best_greedy
from eqdsl.extract.decompose import Parts, split
from eqdsl.extract.egraph import ExtractionProblem, Selection, dag_cost, restrict, tree_cost
from eqdsl.extract.greedy import CHECK_EVERY, OutOfTime, tree_greedy, unreachable_roots_error
from eqdsl.extract.hitting import hitting_set, meets_bound
from eqdsl.extract.prune import Pruned, apply_filter, prune, usable_nodes
from eqdsl.extract.result import Extraction, ExtractStatus
from eqdsl.extract.starts import Start, cheapest_known, run_start, start_names
from eqdsl.fields import is_bool, one_of, option
from eqdsl.worker import Budget, Stopped, guarded


@dataclass(frozen=True)
class _Model:
    model: cp_model.CpModel
    x: dict[int, cp_model.IntVar]  # node index → Boolean
    class_nodes: dict[int, list[int]]  # class → usable nodes
    scale: float


@dataclass
class _Search:
    """The best acyclic program so far and what the rounds proved."""
    best: Selection
    cost: float
    bound: float
    proven: bool = False
    from_solver: bool = False
    rounds: int = 0
    cuts: int = 0
    ordered_late: int = 0  # hybrid: the round after which order variables were added (0: never)
    overran: bool = False
    alone_failed: bool = False  # a part's model closed a cycle through classes outside it, or had no solution
    parts: int = 0  # solved as this many independent parts (0: as a whole)
    hs_cores: int = 0  # the hs search: cores found
    switched: bool = False  # auto: lp proved nothing in its share of the time, core searched the parts
    unbuilt: bool = False  # the time limit ended while a model was being written (a huge e-graph)
    choice: Selection | None = None  # the last program taken, before `restrict` (parts build on it)
    started: float = field(default_factory=time.perf_counter)
    trace: list[tuple[float, float, float]] = field(default_factory=list)  # (seconds, cost, bound) per round

    def note_round(self) -> None:
        """The best program's cost and the bound now: the live status line and the trace."""
        self.trace.append((time.perf_counter() - self.started, self.cost, self.bound))
        live_status.update(incumbent=self.cost, note=f"CP-SAT round {self.rounds + 1}",
                           **({"bound": self.bound} if math.isfinite(self.bound) else {}))

    def take(self, problem: ExtractionProblem, choice: Selection, optimal: bool) -> None:
        selection = restrict(problem, choice)
        cost = dag_cost(problem, selection)
        if cost <= self.cost:
            self.best, self.cost, self.from_solver, self.choice = selection, cost, True, choice
        self.proven = optimal


# CP-SAT threads. With two or more, two complete searches, both with every constraint in the LP:
# on the LP folded by the model's symmetries (the repeated blocks of CNNs: NasNet-A k1 proves
# optimal; alone it never closes BERT's last unit of gap) and as is. Listed in that order: the
# order alone took ResNeXt-50 k1 from 19–20 s to 10–13 s. A third thread (CP-SAT's neighbourhood
# searches) shared the two cores and slowed both; its one gain, VGG-19 k1 (3.3 → 0.1 s), is now
# the lower bound's without a solve (BENCHMARKS.md, "Two CP-SAT threads, the symmetry-folded search
# first" and "VGG-19 k2 proven optimal by the lower bound").
DEFAULT_WORKERS = 2 if (os.cpu_count() or 1) >= 2 else 1
# `search`: which complete searches the first threads run. `lp`: the full-LP searches above.
# `core`: CP-SAT's core-based (MaxSAT) search, unstratified — every cost at once, so its first
# solution is optimal and its bound rises core by core — beside a search without LP that finds
# programs fast and shares them (BENCHMARKS.md, "Where Inception-v3 k1's gap lives").
SEARCHES = {"lp": ("max_lp_sym", "max_lp"), "core": ("core", "no_lp")}
SEARCH_NAMES = ("auto", *SEARCHES, "hs")  # hs: `eqdsl.extract.hitting`, no CP-SAT model
ACYCLIC = ("hybrid", "order", "lazy", "filter-list")


@dataclass(frozen=True)
class CpSatOptions:
    """`cpsat`'s own keys of the `extract:` section (its time and threads come as an `ExtractBudget`)."""

    acyclic: str = option("hybrid", one_of(ACYCLIC), f"one of {', '.join(ACYCLIC)}",
                          help="how cycles are kept out: hybrid, order (TENSAT's order variables), lazy "
                               "(cycle cuts), filter-list (a cycle filter first)")
    warm_start: str | None = option("greedy-dag", lambda v: v is None or v in start_names(),
                                    lambda: f"one of {', '.join(start_names())}, or null",
                                    help="the program the search starts from and falls back to")
    parts: bool = option(False, is_bool, "true or false",
                         help="solve independent parts one model each (layered models: BERT; loses on "
                              "repeated cells)")
    search: str = option("auto", one_of(SEARCH_NAMES), f"one of {', '.join(SEARCH_NAMES)}",
                         help="auto (lp on the whole model first, then core on the parts, or hs where there are "
                              "none and cycles remain), lp, core, or hs (implicit hitting sets, costs ≥ 0)")


def all_nodes(problem: ExtractionProblem, deadline: float | None = None) -> dict[int, list[int]]:
    _, best = tree_greedy(problem, deadline)
    if any(math.isinf(best[r]) for r in problem.roots):
        raise unreachable_roots_error(problem, best)
    return {c: [i for i in nodes if problem.allowed(i)] for c, nodes in enumerate(problem.class_nodes)}


def _scale(costs: list[float]) -> float:
    largest = max((abs(c) for c in costs), default=0.0)
    if all(c == int(c) for c in costs) and largest <= 1e9:
        return 1.0
    return 1e7 / max(largest, 1e-12)


def _build(problem: ExtractionProblem, class_nodes: dict[int, list[int]], acyclic: str,
           plain: bool = False, cycle_free: bool = False, required: frozenset[int] = frozenset(),
           deadline: float | None = None) -> _Model:
    """`cycle_free`: the class graph of `class_nodes` is known to have no cycle (no order
    variables or cycle cuts are needed, whatever `acyclic` says). `required`: classes besides the
    roots that pick exactly one node. A child class outside `class_nodes` is taken as present
    (a part of a split problem: `eqdsl.extract.decompose`). `OutOfTime` past `deadline`
    (`time.perf_counter()`): a model of a million nodes takes tens of seconds to write."""
    m = cp_model.CpModel()
    x = {i: m.new_bool_var(f"n{i}") for nodes in class_nodes.values() for i in nodes}
    for c, nodes in class_nodes.items():
        if c in problem.roots or c in required:
            m.add_exactly_one([x[i] for i in nodes])
        else:
            m.add_at_most_one([x[i] for i in nodes])
    for k, (i, var) in enumerate(x.items()):
        if deadline is not None and k % CHECK_EVERY == 0 and time.perf_counter() > deadline:
            raise OutOfTime("cpsat", f"its model written for {k} of {len(x)} nodes")
        _require_children(m, problem.nodes[i].children, class_nodes, x, var)
    if problem.has_negative_costs:
        _only_needed(m, problem, class_nodes, x)
    scale = _scale([problem.nodes[i].cost for i in x])
    m.minimize(cp_model.LinearExpr.weighted_sum(list(x.values()), [round(problem.nodes[i].cost * scale) for i in x]))
    if plain or (acyclic == "order" and not cycle_free):
        _add_order(m, problem, class_nodes, x, plain)
    elif not cycle_free:
        _forbid_two_cycles(m, problem, class_nodes, x)
    return _Model(m, x, class_nodes, scale)


def _require_children(m: cp_model.CpModel, children: tuple[int, ...], class_nodes: dict[int, list[int]],
                      x: dict[int, cp_model.IntVar], var: cp_model.IntVar) -> None:
    """`var` ⇒ each child class picks a node. Children with one node go into one enforced
    conjunction: CP-SAT's presolve makes the linear form into the same (its presolved model is
    identical, compared by fingerprint), and writing it so halves the model's build time."""
    only = []
    for child in set(children):
        kids = class_nodes.get(child)
        if kids is None:
            continue
        if len(kids) == 1:
            only.append(x[kids[0]])
        else:
            m.add(sum(x[j] for j in kids) >= var)
    if only:
        m.add_bool_and(only).only_enforce_if(var)


def _forbid_pairs(built: _Model, pairs: tuple[tuple[int, int], ...]) -> None:
    """`eqdsl.extract.prune`'s cycle conflicts, as exit clauses. A pair (n, m) says every term of
    n contains m's class D, and every term of m contains n's class C. So in an acyclic program
    with n, D is present and its node is one whose terms avoid C: `x_n → OR(D's nodes not paired
    with n)`. With one node per class this implies `x_n + x_m ≤ 1`, and it is stronger: D must
    be picked (the relaxation without order variables otherwise skips D through a cycle).
    BENCHMARKS.md: NasNet-A k1's gap after 60 s on one thread 13.5 % (pair clauses) → 1.6–2.2 %."""
    eclass = {i: c for c, nodes in built.class_nodes.items() for i in nodes}
    paired: dict[tuple[int, int], set[int]] = {}
    for a, b in pairs:
        if a in built.x and b in built.x:
            paired.setdefault((a, eclass[b]), set()).add(b)
            paired.setdefault((b, eclass[a]), set()).add(a)
    for (n, d), excluded in paired.items():
        exits = [built.x[j] for j in built.class_nodes[d] if j not in excluded]
        built.model.add_bool_or([built.x[n].negated(), *exits])


def _only_needed(m, problem: ExtractionProblem, class_nodes: dict[int, list[int]], x) -> None:
    """A non-root class is picked only if a picked node uses it. With costs ≥ 0 minimisation
    does this by itself; a negative-cost node would otherwise be picked for its own sake."""
    users: dict[int, list[int]] = {c: [] for c in class_nodes}
    for i in x:
        for child in set(problem.nodes[i].children):
            users[child].append(i)
    for c, nodes in class_nodes.items():
        if c not in problem.roots:
            m.add(sum(x[i] for i in nodes) <= sum(x[i] for i in users[c]))


def _add_order(m, problem, class_nodes, x, plain: bool = False) -> None:
    """Topological positions; only classes on a cycle of the class graph need one (unless plain)."""
    component = {c: 0 for c in class_nodes} if plain else cyclic_components(problem, class_nodes)
    sizes: dict[int, int] = {}
    for comp in component.values():
        sizes[comp] = sizes.get(comp, 0) + 1
    t = {c: m.new_int_var(0, sizes[comp] - 1, f"t{c}") for c, comp in component.items()}
    for i, var in x.items():
        node = problem.nodes[i]
        for child in set(node.children):
            if child in component and component.get(node.eclass) == component[child]:
                m.add(t[node.eclass] > t[child]).only_enforce_if(var)


def cyclic_components(problem: ExtractionProblem, class_nodes: dict[int, list[int]]) -> dict[int, int]:
    """Class → id of its strongly connected component, for classes in components of size > 1."""
    edges = {c: sorted({k for i in nodes for k in problem.nodes[i].children if k in class_nodes})
             for c, nodes in class_nodes.items()}
    return graphs.cyclic_components(edges)


def _forbid_class_cycle(m, problem: ExtractionProblem, class_nodes: dict[int, list[int]], x,
                        classes: list[int]) -> None:
    """A cycle of classes c0 → c1 → … → c0 (each c_{i+1} a child of c_i's chosen node) cannot
    have all its edges in an acyclic program: Σ_i Σ_{n in c_i with child c_{i+1}} x_n ≤ k − 1.
    Each class picks at most one node, so each inner sum is 0 or 1 — the cut forbids every
    node-level cycle through these classes at once (a class with 56 alternatives would otherwise
    need one cut per combination)."""
    edges = []
    for a, b in zip(classes, classes[1:] + classes[:1]):
        edges += [x[n] for n in class_nodes[a] if b in problem.nodes[n].children]
    m.add(sum(edges) <= len(classes) - 1)


def _forbid_short_cycles(built: _Model, problem: ExtractionProblem) -> int:
    """Every cycle of 3 to `SHORT_CYCLE` classes, at most `MAX_SHORT_CUTS` of them: one class-cycle
    cut each, up front (two-class cycles have theirs already). For the core search: a cyclic
    answer costs it a cut and a fresh solve, which on Inception-v3 k1 ran past the time limit in 4
    of 9 runs; with these cuts it proved optimal in all (BENCHMARKS.md, "Where Inception-v3 k1's
    gap lives"). Returns the number of cuts."""
    kids = {c: sorted({k for i in nodes for k in problem.nodes[i].children if k in built.class_nodes and k != c})
            for c, nodes in built.class_nodes.items()}
    cuts = 0
    for cycle in graphs.short_cycles(kids, SHORT_CYCLE, MAX_SHORT_CUTS):
        _forbid_class_cycle(built.model, problem, built.class_nodes, built.x, cycle)
        cuts += 1
    return cuts


def _constrain(built: _Model, problem: ExtractionProblem, conflicts: tuple[tuple[int, int], ...], search: str) -> None:
    """What every model gets before its first solve: the exit clauses, and for the core search
    the short-cycle cuts."""
    _forbid_pairs(built, conflicts)
    if search == "core":
        _forbid_short_cycles(built, problem)


def _forbid_two_cycles(m, problem, class_nodes, x) -> None:
    """Every two classes that point at each other: one class-cycle cut (`_forbid_class_cycle`)."""
    edges = {(problem.nodes[i].eclass, child) for i in x for child in problem.nodes[i].children}
    for a, b in sorted(edges):
        if a < b and (b, a) in edges:
            _forbid_class_cycle(m, problem, class_nodes, x, [a, b])


def _solve(solver: cp_model.CpSolver, built: _Model, whole: bool = True,
           ) -> tuple[cp_model.CpSolverStatus, tuple[Selection, float] | None]:
    """Status, and the solution and bound read inside the (possibly guarded) process that solved.
    `whole`: the model is the whole problem, so its bound is the problem's (the live status line
    shows it as it rises; a part's bound is not, and a round's solutions may be cyclic: the line
    shows only valid programs' costs, `_search`)."""
    if whole and live_status.active():
        solver.best_bound_callback = lambda bound: live_status.update(bound=bound / built.scale)
    status = solver.solve(built.model)
    if status not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        return status, None
    return status, (_decode(solver, built), solver.best_objective_bound)


def _decode(solver: cp_model.CpSolver, built: _Model) -> Selection:
    values = list(solver.response_proto.solution)  # read at once: Value per variable is 1 µs each
    return {c: i for c, nodes in built.class_nodes.items() for i in nodes if values[built.x[i].index]}


def find_cycles(problem: ExtractionProblem, choice: Selection) -> list[list[int]]:
    """Cycles (as lists of chosen node indices) among the classes the roots reach (iterative:
    chains of any depth)."""
    paths = graphs.cycles_from(problem.roots, lambda c: [k for k in problem.nodes[choice[c]].children if k in choice])
    return [[choice[c] for c in path] for path in paths]


PRUNE_SHARE = 0.2  # of the time limit, at most, for the cycle-closing test
LAZY_SHARE = 1 / 3  # hybrid: of the time limit, for rounds without order variables
LP_FIRST_SHARE = 1 / 6  # auto: of the time left after pruning, for the lp search on the whole model
HS_SHARE = 0.75  # of the time left, for the hitting sets; unproven, lp for the rest
CORE_FROM_S = 20.0  # auto: shorter budgets run lp alone (pulsed epochs' few seconds: issues 5 and 18)
SHORT_CYCLE, MAX_SHORT_CUTS = 5, 20_000  # core search: class cycles cut up front (Inception-v3 k1: 5,847)


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
        start = _Search(warm.selection, warm.cost, floor or -math.inf, started=t0)
        search = self._solve(problem, pruned, class_nodes, start, deadline)
        search.note_round()
        result = self._result(problem, search.best, search.cost, search.bound, search.proven,
                              time.perf_counter() - t0, search.rounds, search.cuts, pruning)
        result = replace(result, trace=tuple((round(t, 4), c, b) for t, c, b in search.trace if math.isfinite(b)))
        return replace(result, note="; ".join([result.note, *self._notes(search, warm.method, filtered)]))

    def _notes(self, search: _Search, warm: str, filtered: int) -> list[str]:
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

    def _solve(self, problem: ExtractionProblem, pruned: Pruned, class_nodes: dict[int, list[int]], s: _Search,
               deadline: float) -> _Search:
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

    def _hitting(self, problem: ExtractionProblem, pruned: Pruned, class_nodes: dict[int, list[int]], s: _Search,
                 deadline: float, held: frozenset[int] | None = None) -> _Search:
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
                    s: _Search, deadline: float, search: str, by_parts: bool, parts: Parts | None = None) -> _Search:
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
            built = _build(problem, class_nodes, self.acyclic, self.plain, pruned.acyclic, deadline=deadline)
        except OutOfTime:  # a huge model: the search so far (or the warm start) is the answer
            s.unbuilt = True
            return s
        _constrain(built, problem, conflicts, search)
        return self._search(problem, built, (acyclic, search), s, (time.perf_counter(), deadline))

    def _search(self, problem: ExtractionProblem, built: _Model, how: tuple[str, str], s: _Search,
                window: tuple[float, float], base: Selection | None = None) -> _Search:
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
            done = guarded(partial(_solve, solver, built, base is None),
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
                _add_order(built.model, problem, built.class_nodes, built.x)
                ordered, s.ordered_late = True, s.rounds
            elif status != cp_model.OPTIMAL:
                return s
        return s

    def _search_parts(self, problem: ExtractionProblem, parts: Parts, conflicts: tuple[tuple[int, int], ...],
                      s: _Search, how: tuple[str, str], deadline: float) -> bool:
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
            p = _Search(selection, cost, -math.inf, choice=base)
            built = _build(problem, part, how[0], required=parts.required)
            _constrain(built, problem, conflicts, how[1])
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
    def _hint(built: _Model, selection: Selection) -> None:
        built.model.clear_hints()
        chosen = set(selection.values())
        hint = built.model.proto.solution_hint  # written at once: AddHint per variable took 12 ms on 3,500
        hint.vars.extend([var.index for var in built.x.values()])
        hint.values.extend([int(i in chosen) for i in built.x])

    @staticmethod
    def _cut(problem: ExtractionProblem, built: _Model, cycles: list[list[int]]) -> int:
        for cycle in cycles:
            _forbid_class_cycle(built.model, problem, built.class_nodes, built.x,
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
