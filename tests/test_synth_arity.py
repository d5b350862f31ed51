"""`eqdsl.synth.arity`: a rule found at a binary concat, lifted to the n-ary concats the language
has (found from the semantics), and kept only where it verifies."""
from __future__ import annotations

import pytest

from eqdsl import ir
from eqdsl.frontend import load_language
from eqdsl.synth.arity import lifted, operator_count, variadic_forms
from eqdsl.synth.candidates import Candidate, rule_text, stable_name
from eqdsl.synth.synthesize import Synthesis, _at_variadic_forms
from eqdsl.verify.rules import Status, verify_rule
from eqdsl.verify.semantics import load_semantics

from conftest import ROOT

SPLIT_SUM = "concat(1, ewadd(?a, ?b), ewadd(?c, ?d)) => ewadd(concat(1, ?a, ?c), concat(1, ?b, ?d))"
SAME_LAST = " if shape(?c)[3] == shape(?d)[3]"


@pytest.fixture(scope="module")
def tensor():
    lang = load_language("tensor")
    return lang, load_semantics(lang)


def _rule(tmp_path, text: str) -> ir.Rule:
    file = tmp_path / f"one{len(list(tmp_path.iterdir()))}.eqr"
    file.write_text(f"language one\ninclude tensor\nrule r: {text}\n")
    return load_language(str(file)).rules[0]


def _holds(lang, sem, rule: ir.Rule, examples: int = 60) -> bool:
    return verify_rule(lang, sem, rule, examples, shrink=False).status is Status.PASSED


def test_the_n_ary_forms_are_found_from_the_semantics_not_the_names(tensor):
    lang, sem = tensor
    forms = variadic_forms(lang, lambda r: _holds(lang, sem, r, 30))
    assert forms == {"concat": (("concat3", 3), ("concat4", 4), ("concat5", 5))}
    # nothing holds: no forms, though concat3 is still named like one
    assert variadic_forms(lang, lambda r: False) == {}


def test_a_rule_at_a_binary_concat_lifts_to_every_copy_with_its_condition(tmp_path):
    rule = _rule(tmp_path, SPLIT_SUM + SAME_LAST)
    three = lifted(rule, "concat", "concat3", 3)
    assert three is not None and rule_text(three) == (
        "concat3(1, ewadd(?a1, ?b1), ewadd(?a2, ?b2), ewadd(?a3, ?b3)) => "
        "ewadd(concat3(1, ?a1, ?a2, ?a3), concat3(1, ?b1, ?b2, ?b3)) "
        "if shape(?a1)[3] == shape(?b1)[3], shape(?a2)[3] == shape(?b2)[3], shape(?a3)[3] == shape(?b3)[3]")
    assert three.name.startswith("syn-") and operator_count(three) == 7
    # the reverse direction lifts from its right side
    back = _rule(tmp_path, "ewadd(concat(1, ?a, ?c), concat(1, ?b, ?d)) => concat(1, ewadd(?a, ?b), ewadd(?c, ?d))")
    lifted_back = lifted(back, "concat", "concat4", 4)
    assert lifted_back is not None and rule_text(lifted_back).startswith("ewadd(concat4(1, ?a1, ?a2, ?a3, ?a4), ")


@pytest.mark.parametrize("text", [
    "concat(1, ewadd(?a, ?a), ewadd(?b, ?c)) => ewadd(concat(1, ?a, ?b), concat(1, ?a, ?c))",  # halves not alike
    "concat(1, relu(?a), relu(?b)) => relu(concat(1, ?a, ?b)) where k = shape(?a)[1]",  # a where
    "concat(1, relu(?a), relu(?b)) => ewadd(relu(concat(1, ?a, ?b)), relu(concat(1, ?b, ?a)))",  # ?b apart from ?a
])
def test_rules_not_of_that_form_are_not_lifted(tmp_path, text):
    assert lifted(_rule(tmp_path, text), "concat", "concat5", 5) is None


def test_a_lifted_rule_is_kept_only_where_it_verifies(tmp_path, tensor):
    """The sound law lifts and passes; without its condition (a broadcast half) the binary rule is
    unsound, and so is its lift: `verify` says so."""
    lang, sem = tensor
    sound = lifted(_rule(tmp_path, SPLIT_SUM + SAME_LAST), "concat", "concat3", 3)
    unsound = lifted(_rule(tmp_path, SPLIT_SUM), "concat", "concat3", 3)
    assert sound is not None and unsound is not None
    assert _holds(lang, sem, sound, 30) and not _holds(lang, sem, unsound, 100)


def test_synthesis_keeps_the_verified_lifts_after_the_kept_rules(tmp_path, tensor):
    lang, sem = tensor
    law = Candidate(_rule(tmp_path, SPLIT_SUM + SAME_LAST), 6, 0)
    forms = {"concat": (("concat3", 3), ("concat4", 4))}
    result, notes = Synthesis(kept=[law]), []
    assert _at_variadic_forms(lang, sem, forms, 10, result, lambda: False, notes.append, lambda partial: None)
    assert notes == [f"verifying {law.rule.name} at concat3", f"verifying {law.rule.name} at concat4"]
    assert [c.rule.lhs[0].op for c in result.kept] == ["concat", "concat3", "concat4"] and result.lifted == 2
    assert all(c.note == f"{law.rule.name} at {c.rule.lhs[0].op}" for c in result.kept[1:])
    stopped = Synthesis(kept=[law])
    assert not _at_variadic_forms(lang, sem, forms, 10, stopped, lambda: True, print, lambda partial: None)
    assert stopped.kept == [law]


def test_the_shipped_synthesized_rules_are_named_by_their_text_and_say_where_they_came_from():
    """`rulesets/tensor-synth.eqr` is written by `eqdsl synthesize` (its header names the commands):
    every rule is `syn-<hash of its text>` with its origin, the lifted ones at concat3..5 among them
    (`make test-slow` verifies them all at 100 examples)."""
    lang = load_language("tensor-synth")
    lines = [line for line in (ROOT / "rulesets" / "tensor-synth.eqr").read_text().splitlines()
             if line.startswith("rule ")]
    assert all("# size " in line for line in lines)
    assert {line.split(":")[0].removeprefix("rule ").removesuffix("-rev") for line in lines} == \
        {r.name.removesuffix("-rev") for r in lang.rules}
    assert [r.name for r in lang.rules if not r.name.endswith("-rev") and r.name != stable_name(r)] == []
    assert {r.lhs[0].op for r in lang.rules} >= {"concat3", "concat4", "concat5", "relu", "conv2d", "ewadd"}
    assert {r.name for r in load_language("tensat-synth").rules} >= {r.name for r in lang.rules}
