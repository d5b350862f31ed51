"""Seeded synthetic e-graphs shaped like TENSAT's (extraction-gym `data/tensat`), for benchmarks.

A random layered tensor program (leaves, unary and binary operators, several outputs) is given
the alternatives TENSAT's rules create:
- rewrites: another node in the same class over the same or lower classes, at another cost;
- merges (TENSAT's multi-pattern rules): two classes A, B over a common input x become
  `split0(M)` / `split1(M)` of one merged class M = op(x, concat(wA, wB)), cheaper than A + B
  together but dearer than either alone — tree greedy cannot see the sharing;
- split/concat cycles: `concat(A, B)` added to a class C, and `split0(C)` into A, `split1(C)`
  into B, so A → C → A is a cycle, as in the real TENSAT e-graphs.
Contract: `tensat_like(n_ops, seed)` returns egraph-serialize JSON (a dict); same seed, same graph.
"""
from __future__ import annotations

import random


class _Builder:
    def __init__(self) -> None:
        self.nodes: dict[str, dict] = {}
        self.next_class = 0

    def new_class(self) -> str:
        self.next_class += 1
        return f"c{self.next_class}"

    def add(self, op: str, eclass: str, children: list[str], cost: float) -> None:
        nid = f"{eclass}__{sum(1 for k in self.nodes if k.startswith(eclass + '__'))}"
        self.nodes[nid] = {"op": op, "eclass": eclass, "children": [f"{c}__0" for c in children],
                           "cost": round(cost, 6)}


def tensat_like(n_ops: int, seed: int = 0, cycles: bool = True, partners: int = 1) -> dict:
    """`partners`: how many nearby classes each class is concatenated with (more: denser cycles)."""
    rng = random.Random(seed)
    b = _Builder()
    act = [b.new_class() for _ in range(3)]
    for c in act:
        b.add("input", c, [], 0.0)
    layers: list[tuple[str, str, str]] = []  # (class, input class, weight class)
    for _ in range(n_ops):
        x = rng.choice(act[-6:])
        w = b.new_class()
        b.add("weight", w, [], 0.0)
        out = b.new_class()
        b.add(rng.choice(["conv2d", "matmul"]), out, [x, w], rng.uniform(0.05, 1.0))
        layers.append((out, x, w))
        if rng.random() < 0.5:
            relu = b.new_class()
            b.add("relu", relu, [out], rng.uniform(0.002, 0.05))
            b.add("conv2d-relu", relu, [x, w], rng.uniform(0.05, 1.0))  # a fused rewrite
            out = relu
        act.append(out)
    _add_merges(b, rng, layers)
    if cycles:
        _add_split_concat_cycles(b, rng, [c for c, _, _ in layers], partners)
    outputs = sorted(set(rng.sample(act[3:], k=min(3, len(act) - 3))))
    root = b.new_class()
    b.add("noop", root, outputs, 0.0)
    return {"nodes": b.nodes, "root_eclasses": [root]}


def _add_merges(b: _Builder, rng: random.Random, layers: list[tuple[str, str, str]]) -> None:
    by_input: dict[str, list[tuple[str, str]]] = {}
    for out, x, w in layers:
        by_input.setdefault(x, []).append((out, w))
    for x, users in by_input.items():
        for (a, wa), (c, wc) in zip(users, users[1:]):
            cost_a, cost_c = _first_cost(b, a), _first_cost(b, c)
            wcat, merged, pair = b.new_class(), b.new_class(), b.new_class()
            b.add("concat", wcat, [wa, wc], 0.0)  # weights only: folded at inference
            b.add("conv2d", merged, [x, wcat], (cost_a + cost_c) * rng.uniform(0.6, 0.95))
            b.add("split", pair, [merged], 0.0)
            b.add("split0", a, [pair], 0.0)
            b.add("split1", c, [pair], 0.0)


def _add_split_concat_cycles(b: _Builder, rng: random.Random, classes: list[str], partners: int) -> None:
    pairs = {(a, classes[min(len(classes) - 1, i + rng.randint(1, 6))])
             for i, a in enumerate(classes[:-1]) for _ in range(partners)}
    for a, c in sorted(pairs):
        if a != c and rng.random() < 0.6:
            joined, pair = b.new_class(), b.new_class()
            b.add("concat", joined, [a, c], rng.uniform(1e-5, 4e-5))
            b.add("split", pair, [joined], 0.0)
            b.add("split0", a, [pair], 0.0)
            b.add("split1", c, [pair], 0.0)


def _first_cost(b: _Builder, eclass: str) -> float:
    return b.nodes[f"{eclass}__0"]["cost"]


def matrix_chain(n: int, seed: int = 0) -> dict:
    """Every parenthesisation of a product of `n` matrices with seeded sizes: class [i, j] holds
    `mul([i, k], [k+1, j])` for each split k, costing the multiplications d_i·d_{k+1}·d_{j+1}.
    No two sub-products of one program share a class, so the DAG optimum is the tree optimum
    (the textbook dynamic programme): what tree greedy finds and what a DAG bound must prove."""
    rng = random.Random(seed)
    dims = [rng.randint(2, 64) for _ in range(n + 1)]
    nodes: dict[str, dict] = {}
    for i in range(n):
        nodes[f"m{i}"] = {"op": f"M{i}", "eclass": f"c{i}_{i}", "children": [], "cost": 0.0}
    for length in range(2, n + 1):
        for i in range(n - length + 1):
            j = i + length - 1
            for k in range(i, j):
                nodes[f"p{i}_{k}_{j}"] = {"op": "mul", "eclass": f"c{i}_{j}",
                                          "children": [_first(nodes, i, k), _first(nodes, k + 1, j)],
                                          "cost": float(dims[i] * dims[k + 1] * dims[j + 1])}
    return {"nodes": nodes, "root_eclasses": [f"c0_{n - 1}"]}


def _first(nodes: dict[str, dict], i: int, j: int) -> str:
    return f"m{i}" if i == j else f"p{i}_{i}_{j}"
