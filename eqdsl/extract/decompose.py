"""Independent parts of an extraction problem, to be solved one CP-SAT model each.

CP-SAT finds the independent components of a model (its log's `compo:`) and gives each its own
LP, but searches them as one tree: proving one component's optimum is repeated under every
choice made in the others. TENSAT's e-graphs fall apart at the classes every program holds (a
BERT layer's output, a ResNet stage's): solved one part at a time, BERT k_multi 3 proves optimal
in 0.3 s instead of 4–18 s (BENCHMARKS.md, "k_multi 3, independent parts").

`split(problem, class_nodes, conflicts, deadline)` (costs ≥ 0) returns:
- `fixed`: choices made without a solve — a class whose cheapest tree costs 0 takes that tree's
  node (a zero-cost term of zero-cost classes: never dearer, and its classes only point at each
  other, so no cycle goes through them); a class every program holds that has one node takes it;
- `required`: classes every program holds (`eqdsl.extract.prune.unavoidable_classes`): a part
  picks exactly one node there, and a node needing one of them needs nothing of its part;
- `parts`: the other classes, grouped so that no constraint of the extraction model links two
  groups — a node is linked to its class, to each child class that is neither fixed nor required,
  and, through a cycle conflict, to the other node's class.
Contract: for each part, any choice satisfying its own model (one node per required class, at
most one elsewhere, children inside the part present, exit clauses inside it), together with
`fixed`, is a complete program; Σ of the parts' optimal costs + `fixed_cost` is a lower bound of
the optimum, and equals it when the combined choice is acyclic (the caller checks: a cycle can
pass through a fixed or required class and so through two parts).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from eqdsl.extract.egraph import ExtractionProblem, Selection
from eqdsl.extract.greedy import tree_greedy
from eqdsl.extract.prune import ClassNodes, unavoidable_classes

MIN_PART = 200  # nodes: smaller parts share one model


@dataclass(frozen=True)
class Parts:
    fixed: Selection  # class → node, chosen without a solve
    fixed_cost: float  # of the fixed classes every program holds
    required: frozenset[int]
    parts: tuple[ClassNodes, ...]  # smallest first

    @property
    def solvable(self) -> tuple[ClassNodes, ...]:
        """The parts worth a model of their own (a single one is the whole problem again)."""
        return self.parts if len(self.parts) > 1 else ()


def split(problem: ExtractionProblem, class_nodes: ClassNodes, conflicts: tuple[tuple[int, int], ...],
          deadline: float) -> Parts | None:
    """None: past the deadline, or costs below 0 (then a zero-cost tree is not the cheapest)."""
    if problem.has_negative_costs:
        return None
    required = unavoidable_classes(problem, class_nodes, deadline)
    if required is None:
        return None
    fixed = _zero_cost_trees(problem, class_nodes)
    for c in required:
        if c not in fixed and len(class_nodes[c]) == 1:
            fixed[c] = class_nodes[c][0]
    fixed_cost = sum(problem.nodes[i].cost for c, i in fixed.items() if c in required)
    groups = _groups(problem, class_nodes, conflicts, set(fixed), required)
    return Parts(fixed, fixed_cost, frozenset(required), groups)


def _zero_cost_trees(problem: ExtractionProblem, class_nodes: ClassNodes) -> Selection:
    """Classes whose cheapest term (over `class_nodes`) costs 0, each with that term's node."""
    usable = {i for nodes in class_nodes.values() for i in nodes}
    only = ExtractionProblem(problem.class_ids, problem.nodes, problem.class_nodes, problem.roots,
                             frozenset(range(len(problem.nodes))) - usable)
    choice, best = tree_greedy(only)
    return {c: choice[c] for c in class_nodes if best[c] == 0 and not math.isinf(best[c])}


def _groups(problem: ExtractionProblem, class_nodes: ClassNodes, conflicts: tuple[tuple[int, int], ...],
            fixed: set[int], required: set[int]) -> tuple[ClassNodes, ...]:
    """Union-find over the classes left to choose: a node joins its class to its children that
    are neither fixed nor required; a conflict pair joins the two nodes' classes."""
    parent = {c: c for c in class_nodes if c not in fixed}

    def find(c: int) -> int:
        while parent[c] != c:
            parent[c] = parent[parent[c]]
            c = parent[c]
        return c

    def join(a: int, b: int) -> None:
        parent[find(a)] = find(b)

    for c in parent:
        for i in class_nodes[c]:
            for k in problem.nodes[i].children:
                if k in parent and k not in required:
                    join(c, k)
    for a, b in conflicts:
        ca, cb = problem.nodes[a].eclass, problem.nodes[b].eclass
        if ca in parent and cb in parent:
            join(ca, cb)
    grouped: dict[int, ClassNodes] = {}
    for c in parent:
        grouped.setdefault(find(c), {})[c] = class_nodes[c]
    return _bundled(sorted(grouped.values(), key=_size))


def _size(part: ClassNodes) -> int:
    return sum(map(len, part.values()))


def _bundled(parts: list[ClassNodes]) -> tuple[ClassNodes, ...]:
    """Small parts (smallest first) merged up to `MIN_PART` nodes: one model for many constant
    folds of a few nodes each instead of a CP-SAT call apiece."""
    out: list[ClassNodes] = []
    for part in parts:
        if out and _size(out[-1]) < MIN_PART:
            out[-1] = {**out[-1], **part}
        else:
            out.append(part)
    return tuple(sorted(out, key=_size))
