"""Independent parts: solved one model each, the program and its proof are the whole problem's."""
from __future__ import annotations

import itertools
import math
import time

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from eqdsl.diagnostics import EqdslError
from eqdsl.extract import cpsat_model, cpsat_search, decompose
from eqdsl.extract.cpsat import CpSatExtractor
from eqdsl.extract.decompose import split
from eqdsl.extract.egraph import CyclicSelection, IncompleteSelection, dag_cost, problem_from_json, restrict
from eqdsl.extract.prune import prune
from eqdsl.extract.result import ExtractStatus

from test_extract import brute_force, egraph, small_egraphs

# Two layers joined at a class every program holds (`mid`): each layer picks between its own
# node and a shared-looking alternative, so the layers are two parts; `w` costs 0 (fixed).
LAYERS = egraph({
    "w": ("w", "cw", [], 0), "x": ("x", "cx", [], 0),
    "a1": ("f", "ca", ["x", "w"], 5), "a2": ("g", "ca", ["x"], 7),
    "m": ("m", "mid", ["a1"], 1),
    "b1": ("f", "cb", ["m", "w"], 3), "b2": ("g", "cb", ["m"], 4),
    "out": ("o", "root", ["b1", "m"], 1),  # m shared: no DAG lower bound shortcut
}, ["root"])

# A cycle through two parts: A and K are held by every program (the root needs both), B is not.
# a1 → K, k1 → B, b1 → A is the cheap loop; each part alone sees only its own edges.
ACROSS = egraph({
    "a1": ("a1", "A", ["k1"], 1), "a2": ("a2", "A", [], 10),
    "k1": ("k1", "K", ["b1"], 1), "k2": ("k2", "K", [], 10),
    "b1": ("b1", "B", ["a1"], 1), "b2": ("b2", "B", [], 10),
    "r": ("r", "R", ["a1", "k1"], 0),
}, ["R"])


@pytest.fixture
def split_at_once(monkeypatch):
    """Every part its own model, however small."""
    monkeypatch.setattr(decompose, "MIN_PART", 1)


def parts_of(data):
    p = problem_from_json(data)
    pruned = prune(p, math.inf, time.monotonic() + 60)
    return p, split(p, pruned.class_nodes, pruned.conflicts, time.monotonic() + 60)


def test_layers_split_at_the_class_every_program_holds(split_at_once):
    p, parts = parts_of(LAYERS)
    names = [sorted(p.class_ids[c] for c in part) for part in parts.parts]
    assert sorted(names) == [["ca"], ["cb"]]
    assert {p.class_ids[c] for c in parts.required} >= {"root", "mid", "ca", "cb"}
    assert {p.class_ids[c] for c in parts.fixed} == {"cw", "cx", "mid", "root"}
    e = CpSatExtractor(time_limit_s=10, parts=True).extract(p)
    assert e.status is ExtractStatus.OPTIMAL and e.cost == brute_force(p) == 5 + 1 + 3 + 1
    assert "solved as 2 independent parts" in e.note


def test_a_cycle_through_two_parts_falls_back_to_the_whole_model(split_at_once):
    p, parts = parts_of(ACROSS)
    assert len(parts.solvable) == 2  # {A} and {K, B}: no conflict pair ties them
    e = CpSatExtractor(time_limit_s=10, parts=True).extract(p)
    assert e.status is ExtractStatus.OPTIMAL and e.cost == brute_force(p)
    assert "independent parts" not in e.note


def test_negative_costs_are_not_split():
    data = egraph({"x": ("x", "cx", [], -1), "r": ("r", "root", ["x"], 1)}, ["root"])
    p = problem_from_json(data)
    assert split(p, prune(p, math.inf, time.monotonic() + 60).class_nodes, (), time.monotonic() + 60) is None


@st.composite
def two_layer_egraphs(draw):
    """Two small e-graphs under one root node, each behind a class with two undominated nodes
    (different children, costs ≥ 1) that every program holds; the first is used twice, so the
    warm start shares a term and the lower bound cannot settle it. About half split into parts."""
    nodes, picks = {}, []
    for tag in "ab":
        layer = draw(small_egraphs())
        for nid, n in layer["nodes"].items():
            nodes[tag + nid] = (n["op"], tag + n["eclass"], [tag + k for k in n["children"]], n["cost"])
        first = {n[1]: nid for nid, n in reversed(list(nodes.items())) if nid.startswith(tag)}
        one, other = draw(st.lists(st.sampled_from(sorted(first)), min_size=2, max_size=2, unique=True))
        nodes[tag + "p"] = ("p", tag + "pick", [first[one]], draw(st.integers(1, 9)))
        nodes[tag + "q"] = ("q", tag + "pick", [first[other]], draw(st.integers(1, 9)))
        picks.append(tag + "p")
    nodes["top"] = ("top", "root", picks + picks[:1], 1)
    return egraph(nodes, ["root"])


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                   HealthCheck.function_scoped_fixture])
@given(two_layer_egraphs())
def test_split_solves_find_the_brute_force_optimum(split_at_once, data):
    p = problem_from_json(data)
    best = brute_force(p)
    if math.isinf(best):
        return
    e = CpSatExtractor(time_limit_s=10, parts=True).extract(p)
    assert e.status is ExtractStatus.OPTIMAL and e.cost == best


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(small_egraphs())
def test_every_program_of_the_pruned_nodes_holds_the_required_classes(data):
    p = problem_from_json(data)
    try:
        pruned = prune(p, math.inf, time.monotonic() + 60)
    except EqdslError:  # no acyclic program at all
        return
    parts = split(p, pruned.class_nodes, pruned.conflicts, time.monotonic() + 60)
    classes = sorted(pruned.class_nodes)
    for choice in itertools.product(*(pruned.class_nodes[c] for c in classes)):
        try:
            program = restrict(p, dict(zip(classes, choice)))
        except (CyclicSelection, IncompleteSelection):
            continue
        assert parts.required <= set(program)
        assert parts.fixed_cost <= dag_cost(p, program)


