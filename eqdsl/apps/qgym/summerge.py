"""SumMerge (Gope et al.): share pair sums across the per-weight-value activation groups.

Every kernel k and weight level v owns the group of window activations that k multiplies by v.
Repeatedly the pair of terms occurring together in the most groups is merged — a new term
t = a + b replaces a and b in every group holding both — until no pair occurs in two groups
(ties: the smallest pair, so the result is deterministic). Then every group is summed, multiplied
by its level, and each kernel sums its products.

Level shift (eqdsl's addition, `shift=True`): a kernel that puts every window activation in one
of its level groups (zero weights form the level-0 group) computes
    Σ_v v · S_v  =  Σ_{v ≠ c} (v − c) · S_v  +  c · T,    T = Σ of the whole window,
for any level c. Taking c = the level of the kernel's largest group drops that group's sum; T is
one more group in the merging, shared by every kernel at the position, and c · T is shared by
the kernels with the same c. When the largest group is the zero group, c = 0 and nothing changes.

Contract: `summerge(lang, layer, shift=False)` returns a program of the `qgym` language with the
same roots, in the same order, as `layer_expressions`; `merge_pairs(groups)` is the merging step
alone; `level_groups(kernel, window, ids)` is a kernel's level groups and `shift_level(groups)`
the level the shift drops (what studies of other merging orders start from);
`start_program(lang, layer, start)` is the program a search with that `start` (layer.STARTS)
begins from.
"""
from __future__ import annotations

import heapq
from dataclasses import dataclass

import numpy as np

from eqdsl import ir
from eqdsl.apps.qgym.baselines import count_ops
from eqdsl.apps.qgym.layer import QuantizedLayer, layer_expressions, window_order
from eqdsl.ir.builder import GraphBuilder, Tensor


@dataclass(frozen=True)
class Merged:
    groups: list[list[int]]  # per group, its terms after merging (ids ≥ `first_new` are merges)
    merges: list[tuple[int, int]]  # merge i defines term first_new + i = a + b
    first_new: int


_BITS = 20  # a pair (a, b), a < b, is the int a << 20 | b; a heap entry is −count << 40 | pair,
_PAIR = 2 * _BITS  # so heap order is (count descending, smallest pair) with int compares only
_TERM_MASK, _PAIR_MASK = (1 << _BITS) - 1, (1 << _PAIR) - 1


def merge_pairs(groups: list[set[int]], num_terms: int) -> Merged:
    """Greedy most-frequent-pair merging over `groups` (sets of term ids in [0, num_terms))."""
    groups = [set(g) for g in groups]
    if num_terms + sum(len(g) for g in groups) >= 1 << _BITS:
        raise ValueError(f"merge_pairs: at most {1 << _BITS} terms and merges")
    holders: dict[int, set[int]] = {}
    for gi, g in enumerate(groups):
        for t in g:
            holders.setdefault(t, set()).add(gi)
    counts = _initial_counts(groups, num_terms)
    heap = [(-n << _PAIR) | pair for pair, n in counts.items() if n >= 2]
    heapq.heapify(heap)
    merges: list[tuple[int, int]] = []
    while heap:
        entry = heapq.heappop(heap)
        n, pair = -(entry >> _PAIR), entry & _PAIR_MASK
        current = counts.get(pair, 0)
        if current != n:  # stale: the count fell since the push; queue it at its true count
            if current >= 2:
                heapq.heappush(heap, (-current << _PAIR) | pair)
            continue
        if n < 2:
            break
        a, b = pair >> _BITS, pair & _TERM_MASK
        t = num_terms + len(merges)
        merges.append((a, b))
        new_pairs: set[int] = set()
        for gi in holders[a] & holders[b]:
            _replace(groups[gi], gi, a, b, t, counts, holders, new_pairs)
        for key in new_pairs:  # queued once, at the count after every group was updated
            if counts[key] >= 2:
                heapq.heappush(heap, (-counts[key] << _PAIR) | key)
    return Merged([sorted(g) for g in groups], merges, num_terms)


def _initial_counts(groups: list[set[int]], num_terms: int) -> dict[int, int]:
    member = np.zeros((len(groups), num_terms), dtype=np.int32)
    for gi, g in enumerate(groups):
        member[gi, list(g)] = 1
    together = member.T @ member
    a, b = np.nonzero(np.triu(together, 1))
    return {(int(i) << _BITS) | int(j): int(together[i, j]) for i, j in zip(a, b)}


def _replace(group: set[int], gi: int, a: int, b: int, t: int, counts: dict[int, int], holders,
             new_pairs: set[int]) -> None:
    group.discard(a)
    group.discard(b)
    holders[a].discard(gi)
    holders[b].discard(gi)
    for x in group:
        counts[(a << _BITS) | x if a < x else (x << _BITS) | a] -= 1
        counts[(b << _BITS) | x if b < x else (x << _BITS) | b] -= 1
        key = (x << _BITS) | t  # x < t: merged terms get increasing ids
        counts[key] = counts.get(key, 0) + 1
        new_pairs.add(key)
    pair = (a << _BITS) | b
    counts[pair] = counts.get(pair, 0) - 1
    group.add(t)
    holders.setdefault(t, set()).add(gi)


