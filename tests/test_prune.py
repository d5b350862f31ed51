"""Pruning before the CP-SAT model: each step removes what it says, and never the last optimal program."""
from __future__ import annotations

import itertools
import math
import time

import pytest
from hypothesis import HealthCheck, given, settings

from eqdsl.diagnostics import EqdslError
from eqdsl.extract import cpsat_search
from eqdsl.extract.bound import dag_lower_bound
from eqdsl.extract.cpsat import CpSatExtractor
from eqdsl.extract.cpsat_model import cyclic_components
from eqdsl.extract.egraph import (
    CyclicSelection,
    ExtractionProblem,
    IncompleteSelection,
    problem_from_json,
    reachable,
    restrict,
)
from eqdsl.extract.greedy import GreedyExtractor
from eqdsl.extract.prune import prune, usable_nodes
from eqdsl.extract.result import ExtractStatus

from test_extract import brute_force, egraph, small_egraphs

# x = split0(split(concat(x, y))) as TENSAT's merge rules make it: the root's second node closes a
# cycle (every term of `cs` contains the root class); `dear` is dominated by `cheap` (same child, dearer).
LOOP = egraph({
    "x": ("x", "cx", [], 0), "y": ("y", "cy", [], 0),
    "cheap": ("f", "root", ["x"], 3), "dear": ("g", "root", ["x"], 4),
    "back": ("split0", "root", ["s"], 0),
    "s": ("split", "cs", ["c"], 0), "c": ("concat", "cc", ["cheap", "y"], 1),
}, ["root"])


def far_future() -> float:
    return time.monotonic() + 60


def test_steps_remove_dominated_and_cycle_closing_nodes():
    p = problem_from_json(LOOP)
    pruned = prune(p, incumbent=3, deadline=far_future())
    steps = dict(pruned.steps)
    assert steps["dominated"] == 1 and steps["cycle-closing"] >= 1 and pruned.complete
    kept = {p.nodes[i].op for nodes in pruned.class_nodes.values() for i in nodes}
    assert kept == {"f", "x"}  # the split/concat loop's classes are no longer needed
    assert cyclic_components(p, pruned.class_nodes) == {}
    assert "dominated −1" in pruned.summary()


def test_negative_costs_keep_dominated_nodes():
    data = egraph({"x": ("x", "cx", [], -1), "a": ("a", "r", [], 1), "b": ("b", "r", ["x"], 1)}, ["r"])
    steps = dict(prune(problem_from_json(data), incumbent=math.inf, deadline=far_future()).steps)
    assert "dominated" not in steps  # b needs more than a, but its child pays −1


def test_a_spent_budget_is_labelled_and_still_valid():
    p = problem_from_json(LOOP)
    pruned = prune(p, incumbent=math.inf, deadline=time.monotonic() - 1)
    assert not pruned.complete and "time budget" in pruned.summary()
    e = CpSatExtractor(time_limit_s=5).extract(p)
    assert e.status is ExtractStatus.OPTIMAL and e.cost == 3 and "pruned" in e.note


# the loop again, but the concat's class has a way out (g): nothing closes a cycle, yet split0 and
# concat exclude each other — every term of either contains the other's class
OPEN_LOOP = egraph({
    "x": ("x", "cx", [], 0), "y": ("y", "cy", [], 0), "z": ("z", "cz", [], 0),
    "f": ("f", "root", ["x"], 5), "back": ("split0", "root", ["s"], 0),
    "s": ("split", "cs", ["c"], 0), "c": ("concat", "cc", ["f", "y"], 1), "g": ("g", "cc", ["z"], 9),
}, ["root"])


def test_cycle_conflicts_pair_split_with_concat():
    p = problem_from_json(OPEN_LOOP)
    pruned = prune(p, incumbent=math.inf, deadline=far_future())
    assert dict(pruned.steps)["cycle-closing"] == 0
    assert [{p.nodes[i].op for i in pair} for pair in pruned.conflicts] == [{"split0", "concat"}]
    assert "1 cycle conflict(s)" in pruned.summary()
    for acyclic in ("lazy", "hybrid", "order"):
        e = CpSatExtractor(time_limit_s=5, acyclic=acyclic, workers=1).extract(p)
        assert e.status is ExtractStatus.OPTIMAL and e.cost == 5  # f, not split0(split(g(z))) at 9

# the loop once more, with a second root sharing z (so no bound proves the warm start): the
# cycle survives pruning, and CP-SAT proves it on one thread or with helper threads
SHARED_LOOP = egraph({
    "x": ("x", "cx", [], 0), "y": ("y", "cy", [], 0), "z": ("z", "cz", [], 1),
    "f": ("f", "root", ["x"], 5), "back": ("split0", "root", ["s"], 0),
    "s": ("split", "cs", ["c"], 0), "c": ("concat", "cc", ["f", "y"], 1), "g": ("g", "cc", ["z"], 1),
    "h": ("h", "r2", ["z"], 10),
}, ["root", "r2"])


