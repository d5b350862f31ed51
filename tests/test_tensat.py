"""TENSAT: the tensor language, the imported TASO rules, the model builders, constant folding."""
from __future__ import annotations

import pytest

from eqdsl.diagnostics import EqdslError
from eqdsl.egglog.lower import lower_language
from eqdsl.egglog.session import EGraphSession
from eqdsl.frontend import load_language
from eqdsl.importers.taso import import_rules
from eqdsl.languages.tensat.models import MODELS, build_model
from eqdsl.schedule import runner
from eqdsl.schedule.runner import Limits, StopReason
from eqdsl.schedule.saturate import SaturateScheduler

from conftest import ROOT

DATA = ROOT / "tests" / "data" / "tensat-rules"  # copied from ../shared/data (MIT, TENSAT)


@pytest.fixture(scope="module")
def tensat():
    return load_language("tensat")


def test_shipped_ruleset_has_all_taso_rules(tensat, run_cli):
    assert len(tensat.single_rules) == 124 and len(tensat.multi_rules) == 15
    assert all(r.name.startswith("taso-") for r in tensat.rules)  # TASO's alone (fusions.eqr adds more)
    code, out, _ = run_cli("check", "tensat")
    assert code == 0 and "124 single, 15 multi" in out


@pytest.mark.skipif(not DATA.exists(), reason="TENSAT rule files not present")
def test_importer_reproduces_the_shipped_ruleset(tmp_path, run_cli):
    out = tmp_path / "t.eqr"
    code, text, err = run_cli("import", "tensat", DATA / "converted.txt", "--multi",
                              DATA / "converted_multi.txt", "--predefined", DATA / "predefined.txt",
                              "-o", out)
    assert code == 0, err
    assert "124 single-pattern and 15 multi-pattern" in text
    assert out.read_text() == (ROOT / "rulesets" / "tensat.eqr").read_text()


def test_importer_split_point_comes_from_the_concat(tmp_path):
    single = tmp_path / "s.txt"
    single.write_text("")
    multi = tmp_path / "m.txt"
    multi.write_text("(relu ?input_1)=>(split_0 (split 1 (relu (concat 1 2 ?input_1 ?input_2))))\n"
                     "(relu ?input_2)=>(split_1 (split 1 (relu (concat 1 2 ?input_1 ?input_2))))\n")
    text = import_rules(single, multi, None)
    assert "split0(split(1, k, relu(concat(1, ?t1, ?t2))))" in text
    assert "where k = shape(?t1)[1]" in text
    assert "if ?t1 != ?t2" in text


def test_importer_reports_malformed_lines(tmp_path, run_cli):
    bad = tmp_path / "bad.txt"
    bad.write_text("(matmul 0 ?input_1 ?input_2)=>(matmul 0 ?input_1\n")
    code, _, err = run_cli("import", "tensat", bad, "-o", tmp_path / "o.eqr")
    assert code == 2 and "bad.txt:1:" in err and "expected ')'" in err
    assert not (tmp_path / "o.eqr").exists()
    bad.write_text("(frobnicate ?input_1)=>(relu ?input_1)\n")
    code, _, err = run_cli("import", "tensat", bad, "-o", tmp_path / "o.eqr")
    assert code == 2 and "unknown TENSAT operator 'frobnicate'" in err


EXPECTED_OUTPUT = {
    "bert": (64, 1024), "nasrnn": (1, 512), "vgg19": (1, 1000), "squeezenet": (1, 1000, 1, 1),
    "resnet50": (1, 2048, 7, 7), "resnext50": (1, 2048, 7, 7), "mobilenetv2": (1, 1000, 1, 1),
    "inceptionv3": (1, 1000), "nasneta": (1, 5 * 1024, 7, 7), "vit_base": (1, 1000), "vit_large": (1, 1000),
    "vit_huge": (1, 1000), "transformer_transducer": (256, 512),
}

