"""`cpsat`'s `hs` search: extraction as an implicit hitting set over the e-nodes that cost something.

Why: on e-graphs whose cycles run through zero-cost `split`/`concat` nodes (TENSAT's BERT), every
relaxation of the one-Boolean-per-node model carries classes around those cycles for nothing:
CP-SAT's bound sat at the cost of the forced nodes (0.14 of 0.70) and BERT stayed 24 % open after
60 s. Here acyclicity is never modelled. A set B of bought nodes (every zero-cost node is free)
*derives* a class when some node of it is bought and all its child classes are derived — a least
fixpoint, so every derivation is well-founded and the nodes that first derive each class form an
acyclic program costing at most cost(B) (`Closure`, incremental, with undo).

The search (MaxHS-style, Davies & Bacchus): a *core* is a set of nodes every program must hold
one of. Take a target class every program holds (`eqdsl.extract.prune.unavoidable_classes`; the
first one not derived, nearest the leaves); from a B that does not derive it, add nodes cheapest
first, each kept unless it would derive the target; those refused form a core (a program missing
all of them would lie inside the grown set, which does not derive the target: derivation is
monotone). Each round solves the minimum-cost hitting set of the cores so far (a set-cover MIP on
HiGHS through OR-Tools: CP-SAT took over 30 s per solve past 22 BERT cores where HiGHS took
0.2–2 s), then collects disjoint cores from its answer until they derive the roots. The hitting
set's optimum (the MIP's bound) is a lower bound on every program: a program's priced nodes hit
every core. When an optimal hitting set derives the roots, the program it derives is optimal.
BENCHMARKS.md, "Extraction on the public TENSAT e-graphs (issue 47)".

Contract: costs ≥ 0 (with negative ones `cpsat` runs `lp` instead); `hitting_set(problem,
class_nodes, seconds, held)` returns an `HsOutcome`: the cheapest program a hitting set derived
(optimal when it `meets_bound`; else the best of the greedy hitting sets and a time-limited MIP's),
or none, and the best lower bound found. `class_nodes` is `eqdsl.extract.prune`'s (some optimal
program uses only those nodes); `held`, the classes every program holds where the caller has them
(`eqdsl.extract.decompose.Parts.required`), else computed.
"""
from __future__ import annotations

import heapq
import math
import time
from dataclasses import dataclass

from ortools.linear_solver import pywraplp

from eqdsl.diagnostics import EqdslError
from eqdsl.extract.egraph import ExtractionProblem, Selection, dag_cost, restrict
from eqdsl.extract.greedy import tree_greedy
from eqdsl.extract.prune import unavoidable_classes

MIP_SOLVERS = ("HIGHS", "SCIP", "CBC")  # the first OR-Tools has linked in
ClassNodes = dict[int, list[int]]
Found = tuple[float, Selection] | None  # a program's DAG cost and the program


@dataclass(frozen=True)
class HsOutcome:
    selection: Selection | None  # the cheapest hitting set's program (optimal when cost ≤ bound), or None
    cost: float  # its DAG cost (inf without one)
    bound: float  # a lower bound on every program's DAG cost
    rounds: int  # hitting sets solved
    cores: int


class Graph:
    """What derivation needs of the e-graph, built once, indexed by node and class: each node's
    class and number of distinct child classes (-1: not usable), each class's user nodes."""

    def __init__(self, problem: ExtractionProblem, class_nodes: ClassNodes) -> None:
        self.node_class = [-1] * len(problem.nodes)
        self.need = [-1] * len(problem.nodes)
        self.users: list[list[int]] = [[] for _ in range(problem.num_classes)]
        for c, nodes in class_nodes.items():
            for i in nodes:
                kids = set(problem.nodes[i].children)
                self.node_class[i], self.need[i] = c, len(kids)
                for child in kids:
                    self.users[child].append(i)


