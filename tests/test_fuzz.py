"""Fuzzing campaign (issue 12): every surface a user feeds eqdsl — `.eqr` text, YAML configs,
e-graph JSON, CLI argument vectors — gives a result or an `EqdslError` (a diagnostic), never
another exception. Extraction is also checked against brute force on small random e-graphs.

`make test` runs a small sample per surface; `FUZZ_EXAMPLES=10000 pytest -m slow tests/test_fuzz.py`
runs the campaign (counts in BENCHMARKS.md). Each crash found is a regression test elsewhere.
"""
from __future__ import annotations

import itertools
import json
import math
import os
import random
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from eqdsl.config import parse_config
from eqdsl.diagnostics import EqdslError
from eqdsl.extract.cpsat import CpSatExtractor
from eqdsl.extract.dag import GreedyDagExtractor
from eqdsl.extract.egraph import dag_cost, problem_from_json, restrict
from eqdsl.extract.greedy import GreedyExtractor
from eqdsl.frontend import check_modules, load_modules, resolve_ruleset

from conftest import ROOT

SLOW = int(os.environ.get("FUZZ_EXAMPLES", "10000"))
FAST = 60


def fuzz_settings(n: int):
    return settings(max_examples=n, deadline=None, derandomize=True, database=None,
                    suppress_health_check=list(HealthCheck))


def sizes(fast_or_slow: str) -> int:
    return FAST if fast_or_slow == "fast" else SLOW


def report(surface: str, mode: str, inputs: list[int]) -> None:
    """Print how many inputs ran (the campaign's counts), and hold the slow run to its size."""
    print(f"\nfuzz {surface}: {inputs[0]} inputs, 0 crashes")
    if mode == "slow":
        assert inputs[0] >= SLOW


MODES = [pytest.param("fast"), pytest.param("slow", marks=pytest.mark.slow)]

# ---- .eqr text: grammar-guided generation plus byte-level mutation of the shipped files ----
NAMES = st.sampled_from(["x", "y", "T", "N", "add", "mul-2", "f", "in", "shape", "a-1b", "__"])
SORTS = st.sampled_from(["N", "T", "Int", "Str", "[Int]", "Q"])


@st.composite
def eqr_text(draw) -> str:
    lines = [f"language {draw(NAMES)}"] if draw(st.booleans()) else []
    for _ in range(draw(st.integers(0, 3))):
        lines.append(f"sort {draw(NAMES)}" + (" { shape: [Int] }" if draw(st.booleans()) else ""))
    for _ in range(draw(st.integers(0, 4))):
        params = ", ".join(f"{draw(NAMES)}: {draw(SORTS)}" for _ in range(draw(st.integers(0, 3))))
        lines.append(f"op {draw(NAMES)}({params}) -> {draw(SORTS)}")
    term = st.recursive(st.sampled_from(["?x", "?y", "1", '"s"', "num(2)"]),
                        lambda kids: st.builds(lambda f, a: f"{f}({', '.join(a)})", NAMES,
                                               st.lists(kids, max_size=3)), max_leaves=8)
    for _ in range(draw(st.integers(0, 3))):
        arrow = draw(st.sampled_from(["=>", "<=>", "->", "=="]))
        cond = draw(st.sampled_from(["", " if ?x != ?y", " if shape(?x)[0] > 1", " where k = 3"]))
        lines.append(f"rule {draw(NAMES)}: {draw(term)} {arrow} {draw(term)}{cond}")
    for _ in range(draw(st.integers(0, 3))):
        lines.append(draw(st.sampled_from([
            "cost x = 1", "cost f(a) = a[0] * 2", "cost add = -1", "shape f(a) = [a[0], a[9]]",
            "shape x = []", "param p: Int", "include arith", 'include "nowhere.eqr"',
            "program main:\n  root f(1)", "program p:\n  let a = x()\n  root a", "cost mul = 1 / 0"])))
    return "\n".join(lines) + "\n"


SHIPPED = [p.read_text() for p in sorted((ROOT / "rulesets").glob("*.eqr")) if p.stat().st_size < 20_000]


