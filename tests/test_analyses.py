"""Analyses in `.eqr` (issue 64, item 1): what egglog does with them, what `verify` proves of them
and of the guards that read them, and what `check` refuses."""
from __future__ import annotations

import json
import shutil

import pytest

from eqdsl.diagnostics import EqdslError
from eqdsl.egglog.lower import lower_language
from eqdsl.egglog.session import EGraphSession
from eqdsl.frontend import load_language
from eqdsl.frontend.load import load_program_text

from conftest import EXAMPLES, ROOT

RATIONAL = EXAMPLES / "rational" / "rational.eqr"
MUTANTS = ROOT / "tests" / "data" / "unsound_analyses.eqr"


def _joined_after(steps: int, roots: str, pairs: list[tuple[int, int]], path=RATIONAL, sort="Q") -> list[bool]:
    lang = load_language(path)
    session = EGraphSession(lower_language(lang))
    program = next(iter(load_program_text(f"program p:\n{roots}", "p.eqr", lang).values()))
    session.load(program)
    for _ in range(steps):
        session.step("all")
    return [session.roots_joined([pair], [sort]) for pair in pairs]


def test_div_self_fires_where_nonzero_is_known_and_not_on_a_free_variable():
    roots = ('  root div(num(4), num(4))\n  root num(1)\n'
             '  root div(var("a"), var("a"))\n  root num(1)\n')
    assert _joined_after(3, roots, [(0, 1), (2, 3)]) == [True, False]


@pytest.mark.parametrize("path, sort", [(RATIONAL, "Q"), ("arith", "Num")])
def test_constant_folding_folds_a_product_in_one_iteration(path, sort):
    roots = "  root mul(num(3), num(4))\n  root num(12)\n  root mul(num(3), num(5))\n"
    assert _joined_after(1, roots, [(0, 1), (2, 1)], path, sort) == [True, False]


def test_arith_folds_an_exact_quotient_and_leaves_an_inexact_one():
    roots = "  root div(num(12), num(4))\n  root num(3)\n  root div(num(7), num(2))\n  root num(3)\n"
    assert _joined_after(1, roots, [(0, 1), (2, 3)], "arith", "Num") == [True, False]


def test_a_value_that_overflows_i64_stays_unset_and_the_run_goes_on():
    roots = "  root mul(num(4611686018427387904), num(4))\n  root num(0)\n  root mul(num(2), num(3))\n  root num(6)\n"
    assert _joined_after(2, roots, [(0, 1), (2, 3)], "arith", "Num") == [False, True]


def test_two_different_constants_in_one_class_stop_the_run_with_the_reason(tmp_path):
    bad = tmp_path / "bad.eqr"
    bad.write_text(f'language bad\ninclude "{RATIONAL}"\nrule wrong: add(?x, num(0)) => num(5)\n')
    with pytest.raises(EqdslError) as err:
        _joined_after(1, "  root add(num(1), num(0))\n  root num(5)\n", [(0, 1)], path=bad)
    assert "merge agree" in " ".join(err.value.diagnostics[0].notes)


def _verdicts(run_cli, path) -> dict[str, str]:
    code, out, _ = run_cli("verify", path, "--json", "--examples", "60")
    return {r["name"]: r["status"] for r in json.loads(out)["rules"]}


def test_verify_checks_the_analyses_and_passes_every_rule_of_the_rational_language(run_cli):
    verdicts = _verdicts(run_cli, RATIONAL)
    assert {"analysis:const:mul", "analysis:nonzero:merge", "div-self", "fold-mul"} <= set(verdicts)
    assert "analysis:const:merge" not in verdicts  # `merge agree`: egglog itself refuses two values
    assert set(verdicts.values()) == {"pass"}


def test_verify_fails_every_unsound_analysis_merge_and_guard(run_cli):
    verdicts = _verdicts(run_cli, MUTANTS)
    mutants = ["analysis:merge_max:merge", "analysis:rule_wrong:add", "analysis:nonzero_sub:sub",
               "analysis:merge_and:merge", "guard-ne", "guard-wrong", "fold-wrong", "guard-too-weak"]
    assert {m: verdicts[m] for m in mutants} == {m: "FAIL" for m in mutants}
    assert {v for k, v in verdicts.items() if k not in mutants} == {"pass"}  # the included rational rules