class Closure:
    """The classes the bought nodes derive (least fixpoint), kept incrementally. `trial` buys one
    node and takes everything back if that derived a class of `stop`. `first[c]`: the node that
    derived class c (-1: not derived)."""

    def __init__(self, graph: Graph, like: Closure | None = None) -> None:
        """Empty, or a copy of `like`."""
        self.graph = graph
        self.ready: list[int] = list(like.ready) if like else [0] * len(graph.need)  # derived children per node
        self.bought: list[bool] = list(like.bought) if like else [False] * len(graph.need)
        self.first: list[int] = list(like.first) if like else [-1] * len(graph.users)

    def add(self, nodes) -> None:
        for n in nodes:
            if not self.bought[n]:
                self.bought[n] = True
                self._derive(n, None, frozenset())

    def trial(self, node: int, stop: frozenset[int]) -> bool:
        """Buy `node`, True (and nothing bought or derived) if a class of `stop` would follow."""
        self.bought[node] = True
        derived: list[int] = []
        if self._derive(node, derived, stop):
            self.bought[node] = False
            self._undo(derived)
            return True
        return False

    def _derive(self, node: int, derived: list[int] | None, stop: frozenset[int]) -> bool:
        node_class, need, users = self.graph.node_class, self.graph.need, self.graph.users
        ready, bought, first = self.ready, self.bought, self.first
        if ready[node] != need[node] or first[node_class[node]] >= 0:
            return False
        stack = [node]
        while stack:
            n = stack.pop()
            c = node_class[n]
            if first[c] >= 0:
                continue
            first[c] = n
            for user in users[c]:
                ready[user] += 1
                if ready[user] == need[user] and bought[user]:
                    stack.append(user)
            if derived is not None:
                derived.append(c)
                if c in stop:
                    return True
        return False

    def _undo(self, derived: list[int]) -> None:
        """Un-derive these classes: their users' counts go back with them."""
        ready, users, first = self.ready, self.graph.users, self.first
        for c in derived:
            first[c] = -1
            for user in users[c]:
                ready[user] -= 1


class _Search:
    """The cores found so far and how to find more: the nodes by price, the targets in order."""

    def __init__(self, problem: ExtractionProblem, class_nodes: ClassNodes, deadline: float,
                 held: frozenset[int] | None = None) -> None:
        self.problem, self.class_nodes, self.deadline = problem, class_nodes, deadline
        nodes = [i for group in class_nodes.values() for i in group]
        self.free = [i for i in nodes if problem.nodes[i].cost == 0]
        # cheapest first: the grown set keeps cheap nodes, so cores hold the dear ones that complete
        self.priced = sorted((i for i in nodes if problem.nodes[i].cost > 0), key=lambda i: problem.nodes[i].cost)
        self.roots = frozenset(problem.roots)
        self.cores: list[list[int]] = []
        self.graph = Graph(problem, class_nodes)
        self.free_closure = Closure(self.graph)  # what the zero-cost nodes derive, copied for every closure
        self.free_closure.add(self.free)
        if held is None:
            held = frozenset(unavoidable_classes(problem, class_nodes, deadline) or problem.roots)
        _, below = tree_greedy(problem)  # cheapest tree per class: nearer the leaves first
        self.targets = sorted(held | set(problem.roots), key=lambda c: (below[c], c))

    def closure(self, bought) -> Closure:
        closure = Closure(self.graph, self.free_closure)
        closure.add(bought)
        return closure

    def derives_roots(self, closure: Closure) -> bool:
        return all(closure.first[r] >= 0 for r in self.roots)

    def core(self, closure: Closure) -> list[int]:
        """The nodes refused while growing `closure` (grown in place) cheapest first without deriving
        the first target it does not derive (a class every program holds, so every program hits the
        core; the first, nearest the leaves: a refusal's trial derives only what lies below it)."""
        missing = frozenset([next(t for t in self.targets if closure.first[t] < 0)])
        node_class, need, first, owned, ready = (self.graph.node_class, self.graph.need, closure.first,
                                                 closure.bought, closure.ready)
        completing, refused = self.completing(closure, missing), []
        for n in self.priced:
            if owned[n] or first[node_class[n]] >= 0:
                continue
            if ready[n] == need[n] and node_class[n] in completing:
                refused.append(n)  # what its trial would find, without deriving half the e-graph again
            elif closure.trial(n, missing):
                refused.append(n)
                completing = self.completing(closure, missing)
        return refused

    def completing(self, closure: Closure, missing: frozenset[int]) -> set[int]:
        """Underived classes whose derivation alone would derive a class of `missing`: those, and
        (backwards) the one underived child of a bought node of such a class. Only grows as nodes
        are bought, so it stays right, if incomplete, until recomputed."""
        found, stack = set(missing), list(missing)
        first, ready, need, bought = closure.first, closure.ready, self.graph.need, closure.bought
        while stack:
            for n in self.class_nodes.get(stack.pop(), ()):
                if bought[n] and ready[n] == need[n] - 1:
                    child = next(k for k in self.problem.nodes[n].children if first[k] < 0)
                    if child not in found:
                        found.add(child)
                        stack.append(child)
        return found

    def new_cores(self, bought: set[int]) -> None:
        """Cores from `bought`, each found with the earlier ones' nodes bought too, until the roots
        are derived (so they are disjoint). Taking them all, not the first few, measured best
        (BERT / Inception-v3 k1: 2 per round 55 s / unproven, 8: 27 / 25 s, all: 21 / 16 s)."""
        while time.monotonic() < self.deadline and not self.derives_roots(closure := self.closure(bought)):
            core = self.core(closure)
            self.cores.append(core)
            bought |= set(core)

    def program(self, closure: Closure) -> Found:
        """The program that `closure`'s derivation makes, with its DAG cost; None if it does not
        derive the roots."""
        if not self.derives_roots(closure):
            return None
        selection = restrict(self.problem, {c: n for c, n in enumerate(closure.first) if n >= 0})
        return dag_cost(self.problem, selection), selection


