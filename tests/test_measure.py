"""Measured costs: the SQLite timing cache, timing batches, `target: {measure: ...}` in runs, and
`eqdsl measure`."""
from __future__ import annotations

import json
import multiprocessing
import sqlite3

import pytest

from eqdsl.config import parse_config
from eqdsl.cost.cache import TimingCache
from eqdsl.cost.measured import MeasuredCosts
from eqdsl.cost.model import Request, RuleCosts
from eqdsl.diagnostics import EqdslError
from eqdsl.frontend import load_language
from eqdsl.languages.tensor.ops import OPS

LEAVES = frozenset(s.name for s in OPS if not s.timed)


def test_cache_keeps_the_first_timing(tmp_path):
    cache = TimingCache(tmp_path / "t.sqlite")
    assert cache.get("dev", "relu", ((1, 8),)) is None
    assert cache.put("dev", "relu", ((1, 8),), 120.0, 20) == 120.0
    assert cache.put("dev", "relu", ((1, 8),), 999.0, 20) == 120.0  # an earlier writer wins
    assert cache.get("other", "relu", ((1, 8),)) is None  # keyed by device
    assert TimingCache(tmp_path / "t.sqlite").get("dev", "relu", ((1, 8),)) == 120.0  # persisted


def _other_programs_database(path):
    db = sqlite3.connect(path)
    db.execute("CREATE TABLE photos (id INTEGER, title TEXT)")
    db.commit()
    db.close()


@pytest.mark.parametrize("make, expected", [
    (lambda p: p.write_bytes(b"\x00garbage" * 100), "not an SQLite database"),
    (lambda p: p.write_text("timings, but as text\n"), "not an SQLite database"),
    (lambda p: p.mkdir(), "not a regular file"),
    (_other_programs_database, r"an SQLite database that is not eqdsl.s \(tables: photos\)"),
])
def test_a_cache_path_holding_something_else_is_refused_and_left_alone(tmp_path, make, expected):
    """Issue 46 item 3: sqlite3 errors were tracebacks; another program's database got a table
    and a WAL journal added."""
    path = tmp_path / "t.sqlite"
    make(path)
    before = sorted((p.name, p.read_bytes() if p.is_file() else b"") for p in tmp_path.rglob("*"))
    with pytest.raises(EqdslError, match=expected):
        TimingCache(path)
    assert sorted((p.name, p.read_bytes() if p.is_file() else b"") for p in tmp_path.rglob("*")) == before


def test_a_truncated_cache_is_refused(tmp_path):
    path = tmp_path / "t.sqlite"
    cache = TimingCache(path)
    for k in range(300):
        cache.put("dev", "relu", ((k, 8),), 1.0, 1)
    cache.close()
    path.write_bytes(path.read_bytes()[:1500])
    with pytest.raises(EqdslError, match="timing cache"):
        TimingCache(path).get("dev", "relu", ((299, 8),))


def _writer(path, worker):
    cache = TimingCache(path)
    for k in range(200):
        cache.put("dev", "ewadd", ((k,), (k,)), float(worker), 1)