def test_one_two_or_three_threads_prove_the_shared_loop_optimal():
    p = problem_from_json(SHARED_LOOP)
    assert cyclic_components(p, prune(p, incumbent=12, deadline=far_future()).class_nodes)
    for workers in (1, 2, 3):
        for search in ("auto", "lp", "core"):
            extractor = CpSatExtractor(time_limit_s=5, workers=workers, search=search)
            params = cpsat_search._solver(5, "lp" if search == "auto" else search, workers).parameters
            assert params.num_workers == workers
            expected = {"lp": ["max_lp_sym", "max_lp"], "core": ["core", "no_lp"]}["core" if search == "core" else "lp"]
            assert list(params.subsolvers) == ([] if workers == 1 else expected)
            assert params.optimize_with_core == (search == "core" and workers == 1)
            e = extractor.extract(p)
            assert e.status is ExtractStatus.OPTIMAL and e.cost == 12  # split0(split(g(z))) and h(z)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(small_egraphs())
def test_an_acyclic_program_with_one_of_a_pair_exits_through_the_others_class(data):
    """The exit clause the model adds: with n in the program, m's class is in it too, through a
    node not paired with n (so in particular not m)."""
    p = problem_from_json(data)
    if math.isinf(brute_force(p)):
        return  # no program at all: prune refuses it (tested with the extractors)
    pairs = prune(p, incumbent=math.inf, deadline=far_future()).conflicts
    partners: dict[int, set[int]] = {}
    for a, b in pairs:
        partners.setdefault(a, set()).add(b)
        partners.setdefault(b, set()).add(a)
    for choice in itertools.product(*p.class_nodes):
        try:
            selection = restrict(p, dict(enumerate(choice)))
        except (CyclicSelection, IncompleteSelection):
            continue
        classes = reachable(p, selection)
        used = {selection[c] for c in classes}
        for n in used & partners.keys():
            for m in partners[n]:
                d = p.nodes[m].eclass
                assert d in classes and selection[d] not in partners[n]


def optimum(data: dict) -> tuple[ExtractionProblem, float]:
    p = problem_from_json(data)
    return p, brute_force(p)


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(small_egraphs())
def test_some_optimal_program_survives_pruning(data):
    p, best = optimum(data)
    if not math.isinf(best):
        assert brute_force(p, prune(p, incumbent=best, deadline=far_future()).class_nodes) == best


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(small_egraphs())
def test_pruned_says_acyclic_only_when_no_class_cycle_is_left(data):
    """CP-SAT drops the acyclicity constraints when `acyclic` says so: it must never be wrong."""
    p = problem_from_json(data)
    try:
        pruned = prune(p, incumbent=math.inf, deadline=far_future())
    except EqdslError:
        return  # no program at all
    if pruned.acyclic:
        assert cyclic_components(p, pruned.class_nodes) == {}


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(small_egraphs())
def test_pruning_keeps_exactly_the_usable_needed_nodes_of_what_it_did_not_remove(data):
    """Each step recomputes what is left (after dominated nodes only the reachability, as their
    classes stay usable): the same as recomputing everything with the removed nodes blocked."""
    p = problem_from_json(data)
    try:
        pruned = prune(p, incumbent=math.inf, deadline=far_future())
    except EqdslError:
        return
    kept = {i for nodes in pruned.class_nodes.values() for i in nodes}
    removed = set(range(len(p.nodes))) - kept
    assert pruned.class_nodes == usable_nodes(ExtractionProblem(p.class_ids, p.nodes, p.class_nodes, p.roots,
                                                                frozenset(removed)))


def test_pruned_acyclic_flag_on_a_loop_and_a_chain():
    assert not prune(problem_from_json(LOOP), incumbent=math.inf, deadline=far_future()).acyclic
    chain = egraph({"x": ("x", "cx", [], 1), "f": ("f", "r", ["x"], 1)}, ["r"])
    assert prune(problem_from_json(chain), incumbent=math.inf, deadline=far_future()).acyclic


# ---- the DAG lower bound (eqdsl.extract.bound) ----
@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(small_egraphs())
def test_dag_lower_bound_never_exceeds_the_optimum(data):
    p, best = optimum(data)
    if not math.isinf(best):
        assert dag_lower_bound(p, usable_nodes(p)) <= best + 1e-9


# Two layers of a chain whose classes can also be cut out of a concat of both (TENSAT's
# split/concat identities): L1 = split0(split(concat(L1, L2))) loops through L2 and back.
LAYER_NODES = {
    "in": ("in", "cin", [], 0), "pad": ("pad", "cpad", [], 0),
    "conv1": ("conv", "L1", ["in"], 100), "cut1": ("split0", "L1", ["s"], 0),
    "conv2": ("conv", "L2", ["conv1"], 100), "cut2": ("split1", "L2", ["s"], 0),
    "s": ("split", "S", ["cat"], 0),
    "cat": ("concat", "C", ["conv1", "conv2"], 1), "both": ("both", "C", ["pad"], 500),
}
LAYERS = egraph(LAYER_NODES, ["L2"])


