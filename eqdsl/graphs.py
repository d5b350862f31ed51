"""TENSAT's cycle filter as a graph algorithm, shared by exploration (subsume in egglog) and
extraction (`acyclic: filter-list`).

Contract: `filter_cycles(roots, edges, victim)` walks depth-first from `roots`; `edges(cls)`
lists (node, child class) pairs in the order to try them; when an edge closes a cycle,
`victim(cycle)` picks one node of the cycle (given as nodes in path order, the closing node
last) to filter. Walks repeat until one finds no cycle, so the classes reachable through
unfiltered nodes form a DAG. Returns the filtered nodes. Node and class ids are any hashables.
"""
from __future__ import annotations

from typing import Callable, Hashable, Iterable, Sequence

Edges = Callable[[Hashable], Iterable[tuple[Hashable, Hashable]]]
Victim = Callable[[Sequence[Hashable]], Hashable]


def filter_cycles(roots: Iterable[Hashable], edges: Edges, victim: Victim) -> set:
    roots = list(roots)
    filtered: set = set()
    while _one_walk(roots, edges, victim, filtered):
        pass
    return filtered


def _one_walk(roots, edges: Edges, victim: Victim, filtered: set) -> bool:
    found = False
    state: dict = {}  # 1: on the stack, 2: finished
    for root in roots:
        if root in state:
            continue
        state[root] = 1
        stack = [(root, iter(edges(root)), None)]  # (class, its edge walk, node used to enter it)
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
