"""The e-graph as extractors see it: classes, nodes with costs, roots; read from egraph-serialize JSON.

Contract: `problem_from_json(data, source)` accepts any egraph-serialize JSON (egglog's own output,
extraction-gym files) and raises `EqdslError` naming the JSON path of the first malformed entry
(dangling child, no root, a cost that is not a finite number). Costs may be negative
(set-cover / MaxSAT encodings): `cpsat` handles them, the greedy extractors refuse them. Node
children are class indices. `Selection` maps each class needed by the roots to one chosen node;
helpers compute its DAG cost and check it is complete and acyclic.
"""
from __future__ import annotations

import json
import math
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Sequence

from eqdsl.diagnostics import EqdslError
from eqdsl.graphs import CycleFound, children_first

Selection = dict[int, int]  # class index → node index


@dataclass(frozen=True)
class ENode:
    id: str
    op: str
    eclass: int
    children: tuple[int, ...]  # class indices
    cost: float


@dataclass(frozen=True)
class ExtractionProblem:
    class_ids: tuple[str, ...]
    nodes: tuple[ENode, ...]
    class_nodes: tuple[tuple[int, ...], ...]  # node indices of each class
    roots: tuple[int, ...]  # class indices, in root order
    blocked: frozenset[int] = frozenset()  # node indices that may not be chosen (filtered/subsumed)
    # complete, acyclic selections of programs the e-graph is known to hold (the ones it was loaded
    # with): an extractor may start from them (`eqdsl.extract.starts.cheapest_known`)
    known: tuple[Selection, ...] = field(default=(), compare=False)

    @property
    def num_classes(self) -> int:
        return len(self.class_ids)

    def allowed(self, node: int) -> bool:
        return node not in self.blocked

    @property
    def has_negative_costs(self) -> bool:
        return any(n.cost < 0 for n in self.nodes)


def build_problem(raw_nodes: Sequence[tuple[str, str, str, Sequence[str], float, bool]],
                  roots: list[str], children_are_classes: bool = False) -> ExtractionProblem:
    """From (node id, op, class id, child node ids, cost, subsumed) rows with validated ids
    (children: class ids instead, with `children_are_classes`)."""
    class_index: dict[str, int] = {}
    for _, _, cid, _, _, _ in raw_nodes:
        class_index.setdefault(cid, len(class_index))
    node_class = class_index if children_are_classes else {nid: class_index[cid] for nid, _, cid, _, _, _ in raw_nodes}
    nodes = []
    members: list[list[int]] = [[] for _ in class_index]
    blocked = set()
    for i, (nid, op, cid, kids, cost, subsumed) in enumerate(raw_nodes):
        nodes.append(ENode(nid, op, class_index[cid], tuple([node_class[k] for k in kids]), cost))
        members[class_index[cid]].append(i)
        if subsumed:
            blocked.add(i)
    return ExtractionProblem(tuple(class_index), tuple(nodes), tuple(tuple(m) for m in members),
                             tuple(class_index[r] for r in roots), frozenset(blocked))


def _check_node(nid: Any, node: Any) -> tuple[str, str, list[str], float, bool]:
    where = f"nodes[{json.dumps(nid)}]"
    if not isinstance(node, dict):
        raise EqdslError.one(f"expected a node object, got {type(node).__name__}", path=where)
    op, cid, kids = node.get("op"), node.get("eclass"), node.get("children", [])
    cost, subsumed = node.get("cost", 1.0), node.get("subsumed", False)
    if not isinstance(op, str):
        raise EqdslError.one(f"expected a string 'op', got {op!r}", path=f"{where}.op")
    if not isinstance(cid, (str, int)):
        raise EqdslError.one(f"expected an 'eclass' id, got {cid!r}", path=f"{where}.eclass")
    if not isinstance(kids, list) or not all(isinstance(k, (str, int)) for k in kids):
        raise EqdslError.one(f"expected a list of node ids, got {kids!r}", path=f"{where}.children")
    if not isinstance(cost, (int, float)) or isinstance(cost, bool) or not _finite(cost):
        shown = repr(cost) if len(repr(cost)) < 40 else repr(cost)[:37] + "..."
        raise EqdslError.one(f"expected a finite number, got {shown}", path=f"{where}.cost")
    return op, str(cid), [str(k) for k in kids], float(cost), bool(subsumed)


def _finite(cost: int | float) -> bool:
    try:
        return math.isfinite(float(cost))
    except OverflowError:  # an integer past float64's range
        return False


