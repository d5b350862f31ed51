"""Glenside in eqdsl (issue 19): two-field analysis values, the access-pattern language, and the
paper's hardware-mapping case studies (im2col, blocking, an MLP) on a systolic-array target."""
from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest

from eqdsl.frontend.load import load_language, load_program_text
from eqdsl.languages.base import Split
from eqdsl.verify.rules import Status, verify_rule
from eqdsl.verify.semantics import evaluate_program, load_semantics

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples" / "glenside"


@pytest.fixture(scope="module")
def lang():
    return load_language("glenside")


def _run(run_cli, name: str, tmp_path: Path) -> tuple[dict, str]:
    code, out, err = run_cli("run", EXAMPLES / f"{name}.yaml", "--output", tmp_path / "out")
    assert code == 0, out + err
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    assert report["validation"]["ok"], report["validation"]
    return report, (tmp_path / "out" / "optimized.eqr").read_text()


def test_conv2d_maps_to_one_invocation_through_im2col(run_cli, tmp_path):
    report, program = _run(run_cli, "conv2d", tmp_path)
    calls = re.findall(r"systolicArray\((\d+), (\d+),", program)
    assert calls == [("27", "8")]  # one invocation: 3·3·3 = 27 rows, 8 filters
    assert "flatten(squeeze(windows(" in program  # the flattened windows: im2col
    assert "dotProd" not in program
    assert report["extractor"]["status"] == "optimal"


def test_matmul_is_blocked_into_eight_invocations(run_cli, tmp_path):
    _, program = _run(run_cli, "matmul", tmp_path)
    assert re.findall(r"systolicArray\((\d+), (\d+),", program) == [("16", "16")] * 8
    assert program.count("elemAdd(pair(") == 4  # the two halves of the inner dimension summed
    assert "concat(" in program and "dotProd" not in program


def test_the_blocked_call_replaces_explicit_blocking_where_it_is_cheaper(run_cli, tmp_path):
    report, program = _run(run_cli, "matmul-blocked", tmp_path)
    assert re.findall(r"systolicArray\w*\((\d+), (\d+),", program) == [("16", "16")]
    assert "systolicArrayBlocked(16, 16, " in program and "elemAdd" not in program
    assert report["best_cost"] < 13_184  # the explicit eight-invocation blocking's cost on systolic-16


def test_mlp_maps_every_layer_to_the_array(run_cli, tmp_path):
    _, program = _run(run_cli, "mlp", tmp_path)
    assert "dotProd" not in program and "systolicArray(" in program
    assert program.count("relu(") == 2


def test_two_field_values_in_semantics_and_analysis(lang):
    sem = load_semantics(lang)
    program = load_program_text(
        'program p:\n  root cartProd(access(tensor(input("a", [2, 3])), 1), access(tensor(input("b", [4, 3])), 1))\n',
        "p.eqr", lang)["p"]
    (value,) = evaluate_program(program, sem, seed=0)
    assert isinstance(value, Split) and value.split == 2 and value.array.shape == (2, 4, 2, 3)
    a = np.asarray(evaluate_program(load_program_text(
        'program q:\n  root access(tensor(input("a", [2, 3])), 1)\n', "q.eqr", lang)["q"], sem, seed=0)[0])
    assert np.array_equal(value.array[1, 3, 0], a[1])


def test_maxpool_written_in_glenside_is_a_max_pool(lang):
    from eqdsl.languages.tensor.reference import poolmax

    sem = load_semantics(lang)
    text = (EXAMPLES / "maxpool.eqr").read_text()
    (pooled,) = evaluate_program(load_program_text(text, "maxpool.eqr", lang)["maxpool"], sem, seed=3)
    x = evaluate_program(load_program_text('program x:\n  root tensor(input("x", [1, 8, 16, 16]))\n', "x.eqr",
                                           lang)["x"], sem, seed=3)[0]
    assert pooled.split == 4 and pooled.array.shape == (1, 8, 8, 8)
    assert np.allclose(pooled.array, poolmax(x.array, 2, 2, 2, 2, 1, 0))


