"""`eqdsl synthesize --goal`: the cheapest verified equivalent of one pattern (`eqdsl.synth.goals`)."""
from __future__ import annotations

import pytest

from eqdsl.cost.model import RuleCosts
from eqdsl.cost.targets import bind_target, load_target
from eqdsl.frontend import load_language
from eqdsl.synth.enumerate import Space
from eqdsl.synth.goals import cheaper_form, read_goal
from eqdsl.verify.rules import Status, verify_rule
from eqdsl.verify.semantics import load_semantics

BN_SHAPES = {"x": (1, 64, 56, 56), "s": (64,), "b": (64,), "m": (64,), "v": (64,), "g": (64, 1, 1)}


@pytest.fixture(scope="module")
def tensor():
    lang = load_language("tensor")
    return lang, load_semantics(lang), RuleCosts(lang, bind_target(lang, load_target("cpu")))


def test_a_shift_after_a_batch_norm_becomes_its_bias_with_the_condition_it_needs(tensor):
    lang, sem, costs = tensor
    goal = read_goal(lang, "ewadd(batchnorm(?x, ?s, ?b, ?m, ?v), ?g)", BN_SHAPES, {"s", "b", "m", "v", "g"})
    form = cheaper_form(lang, sem, goal, costs, Space(size=3, ops=("reshape",)))
    assert form is not None
    assert form.candidate.text == ("ewadd(batchnorm(?x, ?s, ?b, ?m, ?v), ?g) => batchnorm(?x, ?s, ewadd(?b, "
                                   "reshape(?g, q0)), ?m, ?v) where q0 = [shape(?x)[1]] "
                                   "if shape(?g) == [shape(?x)[1], 1, 1]")
    assert form.cost < form.goal_cost  # one pass over the activations fewer; the bias sum is folded
    assert verify_rule(lang, sem, form.candidate.rule, 200, seed=3).status is Status.PASSED
    # without the condition the shift could be a whole tensor: the rule would be unsound
    loose = form.candidate.rule.__class__(**{**form.candidate.rule.__dict__, "conds": ()})
    assert verify_rule(lang, sem, loose, 200, seed=3).status is Status.FAILED


def test_what_only_weights_compute_is_folded_and_prices_at_nothing(tensor):
    lang, sem, costs = tensor
    shapes = {v: (1, 8, 16, 16) for v in "abc"}
    goal = read_goal(lang, "ewmul(ewmul(?a, ?b), ?c)", shapes, set())
    assert cheaper_form(lang, sem, goal, costs, Space(size=2)) is None  # two full products either way
    form = cheaper_form(lang, sem, read_goal(lang, "ewmul(ewmul(?a, ?b), ?c)", shapes, {"b", "c"}), costs,
                        Space(size=2))
    assert form is not None and form.candidate.text.startswith("ewmul(ewmul(?a, ?b), ?c) => ewmul(?a, ewmul(")
    assert form.cost == pytest.approx(form.goal_cost / 2)


def test_a_scale_after_a_conv_scales_its_kernel(tensor):
    lang, sem, costs = tensor
    goal = read_goal(lang, "ewmul(conv2d(1, 1, 0, 0, ?x, ?w), ?f)",
                     {"x": (1, 32, 56, 56), "w": (64, 32, 1, 1), "f": (64, 1, 1)}, {"w", "f"})
    form = cheaper_form(lang, sem, goal, costs, Space(size=3, ops=("reshape",)))
    assert form is not None
    # found at stride 1 without padding, it holds at every stride and padding: not through an activation
    assert form.candidate.text.endswith("=> conv2d(?i0, ?i1, ?i2, 0, ?x, ewmul(?w, reshape(?f, q0))) "
                                        "where q0 = [shape(?w)[0], 1, 1, 1] if shape(?f) == [shape(?w)[0], 1, 1]")


def test_no_cheaper_form_is_none(tensor):
    lang, sem, costs = tensor
    goal = read_goal(lang, "relu(ewadd(?a, ?b))", {"a": (1, 8, 4, 4), "b": (1, 8, 4, 4)}, set())
    assert cheaper_form(lang, sem, goal, costs, Space(size=2)) is None


def test_the_command_writes_the_rule_and_refuses_a_goal_without_shapes(tmp_path, run_cli):
    out = tmp_path / "bn.eqr"
    at = [f"--at={v}={','.join(map(str, s))}" for v, s in BN_SHAPES.items()]
    code, printed, err = run_cli("synthesize", "tensor", "--goal", "ewadd(batchnorm(?x, ?s, ?b, ?m, ?v), ?g)", *at,
                                 "--constant", "s,b,m,v,g", "--target", "cpu", "--ops", "reshape", "-o", out)
    assert code == 0, err
    assert "cost 38,191 -> 19,094" in printed and "rule syn-" in out.read_text()
    # the file says how to write it again: every option that shaped the search
    assert "--constant b,g,m,s,v --size 3 --ops reshape --target cpu`" in out.read_text().splitlines()[0]
    code, printed, _ = run_cli("synthesize", "tensor", "--goal", "ewadd(batchnorm(?x, ?s, ?b, ?m, ?v), ?g)", *at,
                               "--target", "cpu", "--ops", "reshape", "--size", "5", "--time-limit", "0.5", "-o",
                               tmp_path / "late.eqr")
    assert code == 1 and "stopped at --time-limit" in printed and not (tmp_path / "late.eqr").exists()
    code, _, err = run_cli("synthesize", "tensor", "--goal", "ewadd(?x, ?y)", "--at", "x=2,3", "-o",
                           tmp_path / "no.eqr")
    assert code != 0 and "missing ?y" in err and "Traceback" not in err
    code, _, err = run_cli("synthesize", "tensor", "--at", "x=2,3", "-o", tmp_path / "no.eqr")
    assert code != 0 and "go with --goal" in err
    code, _, err = run_cli("synthesize", "tensor", "--goal", "ewadd(?x, ", "-o", tmp_path / "no.eqr")
    assert code != 0 and "--goal" in err and "Traceback" not in err
    code, _, err = run_cli("synthesize", "tensor", "--goal", "relu(?x)", "--at", "x=2,3", "-o", tmp_path / "no.eqr")
    assert code != 0 and "pass --target with one of" in err and "`target:`" not in err  # a flag, not a YAML key