@pytest.mark.parametrize("body, expected", [
    ("analysis c(x: Q) -> Int {\n  merge agree\n  num(v) = v\n}", "needs `means EXPR`"),
    ("analysis c(x: Q) -> Int {\n  means c == x\n  num(v) = v\n}", "needs a merge"),
    ("analysis c(x: Q) -> Int {\n  merge old or new\n  means c == x\n}", "type mismatch: expected Bool"),
    ("analysis c(x: R) -> Int {\n  merge agree\n  means c == x\n}", "unknown sort 'R'"),
    ("analysis c(x: Q) -> Str {\n  merge agree\n  means c == x\n}", "Int, Bool or [Int]"),
    ("analysis c(x: Q) -> Int {\n  merge agree\n  means c == x\n  num(v) = v == 0\n}", "this rule gives Bool"),
    ("analysis num(x: Q) -> Int {\n  merge agree\n  means num == x\n}", "reserved name"),
    ("analysis c(x: Q) -> Int {\n  merge agree\n  means c == x\n  num(v) = v\n  num(w) = w\n}", "two rules for 'num'"),
    ("analysis c(x: Q) -> Int {\n  merge agree\n  means c == x\n}\ncost num = c(1)", "reads one operand by name"),
    ("analysis c(x: Q) -> Int {\n  merge max\n  means c == x\n}", "(e.g. `merge max(old, new)`), found the name"),
    ("analysis c(x: Bool) -> Bool {\n  merge or\n  means c == x\n}", "unknown sort 'Bool'"),
    ("analysis c(x: Q) -> Int {\n  merge agree\n  means c == x\n}\nrule r: num(?v) => num(1) if c(?v)",
     "?v is Int here but Q elsewhere"),
])
def test_check_refuses_a_malformed_analysis_with_its_position(tmp_path, run_cli, body, expected):
    src = tmp_path / "a.eqr"
    src.write_text(f"language a\nsort Q\nop num(v: Int) -> Q\n{body}\n" + ("" if "cost num" in body else "cost num = 1\n"))
    code, out, err = run_cli("check", src)
    assert code != 0 and expected in err and f"{src}:" in err, err


def test_a_malformed_analysis_is_one_error_not_one_more_per_reader(tmp_path, run_cli):
    src = tmp_path / "a.eqr"
    src.write_text("language a\nsort Q\nop num(v: Int) -> Q\nanalysis c(x: Q) -> Int {\n  merge agree\n}\n"
                   "rule r: num(?v) => num(k) where k = c(num(?v))\ncost num = 1\n")
    code, _, err = run_cli("check", src)
    assert code == 2 and err.count("error:") == 1 and "needs `means EXPR`" in err, err


def test_an_analysis_over_tensors_is_checked_element_by_element_and_guards_a_rewrite(tmp_path, run_cli):
    signs, unsound = ROOT / "tests" / "data" / "tensor_signs.eqr", ROOT / "tests" / "data" / "unsound_tensor_signs.eqr"
    checks = [f"analysis:nonneg:{op}" for op in ("input", "relu", "sigmoid", "ewadd", "ewmul", "matmul", "conv2d",
                                                 "transpose", "merge")]
    code, out, _ = run_cli("verify", signs, "--json", "--examples", "40", *[f"--rule={c}" for c in checks],
                           "--rule", "relu-nonneg")
    assert code == 0 and {r["status"] for r in json.loads(out)["rules"]} == {"pass"}, out
    code, out, _ = run_cli("verify", unsound, "--json", "--examples", "40", "--rule", "analysis:nonneg:tanh",
                           "--rule", "analysis:nonneg:ewadd", "--rule", "analysis:nonneg:conv2d", "--rule", "relu-of-tanh")
    assert code == 1 and {r["status"] for r in json.loads(out)["rules"]} == {"FAIL"}, out
    (tmp_path / "p.eqr").write_text('program p:\n  let x = input("x", [2, 3])\n'
                                    "  root relu(ewadd(relu(x), sigmoid(x)))\n")
    (tmp_path / "c.yaml").write_text(f"ruleset: {signs}\nprogram: p.eqr\ntarget: cpu\nvalidate: true\n"
                                     "extract: {method: greedy}\n")
    code, out, err = run_cli("run", tmp_path / "c.yaml", "-o", tmp_path / "out", "--quiet")
    assert code == 0 and "root ewadd(relu(t4), sigmoid(t4))" in out and "agree" in out, out + err


