"""SumMerge (Gope et al.): share pair sums across the per-weight-value activation groups.

Every kernel k and weight level v owns the group of window activations that k multiplies by v.
Repeatedly the pair of terms occurring together in the most groups is merged — a new term
t = a + b replaces a and b in every group holding both — until no pair occurs in two groups
(ties: the smallest pair, so the result is deterministic). Then every group is summed, multiplied
by its level, and each kernel sums its products.

Contract: `summerge(lang, layer)` returns a program of the `qgym` language with the same roots,
in the same order, as `layer_expressions`; `merge_pairs(groups)` is the merging step alone.
"""
from __future__ import annotations

import heapq
from dataclasses import dataclass

import numpy as np

from eqdsl import ir
from eqdsl.apps.qgym.layer import QuantizedLayer, window_order
from eqdsl.ir.builder import GraphBuilder, Tensor


@dataclass(frozen=True)
class Merged:
    groups: list[list[int]]  # per group, its terms after merging (ids ≥ `first_new` are merges)
    merges: list[tuple[int, int]]  # merge i defines term first_new + i = a + b
    first_new: int


def merge_pairs(groups: list[set[int]], num_terms: int) -> Merged:
    """Greedy most-frequent-pair merging over `groups` (sets of term ids in [0, num_terms))."""
    groups = [set(g) for g in groups]
    holders: dict[int, set[int]] = {}
    for gi, g in enumerate(groups):
        for t in g:
            holders.setdefault(t, set()).add(gi)
    counts = _initial_counts(groups, num_terms)
    heap = [(-n, pair) for pair, n in counts.items() if n >= 2]
    heapq.heapify(heap)
    merges: list[tuple[int, int]] = []
    while heap:
        neg, (a, b) = heapq.heappop(heap)
        current = counts.get((a, b), 0)
        if current != -neg:  # stale: the count fell since the push; queue it at its true count
            if current >= 2:
                heapq.heappush(heap, (-current, (a, b)))
            continue
        if -neg < 2:
            break
        t = num_terms + len(merges)
        merges.append((a, b))
        for gi in holders[a] & holders[b]:
            _replace(groups[gi], gi, a, b, t, counts, holders, heap)
    return Merged([sorted(g) for g in groups], merges, num_terms)


def _initial_counts(groups: list[set[int]], num_terms: int) -> dict[tuple[int, int], int]:
    member = np.zeros((len(groups), num_terms), dtype=np.int32)
    for gi, g in enumerate(groups):
        member[gi, list(g)] = 1
    together = member.T @ member
    a, b = np.nonzero(np.triu(together, 1))
    return {(int(i), int(j)): int(together[i, j]) for i, j in zip(a, b)}


def _replace(group: set[int], gi: int, a: int, b: int, t: int, counts, holders, heap) -> None:
    group.discard(a)
    group.discard(b)
    holders[a].discard(gi)
    holders[b].discard(gi)
    for x in group:
        for old in ((min(a, x), max(a, x)), (min(b, x), max(b, x))):
            counts[old] -= 1
        key = (x, t)  # x < t: merged terms get increasing ids
        n = counts.get(key, 0) + 1
        counts[key] = n
        if n >= 2:
            heapq.heappush(heap, (-n, key))
    counts[(a, b)] = counts.get((a, b), 0) - 1
    group.add(t)
    holders.setdefault(t, set()).add(gi)


def summerge(lang: ir.Language, layer: QuantizedLayer) -> ir.Program:
    spec = layer.spec
    window = window_order(spec)
    # terms: every (r, s + j, c) the built positions read, numbered in column-major order
    cells = sorted({(r, s + j, c) for j in range(spec.tpr + 1) for (r, s, c) in window},
                   key=lambda rsc: (rsc[1], rsc[0], rsc[2]))
    term_id = {cell: i for i, cell in enumerate(cells)}
    keys, groups = [], []
    for j in range(spec.tpr + 1):
        for k in range(spec.K):
            for v in sorted(int(u) for u in np.unique(layer.weights[k]) if u != 0):
                keys.append((j, k, v))
                groups.append({term_id[(r, s + j, c)] for (r, s, c) in window
                               if layer.weights[k, c, r, s] == v})
    merged = merge_pairs(groups, len(cells))
    return _merged_program(lang, layer, cells, keys, merged)


def _merged_program(lang: ir.Language, layer: QuantizedLayer, cells, keys, merged: Merged) -> ir.Program:
    g = GraphBuilder(lang)
    terms: list[Tensor] = [g.x(*cell) for cell in cells]
    for a, b in merged.merges:
        terms.append(g.add(terms[a], terms[b]))
    per_root: dict[tuple[int, int], list[Tensor]] = {}
    for (j, k, v), members in zip(keys, merged.groups):
        per_root.setdefault((j, k), []).append(g.mul(g.w(v), _chain(g, [terms[t] for t in members])))
    roots = []
    for j in range(layer.spec.tpr + 1):
        for k in range(layer.spec.K):
            products = per_root.get((j, k)) or [g.mul(g.w(0), g.x(0, j, 0))]
            roots.append(_chain(g, products))
    return g.program("summerge", roots)


def _chain(g: GraphBuilder, terms: list[Tensor]) -> Tensor:
    total = terms[0]
    for t in terms[1:]:
        total = g.add(total, t)
    return total