# Operator counts of TASO's model scripts (the graphs TENSAT and the PACT study optimized): activations
# and batch norms are operators of their own.
TASO_COUNTS = {
    "vgg19": {"conv2d": 16, "relu": 18, "poolmax": 5, "matmul": 3},
    "squeezenet": {"conv2d": 26, "relu": 26, "concat": 8},
    "mobilenetv2": {"conv2d": 54, "batchnorm": 53, "relu": 36, "ewadd": 10},
    "inceptionv3": {"conv2d": 94},
    "bert": {"matmul": 48, "reshape": 32, "transpose": 32},
}


@pytest.mark.parametrize("name", sorted(TASO_COUNTS))
def test_models_have_tasos_operator_counts(tensat, name):
    ops = [n.op for n in build_model(tensat, name).nodes]
    assert {op: ops.count(op) for op in TASO_COUNTS[name]} == TASO_COUNTS[name]
    assert all(n.args[3] == 0 for n in build_model(tensat, name).nodes if n.op in ("conv2d",))  # no fused act


def test_vit_sizes(tensat):
    for name, layers, hidden, patches in [("vit_base", 12, 768, 196), ("vit_large", 24, 1024, 196),
                                          ("vit_huge", 32, 1280, 256)]:
        program = build_model(tensat, name)
        norms = [n for n in program.nodes if n.op == "opaque3"]
        assert len(norms) == 2 * layers + 1
        assert norms[0].args[1] == (patches + 1, hidden)


def test_every_model_has_an_expected_output_shape():
    assert set(EXPECTED_OUTPUT) == set(MODELS)


def test_model_structure(tensat):
    resnet = build_model(tensat, "resnet50")
    convs = sum(1 for n in resnet.nodes if n.op == "conv2d")
    assert convs == 1 + 16 * 3 + 4  # stem, 16 bottlenecks of 3 convs, 4 projection shortcuts
    bert = build_model(tensat, "bert")
    assert sum(1 for n in bert.nodes if n.op == "matmul") == 8 * 6
    resnext = build_model(tensat, "resnext50")
    grouped = [n for n in resnext.nodes if n.op == "weight" and n.args[1][1] * 32 in (128, 256, 512, 1024)]
    assert len(grouped) == 16
    inception = build_model(tensat, "inceptionv3")
    assert sum(1 for n in inception.nodes if n.op == "conv2d") == 94  # torchvision's count
    nasnet = build_model(tensat, "nasneta")
    cells = sum(1 for n in nasnet.nodes if n.op == "concat5")
    assert cells == 3 * (5 + 1)
    # every cell: squeeze, fit and 5 separable convolutions (depthwise + pointwise)
    assert sum(1 for n in nasnet.nodes if n.op == "conv2d") == 1 + 3 * 6 * (2 + 5 * 2)


def test_builder_rejects_inconsistent_sizes(tensat):
    with pytest.raises(EqdslError, match="multiple of heads"):
        build_model(tensat, "bert", hidden=1000, heads=16)
    with pytest.raises(EqdslError, match="unknown parameter"):
        build_model(tensat, "bert", depth=3)
    with pytest.raises(EqdslError, match="violates a requirement"):
        build_model(tensat, "vgg19", size=8)  # five VALID 2x2 pools need at least 32 pixels
    with pytest.raises(EqdslError, match="at least 75"):
        build_model(tensat, "inceptionv3", size=64)
    with pytest.raises(EqdslError, match="multiple of 32"):
        build_model(tensat, "nasneta", size=100)


def test_output_shapes(tensat):
    from eqdsl.ir.builder import GraphBuilder

    for name, shape in EXPECTED_OUTPUT.items():
        program = build_model(tensat, name)
        g = GraphBuilder(tensat)
        # rebuild node by node to read the computed shapes
        shapes = {}
        for i, node in enumerate(program.nodes):
            args = [g_arg(shapes, a) for a in node.args]
            shapes[i] = g.op(node.op, *args)
        assert shapes[program.roots[0]].shape == shape, name


def g_arg(built, a):
    from eqdsl.ir import Child

    return built[a.index] if isinstance(a, Child) else a


