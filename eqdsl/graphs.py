"""Graph algorithms, the one home of reachability and cycles for every stage: programs, e-graphs
being explored (cycle filtering), extraction problems (orders, cycle cuts, components).

Contract: `reach(starts, successors)` is the set reachable from `starts`; `reaches(starts,
successors, goal)` stops early. `children_first(roots, successors)` lists the nodes reachable
from `roots`, each after its successors, raising `CycleFound(node)` on a cycle. `cycles_from(roots,
successors)` lists cycles met depth-first (node paths). `cyclic_components(edges)` maps each node
of a strongly connected component of size > 1 to its component id (iterative Tarjan).
`short_cycles(edges, longest, limit)` lists simple cycles of 3 to `longest` nodes.
`filter_cycles(roots, edges, victim)` walks depth-first from `roots`; `edges(cls)`
lists (node, child class) pairs in the order to try them; when an edge closes a cycle,
`victim(cycle)` picks one node of the cycle (given as nodes in path order, the closing node
last) to filter. Walks repeat until one finds no cycle, so the classes reachable through
unfiltered nodes form a DAG. Returns the filtered nodes. Node and class ids are any hashables.
"""
from __future__ import annotations

from typing import Any, Callable, Hashable, Iterable, Iterator, TypeVar

N = TypeVar("N", bound=Hashable)
C = TypeVar("C", bound=Hashable)  # a class (filter_cycles walks classes)
E = TypeVar("E", bound=Hashable)  # an edge: the node leading from a class to a child class
Successors = Callable[[N], Iterable[N]]


class CycleFound(Exception):
    def __init__(self, node: Hashable) -> None:
        super().__init__(f"cycle through {node!r}")
        self.node: Any = node


def reach(starts: Iterable[N], successors: Successors[N]) -> set[N]:
    seen: set[N] = set()
    stack = list(starts)
    while stack:
        n = stack.pop()
        if n not in seen:
            seen.add(n)
            stack.extend(successors(n))
    return seen


def reaches(starts: Iterable[N], successors: Successors[N], goal: N) -> bool:
    seen = set(starts)
    stack = list(seen)
    while stack:
        n = stack.pop()
        if n == goal:
            return True
        for k in successors(n):
            if k not in seen:
                seen.add(k)
                stack.append(k)
    return False


def children_first(roots: Iterable[N], successors: Successors[N]) -> list[N]:
    order: list[N] = []
    state: dict[N, int] = {}  # 1 = on the stack, 2 = done
    for root in roots:
        stack = [(root, False)]
        while stack:
            n, leaving = stack.pop()
            if leaving:
                state[n] = 2
                order.append(n)
                continue
            if state.get(n) == 2:
                continue
            if state.get(n) == 1:
                raise CycleFound(n)
            kids = successors(n)
            state[n] = 1
            stack.append((n, True))
            for k in kids:
                if state.get(k) == 1:
                    raise CycleFound(k)
                if state.get(k) != 2:
                    stack.append((k, False))
    return order


def cycles_from(roots: Iterable[N], successors: Successors[N]) -> list[list[N]]:
    """Each cycle as the path of nodes from the node it closes on (iterative: any depth)."""
    cycles: list[list[N]] = []
    state: dict[N, int] = {}
    path: list[N] = []
    for r in roots:
        if r in state:
            continue
        state[r] = 1
        path.append(r)
        walk = [iter(successors(r))]
        while walk:
            child = next(walk[-1], None)
            if child is None:
                state[path.pop()] = 2
                walk.pop()
            elif state.get(child) == 1:
                cycles.append(path[path.index(child):])
            elif child not in state:
                state[child] = 1
                path.append(child)
                walk.append(iter(successors(child)))
    return cycles


def short_cycles(edges: dict[int, list[int]], longest: int, limit: int) -> Iterator[list[int]]:
    """Simple cycles of 3 to `longest` nodes (each once, from its smallest node), at most `limit`
    of them; `edges` maps every node to its successors (self-loops and two-node cycles are left
    out: callers handle those apart)."""
    found = 0
    for start in edges:
        stack = [[start]]
        while stack:
            path = stack.pop()
            for k in edges[path[-1]]:
                if k == start and len(path) > 2:
                    if found == limit:
                        return
                    found += 1
                    yield path
                elif k > start and k not in path and len(path) < longest:
                    stack.append(path + [k])


def cyclic_components(edges: dict[N, list[N]]) -> dict[N, N]:
    """Node → a representative of its strongly connected component, for components of size > 1."""
    index: dict[N, int] = {}
    low: dict[N, int] = {}
    on_stack: set[N] = set()
    stack: list[N] = []
    result: dict[N, N] = {}
    for start in edges:
        if start in index:
            continue
        work = [(start, 0)]
        while work:
            c, k = work.pop()
            if k == 0:
                index[c] = low[c] = len(index)
                stack.append(c)
                on_stack.add(c)
            if k < len(edges[c]):
                work.append((c, k + 1))
                child = edges[c][k]
                if child not in index:
                    work.append((child, 0))
                elif child in on_stack:
                    low[c] = min(low[c], index[child])
                continue
            if low[c] == index[c]:
                members = _pop_component(stack, on_stack, c)
                if len(members) > 1:
                    result.update((v, c) for v in members)
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[c])
    return result


def _pop_component(stack: list[N], on_stack: set[N], head: N) -> list[N]:
    members = []
    while True:
        v = stack.pop()
        on_stack.discard(v)
        members.append(v)
        if v == head:
            return members


def filter_cycles(roots: Iterable[C], edges: Callable[[C], Iterable[tuple[E, C]]],
                  victim: Callable[[list[E]], E]) -> set[E]:
    starts = list(roots)
    filtered: set[E] = set()
    while _one_walk(starts, edges, victim, filtered):
        pass
    return filtered


def _one_walk(roots: list[C], edges: Callable[[C], Iterable[tuple[E, C]]],
              victim: Callable[[list[E]], E], filtered: set[E]) -> bool:
    found = False
    state: dict = {}  # 1: on the stack, 2: finished
    for root in roots:
        if root in state:
            continue
        state[root] = 1
        # (class, its edge walk, node used to enter it)
        stack: list[tuple[C, Iterator[tuple[E, C]], Any]] = [(root, iter(edges(root)), None)]
        while stack:
            cls, walk, _ = stack[-1]
            step = next(walk, None)
            if step is None:
                state[cls] = 2
                stack.pop()
                continue
            node, child = step
            if node in filtered:
                continue
            if state.get(child) == 1:
                at = next(k for k, frame in enumerate(stack) if frame[0] == child)
                cycle = [frame[2] for frame in stack[at + 1:]] + [node]
                chosen = victim(cycle)
                filtered.add(chosen)
                found = True
                if chosen != node:  # stop walking below the filtered node; revisit later
                    cut = next(k for k in range(at + 1, len(stack)) if stack[k][2] == chosen)
                    for frame in stack[cut:]:
                        state.pop(frame[0], None)
                    del stack[cut:]
            elif child not in state:
                state[child] = 1
                stack.append((child, iter(edges(child)), node))
    return found
