"""Cycle filtering during exploration (efficient / vanilla) and hardware targets for cost rules."""
from __future__ import annotations

import json
import math
import random

import pytest
import yaml

from eqdsl.cost.model import Request, RuleCosts
from eqdsl.cost.targets import target_path
from eqdsl.egglog.lower import lower_language
from eqdsl.egglog.session import EGraphSession
from eqdsl.extract.cpsat_model import cyclic_components
from eqdsl.extract.prune import usable_nodes
from eqdsl.frontend import load_language
from eqdsl.graphs import filter_cycles
from eqdsl.languages.tensat.models import build_model
from eqdsl.schedule.runner import Limits
from eqdsl.schedule.saturate import SaturateScheduler


def test_filter_removes_the_youngest_node_of_each_cycle():
    # classes a→b→c→a through nodes; node "n3" (age 3) is the youngest on the cycle
    edges = {"a": [("n1", "b")], "b": [("n2", "c"), ("n4", "d")], "c": [("n3", "a")], "d": []}
    age = {"n1": 1, "n2": 1, "n3": 3, "n4": 1}
    cut = filter_cycles(["a"], lambda c: edges[c], lambda cyc: max(cyc, key=age.get))
    assert cut == {"n3"}
    age["n3"], age["n1"] = 1, 5
    assert filter_cycles(["a"], lambda c: edges[c], lambda cyc: max(cyc, key=age.get)) == {"n1"}


@pytest.fixture(scope="module")
def tensat():
    lang = load_language("tensat")
    return lang, lower_language(lang)


@pytest.mark.parametrize("mode", ["efficient", "vanilla"])
def test_filtered_egraph_is_acyclic_and_keeps_the_program(tensat, mode):
    lang, lowered = tensat
    unfiltered = _explore(lang, lowered, "none")
    assert cyclic_components(unfiltered, usable_nodes(unfiltered)), "the test needs cycles to remove"
    problem = _explore(lang, lowered, mode)
    assert problem.blocked, "some nodes must have been subsumed"
    assert not cyclic_components(problem, usable_nodes(problem))


def _explore(lang, lowered, mode: str):
    session = EGraphSession(lowered)
    session.load(build_model(lang, "nasrnn", steps=2, hidden=16))
    outcome = SaturateScheduler(Limits(3, 20_000, 60), 1, False, mode).run(session)
    assert (sum(r.filtered for r in outcome.iterations) > 0) == (mode != "none")
    session.costs = RuleCosts(lowered.language, {"gflops": 1, "gbps": 1, "launch_ns": 1})
    return session.live().problem


def _config(tmp_path, target_line: str) -> str:
    cfg = tmp_path / "c.yaml"
    cfg.write_text(f"ruleset: tensat\n{target_line}\nprogram: {{builder: nasrnn, steps: 1, hidden: 16}}\n"
                   "schedule: {iter_limit: 1}\nextract: {method: greedy, compare: []}\n")
    return cfg


@pytest.mark.parametrize("target_line, message", [
    ("target: tpu9", "target: error: unknown target 'tpu9'; expected a .yaml path or one of: a100, cpu, h100, systolic-16, systolic-32, t4"),
    ("", "set `target:` to one of a100, cpu, h100, systolic-16, systolic-32, t4"),
    ("target: missing.yaml", "target file not found"),
])
def test_target_errors_name_the_key(tmp_path, run_cli, target_line, message):
    code, _, err = run_cli("run", _config(tmp_path, target_line), "--output", tmp_path / "out")
    assert code != 0 and message in err and "Traceback" not in err
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("params, message", [
    ("{gflops: 1, gbps: 1}", "gives no value for param 'launch_ns'"),
    ("{gflops: 1, gbps: 1, launch_ns: 1, watts: 70}", "params.watts: error: unknown param 'watts'"),
    ("{gflops: 1.5, gbps: 1, launch_ns: 1}", "params.gflops: error: expected an int ≥ 0, got 1.5"),
])
def test_bad_target_files(tmp_path, run_cli, params, message):
    (tmp_path / "gpu.yaml").write_text(f"name: gpu\nparams: {params}\n")
    code, _, err = run_cli("run", _config(tmp_path, "target: gpu.yaml"), "--output", tmp_path / "out")
    assert code != 0 and message in err, err
    assert not (tmp_path / "out").exists()