def meets_bound(cost: float, bound: float) -> bool:
    """A program of `cost` is proven optimal by lower bound `bound` (to float rounding)."""
    return cost <= bound * (1 + 1e-9) + 1e-12


def hitting_set(problem: ExtractionProblem, class_nodes: ClassNodes, seconds: float,
                held: frozenset[int] | None = None) -> HsOutcome:
    deadline = time.monotonic() + seconds
    search = _Search(problem, class_nodes, deadline, held)
    if not search.derives_roots(search.closure(search.priced)):
        raise EqdslError.one("extraction is unsatisfiable: the roots have no acyclic choice of e-nodes")
    search.new_cores(set())
    bound, rounds, best = 0.0, 0, None
    while time.monotonic() < deadline:
        # a greedy hitting set that derives the roots is a program: the answer if time runs out
        # (only that: as the solve's replacement, MaxHS-style, it was not faster on every model)
        best = _cheaper(best, search.program(search.closure(_greedy_hitting_set(problem, search.cores))))
        solved = _min_hitting_set(problem, search.cores, deadline - time.monotonic())
        if solved is None:
            break
        chosen, mip_bound = solved
        rounds += 1
        bound = max(bound, mip_bound)
        derived = search.program(search.closure(chosen))
        if derived is not None:  # optimal, or out of time
            best = _cheaper(best, derived)
            break
        if best is not None and meets_bound(best[0], bound):
            break
        search.new_cores(set(chosen))
    cost, selection = best if best is not None else (math.inf, None)
    return HsOutcome(selection, cost, bound, rounds, len(search.cores))


def _cheaper(best: Found, other: Found) -> Found:
    return other if best is None or (other is not None and other[0] < best[0]) else best


def _greedy_hitting_set(problem: ExtractionProblem, cores: list[list[int]]) -> list[int]:
    """A cheap set meeting every core: the node of least cost per core it newly meets, re-priced
    lazily (a node's price only rises as cores are met)."""
    meets: dict[int, list[int]] = {}
    for k, core in enumerate(cores):
        for n in core:
            meets.setdefault(n, []).append(k)
    met, left, chosen = [False] * len(cores), len(cores), []
    heap = [(problem.nodes[n].cost / len(ks), n) for n, ks in meets.items()]
    heapq.heapify(heap)
    while left:
        price, n = heapq.heappop(heap)
        fresh = sum(not met[k] for k in meets[n])
        if fresh and problem.nodes[n].cost / fresh > price:
            heapq.heappush(heap, (problem.nodes[n].cost / fresh, n))
        elif fresh:
            chosen.append(n)
            for k in meets[n]:
                left -= not met[k]
                met[k] = True
    return chosen


def _min_hitting_set(problem: ExtractionProblem, cores: list[list[int]], seconds: float,
                     ) -> tuple[list[int], float] | None:
    """The cheapest set of nodes meeting every core and the MIP's lower bound (the set's cost when
    proven), or None when no solution came within `seconds`."""
    if seconds <= 0:
        return None
    solver = _mip_solver()
    solver.SetTimeLimit(max(1, int(seconds * 1000)))
    take = {}
    for core in cores:
        for n in core:
            if n not in take:
                take[n] = solver.BoolVar(f"n{n}")
        solver.Add(solver.Sum([take[n] for n in core]) >= 1)
    solver.Minimize(solver.Sum([problem.nodes[n].cost * var for n, var in take.items()]))
    exact = pywraplp.MPSolverParameters()
    exact.SetDoubleParam(exact.RELATIVE_MIP_GAP, 0.0)  # HiGHS stops at 0.01 % by default
    status = solver.Solve(exact)
    if status not in (pywraplp.Solver.OPTIMAL, pywraplp.Solver.FEASIBLE):
        return None
    chosen = [n for n, var in take.items() if var.solution_value() > 0.5]
    return chosen, solver.Objective().BestBound()


def _mip_solver() -> pywraplp.Solver:
    for name in MIP_SOLVERS:
        solver = pywraplp.Solver.CreateSolver(name)
        if solver is not None:
            solver.SuppressOutput()  # HiGHS prints its banner to stdout even so; its own flag stops it
            if name == "HIGHS":  # (the call reports False, yet the flag is set)
                solver.SetSolverSpecificParametersAsString("output_flag=false")
            return solver
    raise RuntimeError(f"OR-Tools has none of the MIP solvers {', '.join(MIP_SOLVERS)} linked in")
