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


def test_a_prior_set_is_kept_as_it_is_and_a_second_run_adds_what_it_cannot_derive(tmp_path, run_cli):
    """Enumo's composition: rational's distributivity (`factor`) needs size 3, which over all its
    operators is slow; a size-3 run over add and mul with the first set as --prior adds just it."""
    first, both = tmp_path / "first.eqr", tmp_path / "both.eqr"
    assert run_cli("synthesize", RATIONAL, "--ops", "add,mul", "-o", first)[0] == 0
    code, out, err = run_cli("synthesize", RATIONAL, "--ops", "add,mul", "--size", "3", "--prior", first, "-o", both)
    assert code == 0 and "1 new rule and the 7 of --prior" in out, out + err
    rules = [line.split("#")[0] for line in both.read_text().splitlines() if line.startswith("rule ")]
    assert rules[:-1] == [line.split("#")[0] for line in first.read_text().splitlines() if line.startswith("rule ")]
    assert "add(mul(?a, ?b), mul(?a, ?c)) <=> mul(?a, add(?b, ?c))" in rules[-1]
    found = derive(load_language(both), own_rules(load_language(RATIONAL)), Limits(8, 20_000, 5))
    assert next(d for d in found if d.rule == "factor").verdict is Verdict.DERIVED
    code, _, err = run_cli("synthesize", RATIONAL, "--prior", "arith", "-o", tmp_path / "x.eqr")
    assert code == 2 and "--prior: error: expected a rule set over the operators of rational" in err


def test_a_rule_guarded_by_an_analysis_over_tensors_is_found_from_the_semantics():
    """Over tensors every term is defined everywhere: the guard picks the samples where two terms
    must agree (relu(a) and a agree wherever every element of a is >= 0)."""
    from eqdsl.synth.checked import passes
    from eqdsl.synth.enumerate import Space, enumerate_terms
    from eqdsl.synth.guards import conditioned_candidates
    from eqdsl.verify.semantics import load_semantics

    lang = load_language(ROOT / "tests" / "data" / "tensor_signs.eqr")
    sem = load_semantics(lang)
    found = enumerate_terms(lang, sem, Space(size=2, variables=2, ops=("relu", "sigmoid", "ewadd", "input")), (3, 3),
                            lambda: False)
    candidates = conditioned_candidates(lang, found)
    assert candidates[0].text == "relu(?a) => ?a if nonneg(?a)"
    assert all(c.text.endswith("if nonneg(?a)") or c.text.endswith("if nonneg(?b)") for c in candidates)
    assert passes(lang, sem, candidates[0], 50, seed=0)