def test_every_glenside_rule_verifies(lang):
    """A few examples per rule here; `eqdsl verify rulesets/glenside.eqr --target systolic-16`
    runs 100 each. The blocking rules read the target's array size."""
    from eqdsl.cost.targets import bind_target, load_target
    from eqdsl.ir.params import bind_params, params_in_rules

    assert set(params_in_rules(lang)) == {"block-rows", "block-cols", "block-inner", "systolic", "systolic-swapped"}
    lang = bind_params(lang, bind_target(lang, load_target("systolic-16")))
    assert not params_in_rules(lang)
    sem = load_semantics(lang)
    for rule in lang.rules:
        report = verify_rule(lang, sem, rule, examples=5, seed=1)
        assert report.status == Status.PASSED, (rule.name, report)


def test_a_wrong_rewrite_is_caught(run_cli, tmp_path):
    bad = tmp_path / "bad.eqr"
    bad.write_text("language bad\ninclude glenside\n"
                   "rule swap-wrong: dotProd(cartProd(?a, ?b)) => dotProd(cartProd(?b, ?a))\n"
                   "    if len(shape(?a).access) == 1, len(shape(?b).access) == 1\n")
    code, out, _ = run_cli("verify", bad, "--rule", "swap-wrong", "--examples", "30", "--target", "systolic-16")
    assert code == 1 and "FAIL" in out


@pytest.mark.parametrize("program, message", [
    ('root windows(access(tensor(input("x", [1, 3, 8, 8])), 1), 3, 9, 3, 1, 1, 1)',
     "ill-shaped 'windows': with a={access: [1], compute: [3, 8, 8]}, kc=3, kh=9"),
    ('root access(tensor(input("x", [4, 4])), 5)', "ill-shaped 'access'"),
])
def test_ill_shaped_programs_point_at_the_node(run_cli, tmp_path, program, message):
    (tmp_path / "p.eqr").write_text(f"program p:\n  {program}\n")
    (tmp_path / "c.yaml").write_text("ruleset: glenside\ntarget: systolic-16\nprogram: p.eqr\noutput: out\n")
    code, _, err = run_cli("run", tmp_path / "c.yaml")
    assert code == 2 and "p.eqr:2:8: error: " + message in err and "Traceback" not in err


def test_rules_that_read_target_params_need_a_target(run_cli, tmp_path):
    code, _, err = run_cli("compile", "glenside")
    assert code == 2 and "rule 'systolic' reads target param(s) array_batch, array_cols, array_rows: expected --target" in err
    code, out, _ = run_cli("verify", "glenside", "--target", "systolic-16", "--rule", "block-inner", "--examples", "5")
    assert code == 0 and "pass    block-inner" in out
    bad = tmp_path / "bad.eqr"
    bad.write_text("language bad\ninclude glenside\nrule r: relu(?a) => relu(?a)\n    where array_rows = 1\n")
    code, _, err = run_cli("check", bad)
    assert code == 2 and "'array_rows' is a target param" in err


def test_a_target_without_array_size_is_refused(run_cli, tmp_path):
    (tmp_path / "t.yaml").write_text("params: {array_cols: 16, array_batch: 16, invoke_cycles: 1, "
                                     "host_cycles: 1, move_cycles: 1}\n")
    (tmp_path / "c.yaml").write_text(f"ruleset: glenside\ntarget: t.yaml\nprogram: {EXAMPLES / 'matmul.eqr'}\n"
                                     "output: out\n")
    code, _, err = run_cli("run", tmp_path / "c.yaml")
    assert code == 2 and "no value for param 'array_rows'" in err


@pytest.mark.parametrize("text, message", [
    ("sort A { access: [Int], access: [Int] }", "two distinct names"),
    ("sort A { access: Int, compute: [Int] }", "[Int] fields"),
    ("sort A { access: [Int], compute: [Int] }\nop f(a: A) -> A\nshape f(a) = {compute: a.compute, access: []}",
     "a record lists the fields of a two-field sort in order"),
    ("sort A { shape: [Int] }\nop f(a: A) -> A\nshape f(a) = a.access", "unknown field '.access'"),
    ("include glenside\nrule r: relu(tensor(?t)) => tensor(?t)\n    if len(shape(?t).access) == 0",
     "this one has one shape, no fields"),
])
def test_two_field_sort_mistakes(run_cli, tmp_path, text, message):
    f = tmp_path / "x.eqr"
    f.write_text("language x\n" + text + "\n")
    code, _, err = run_cli("check", f)
    assert code == 2 and message in err and re.search(r"x\.eqr:\d+:\d+: error", err)