def test_dag_lower_bound_settles_a_loop_at_its_real_cost():
    """Iterated from 0 (the bound of commit 89408eb) the loop priced L2 at 3 through itself; settled
    cheapest-first, a class is never priced through itself."""
    p = problem_from_json(LAYERS)
    assert dag_lower_bound(p, usable_nodes(p)) == brute_force(p) == 200


def test_dag_lower_bound_is_below_cpsats_optimum_on_cyclic_egraphs():
    from synthetic import tensat_like

    for seed in range(1, 5):
        p = problem_from_json(tensat_like(80, seed=seed, partners=4))
        e = CpSatExtractor(time_limit_s=20, workers=1).extract(p)
        assert e.status is ExtractStatus.OPTIMAL
        assert dag_lower_bound(p, usable_nodes(p)) <= e.cost + 1e-9


def test_matrix_chain_is_proven_optimal_by_the_bound_without_a_solve():
    from synthetic import matrix_chain

    p = problem_from_json(matrix_chain(12, seed=2))
    e = CpSatExtractor(time_limit_s=30).extract(p)
    assert e.status is ExtractStatus.OPTIMAL and "meets the DAG lower bound" in e.note
    assert e.cost == GreedyExtractor().extract(p).cost  # no sharing: the tree optimum
    unpruned = CpSatExtractor(time_limit_s=30, prune=False).extract(p)
    assert unpruned.cost == e.cost and "lower bound" not in unpruned.note


SHARED_START_LOOP = egraph({  # LAYERS, a root reading both layers, `both` just under the incumbent
    **LAYER_NODES, "both": ("both", "C", ["pad"], 200.5), "out": ("add", "R", ["conv1", "conv2"], 1)}, ["R"])


def test_a_cyclic_egraph_whose_greedy_start_shares_is_proven_by_the_bound():
    """Issue 47: extraction-gym's TENSAT vgg.json — the greedy start shares a subterm (L1 under R
    and under L2) and split/concat loops survive pruning; the DAG bound equals the start, so no
    CP-SAT round runs (26 s of rounds before)."""
    p = problem_from_json(SHARED_START_LOOP)
    assert brute_force(p) == 201
    e = CpSatExtractor(time_limit_s=30).extract(p)
    assert e.status is ExtractStatus.OPTIMAL and e.cost == 201
    assert "meets the DAG lower bound" in e.note and "rounds=0" in e.note


def _dominated_pairwise(problem: ExtractionProblem, nodes: list[int]) -> set[int]:
    """The definition, pairwise (quadratic: 370 s on acsum's million-node e-graph)."""
    keyed = [(problem.nodes[i].cost, frozenset(problem.nodes[i].children), i) for i in nodes]
    return {i for cost, kids, i in keyed
            if any(j != i and c <= cost and k <= kids and (c < cost or k < kids or j < i) for c, k, j in keyed)}


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(small_egraphs())
def test_dominated_nodes_looked_up_by_subset_are_the_pairwise_ones(data):
    from eqdsl.extract.prune import _dominated_in_class

    p = problem_from_json(data)
    for nodes in p.class_nodes:
        assert _dominated_in_class(p, list(nodes)) == _dominated_pairwise(p, list(nodes))


def _wide_chain(classes: int, per_class: int) -> dict:
    """A chain of classes, each with `per_class` nodes over the class below (cost 1..per_class)."""
    nodes = {"leaf": ("leaf", "c0", [], 0.0)}
    for c in range(1, classes):
        below = "leaf" if c == 1 else f"n{c - 1}_0"
        for k in range(per_class):
            nodes[f"n{c}_{k}"] = (f"op{k}", f"c{c}", [below], float(k + 1))
    return egraph(nodes, [f"c{classes - 1}"])


def test_greedy_out_of_time_is_a_labelled_error_and_cpsat_returns_its_start():
    """On acsum's million-node e-graph greedy ran 38.4 s against a 30 s limit and CP-SAT 15.6 s
    against 8 s (benchmarks/trust.py measures that e-graph)."""
    from eqdsl.extract.dag import GreedyDagExtractor
    from eqdsl.extract.greedy import OutOfTime

    p = problem_from_json(_wide_chain(3000, 20))
    with pytest.raises(OutOfTime, match="extractor greedy reached extract.time_limit_s"):
        GreedyExtractor(time_limit_s=1e-9).extract(p)
    with pytest.raises(OutOfTime, match="extractor greedy-dag reached"):
        GreedyDagExtractor(time_limit_s=1e-9).extract(p)
    assert GreedyExtractor(time_limit_s=60).extract(p).cost == 2999
    start = lambda problem, deadline: GreedyExtractor().extract(problem)  # noqa: E731 - no deadline of its own
    e = CpSatExtractor(time_limit_s=1e-9, warm_start=start).extract(p)
    assert e.status is ExtractStatus.FEASIBLE and e.cost == 2999 and "before CP-SAT could search" in e.note
