"""The MCTS schedule (PACT 2024): finds what saturation finds on small inputs, respects the node
limit, is reproducible per seed, logs its steps, and rejects bad settings by key."""
from __future__ import annotations

import json
from dataclasses import replace

import pytest
import yaml

from eqdsl.config import load_config
from eqdsl.diagnostics import EqdslError
from eqdsl.extract.registry import ExtractConfig
from eqdsl.frontend import load_language
from eqdsl.languages.tensat.models import build_model
from eqdsl.pipeline import optimize
from eqdsl.schedule.mcts import MctsConfig
from eqdsl.schedule.saturate import SaturateConfig

NASRNN = dict(steps=2, hidden=16)
EXTRACT = ExtractConfig(method="cpsat", time_limit_s=10, compare=())


def _nasrnn(config):
    from eqdsl.cost.targets import bind_target, load_target

    lang = load_language("tensat")
    return optimize(lang, build_model(lang, "nasrnn", **NASRNN), config, EXTRACT, bind_target(lang, load_target("a100")))


def test_mcts_ilp_ilp_finds_the_saturation_optimum_on_the_sharing_example():
    """The merged matmul pays off only through sharing between the two roots, which a greedy main
    extractor (OCF included: it shares within a term) cannot see; CP-SAT as main extractor can."""
    from eqdsl.frontend import load_program_file

    from conftest import EXAMPLES

    lang = load_language(EXAMPLES / "sharing" / "sharing.eqr")
    program = next(iter(load_program_file(EXAMPLES / "sharing" / "input.eqr", lang).values()))
    full = optimize(lang, program, SaturateConfig(iter_limit=5, node_limit=1000), EXTRACT)
    mcts = optimize(lang, program, MctsConfig(budget=8, node_limit=1000, main_extract="cpsat"), EXTRACT)
    assert mcts.best.cost == full.best.cost < mcts.original_cost
    assert mcts.outcome.steps and mcts.outcome.steps[0].rule == "merge-matmuls"
    ocf = optimize(lang, program, MctsConfig(budget=8, node_limit=1000, main_extract="greedy-ocf"), EXTRACT)
    assert ocf.outcome.steps == () and ocf.best.cost == ocf.original_cost


def test_mcts_on_nasrnn_improves_is_seeded_and_stays_under_the_node_limit():
    config = MctsConfig(budget=6, max_sim_steps=3, node_limit=600, seed=1)
    first, again = _nasrnn(config), _nasrnn(config)
    assert first.best.cost < first.original_cost
    assert [(s.rule, s.cost) for s in first.outcome.steps] == [(s.rule, s.cost) for s in again.outcome.steps]
    assert first.outcome.nodes <= 600 and all(s.nodes <= 600 for s in first.outcome.steps)
    assert all(0 < s.mean_reward <= 1 and s.iterations <= 6 for s in first.outcome.steps)


def test_run_reports_mcts_steps(tmp_path, run_cli):
    cfg = tmp_path / "mcts.yaml"
    cfg.write_text(yaml.safe_dump({
        "ruleset": "tensat", "target": "a100", "program": {"builder": "nasrnn", **NASRNN},
        "schedule": {"kind": "mcts", "budget": 4, "max_sim_steps": 2, "node_limit": 500},
        "extract": {"method": "cpsat", "time_limit_s": 10, "compare": ["greedy-ocf"]}}))
    code, out, err = run_cli("run", cfg, "--output", tmp_path / "out")
    assert code == 0, out + err
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    steps = report["schedule"]["steps"]
    assert steps and {"rule", "visits", "mean_reward", "nodes", "cost", "search_iterations"} <= set(steps[0])
    assert "mcts:" in out


@pytest.mark.parametrize("schedule, path, message", [
    ({"kind": "mcts", "budget": 0}, "schedule.budget", "an int ≥ 1"),
    ({"kind": "mcts", "main_extract": "ilp"}, "schedule.main_extract", "greedy-ocf"),
    ({"kind": "mcts", "uct_c": -1}, "schedule.uct_c", "a number > 0"),
    ({"kind": "mcts", "multi_matches": -2}, "schedule.multi_matches", "an int ≥ 0"),
    ({"kind": "mcts", "simulation": "random"}, "schedule.simulation", "draw, rewrite"),
    ({"kind": "mcts", "final_extract": "cpsat"}, "schedule.final_extract", "extract.method"),
    ({"kind": "saturate", "budget": 3}, "schedule.budget", "`kind: mcts`"),
])
def test_bad_mcts_settings_name_the_key(tmp_path, schedule, path, message):
    cfg = tmp_path / "c.yaml"
    cfg.write_text(yaml.safe_dump({"ruleset": "arith", "program": str(tmp_path / "p.eqr"), "schedule": schedule}))
    with pytest.raises(EqdslError) as info:
        load_config(cfg)
    d = info.value.diagnostics[0]
    assert d.path.endswith(path) and message in d.message, (d.path, d.message)