def test_a_scalar_condition_lets_verify_draw_a_rank_0_operand(tmp_path, run_cli):
    """`shape(?d) == []` (an ONNX scalar constant): drawn at rank 0, which no other variable is."""
    rule = ("ewmul(ewadd(conv2d(1, 1, 0, 0, ?a, ?b), ?c), ?d) => "
            "ewadd(conv2d(1, 1, 0, 0, ?a, ewmul(?b, ?d)), ewmul(?c, ?d))")
    for cond, verdict in [(" if shape(?d) == []", 0), ("", 1)]:
        (tmp_path / "s.eqr").write_text(f"language s\ninclude tensor\nrule s: {rule}{cond}\n")
        code, out, _ = run_cli("verify", tmp_path / "s.eqr", "--rule", "s", "--examples", "60")
        assert code == verdict and ("1/1 rules" in out) == (verdict == 0), out


def test_a_form_is_built_from_the_cheapest_term_of_each_operands_class(tensor):
    """The enumeration keeps `ewmul(conv2d(?a, ?b), ?d)` as its class's child (it came first); the
    cheaper `conv2d(?a, ewmul(?b, ?d))` (a scaled kernel, folded) is the one the form uses."""
    lang, sem, costs = tensor
    goal = read_goal(lang, "ewmul(ewadd(conv2d(1, 1, 0, 0, ?a, ?b), ?c), ?d)",
                     {"a": (1, 16, 32, 32), "b": (16, 16, 3, 3), "c": (1, 16, 1, 1), "d": ()}, {"b", "c", "d"})
    form = cheaper_form(lang, sem, goal, costs, Space(size=4))
    assert form is not None and form.candidate.text.endswith(
        "=> ewadd(conv2d(?i0, ?i1, ?i2, 0, ?a, ewmul(?b, ?d)), ewmul(?c, ?d)) if shape(?d) == []")


def test_stand_in_sizes_keep_a_concats_sums(tensor):
    """A concat's channels (32 + 64 = 96) at stand-ins 2, 3, 4 would be ill-shaped; the stand-ins
    keep every sum of two or three sizes that is a size, and are otherwise the smallest in order."""
    from eqdsl.synth.goals import Goal, _stand_ins

    def stand_ins(*shapes: tuple[int, ...]) -> dict[int, int]:
        return _stand_ins(Goal(None, tuple((f"v{k}", s) for k, s in enumerate(shapes))))  # type: ignore[arg-type]

    assert stand_ins((1, 32, 7, 7), (1, 64, 7, 7), (1, 96, 7, 7)) == {1: 1, 7: 2, 32: 3, 64: 6, 96: 9}
    assert stand_ins((1, 64, 112, 112), (64, 3, 7, 7)) == {1: 1, 3: 2, 7: 3, 64: 4, 112: 5}
    lang, sem, costs = tensor
    goal = read_goal(lang, "ewadd(concat(1, ?a, ?b), ?c)", {"a": (1, 32, 7, 7), "b": (1, 64, 7, 7),
                                                            "c": (1, 96, 7, 7)}, set())
    assert cheaper_form(lang, sem, goal, costs, Space(size=2)) is None  # enumerated, not ill-shaped


def test_a_goals_mistakes_are_placed_in_the_goal_text(tmp_path, run_cli):
    cases = [("mul(", "--goal:1:5: error: syntax error: expected"), ("mul(?x, nosuch(?y))", "--goal:1:9: error: unknown "
             "operator 'nosuch'"), ("mul(?x, ?y) => ?x", "--goal:1:13: error: syntax error: expected one pattern"),
             ("mul(?x, ?y)", "--goal: error: synthesize --goal: expected a goal with a variable of a sort with shapes")]
    for goal, said in cases:
        code, _, err = run_cli("synthesize", "arith", "--goal", goal, "-o", tmp_path / "s.eqr")
        assert code == 2 and said in err and "found the end of the goal" in err if goal == "mul(" else said in err, err
    code, _, err = run_cli("synthesize", "tensor", "--goal", "relu(?x)", "--at", "x=0,3", "-o", tmp_path / "s.eqr")
    assert code == 2 and "--at: error: expected a shape of dimensions ≥ 1" in err