def summerge(lang: ir.Language, layer: QuantizedLayer, shift: bool = False) -> ir.Program:
    spec = layer.spec
    window = window_order(spec)
    # terms: every (r, s + j, c) the built positions read, numbered in column-major order
    cells = sorted({(r, s + j, c) for j in range(spec.tpr + 1) for (r, s, c) in window},
                   key=lambda rsc: (rsc[1], rsc[0], rsc[2]))
    term_id = {cell: i for i, cell in enumerate(cells)}
    plan = _Plan([], [], {})
    for j in range(spec.tpr + 1):
        ids = [term_id[(r, s + j, c)] for (r, s, c) in window]
        for k in range(spec.K):
            _plan_kernel(plan, (j, k), level_groups(layer.weights[k], window, ids), shift)
        if any(jk[0] == j for jk in plan.shifts):
            plan.keys.append((j, WHOLE, 0))
            plan.groups.append(set(ids))
    merged = merge_pairs(plan.groups, len(cells))
    return _merged_program(lang, layer, cells, plan, merged)


WHOLE = -1  # the kernel index of a position's whole-window group T


@dataclass
class _Plan:
    keys: list[tuple[int, int, int]]  # per group: (position j, kernel k or WHOLE, multiplier)
    groups: list[set[int]]
    shifts: dict[tuple[int, int], int]  # (j, k) → c, for the kernels that add c · T_j


def level_groups(kernel: np.ndarray, window, ids: list[int]) -> dict[int, set[int]]:
    """Term ids of the window grouped by the kernel's weight there (zero weights under 0)."""
    groups: dict[int, set[int]] = {}
    for (r, s, c), term in zip(window, ids):
        groups.setdefault(int(kernel[c, r, s]), set()).add(term)
    return groups


def shift_level(groups: dict[int, set[int]]) -> int:
    """The level c whose group the shift drops: the largest group's; ties go to 0 (no c · T), then
    to the smallest level."""
    return max(sorted(groups), key=lambda v: (len(groups[v]), v == 0))


def _plan_kernel(plan: _Plan, jk: tuple[int, int], groups: dict[int, set[int]], shift: bool) -> None:
    c = shift_level(groups) if shift else 0
    if c != 0:
        plan.shifts[jk] = c
    for v in sorted(groups):
        if v != c:  # with c ≠ 0 the zero group's multiplier is −c
            plan.keys.append((*jk, v - c))
            plan.groups.append(groups[v])


def _merged_program(lang: ir.Language, layer: QuantizedLayer, cells, plan: _Plan, merged: Merged) -> ir.Program:
    g = GraphBuilder(lang)
    terms: list[Tensor] = [g.x(*cell) for cell in cells]
    for a, b in merged.merges:
        terms.append(g.add(terms[a], terms[b]))
    per_root: dict[tuple[int, int], list[Tensor]] = {}
    whole: dict[int, Tensor] = {}
    for (j, k, v), members in zip(plan.keys, merged.groups):
        total = _chain(g, [terms[t] for t in members])
        if k == WHOLE:
            whole[j] = total
        else:
            per_root.setdefault((j, k), []).append(g.mul(g.w(v), total))
    for (j, k), c in plan.shifts.items():
        per_root.setdefault((j, k), []).append(g.mul(g.w(c), whole[j]))
    roots = []
    for j in range(layer.spec.tpr + 1):
        for k in range(layer.spec.K):
            products = per_root.get((j, k)) or [g.mul(g.w(0), g.x(0, j, 0))]
            roots.append(_chain(g, products))
    return g.program("summerge-shifted" if plan.shifts else "summerge", roots)


def _chain(g: GraphBuilder, terms: list[Tensor]) -> Tensor:
    total = terms[0]
    for t in terms[1:]:
        total = g.add(total, t)
    return total


def start_program(lang: ir.Language, layer: QuantizedLayer, start: str, merged: ir.Program | None = None) -> ir.Program:
    """The layer's sums (`layer`), SumMerge's program (`summerge`; `merged` if already built), or
    the cheaper by weighted cost of SumMerge with and without the level shift (`shifted`: a
    search from it is never worse than SumMerge)."""
    match start:
        case "layer":
            return layer_expressions(lang, layer)
        case "summerge":
            return merged if merged is not None else summerge(lang, layer)
        case "shifted":
            plain = merged if merged is not None else summerge(lang, layer)
            shifted = summerge(lang, layer, shift=True)
            return shifted if count_ops(shifted).cost < count_ops(plain).cost else plain
    raise ValueError(f"unknown start {start!r}")