@pytest.mark.parametrize("cycle_filter", ["efficient", "vanilla"])
def test_rollback_by_replay_repeats_the_cycle_filter(tensat, monkeypatch, cycle_filter):
    """Iteration 2 overshoots and did not push (margin 0): the e-graph goes back to the first
    push and iteration 1 is replayed, its filter pass (16 nodes subsumed) included."""
    monkeypatch.setattr(runner, "PUSH_MARGIN", 0)
    lowered = lower_language(tensat)

    def run(node_limit, iterations):
        session = EGraphSession(lowered)
        session.load(build_model(tensat, "nasrnn", steps=2, hidden=16))
        outcome = SaturateScheduler(Limits(iterations, node_limit, 60), cycle_filter=cycle_filter).run(session)
        return session, outcome

    session, outcome = run(1420, 4)
    assert outcome.stop is StopReason.NODE_LIMIT and len(outcome.iterations) == 2
    assert outcome.iterations[0].filtered == 16
    again, _ = run(10**6, 1)
    assert session.serialize() == again.serialize()


def test_small_nasrnn_end_to_end(tmp_path, run_cli):
    cfg = tmp_path / "c.yaml"
    cfg.write_text("ruleset: tensat\ntarget: t4\nprogram: {builder: nasrnn, steps: 1, hidden: 16}\n"
                   "schedule: {iter_limit: 3, node_limit: 5000, cycle_filter: efficient}\n"
                   "extract: {method: cpsat, time_limit_s: 10, compare: [greedy]}\n")
    code, out, err = run_cli("run", cfg, "--output", tmp_path / "out", "--quiet")
    assert code == 0, err
    import json

    report = json.loads((tmp_path / "out" / "report.json").read_text())
    assert report["best_cost"] <= report["original_cost"]
    assert report["schedule"]["iterations"][0]["matches"]


@pytest.mark.parametrize("weights", [
    'concat(1, weight("a", [4, 3]), weight("b", [4, 5]))',
    'concat(1, weight("a", [4, 3]), concat(1, weight("b", [4, 2]), weight("c", [4, 3])))',  # folded in turn
])
def test_weight_only_subterms_cost_nothing(tmp_path, weights):
    from eqdsl.config import load_config
    from eqdsl.pipeline import run_pipeline

    (tmp_path / "unit.yaml").write_text("name: unit\nparams: {gflops: 1, gbps: 1, launch_ns: 1}\n")
    cfg = tmp_path / "c.yaml"
    cfg.write_text("ruleset: tensat\ntarget: unit.yaml\n"
                   f"program: {{text: 'program p: root matmul(0, input(\"x\", [2, 4]), {weights})'}}\n"
                   "schedule: {iter_limit: 0}\nextract: {method: greedy, compare: []}\n")
    result = run_pipeline(load_config(cfg))
    # only the matmul is paid for (the weights' concats are folded): launch + max(flops, bytes)
    assert result.original_cost == 1 + max(2 * 16 * 4, 4 * (8 + 32 + 16))


def test_elementwise_broadcasting_transpose_and_reshape_shapes(tensat):
    from eqdsl.ir.builder import GraphBuilder
    g = GraphBuilder(tensat)
    x = g.input("x", [2, 3, 4, 5])
    assert g.ewadd(x, g.weight("bias", [5])).shape == (2, 3, 4, 5)
    assert g.ewmul(x, g.weight("s", [3, 1, 1])).shape == (2, 3, 4, 5)
    assert g.transpose(x, [3, 0, 2, 1]).shape == (5, 2, 4, 3)
    assert g.reshape(x, [6, 20]).shape == (6, 20)
    for bad in (lambda: g.ewadd(x, g.weight("b2", [4])),           # 4 is not 1 or 5
                lambda: g.ewadd(g.weight("b3", [5]), x),           # the left operand fixes the shape
                lambda: g.transpose(x, [0, 1, 1, 2]),
                lambda: g.transpose(x, [0, 1, 2]),
                lambda: g.reshape(x, [7, 20])):
        with pytest.raises(EqdslError, match="violates a requirement"):
            bad()
