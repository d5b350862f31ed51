"""Synthesis and derivability with analyses: constant folds and rules guarded by a Bool analysis
written from the semantics, and guards assumed of fresh leaves when deriving (issues 61 and 64)."""
from __future__ import annotations

from eqdsl.frontend import load_language
from eqdsl.schedule.runner import Limits
from eqdsl.synth.derive import Verdict, derive, own_rules

from conftest import EXAMPLES, ROOT

RATIONAL = EXAMPLES / "rational" / "rational.eqr"
LIMITS = Limits(8, 20_000, 10)


def test_synthesis_writes_guarded_rules_and_folds_that_derive_the_shipped_ones(tmp_path, run_cli):
    out = tmp_path / "r.eqr"
    code, _, err = run_cli("synthesize", RATIONAL, "--ops", "div,num", "--size", "1", "--vars", "1",
                           "--ints", "0,1", "-o", out)
    assert code == 0, err
    rules = [line.split(": ", 1)[1].split("  #")[0] for line in out.read_text().splitlines()
             if line.startswith("rule ")]
    assert "div(?a, ?a) => num(1) if nonzero(?a)" in rules
    assert "div(?a, ?b) => num(k) where k = const(div(?a, ?b))" in rules
    assert not any("add(" in rule for rule in rules)  # folds only at --ops
    code, printed, err = run_cli("derive", out, RATIONAL, "--all")
    verdicts = {line[17:].split(" ")[0]: line[:16].strip() for line in printed.splitlines()[:-1]}  # "VERDICT  RULE (why)"
    assert {verdicts[r] for r in ("div-self", "div-one", "fold-div")} == {"derived"}, printed


def test_a_guard_of_a_bool_analysis_is_assumed_of_the_fresh_leaf(tmp_path):
    (tmp_path / "b.eqr").write_text(
        f'language b\ninclude "{RATIONAL}"\n'
        "rule cancel: div(mul(?x, ?y), ?y) => ?x  if nonzero(?y)\n"
        "rule too-weak: div(mul(?x, ?y), ?y) => ?x  if nonzero(?x)\n"
        "rule square: div(mul(?x, ?x), mul(?x, ?x)) => num(1)  if nonzero(?x)\n"  # nonzero(x * x) from nonzero(x)
        "rule on-a-term: div(mul(?x, ?y), ?y) => ?x  if nonzero(mul(?y, ?y))\n")
    found = derive(load_language(RATIONAL), own_rules(load_language(tmp_path / "b.eqr")), LIMITS)
    assert [d.verdict for d in found] == [Verdict.DERIVED, Verdict.NOT_DERIVED, Verdict.DERIVED,
                                          Verdict.NOT_INSTANTIABLE]


def test_no_rule_guarded_or_folded_unsoundly_is_derived():
    found = derive(load_language(RATIONAL), own_rules(load_language(ROOT / "tests/data/unsound_analyses.eqr")), LIMITS)
    assert len(found) >= 4 and Verdict.DERIVED not in {d.verdict for d in found}


def test_a_guard_is_not_assumed_where_the_other_set_has_no_bool_analysis_of_that_name(tmp_path):
    (tmp_path / "a.eqr").write_text(
        "language a\nsort Q\nop num(v: Int) -> Q\nop var(name: Str) -> Q\nop div(a: Q, b: Q) -> Q\n"
        "analysis nonzero(x: Q) -> Int {\n  merge agree\n  means nonzero == x\n  num(v) = v\n}\n"
        "rule self: div(?x, ?x) => num(1)  where k = nonzero(?x)  if k != 0\ncost num, var, div = 1\n")
    (tmp_path / "b.eqr").write_text(f'language b\ninclude "{RATIONAL}"\n'
                                    "rule self: div(?x, ?x) => num(1)  if nonzero(?x)\n")
    found = derive(load_language(tmp_path / "a.eqr"), own_rules(load_language(tmp_path / "b.eqr")), LIMITS)
    assert [d.verdict for d in found] == [Verdict.NOT_INSTANTIABLE]