def problem_from_json(data: Any, source: str = "<json>", roots: list[str] | None = None,
                      drop_ops: frozenset[str] = frozenset()) -> ExtractionProblem:
    """`drop_ops` removes rows that are not program nodes (analysis functions, root markers)."""
    try:
        if not isinstance(data, dict) or not isinstance(data.get("nodes"), dict):
            raise EqdslError.one("expected an object with a 'nodes' mapping", path="<top level>")
        rows = []
        for nid, node in data["nodes"].items():
            op, cid, kids, cost, subsumed = _check_node(nid, node)
            if op not in drop_ops:
                rows.append((str(nid), op, cid, kids, cost, subsumed))
        known = {r[0] for r in rows}
        for nid, _, _, kids, _, _ in rows:
            for k, kid in enumerate(kids):
                if kid not in known:
                    raise EqdslError.one(f"dangling child: no node with id {kid!r}",
                                         path=f"nodes[{json.dumps(nid)}].children[{k}]")
        roots = roots if roots is not None else _json_roots(data, {r[2] for r in rows})
        if not math.isfinite(sum(abs(r[4]) for r in rows)):
            raise EqdslError.one("the costs' sum overflows float64: expected costs whose sum is below 1.8e308 "
                                 "(scale them down)", path="nodes")
        return build_problem(rows, roots)
    except EqdslError as err:
        raise EqdslError([_prefixed(d, source) for d in err.diagnostics]) from None


def _prefixed(d, source: str):
    return replace(d, path=f"{source}: {d.path}" if d.path else source)


class DuplicateKey(ValueError):
    def __init__(self, key: str) -> None:
        super().__init__(key)
        self.key = key


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    found: dict[str, Any] = {}
    for key, value in pairs:
        if key in found:
            raise DuplicateKey(key)
        found[key] = value
    return found


def _json_roots(data: dict, classes: set[str]) -> list[str]:
    roots = data.get("root_eclasses")
    if not isinstance(roots, list) or not roots:
        raise EqdslError.one("no root: expected a non-empty list of e-class ids", path="root_eclasses")
    seen: dict[str, int] = {}
    for i, r in enumerate(roots):
        if str(r) not in classes:
            raise EqdslError.one(f"root e-class {r!r} has no nodes", path=f"root_eclasses[{i}]")
        if str(r) in seen:
            raise EqdslError.one(f"root e-class {r!r} is listed twice (also at root_eclasses[{seen[str(r)]}]); "
                                 "expected each root once", path=f"root_eclasses[{i}]")
        seen[str(r)] = i
    return [str(r) for r in roots]


def read_problem(path: Path) -> ExtractionProblem:
    try:
        if path.exists() and not path.is_file():
            raise EqdslError.one(f"cannot read e-graph {path}: not a regular file (a directory or a device)")
        data = json.loads(path.read_text(encoding="utf-8-sig"), object_pairs_hook=_unique_keys)  # a BOM allowed
    except DuplicateKey as err:
        raise EqdslError.one(f"{path}: the key {err.key!r} appears twice in one object (JSON would keep the "
                             "last silently); expected each node id, and each field, once") from None
    except (OSError, UnicodeDecodeError) as err:
        raise EqdslError.one(f"cannot read e-graph {path}: {err}") from None
    except json.JSONDecodeError as err:
        raise EqdslError.one(f"{path}:{err.lineno}:{err.colno}: invalid JSON: {err.msg}") from None
    except RecursionError:
        raise EqdslError.one(f"{path}: JSON nested too deeply (an e-graph is objects and lists a few levels "
                             "deep)") from None
    return problem_from_json(data, str(path))


# ---- selections ----
def reachable(problem: ExtractionProblem, selection: Selection) -> list[int]:
    """Classes the roots need under `selection`, children before parents; raises if cyclic/incomplete."""
    def children(c: int) -> tuple[int, ...]:
        if c not in selection:
            raise IncompleteSelection(c)
        return problem.nodes[selection[c]].children

    try:
        return children_first(problem.roots, children)
    except CycleFound as cycle:
        raise CyclicSelection(cycle.node) from None


class CyclicSelection(Exception):
    def __init__(self, eclass: int) -> None:
        super().__init__(f"selection is cyclic through class {eclass}")
        self.eclass = eclass


class IncompleteSelection(Exception):
    def __init__(self, eclass: int) -> None:
        super().__init__(f"selection has no node for class {eclass}")
        self.eclass = eclass


def dag_cost(problem: ExtractionProblem, selection: Selection) -> float:
    """Cost with shared subterms counted once (the selection must be acyclic and complete)."""
    return sum(problem.nodes[selection[c]].cost for c in reachable(problem, selection))


def cost_by_op(problem: ExtractionProblem, selection: Selection) -> dict[str, float]:
    """The DAG cost split by operator (nodes of cost 0 left out), dearest first."""
    by_op: dict[str, float] = {}
    for c in reachable(problem, selection):
        node = problem.nodes[selection[c]]
        if node.cost:
            by_op[node.op] = by_op.get(node.op, 0.0) + node.cost
    return dict(sorted(by_op.items(), key=lambda kv: -kv[1]))


def tree_cost(problem: ExtractionProblem, selection: Selection) -> float:
    """Cost of the selection as a tree: every use of a shared subterm pays again."""
    memo: dict[int, float] = {}
    for c in reachable(problem, selection):
        node = problem.nodes[selection[c]]
        memo[c] = node.cost + sum(memo[k] for k in node.children)
    return sum(memo[r] for r in problem.roots)


def restrict(problem: ExtractionProblem, selection: Selection) -> Selection:
    """Only the classes the roots need."""
    return {c: selection[c] for c in reachable(problem, selection)}
