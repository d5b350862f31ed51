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
    """Print how many inputs ran (the campaign's counts; `inputs[1]`, when kept: how many were
    accepted rather than refused with a diagnostic), and hold the slow run to its size."""
    accepted = f" ({inputs[1]} accepted)" if len(inputs) > 1 else ""
    print(f"\nfuzz {surface}: {inputs[0]} inputs, 0 crashes{accepted}")
    if mode == "slow":
        assert inputs[0] >= SLOW


MODES = [pytest.param("fast"), pytest.param("slow", marks=pytest.mark.slow)]


def campaign(surface: str, mode: str, inputs, accept) -> None:
    """Feed every input `inputs` draws to `accept`: it returns (accepted) or raises an
    `EqdslError` with a message (refused); anything else is a crash."""
    count = [0, 0]

    @fuzz_settings(sizes(mode))
    @given(inputs)
    def run(value):
        count[0] += 1
        try:
            accept(value)
            count[1] += 1
        except EqdslError as err:
            assert err.diagnostics and all(d.message for d in err.diagnostics)

    run()
    report(surface, mode, count)

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


# ---- YAML text: aliases and merge keys, duplicate keys, scientific notation, byte mutations ----
CONFIG_TEXTS = [p.read_text() for p in sorted((ROOT / "examples").rglob("*.yaml"))]
YAML_PIECES = st.sampled_from([
    "base: &b {iter_limit: 2}\nschedule: *b\n", "schedule: {<<: {iter_limit: 3}, kind: saturate}\n",
    "ruleset: arith\nruleset: tensat\n", "extract: {time_limit_s: 1e3}\n", "extract: {time_limit_s: 1.5e-400}\n",
    "schedule: {node_limit: 1e9}\n", "schedule: {iter_limit: .inf}\n", "output: !!binary aGk=\n",
    "program: {text: \"program p:\\n  root var(\\\"名\\\")\"}\n", "a: &x [*x]\n", "? [1, 2]\n: 3\n",
    "ruleset: arith\nprogram: *undefined\n", "%YAML 1.2\n---\nruleset: arith\n", "--- 1\n--- 2\n",
    "schedule: {kind: mcts, seed: 0x1F}\n", "validate: yes\n", "execute: {runs: 1_000}\n", "he: {batch: -1}\n"])


@st.composite
def yaml_text(draw) -> str:
    text = draw(st.sampled_from(CONFIG_TEXTS)) if draw(st.booleans()) else ""
    text += "".join(draw(st.lists(YAML_PIECES, max_size=3)))
    data = bytearray(text.encode())
    for _ in range(draw(st.integers(0, 4))):
        at = draw(st.integers(0, max(len(data) - 1, 0)))
        data[at:at + draw(st.integers(0, 6))] = draw(st.binary(max_size=4))
    return data.decode("utf-8", errors="replace")


@pytest.mark.parametrize("mode", MODES)
def test_fuzz_yaml_text(mode, tmp_path_factory):
    from eqdsl.config import load_config

    tmp = tmp_path_factory.mktemp("yamltext")
    for name in ("input.eqr", "model.onnx"):
        (tmp / name).write_text("program p:\n  root var(\"a\")\n")

    def accept(text: str) -> None:
        (tmp / "c.yaml").write_text(text)
        load_config(tmp / "c.yaml")

    campaign("yaml-text", mode, yaml_text(), accept)


# ---- e-graph JSON text: huge numbers, deep nesting, non-ASCII, byte mutations of a valid file ----
VALID_JSON = json.dumps({"nodes": {"a": {"op": "f", "eclass": "c0", "children": ["b"], "cost": 2},
                                   "b": {"op": "名", "eclass": "c1", "children": [], "cost": 1.5}},
                         "root_eclasses": ["c0"]})
JSON_PIECES = st.sampled_from(['{"cost": 1e400}', '"cost": 99999999999999999999999999999999999999999999',
                               "[" * 5000, '"\\ud800"', '"名前"', "NaN", "-Infinity", '{"nodes": {}}', "\x00",
                               '"children": ["a", "a", "a"]', '"eclass": 3', '"root_eclasses": [null]'])


@st.composite
def json_text(draw) -> str:
    data = bytearray(VALID_JSON.encode())
    for _ in range(draw(st.integers(0, 4))):
        at = draw(st.integers(0, len(data)))
        piece = draw(JSON_PIECES) if draw(st.booleans()) else draw(st.binary(max_size=3)).decode("latin-1")
        data[at:at + draw(st.integers(0, 8))] = piece.encode()
    return data.decode("utf-8", errors="replace")


@pytest.mark.parametrize("mode", MODES)
def test_fuzz_egraph_json_text(mode, tmp_path_factory):
    from eqdsl.extract.egraph import read_problem

    tmp = tmp_path_factory.mktemp("jsontext")

    def accept(text: str) -> None:
        (tmp / "g.json").write_text(text)
        extract_problem(read_problem(tmp / "g.json"))

    campaign("egraph-json-text", mode, json_text(), accept)


def extract_problem(problem) -> None:
    for extractor in (GreedyExtractor(), GreedyDagExtractor(), CpSatExtractor(time_limit_s=2)):
        try:
            extractor.extract(problem)
        except EqdslError:
            continue


# ---- timing-cache files: garbage, truncated or altered databases, other programs' databases ----
@st.composite
def cache_bytes(draw, valid: bytes) -> bytes:
    match draw(st.sampled_from(["random", "truncated", "flipped", "valid"])):
        case "random":
            return draw(st.binary(max_size=2048))
        case "truncated":
            return valid[:draw(st.integers(0, len(valid)))]
        case "flipped":
            data = bytearray(valid)
            for _ in range(draw(st.integers(1, 6))):
                data[draw(st.integers(0, len(data) - 1))] = draw(st.integers(0, 255))
            return bytes(data)
    return valid