def test_an_analysis_over_vectors_is_drawn_at_one_length_and_a_wrong_rule_fails(tmp_path, run_cli):
    signs = ROOT / "tests" / "data" / "vector_signs.eqr"
    code, out, err = run_cli("verify", signs, "--json", "--examples", "40")
    assert code == 0 and {r["status"] for r in json.loads(out)["rules"]} == {"pass"}, out + err
    for name in ("vectors.eqr", "vectors_ref.py", "vector_signs_ref.py"):
        shutil.copy(signs.with_name(name), tmp_path / name.replace("vector_signs", "wrong"))
    (tmp_path / "wrong.eqr").write_text(signs.read_text().replace("take(k, x) = x", "take(k, x) = true"))
    code, out, _ = run_cli("verify", tmp_path / "wrong.eqr", "--json", "--examples", "40",
                           "--rule", "analysis:nonneg:take")
    rule = json.loads(out)["rules"][0]
    assert code == 1 and rule["status"] == "FAIL" and "`means` does not hold" in rule["counterexample"]["message"]


COST_HEAD = ("language a\nsort Q\nsort R\nop num(v: Int) -> Q\nop two(a: Q, r: R) -> Q\nop r0() -> R\n"
             "analysis c(x: Q) -> Int {\n  merge agree\n  means c == x\n  num(v) = v\n}\n"
             "analysis nz(x: Q) -> Bool {\n  merge old or new\n  means not nz or x != 0\n}\n"
             "cost num, r0 = 1\n")


@pytest.mark.parametrize("cost, expected", [
    ("cost two(a, r) = c(a)", "may be unset on a node, and a cost must be defined: write `c(OPERAND, "),
    ("cost two(a, r) = c(r, 0)", "'r' is a R"),
    ("cost two(a, r) = c(b, 0)", "'b' is not an operand (expected one of: a, out)"),
    ("cost two = c(a, 0)", "'a' is not an operand (expected one of: out)"),
    ("cost two(a, r) = select(nz(a, 3), 1, 2)", "must be Bool; found Int"),
    ("cost two(a, r) = select(c(a, 0), 1, 2)", "type mismatch: expected Bool, found Int"),
    ("cost two(a, r) = c(a, 0, 1)", "reads one operand by name"),
])
def test_check_refuses_a_cost_that_reads_an_analysis_wrongly(tmp_path, run_cli, cost, expected):
    src = tmp_path / "a.eqr"
    src.write_text(COST_HEAD + cost + "\n")
    code, out, err = run_cli("check", src)
    assert code != 0 and expected in err and f"{src}:" in err, err


def test_a_cost_reads_analysis_values_and_unset_reads_its_default():
    """rational's `mul` costs 1 where one factor is known to be 2 (a doubling), else 4; the value
    comes from the e-class, so a factor that folds to 2 (1 + 1) counts too."""
    import eqdsl

    lang = eqdsl.load(RATIONAL)
    cases = {'mul(var("x"), var("y"))': 4.0, 'mul(num(2), var("y"))': 1.0, 'mul(var("x"), add(num(1), num(1)))': 1.0}
    found = {t: eqdsl.optimize(lang, f"program p:\n  root {t}\n", iter_limit=3) for t in cases}
    assert {t: r.cost for t, r in found.items()} == cases
    assert found['mul(var("x"), add(num(1), num(1)))'].text.strip().endswith('root mul(var("x"), num(2))')


def test_a_cost_may_read_the_analysis_of_its_own_class(tmp_path):
    """`out` is the node's own e-class: here a negation known to be non-zero costs 0."""
    import eqdsl

    src = tmp_path / "k.eqr"
    src.write_text(RATIONAL.read_text().replace("cost add, sub, neg = 1",
                                                "cost add, sub = 1\ncost neg(a) = select(nonzero(out), 0, 1)"))
    lang = eqdsl.load(src)
    costs = [eqdsl.optimize(lang, f"program p:\n  root {t}\n", iter_limit=1).cost
             for t in ('neg(var("x"))', 'neg(num(3))')]
    assert costs == [1.0, 0.0]


def test_an_analysis_of_a_shaped_sort_leaves_shapes_and_costs_alone(tmp_path):
    src = tmp_path / "m.eqr"
    src.write_text("language m\nsort M { shape: [Int] }\nop input(name: Str, n: Int) -> M\nop dbl(a: M) -> M\n"
                   "shape input(name, n) = [n]\nshape dbl(a) = a\n"
                   "analysis big(x: M) -> Int {\n  merge agree\n  means big == x\n  input(name, n) = n * 1000\n}\n"
                   "cost input = 0\ncost dbl(a) = a[0]\n")
    lang = load_language(src)
    session = EGraphSession(lower_language(lang))
    session.load(next(iter(load_program_text('program p:\n  root dbl(input("x", 7))\n', "p.eqr", lang).values())))
    live = session.live()
    assert sorted(live.shapes.values()) == [(7,), (7,)]  # not big's 7000
    assert sorted(n.cost for n in live.problem.nodes if n.op == "dbl") == [7.0]
    assert not any(n.op == "big" for n in live.problem.nodes)