def test_parts_is_a_config_option_and_a_flag(tmp_path):
    from eqdsl.config import parse_config
    cfg = parse_config({"ruleset": "arith", "program": {"text": "x"}, "extract": {"parts": True}}, tmp_path / "c.yaml")
    assert cfg.extract.options_for("cpsat").parts is True
    with pytest.raises(EqdslError, match="extract.parts"):
        parse_config({"ruleset": "arith", "program": {"text": "x"}, "extract": {"parts": "yes"}}, tmp_path / "c.yaml")


def test_search_is_a_config_option_and_a_flag(tmp_path):
    from eqdsl.cli import build_parser
    from eqdsl.config import parse_config
    cfg = parse_config({"ruleset": "arith", "program": {"text": "x"}, "extract": {"search": "core"}}, tmp_path / "c.yaml")
    assert cfg.extract.options_for("cpsat").search == "core"
    default = parse_config({"ruleset": "arith", "program": {"text": "x"}}, tmp_path / "c.yaml").extract
    assert default.options_for("cpsat").search == "auto"
    with pytest.raises(EqdslError, match="extract.search.*one of auto, lp, core"):
        parse_config({"ruleset": "arith", "program": {"text": "x"}, "extract": {"search": "fast"}}, tmp_path / "c.yaml")
    assert build_parser().parse_args(["extract", "g.json", "--search", "lp"]).search == "lp"


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                  HealthCheck.function_scoped_fixture])
@given(two_layer_egraphs(), st.sampled_from(["core", "auto-switched"]))
def test_the_core_search_finds_the_brute_force_optimum(split_at_once, monkeypatch, data, search):
    """`core` on the whole model, and `auto` made to switch at once (its lp share set to 0): the
    core search on the parts."""
    p = problem_from_json(data)
    best = brute_force(p)
    if math.isinf(best):
        return
    if search == "auto-switched":
        monkeypatch.setattr(cpsat_search, "LP_FIRST_SHARE", 0.0)
    e = CpSatExtractor(time_limit_s=cpsat_search.CORE_FROM_S, workers=2, search=search.split("-")[0]).extract(p)
    assert e.status is ExtractStatus.OPTIMAL and e.cost == best


def test_auto_switches_to_the_core_search_on_the_parts(split_at_once, monkeypatch):
    p, _ = parts_of(LAYERS)
    monkeypatch.setattr(cpsat_search, "LP_FIRST_SHARE", 0.0)  # the lp search gets no time: it proves nothing
    e = CpSatExtractor(time_limit_s=cpsat_search.CORE_FROM_S, workers=2).extract(p)
    assert e.status is ExtractStatus.OPTIMAL and e.cost == brute_force(p)
    assert "lp search unproven" in e.note and "solved as 2 independent parts" in e.note
    one = CpSatExtractor(time_limit_s=cpsat_search.CORE_FROM_S, workers=1).extract(p)  # one thread: lp only, no switch
    assert one.cost == e.cost and "lp search unproven" not in one.note
    short = CpSatExtractor(time_limit_s=cpsat_search.CORE_FROM_S / 2, workers=2).extract(p)  # an epoch's seconds: lp
    assert short.cost == e.cost and "lp search unproven" not in short.note


def test_the_core_search_cuts_short_cycles_up_front():
    """A cycle of three classes (a → b → c → a, each with a leaf way out): one cut; a chain: none."""
    data = egraph({"a1": ("f", "ca", ["b1"], 1), "a0": ("x", "ca", [], 5), "b1": ("f", "cb", ["c1"], 1),
                   "b0": ("x", "cb", [], 5), "c1": ("f", "cc", ["a1"], 1), "c0": ("x", "cc", [], 5),
                   "r": ("r", "root", ["a1"], 1)}, ["root"])
    p = problem_from_json(data)
    built = cpsat_model.build(p, cpsat_model.all_nodes(p), "lazy")
    assert cpsat_model.forbid_short_cycles(built, p) == 1
    chain = problem_from_json(egraph({"a": ("f", "ca", ["b"], 1), "b": ("x", "cb", [], 5),
                                      "r": ("r", "root", ["a"], 1)}, ["root"]))
    assert cpsat_model.forbid_short_cycles(cpsat_model.build(chain, cpsat_model.all_nodes(chain), "lazy"), chain) == 0
    e = CpSatExtractor(time_limit_s=10, workers=2, search="core").extract(p)
    assert e.status is ExtractStatus.OPTIMAL and e.cost == brute_force(p)