@pytest.mark.parametrize("mode", MODES)
def test_fuzz_timing_cache_files(mode, tmp_path_factory):
    import sqlite3

    from eqdsl.cost.cache import TimingCache, check_cache_file

    tmp = tmp_path_factory.mktemp("cache")
    TimingCache(tmp / "valid.sqlite").put("dev", "relu", ((1, 8),), 1000.0, 3)
    other = sqlite3.connect(tmp / "other.sqlite")
    other.execute("CREATE TABLE timings (x TEXT)")
    other.commit()
    other.close()
    samples = [(tmp / "valid.sqlite").read_bytes(), (tmp / "other.sqlite").read_bytes()]

    def accept(data: bytes) -> None:
        path = tmp / "t.sqlite"
        path.write_bytes(data)
        for extra in ("t.sqlite-wal", "t.sqlite-shm", "t.sqlite-journal"):
            (tmp / extra).unlink(missing_ok=True)
        check_cache_file(path)
        cache = TimingCache(path)
        try:
            cache.get("dev", "relu", ((1, 8),))
        finally:
            cache.close()

    campaign("timing-cache", mode, st.sampled_from(samples).flatmap(cache_bytes), accept)


# ---- ONNX models: random small graphs (custom domains, huge or dynamic dimensions, odd opsets and
# attributes, int64 operands), and byte mutations of the example model ----
ONNX_OPS = ["Relu", "Add", "MatMul", "Conv", "Reshape", "Transpose", "Gather", "Concat", "Softmax", "Identity",
            "MaxPool", "Slice", "Unsqueeze", "Cast", "Where", "LSTM", "MyOp"]


@st.composite
def onnx_model(draw) -> bytes:
    import numpy as np
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    odd = draw(st.integers(0, 4)) == 0  # one model in five: odd dimensions and element types
    dim = st.one_of(st.integers(0, 4), st.just(10**7), st.just("N"), st.just(-1)) if odd else st.integers(1, 4)
    dims = draw(st.lists(dim, min_size=0 if odd else 2, max_size=4))
    kinds = [TensorProto.FLOAT, TensorProto.INT64, TensorProto.DOUBLE] if odd else [TensorProto.FLOAT]
    x = helper.make_tensor_value_info("x", draw(st.sampled_from(kinds)), dims)
    names, nodes, inits = ["x"], [], []
    for i in range(draw(st.integers(0, 4))):
        op = draw(st.sampled_from(ONNX_OPS))
        if draw(st.booleans()):
            const = f"c{i}"
            shape = draw(st.lists(st.integers(1, 3), max_size=3))
            dtype = draw(st.sampled_from([np.float32, np.int64]))
            dtype = dtype if odd else np.float32
            inits.append(numpy_helper.from_array(np.ones(shape, dtype), const))
            names.append(const)
        inputs = draw(st.lists(st.sampled_from(names), min_size=1, max_size=3))
        attrs = {draw(st.sampled_from(["axis", "perm", "kernel_shape", "to", "shape"])): draw(
            st.one_of(st.integers(-3, 3), st.lists(st.integers(-1, 3), min_size=1, max_size=3)))} if odd else {}
        domain = "com.example" if op == "MyOp" else ""
        nodes.append(helper.make_node(op, inputs, [f"t{i}"], domain=domain, **attrs))
        names.append(f"t{i}")
    out = helper.make_tensor_value_info(names[-1], TensorProto.FLOAT, None)
    graph = helper.make_graph(nodes, "fuzz", [x], [out], inits)
    versions = [1, 7, 9, 11, 13, 17, 18, 21, 23, 99] if odd else [13, 17, 18, 21]
    opsets = [helper.make_opsetid("", draw(st.sampled_from(versions)))]
    model = helper.make_model(graph, opset_imports=opsets + [helper.make_opsetid("com.example", 1)])
    try:  # the output's type as ONNX infers it, where it can (a model without one is refused early)
        inferred = {v.name: v for v in onnx.shape_inference.infer_shapes(model).graph.value_info}
    except Exception:  # noqa: BLE001 - an ill-formed model stays as it is: a fuzz input
        inferred = {}
    if names[-1] in inferred:
        model.graph.output[0].CopyFrom(inferred[names[-1]])
    elif names[-1] == "x":
        model.graph.output[0].CopyFrom(x)
    return model.SerializeToString()


EXAMPLE_ONNX = (ROOT / "examples" / "onnx" / "small_cnn.onnx").read_bytes()


@st.composite
def mutated_onnx(draw) -> bytes:
    data = bytearray(EXAMPLE_ONNX)
    for _ in range(draw(st.integers(1, 6))):
        at = draw(st.integers(0, len(data) - 1))
        data[at:at + draw(st.integers(0, 4))] = draw(st.binary(max_size=4))
    return bytes(data)


@pytest.mark.parametrize("mode", MODES)
def test_fuzz_onnx_models(mode, tmp_path_factory):
    pytest.importorskip("onnxruntime")
    from eqdsl.frontend import load_language
    from eqdsl.onnx.read import read_onnx

    tmp = tmp_path_factory.mktemp("onnx")
    lang = load_language("tensat")

    def accept(data: bytes) -> None:
        (tmp / "m.onnx").write_bytes(data)
        read_onnx(tmp / "m.onnx", lang)

    campaign("onnx", mode, st.one_of(onnx_model(), mutated_onnx()), accept)
