"""The CP-SAT model of `cpsat` extraction (`eqdsl.extract.cpsat` solves it): one Boolean per usable
e-node, a root class picks exactly one node, a picked node makes each child class pick one, a
pruning conflict forces the other class outside it, Σ cost·x minimised; acyclicity by order
variables (`order`), by cuts on the cycles an answer holds (`lazy`), or both (`hybrid`). `Search`
is the state of a search over it: the best acyclic program so far and what the rounds proved.
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass, field

from ortools.sat.python import cp_model

from eqdsl import graphs
from eqdsl import status as live_status
from eqdsl.extract.egraph import ExtractionProblem, Selection, dag_cost, restrict
from eqdsl.extract.greedy import CHECK_EVERY, OutOfTime, tree_greedy, unreachable_roots_error

SHORT_CYCLE, MAX_SHORT_CUTS = 5, 20_000  # core search: class cycles of up to 5 cut up front, at most this many


@dataclass(frozen=True)
class Model:
    model: cp_model.CpModel
    x: dict[int, cp_model.IntVar]  # node index → Boolean
    class_nodes: dict[int, list[int]]  # class → usable nodes
    scale: float


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


def build(problem: ExtractionProblem, class_nodes: dict[int, list[int]], acyclic: str,
           plain: bool = False, cycle_free: bool = False, required: frozenset[int] = frozenset(),
           deadline: float | None = None) -> Model:
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
        add_order(m, problem, class_nodes, x, plain)
    elif not cycle_free:
        _forbid_two_cycles(m, problem, class_nodes, x)
    return Model(m, x, class_nodes, scale)


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


def _forbid_pairs(built: Model, pairs: tuple[tuple[int, int], ...]) -> None:
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


def add_order(m, problem, class_nodes, x, plain: bool = False) -> None:
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


def forbid_class_cycle(m, problem: ExtractionProblem, class_nodes: dict[int, list[int]], x,
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


def forbid_short_cycles(built: Model, problem: ExtractionProblem) -> int:
    """Every cycle of 3 to `SHORT_CYCLE` classes, at most `MAX_SHORT_CUTS` of them: one class-cycle
    cut each, up front (two-class cycles have theirs already). For the core search: a cyclic
    answer costs it a cut and a fresh solve, which on Inception-v3 k1 ran past the time limit in 4
    of 9 runs; with these cuts it proved optimal in all (BENCHMARKS.md, "Where Inception-v3 k1's
    gap lives"). Returns the number of cuts."""
    kids = {c: sorted({k for i in nodes for k in problem.nodes[i].children if k in built.class_nodes and k != c})
            for c, nodes in built.class_nodes.items()}
    cuts = 0
    for cycle in graphs.short_cycles(kids, SHORT_CYCLE, MAX_SHORT_CUTS):
        forbid_class_cycle(built.model, problem, built.class_nodes, built.x, cycle)
        cuts += 1
    return cuts


def constrain(built: Model, problem: ExtractionProblem, conflicts: tuple[tuple[int, int], ...], search: str) -> None:
    """What every model gets before its first solve: the exit clauses, and for the core search
    the short-cycle cuts."""
    _forbid_pairs(built, conflicts)
    if search == "core":
        forbid_short_cycles(built, problem)


def _forbid_two_cycles(m, problem, class_nodes, x) -> None:
    """Every two classes that point at each other: one class-cycle cut (`forbid_class_cycle`)."""
    edges = {(problem.nodes[i].eclass, child) for i in x for child in problem.nodes[i].children}
    for a, b in sorted(edges):
        if a < b and (b, a) in edges:
            forbid_class_cycle(m, problem, class_nodes, x, [a, b])


def solve(solver: cp_model.CpSolver, built: Model, whole: bool = True,
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


def _decode(solver: cp_model.CpSolver, built: Model) -> Selection:
    values = list(solver.response_proto.solution)  # read at once: Value per variable is 1 µs each
    return {c: i for c, nodes in built.class_nodes.items() for i in nodes if values[built.x[i].index]}


def find_cycles(problem: ExtractionProblem, choice: Selection) -> list[list[int]]:
    """Cycles (as lists of chosen node indices) among the classes the roots reach (iterative:
    chains of any depth)."""
    paths = graphs.cycles_from(problem.roots, lambda c: [k for k in problem.nodes[choice[c]].children if k in choice])
    return [[choice[c] for c in path] for path in paths]


@dataclass
class Search:
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
