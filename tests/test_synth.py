"""`eqdsl derive`: a set derives itself, the empty set derives nothing, and no sound set derives
an unsound rule (the yardstick of rule synthesis, issue 61)."""
from __future__ import annotations

from dataclasses import replace

from eqdsl.frontend import load_language
from eqdsl.schedule.runner import Limits
from eqdsl.synth.derive import Verdict, derive, own_rules

from conftest import ROOT
from mutants import mutants

LIMITS = Limits(8, 20_000, 10)


def _verdicts(a, b) -> dict[str, Verdict]:
    return {d.rule: d.verdict for d in derive(load_language(a), own_rules(load_language(b)), LIMITS)}


def test_a_rule_set_derives_itself():
    assert set(_verdicts("arith", "arith").values()) == {Verdict.DERIVED}
    tensat = load_language("tensat")
    sample = tensat.rules[::7]  # 20 of TASO's 139 (all of them: `eqdsl derive tensat tensat`, 16 s)
    found = derive(tensat, replace(tensat, rules=sample), LIMITS)
    assert [d.rule for d in found if d.verdict is not Verdict.DERIVED] == []


def test_the_empty_set_derives_nothing_but_identities():
    found = _verdicts("tensor", "tensat")
    assert len(found) == 139 and Verdict.DERIVED not in found.values()


def test_no_sound_set_derives_an_unsound_rule():
    for a, b in (("arith", "unsound_guards_arith.eqr"), ("tensat", "unsound_guards_tensor.eqr")):
        found = _verdicts(a, str(ROOT / "tests" / "data" / b))
        assert len(found) == 6 and Verdict.DERIVED not in found.values(), found
    tensat = load_language("tensat")
    unsound = mutants(tensat.rules)[::9]
    found = derive(tensat, replace(tensat, rules=tuple(unsound)), LIMITS)
    assert len(found) > 20 and [d.rule for d in found if d.verdict is Verdict.DERIVED] == []


def test_derive_prints_what_it_could_not_derive_and_the_share_last(tmp_path, run_cli):
    (tmp_path / "b.eqr").write_text("language b\ninclude arith\n"
                                    "rule twice: mul(mul(?x, num(2)), ?y) => mul(shl(?x, 1), ?y)\n"
                                    "rule wrong: mul(?x, ?y) => ?x\n")
    code, out, err = run_cli("derive", "arith", tmp_path / "b.eqr")
    assert code == 0, err
    lines = out.strip().splitlines()
    assert lines[-1] == "derived 1 of 2 rules (50.0 %)" and any("wrong" in line for line in lines)
    assert not any("twice" in line for line in lines)