def test_an_exact_main_extractor_prices_only_each_rollouts_last_state(monkeypatch):
    """cpsat's minimum costs never rise as the e-graph grows, so a rollout's cost decreases sum to
    its first cost minus its last: pricing the last state alone gives the same search."""
    from eqdsl.extract.cpsat import CpSatExtractor
    from eqdsl.schedule import mcts

    priced = []
    extract = CpSatExtractor.extract
    monkeypatch.setattr(CpSatExtractor, "extract", lambda self, p: priced.append(1) or extract(self, p))
    # rollouts long enough that some change the e-graph more than once (else both price alike)
    config = MctsConfig(budget=6, max_sim_steps=8, node_limit=600, seed=2, main_extract="cpsat")
    last_only = _nasrnn(config)
    fewer = len(priced)
    monkeypatch.setattr(mcts, "is_exact", lambda name: False)
    priced.clear()
    every_step = _nasrnn(config)
    assert [(s.rule, s.visits, s.cost) for s in last_only.outcome.steps] == \
        [(s.rule, s.visits, s.cost) for s in every_step.outcome.steps]
    assert [s.mean_reward for s in last_only.outcome.steps] == \
        pytest.approx([s.mean_reward for s in every_step.outcome.steps])
    assert last_only.best.cost == every_step.best.cost and fewer < len(priced)


class _OneRuleChanges:
    """A session where only rule `good` changes the e-graph (every other rule has no match)."""

    def __init__(self, rules: list[str], good: str | None) -> None:
        from types import SimpleNamespace

        self.lowered = SimpleNamespace(sampled={}, rulesets={r: r for r in rules})
        self.good, self.tried = good, []

    def step(self, ruleset: str):
        from eqdsl.egglog.session import StepResult

        self.tried.append(ruleset)
        return StepResult({ruleset: int(ruleset == self.good)}, ruleset == self.good)


@pytest.mark.parametrize("seed", range(5))
def test_a_simulation_step_is_one_rewrite_not_one_draw(seed):
    """With 1 of 40 rules matching, a draw from all rules would miss 39 times in 40; a simulation
    step draws without replacement until a rule changes the e-graph, or every rule has missed."""
    from eqdsl.schedule.mcts import MctsScheduler

    rules = [f"r{i}" for i in range(40)]
    cfg = MctsConfig(seed=seed, multi_matches=0, simulation="rewrite")
    search = MctsScheduler(cfg.limits(cfg.max_steps), cfg, None)  # type: ignore[arg-type]
    search.rules = tuple(rules)
    session = _OneRuleChanges(rules, "r17")
    assert search._sim_step(session, ()) == "r17"  # type: ignore[arg-type]
    assert len(set(session.tried)) == len(session.tried)  # no rule drawn twice
    stuck = _OneRuleChanges(rules, None)
    assert search._sim_step(stuck, ()) is None  # type: ignore[arg-type]
    assert sorted(stuck.tried) == sorted(rules)
    drawing = MctsScheduler(cfg.limits(cfg.max_steps), replace(cfg, simulation="draw"), None)  # type: ignore[arg-type]
    drawing.rules = tuple(rules)
    once = _OneRuleChanges(rules, "r17")
    drawing._sim_step(once, ())  # type: ignore[arg-type]
    assert len(once.tried) == 1  # `draw`: one rule, whether it changed the e-graph or not


def test_rewrite_rollouts_are_seeded_and_stay_under_the_node_limit():
    config = MctsConfig(budget=4, max_sim_steps=3, node_limit=600, seed=1, main_extract="cpsat", simulation="rewrite")
    first, again = _nasrnn(config), _nasrnn(config)
    assert first.best.cost < first.original_cost
    assert [(s.rule, s.visits, s.cost) for s in first.outcome.steps] == \
        [(s.rule, s.visits, s.cost) for s in again.outcome.steps]
    assert first.outcome.nodes <= 600 and all(s.nodes <= 600 for s in first.outcome.steps)