def test_runtime_rules_must_be_rule_names(tmp_path, run_cli):
    (tmp_path / "gpu.yaml").write_text("name: gpu\nparams: {gflops: 1, gbps: 1, launch_ns: 1}\nruntime_rules: conv-relu\n")
    code, _, err = run_cli("run", _config(tmp_path, "target: gpu.yaml"), "--output", tmp_path / "out")
    assert code != 0 and "runtime_rules: error: expected a list of rule names, got 'conv-relu'" in err, err


def test_costs_follow_the_target(tmp_path, run_cli):
    costs = {}
    for target in ("t4", "h100"):
        out = tmp_path / target
        code, _, err = run_cli("run", _config(tmp_path, f"target: {target}"), "--output", out, "--quiet")
        assert code == 0, err
        costs[target] = json.loads((out / "report.json").read_text())["original_cost"]
    assert costs["h100"] < costs["t4"]  # lower launch overhead, more bandwidth and FLOP/s


def test_a_param_with_a_default_may_be_left_out_and_zero_is_a_value(tmp_path):
    """`param split_copies: Int = 0` (tensor.eqr): TASO's GPU targets leave it out (a split is a
    view there), the CPU target sets 1 (ONNX Runtime's Split copies), so a split costs only there."""
    from eqdsl.cost.targets import bind_target, load_target

    tensat = load_language("tensat")
    assert tensat.params["split_copies"].default == 0 and tensat.params["gflops"].default is None
    assert bind_target(tensat, load_target("t4"))["split_copies"] == 0
    assert bind_target(tensat, load_target("cpu"))["split_copies"] == 1
    (tmp_path / "z.yaml").write_text("name: z\nparams: {gflops: 1, gbps: 1, launch_ns: 0, split_copies: 0}\n")
    assert bind_target(tensat, load_target(str(tmp_path / "z.yaml")))["launch_ns"] == 0
    priced = {name: RuleCosts(tensat, bind_target(tensat, load_target(name))) for name in ("t4", "cpu")}
    split = ("split", (1, 8, (1, 16, 4, 4)), (1, 16, 4, 4, 1, 8))
    assert priced["t4"].cost(split) == 0 < priced["cpu"].cost(split)


def test_short_cycles_lists_each_cycle_of_three_to_longest_nodes_once():
    from eqdsl.graphs import short_cycles
    edges = {0: [1], 1: [2, 0], 2: [0, 3], 3: [4], 4: [5], 5: [2]}  # 0-1-2 (3), 2-3-4-5 (4), 0-1 (2: left out)
    assert sorted(map(tuple, short_cycles(edges, 5, 100))) == [(0, 1, 2), (2, 3, 4, 5)]
    assert list(short_cycles(edges, 3, 100)) == [[0, 1, 2]]
    assert len(list(short_cycles(edges, 5, 1))) == 1


@pytest.mark.parametrize("target", ["t4", "a100", "h100"])
def test_a_target_without_a_cache_tier_prices_the_plain_roofline(target):
    """The CPU target's cache, depthwise and activation parameters default to the plain roofline:
    the GPU targets price `launch_ns + max(FLOPs / gflops, bytes / gbps)` as TENSAT's model does."""
    params = yaml.safe_load(target_path(target, None).read_text())["params"]
    costs, rng = RuleCosts(load_language("tensor"), params), random.Random(0)
    g, bw, launch = params["gflops"], params["gbps"], params["launch_ns"]
    for _ in range(50):
        n, c, k, hw = (rng.randint(1, 64) for _ in range(4))
        x, w, out = (n, c, hw + 2, hw + 2), (k, rng.choice([1, c]), 3, 3), (n, k, hw, hw)
        act = rng.randint(0, 3)
        flops, moved = 2 * math.prod(out) * w[1] * 9, 4 * (math.prod(x) + math.prod(w) + math.prod(out))
        assert costs.cost(Request("conv2d", (1, 1, 1, act, x, w), out)) == launch + max(flops // g, moved // bw)
        a, b = (n, c), (c, k)
        moved = 4 * (n * c + c * k + n * k)
        assert costs.cost(Request("matmul", (act, a, b), (n, k))) == launch + max(2 * n * k * c // g, moved // bw)
        assert costs.cost(Request("sigmoid", (out,), out)) == launch + max(4 * math.prod(out) // g, 8 * math.prod(out) // bw)