@st.composite
def mutated_eqr(draw) -> str:
    data = bytearray(draw(st.sampled_from(SHIPPED)).encode())
    for _ in range(draw(st.integers(1, 8))):
        at = draw(st.integers(0, max(len(data) - 1, 0)))
        match draw(st.sampled_from(["flip", "delete", "insert", "dup"])):
            case "flip":
                data[at] = draw(st.integers(0, 255))
            case "delete":
                del data[at:at + draw(st.integers(1, 40))]
            case "insert":
                data[at:at] = draw(st.binary(min_size=1, max_size=8))
            case "dup":
                data[at:at] = data[at:at + draw(st.integers(1, 80))]
    return data.decode("utf-8", errors="replace")


def check_eqr(text: str, tmp: Path) -> None:
    path = tmp / "f.eqr"
    path.write_text(text)
    try:
        check_modules(load_modules(resolve_ruleset(str(path))))
    except EqdslError as err:
        assert err.diagnostics and all(d.message for d in err.diagnostics)


@pytest.mark.parametrize("mode", MODES)
def test_fuzz_eqr(mode, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("eqr")

    @fuzz_settings(sizes(mode))
    @given(st.one_of(eqr_text(), mutated_eqr()))
    def run(text):
        count[0] += 1
        check_eqr(text, tmp)

    count = [0]
    run()
    report("eqr", mode, count)


# ---- YAML configs ----
KEYS = {"": ["ruleset", "program", "schedule", "extract", "output", "target", "validate", "bogus"],
        "schedule": ["kind", "iter_limit", "node_limit", "time_limit_s", "memory_limit_mb", "k_multi",
                     "cycle_filter", "epochs", "rules", "class_counts"],
        "extract": ["method", "time_limit_s", "acyclic", "warm_start", "compare", "workers", "parts", "search"]}
VALUES = st.recursive(st.one_of(st.none(), st.booleans(), st.integers(-5, 10**12), st.floats(allow_nan=True),
                                st.sampled_from(["arith", "cpsat", "saturate", "pulsed", "", "x.eqr", "order"])),
                      lambda kids: st.one_of(st.lists(kids, max_size=3),
                                             st.dictionaries(st.sampled_from(KEYS[""]), kids, max_size=3)),
                      max_leaves=6)


@st.composite
def config_data(draw):
    data = {k: draw(VALUES) for k in draw(st.lists(st.sampled_from(KEYS[""]), max_size=6, unique=True))}
    for section in ("schedule", "extract"):
        if draw(st.booleans()):
            data[section] = {k: draw(VALUES) for k in draw(st.lists(st.sampled_from(KEYS[section]),
                                                                    max_size=5, unique=True))}
    return data if draw(st.integers(0, 9)) else draw(VALUES)


@pytest.mark.parametrize("mode", MODES)
def test_fuzz_yaml_config(mode, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("yaml")

    @fuzz_settings(sizes(mode))
    @given(config_data())
    def run(data):
        count[0] += 1
        text = yaml.safe_dump(data)
        try:
            parse_config(yaml.safe_load(text), tmp / "c.yaml")
        except EqdslError as err:
            assert err.diagnostics[0].path is not None or err.diagnostics[0].message

    count = [0]
    run()
    report("yaml", mode, count)


# ---- e-graph JSON: random shapes, cycles, deep chains, fan-in, dangling ids, odd costs ----
COSTS = st.one_of(st.integers(-5, 100), st.floats(allow_nan=True, allow_infinity=True), st.just(1e300),
                  st.sampled_from(["1", None, True]))


@st.composite
def egraph_json(draw):
    n_classes = draw(st.integers(1, 12))
    nodes = {}
    for c in range(n_classes):
        for k in range(draw(st.integers(1, 3))):
            kids = draw(st.lists(st.integers(0, n_classes + 1), max_size=4))  # n, n+1: dangling
            nodes[f"c{c}.{k}"] = {"op": draw(st.sampled_from(["a", "b", "f"])), "eclass": f"c{c}",
                                  "children": [f"c{x}.0" for x in kids],
                                  "cost": draw(COSTS) if draw(st.integers(0, 5)) == 0 else draw(st.integers(0, 20))}
    roots = draw(st.lists(st.integers(0, n_classes), min_size=0, max_size=3))
    data = {"nodes": nodes, "root_eclasses": [f"c{r}" for r in roots]}
    if draw(st.integers(0, 20)) == 0:
        data = draw(st.sampled_from([[], {"nodes": []}, {"nodes": {"x": 3}}, {"nodes": {}, "root_eclasses": "c0"}]))
    return data


def extract_all(data) -> None:
    try:
        problem = problem_from_json(json.loads(json.dumps(data, allow_nan=True)), "g.json")
    except EqdslError:
        return
    for extractor in (GreedyExtractor(), GreedyDagExtractor(), CpSatExtractor(time_limit_s=2)):
        try:
            e = extractor.extract(problem)
        except EqdslError:
            continue
        assert dag_cost(problem, restrict(problem, e.selection)) == pytest.approx(e.cost)


@pytest.mark.parametrize("mode", MODES)
def test_fuzz_egraph_json(mode):
    @fuzz_settings(sizes(mode))
    @given(egraph_json())
    def run(data):
        count[0] += 1
        extract_all(data)

    count = [0]
    run()
    report("egraph-json", mode, count)


def brute_force(problem) -> float:
    """The cheapest acyclic complete selection, by enumerating every choice per class."""
    best = math.inf
    classes = range(problem.num_classes)
    for picks in itertools.product(*[problem.class_nodes[c] for c in classes]):
        try:
            best = min(best, dag_cost(problem, restrict(problem, dict(zip(classes, picks)))))
        except Exception:  # noqa: BLE001 - cyclic selections are simply not programs
            continue
    return best


@pytest.mark.parametrize("mode", MODES)
def test_extraction_matches_brute_force(mode):
    @fuzz_settings(300 if mode == "fast" else 3000)
    @given(st.integers(0, 2**32 - 1), st.booleans())
    def run(seed, negative):
        rng = random.Random(seed)
        n = rng.randint(1, 6)
        nodes = {}
        for c in range(n):
            for k in range(rng.randint(1, 2)):
                kids = [f"c{rng.randrange(n)}.0" for _ in range(rng.randint(0, 2))]
                low = -5 if negative else 0
                nodes[f"c{c}.{k}"] = {"op": "f", "eclass": f"c{c}", "children": kids, "cost": rng.randint(low, 9)}
        problem = problem_from_json({"nodes": nodes, "root_eclasses": [f"c{rng.randrange(n)}"]})
        optimum = brute_force(problem)
        try:
            e = CpSatExtractor(time_limit_s=10).extract(problem)
        except EqdslError:
            assert math.isinf(optimum)  # unsatisfiable exactly when no acyclic program exists
            return
        assert e.cost == optimum and e.status.value == "optimal"
        if not negative:
            for greedy in (GreedyExtractor(), GreedyDagExtractor()):
                assert greedy.extract(problem).cost >= optimum

    run()


# ---- CLI argument vectors ----
ARGS = st.lists(st.sampled_from(["run", "check", "verify", "extract", "compile", "import", "--examples",
                                 "0", "-1", "nan", "arith", "--time-limit", "--workers", "--out", "x/y.json",
                                 "--rule", "nope", "--extractor", "cpsat", "missing.yaml", "tensat",
                                 "--output", ".", "--seed", "3", "--force", "--quiet", "g.json"]), max_size=6)


@pytest.mark.parametrize("mode", MODES)
def test_fuzz_cli_argv(mode, tmp_path, monkeypatch, capfd):
    from eqdsl.cli import main

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("EQDSL_IN_PROCESS", "1")
    (tmp_path / "g.json").write_text('{"nodes": {"a": {"op": "a", "eclass": "c", "children": []}}, '
                                     '"root_eclasses": ["c"]}')

    @fuzz_settings(sizes(mode))
    @given(ARGS)
    def run(argv):
        count[0] += 1
        if argv[:1] == ["verify"]:
            argv = argv + ["--examples", "2"]  # the whole TASO set at 100 examples is not a fuzz input
        try:
            code = main(argv)
        except SystemExit as exit_:
            code = exit_.code
        assert code in (0, 1, 2)
        assert "Traceback" not in capfd.readouterr().err

    count = [0]
    run()
    report("cli", mode, count)
