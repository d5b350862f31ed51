"""A program carried into a later e-graph (`eqdsl.extract.carry`) and handed to an extractor as
its start: found again under other ids, refused where it is not all there, and never beaten by
CP-SAT's answer when time runs out."""
from __future__ import annotations

import random

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from eqdsl.extract.carry import place, sketch
from eqdsl.extract.cpsat import CpSatExtractor
from eqdsl.extract.dag import GreedyDagExtractor
from eqdsl.extract.egraph import dag_cost, problem_from_json, reachable

from test_extract import SHARED, egraph, ops, small_egraphs


def _grown(data: dict, seed: int) -> dict:
    """The same e-graph under new class and node ids, nodes in another order, plus a class and
    a node that were not there (what the next epoch's e-graph looks like)."""
    rng = random.Random(seed)
    classes = sorted({n["eclass"] for n in data["nodes"].values()})
    renamed = dict(zip(classes, rng.sample([f"k{i}" for i in range(len(classes))], len(classes))))
    node_ids = {nid: f"m{i}" for i, nid in enumerate(rng.sample(sorted(data["nodes"]), len(data["nodes"])))}
    nodes = {node_ids[nid]: {**n, "eclass": renamed[n["eclass"]], "children": [node_ids[k] for k in n["children"]]}
             for nid, n in data["nodes"].items()}
    some = next(iter(nodes))
    nodes["extra"] = {"op": "extra", "eclass": "k_new", "children": [some], "cost": 0}
    nodes["alt"] = {"op": "alt", "eclass": nodes[some]["eclass"], "children": ["extra"], "cost": 0}
    return {"nodes": dict(sorted(nodes.items(), key=lambda kv: rng.random())),
            "root_eclasses": [renamed[r] for r in data["root_eclasses"]]}


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(small_egraphs(), st.integers(0, 1000))
def test_a_program_is_found_again_in_a_grown_e_graph(data, seed):
    old = problem_from_json(data)
    try:
        chosen = GreedyDagExtractor().extract(old).selection
    except Exception:  # noqa: BLE001 - no acyclic program: nothing to carry
        return
    new = problem_from_json(_grown(data, seed))
    placed = place(sketch(old, chosen), new)
    assert placed is not None
    assert reachable(new, placed)  # complete and acyclic
    assert ops(new, placed) == ops(old, chosen) and dag_cost(new, placed) == dag_cost(old, chosen)


def test_a_program_not_all_there_is_not_placed():
    old = problem_from_json(SHARED)
    chosen = CpSatExtractor(time_limit_s=5).extract(old).selection  # p1, p2, s, x
    gone = {**SHARED, "nodes": {**SHARED["nodes"], "s": {**SHARED["nodes"]["s"], "op": "t"}}}
    assert place(sketch(old, chosen), problem_from_json(gone)) is None
    blocked = {**SHARED, "nodes": {**SHARED["nodes"], "p2": {**SHARED["nodes"]["p2"], "subsumed": True}}}
    assert place(sketch(old, chosen), problem_from_json(blocked)) is None
    other_roots = {**SHARED, "root_eclasses": ["r2", "r1"]}
    assert place(sketch(old, chosen), problem_from_json(other_roots)) is None
    assert place(sketch(old, chosen), old) == chosen


def test_an_op_in_two_classes_with_the_same_children_is_not_guessed():
    data = egraph({"a": ("in", "ca", [], 0), "b": ("in", "cb", [], 0), "r": ("add", "root", ["a", "b"], 1)}, ["root"])
    p = problem_from_json(data)
    assert place(sketch(p, {0: 0, 1: 1, 2: 2}), p) is None


def test_classes_merged_in_the_new_e_graph_keep_a_valid_cheaper_program():
    # old: root = f(a, b), a = g(b), b = leaf; new: a and b are one class
    old = problem_from_json(egraph({"l": ("leaf", "b", [], 1), "g": ("g", "a", ["l"], 5),
                                    "f": ("f", "root", ["g", "l"], 1)}, ["root"]))
    new = problem_from_json(egraph({"l": ("leaf", "ab", [], 1), "g": ("g", "ab", ["l"], 5),
                                    "f": ("f", "root", ["l", "l"], 1)}, ["root"]))
    chosen = {c: nodes[0] for c, nodes in enumerate(old.class_nodes)}
    placed = place(sketch(old, chosen), new)
    assert placed is not None and ops(new, placed) == ["f", "leaf"]
    assert dag_cost(new, placed) < dag_cost(old, chosen)


def test_cpsat_never_returns_worse_than_its_start_when_time_runs_out():
    from synthetic import tensat_like

    p = problem_from_json(tensat_like(300, seed=4, partners=4))
    best = CpSatExtractor(time_limit_s=60).extract(p)
    hurried = CpSatExtractor(time_limit_s=0.001, workers=1)
    started = hurried.extract(p, best.selection)
    assert started.cost <= best.cost and dag_cost(p, started.selection) == started.cost
    assert GreedyDagExtractor().extract(p, best.selection).cost == GreedyDagExtractor().extract(p).cost