def test_cache_is_safe_with_concurrent_writers(tmp_path):
    path = tmp_path / "t.sqlite"
    TimingCache(path).close()
    ctx = multiprocessing.get_context("spawn")
    procs = [ctx.Process(target=_writer, args=(path, w)) for w in range(4)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
    assert all(p.exitcode == 0 for p in procs)
    rows = sqlite3.connect(path).execute("SELECT COUNT(*), COUNT(DISTINCT args) FROM timings").fetchone()
    assert rows == (200, 200)


class FakeBackend:
    name = "fake"

    def __init__(self):
        self.calls = []

    def device(self):
        return "fake device"

    def supports(self, op):
        return op in ("relu", "matmul")

    def time_ns(self, lang, op, args, runs):
        self.calls.append((op, args))
        return 1000.0 * len({c for c in self.calls})  # steady: each configuration its own time


def test_each_configuration_is_timed_once(tmp_path):
    lang = load_language("tensat")
    backend = FakeBackend()
    rules = RuleCosts(lang, {"gflops": 1, "gbps": 1, "launch_ns": 7})
    costs = MeasuredCosts(lang, backend, rules, TimingCache(tmp_path / "t.sqlite"), 3, not_timed=LEAVES)
    requests = [Request("relu", ((1, 8),), (1, 8)), Request("relu", ((1, 8),), (1, 8)),
                Request("pad2d", ((1, 1, 4, 4), 1, 1, 1, 1, 0), (1, 1, 6, 6)), Request("input", ("x", (1, 8)), (1, 8))]
    by_rule = rules.price(requests[2:])
    assert costs.price(requests) == [1000.0, 1000.0, *by_rule] and by_rule[0] > 7  # the rest: the fallback
    assert costs.price(requests) == [1000.0, 1000.0, *by_rule] and len(backend.calls) == 2  # two medians, agreeing
    assert costs.stats.rule_priced == {"pad2d"}  # `input` is a leaf, not an operator without a kernel
    again = MeasuredCosts(lang, FakeBackend(), rules, TimingCache(tmp_path / "t.sqlite"), 3, not_timed=LEAVES)
    assert again.price(requests)[0] == 1000.0 and again.stats.cached == 1 and not again.stats.timed


class BusyBackend(FakeBackend):
    """Medians that never agree (a busy machine): 3000, 1000, 3000, 1200, ..."""

    def time_ns(self, lang, op, args, runs):
        self.calls.append((op, args))
        return 3000.0 if len(self.calls) % 2 else 1000.0 + 100 * len(self.calls) // 2


def test_a_timing_that_never_steadies_is_used_at_its_lowest_but_never_cached(tmp_path):
    from eqdsl.cost.measured import NOISE_TRIES, noisy_text

    lang = load_language("tensat")
    rules = RuleCosts(lang, {"gflops": 1, "gbps": 1, "launch_ns": 7})
    cache = TimingCache(tmp_path / "t.sqlite")
    costs = MeasuredCosts(lang, BusyBackend(), rules, cache, 3, not_timed=LEAVES)
    request = [Request("relu", ((1, 8),), (1, 8))]
    assert costs.price(request) == [1100.0] and len(costs.backend.calls) == 2 * NOISE_TRIES
    assert costs.price(request) == [1100.0] and len(costs.backend.calls) == 2 * NOISE_TRIES  # not timed again
    assert cache.get(costs.device, "relu", ((1, 8),)) is None and len(costs.stats.noisy) == 1
    assert "1 timing(s) never steady" in noisy_text(costs.stats) and noisy_text(MeasuredCosts(
        lang, FakeBackend(), rules, cache, 3).stats) == ""


@pytest.mark.parametrize("target, message", [
    ({"measure": "tpu"}, "target.measure: error: expected one of: ort, cpu, cuda"),
    ({"fallback": "cpu"}, "target.measure"),
    ({"measure": "ort", "runs": 0}, "target.runs: error: expected an integer >= 1, got 0"),
    ({"measure": "ort", "speed": 1}, "target.speed"),
])
def test_bad_measuring_targets_name_the_key(tmp_path, target, message):
    data = {"ruleset": "tensat", "program": {"builder": "nasrnn"}, "target": target}
    with pytest.raises(EqdslError) as err:
        parse_config(data, tmp_path / "c.yaml")
    assert message in str(err.value)


def _config(tmp_path, measure: str) -> str:
    (tmp_path / "run.yaml").write_text(
        f"ruleset: tensat\ntarget: {{measure: {measure}, fallback: cpu, cache: timings.sqlite, runs: 3}}\n"
        "program: {builder: nasrnn, steps: 1, hidden: 16}\n"
        "schedule: {iter_limit: 2, node_limit: 2000}\nextract: {method: greedy}\n")
    return str(tmp_path / "run.yaml")


def test_run_with_ort_measured_costs_uses_the_cache(tmp_path, run_cli, monkeypatch):
    # caching, not the noise check (its own test): on a loaded VM one-operator ORT timings often
    # differ by more than NOISE_RATIO, and an unsteady timing is rightly not cached
    monkeypatch.setattr("eqdsl.cost.measured.NOISE_RATIO", 1e9)
    config = _config(tmp_path, "ort")
    code, out, err = run_cli("measure", config)
    assert code == 0, err
    assert "operator configuration(s) timed, 0 already in" in out
    code, out, err = run_cli("run", config, "--output", tmp_path / "out", "--quiet")
    assert code == 0, err
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    measured = report["measured_costs"]
    assert measured["backend"] == "ort" and measured["timed"] == 0 and measured["cached"] > 0
    assert "ONNX Runtime" in measured["device"] or "onnxruntime" in measured["device"]
    assert report["original_cost"] > 0


def test_run_with_numba_cpu_kernels_prices_the_rest_by_rules(tmp_path, run_cli):
    code, out, err = run_cli("run", _config(tmp_path, "cpu"), "--output", tmp_path / "out", "--quiet")
    assert code == 0, err
    measured = json.loads((tmp_path / "out" / "report.json").read_text())["measured_costs"]
    assert measured["timed"] > 0 and "numba-cpu" in measured["device"]


def test_measure_needs_a_measuring_target(tmp_path, run_cli):
    (tmp_path / "run.yaml").write_text("ruleset: tensat\ntarget: t4\nprogram: {builder: nasrnn}\n")
    code, _, err = run_cli("measure", tmp_path / "run.yaml")
    assert code == 2 and "expected a measuring target" in err


def test_an_operator_that_cannot_run_alone_is_priced_by_the_fallback(tmp_path, run_cli):
    """A Resize (opaque) timed alone gets random scales, which ONNX Runtime refuses: the measurer
    leaves it to the fallback instead of ending the run in a traceback (PP-OCR's detector)."""
    import numpy as np
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    nodes = [helper.make_node("Relu", ["x"], ["r"]),
             helper.make_node("Resize", ["r", "", "scales"], ["y"], mode="nearest")]
    graph = helper.make_graph(nodes, "up", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 2, 4, 4])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 2, 8, 8])],
                              [numpy_helper.from_array(np.array([1, 1, 2, 2], dtype=np.float32), "scales")])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), tmp_path / "m.onnx")
    (tmp_path / "run.yaml").write_text(
        "ruleset: tensat\ntarget: {measure: ort, fallback: cpu, runs: 3, cache: t.sqlite}\nprogram: {onnx: m.onnx}\n"
        "schedule: {iter_limit: 1}\nextract: {method: greedy, compare: []}\nexport: {format: onnx, runtime_check: false}\n")
    code, out, err = run_cli("run", tmp_path / "run.yaml", "--output", tmp_path / "out", "--quiet")
    assert code == 0 and "Traceback" not in err, err
