"""`eqdsl derive`: a set derives itself, the empty set derives nothing, and no sound set derives
an unsound rule (the yardstick of rule synthesis, issue 61)."""
from __future__ import annotations

import os
from dataclasses import replace

import pytest

from eqdsl import ir
from eqdsl.frontend import load_language
from eqdsl.schedule.runner import Limits
from eqdsl.synth.candidates import rule_text
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


def test_rules_reading_target_params_derive_under_a_target(run_cli):
    code, _, err = run_cli("derive", "glenside", "glenside")
    assert code == 2 and "expected --target NAME" in err and "Traceback" not in err
    code, out, err = run_cli("derive", "glenside", "glenside", "--target", "systolic-16")
    assert code == 0 and out.strip().splitlines()[-1] == "derived 20 of 20 rules (100.0 %)", out + err


def test_rules_of_another_language_are_not_instantiable_where_a_sort_or_operator_is_missing(run_cli):
    code, out, err = run_cli("derive", ROOT / "examples" / "rational" / "rational.eqr", "arith")
    assert code == 0 and "Traceback" not in err, err
    assert "note: A is language rational, B language arith" in out
    assert "not instantiable" in out and "is not in language rational" in out
    code, out, _ = run_cli("derive", "arith", "tensor")
    assert code == 0 and "tensor has no rules of its own" in out


def test_fresh_leaves_get_a_rank_their_leaf_operator_can_make(tmp_path, run_cli):
    # `add` leaves the rank open, but the first language's only leaf, input(name, rows, cols),
    # makes matrices: the instance must be drawn at rank 2, not at the first rank `add` allows
    mats = (ROOT / "examples" / "first" / "mats.eqr").read_text().split("\nrule ")[0]
    for name, rules in (("a", "rule c: add(?a, ?b) <=> add(?b, ?a)\n"
                              "rule s: add(?a, add(?b, ?c)) <=> add(?b, add(?a, ?c))\n"),
                        ("b", "rule assoc: add(add(?a, ?b), ?c) => add(?a, add(?b, ?c))\n")):
        (tmp_path / f"{name}.eqr").write_text(mats + "\n" + rules)
        (tmp_path / f"{name}_ref.py").write_text((ROOT / "examples" / "first" / "mats_ref.py").read_text())
    code, out, err = run_cli("derive", tmp_path / "a.eqr", tmp_path / "b.eqr")
    assert code == 0 and out.strip().splitlines()[-1] == "derived 1 of 1 rules (100.0 %)", out + err


def test_a_languages_own_concat_and_splits_are_found_and_its_merge_synthesized(tmp_path, run_cli):
    """The first language joins with concat(a, b) and splits with cols-before / cols-from (no
    TASO names): its merge is lifted there, verified, and derives the README's merge-matmuls."""
    first = ROOT / "examples" / "first"
    code, _, err = run_cli("synthesize", first / "mats.eqr", "--ops", "matmul,concat", "--size", "3",
                           "--examples", "40", "-o", tmp_path / "syn.eqr")
    assert code == 0, err
    text = (tmp_path / "syn.eqr").read_text()
    assert "matmul(?a, ?b), matmul(?a, ?c) => cols-before(k, matmul(?a, concat(?b, ?c)))" in text, text
    code, out, err = run_cli("derive", tmp_path / "syn.eqr", first / "mats.eqr")
    assert code == 0 and "merge-matmuls" not in out and "assoc" not in out, out + err


def test_vectors_are_enumerated_at_a_length_and_their_joint_gives_a_merge(tmp_path, run_cli):
    vectors = ROOT / "tests" / "data" / "vectors.eqr"
    code, _, err = run_cli("synthesize", vectors, "--ops", "cat,neg", "--size", "3", "--examples", "40",
                           "-o", tmp_path / "syn.eqr")
    assert code == 0, err
    text = (tmp_path / "syn.eqr").read_text()
    assert "rule syn-827233e7: cat(neg(?a), neg(?b)) <=> neg(cat(?a, ?b))  # size 5" in text and "at shape [3]" in text
    assert "neg(?a), neg(?b) => take(k, neg(cat(?a, ?b))), drop(k, neg(cat(?a, ?b))) where k = shape(neg(?a))" in text


def test_declarations_leave_out_a_rule_with_the_comment_above_it(tmp_path):
    from eqdsl.synth.written import declarations

    (tmp_path / "m.eqr").write_text("# the file's own comment\nlanguage m\ninclude arith\n"
                                    "# about r: it goes with r\nrule r: mul(?x, num(1)) => ?x\n"
                                    "op konst(n: Int) -> Num { cost = 1 }  # stays\n")
    text = declarations(load_language(tmp_path / "m.eqr"), "n")
    assert "the file's own comment" in text and "# stays" in text
    assert "about r" not in text and "rule r" not in text


def test_synthesized_arith_rules_verify_and_derive_every_shipped_arith_rule(tmp_path, run_cli):
    """Issue 61's first goal, at the default settings but fewer examples per candidate."""
    out = tmp_path / "arith-synth.eqr"
    code, printed, err = run_cli("synthesize", "arith", "-o", out, "--examples", "40")
    assert code == 0, err
    text = out.read_text()
    assert "include" not in text and "rule mul-two" not in text  # arith's own rules are left out
    rules = [line for line in text.splitlines() if line.startswith("rule syn-")]
    assert 10 <= len(rules) and all("# size" in line for line in rules)
    folds = [line for line in rules if "a fold by analysis const" in line]
    assert [line.split(": ", 1)[1].split("  #")[0] for line in folds] == [
        "mul(?a, ?b) => num(k) where k = const(mul(?a, ?b))", "div(?a, ?b) => num(k) where k = const(div(?a, ?b))"]
    code, printed, err = run_cli("derive", out, "arith")  # the folds: by the same rule (no fresh instance)
    assert code == 0 and printed.strip().splitlines()[-1] == "derived 7 of 7 rules (100.0 %)", printed + err
    code, printed, _ = run_cli("verify", out, "--examples", "50")
    assert code == 0, printed
    code, _, err = run_cli("synthesize", "arith", "-o", out)
    assert code == 2 and "already exists" in err


def test_synthesis_names_rules_stably_and_renames_variables():
    from eqdsl.frontend import load_language
    from eqdsl.synth.enumerate import Space, enumerate_terms
    from eqdsl.synth.synthesize import rule_candidates
    from eqdsl.verify.semantics import load_semantics

    lang = load_language("arith")
    pool = rule_candidates(enumerate_terms(lang, load_semantics(lang), Space(size=1, variables=2)))
    texts = [c.text for c in pool]
    assert "mul(?a, ?b) <=> mul(?b, ?a)" in texts and "mul(?b, ?a) <=> mul(?a, ?b)" not in texts
    again = rule_candidates(enumerate_terms(lang, load_semantics(lang), Space(size=1, variables=2)))
    assert [c.rule.name for c in again] == [c.rule.name for c in pool]
    assert all(c.rule.name.startswith("syn-") for c in pool)


def test_shaped_sorts_are_enumerated_at_one_shape_and_ill_shaped_terms_left_out():
    from eqdsl.frontend import load_language
    from eqdsl.synth.enumerate import Space, enumerate_terms
    from eqdsl.synth.synthesize import rule_candidates
    from eqdsl.verify.semantics import load_semantics

    lang = load_language("tensat")
    space = Space(size=1, variables=2, ints=(0,), ops=("ewadd", "matmul", "transpose"), shapes=((2, 3),))
    found = enumerate_terms(lang, load_semantics(lang), space, (2, 3))
    shapes = {t.shape for t in found.terms}
    assert (2, 3) in shapes and (3, 2) in shapes  # a transpose's permutations were tried
    assert not any(isinstance(t.pattern, ir.PApp) and t.pattern.op == "matmul" for t in found.terms)  # [2,3]x[2,3]
    texts = [c.text for c in rule_candidates(found)]
    assert "ewadd(?a, ?b) <=> ewadd(?b, ?a)" in texts  # an equation: applied both ways
    # a transpose's [1, 0] is lifted out of the pattern (which cannot hold a list) into a condition
    assert "transpose(?a, ?p0) => ?a if ?p0 == [0, 1]" in texts


def test_lifted_list_values_write_and_verify(tmp_path, run_cli):
    out = tmp_path / "t.eqr"
    code, _, err = run_cli("synthesize", "tensor", "-o", out, "--ops", "relu,transpose", "--ints", "0",
                           "--vars", "1", "--size", "2", "--shape", "2,3")
    assert code == 0, err
    text = out.read_text()
    assert "transpose(relu(?a), ?p0) => relu(transpose(?a, ?p0)) if ?p0 == [1, 0]" in text
    code, printed, _ = run_cli("verify", out, "--seed", "2")
    assert code == 0, printed


def _interrupted_at_first_checkpoint(tmp_path, language: str, meanwhile=lambda: None) -> tuple[int, str]:
    """`eqdsl synthesize LANGUAGE -o s.eqr` stopped by Ctrl-C once its first rule is kept
    (`meanwhile()` just before): (exit code, stderr)."""
    import signal
    import subprocess
    import sys
    import time

    proc = subprocess.Popen([sys.executable, "-m", "eqdsl", "synthesize", language, "-o", str(tmp_path / "s.eqr")],
                            cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    deadline = time.monotonic() + 60
    while not list(tmp_path.glob(".s.eqr.eqdsl-*/s.eqr")) and time.monotonic() < deadline:  # a first checkpoint
        assert proc.poll() is None, proc.stderr.read()
        time.sleep(0.05)
    meanwhile()
    proc.send_signal(signal.SIGINT)
    return proc.wait(timeout=30), proc.stderr.read()


def test_ctrl_c_keeps_the_rules_verified_so_far(tmp_path):
    import os

    out = tmp_path / "s.eqr"
    code, err = _interrupted_at_first_checkpoint(tmp_path, "arith")
    assert code == 130 and "interrupted: kept the" in err and "nothing written" not in err, err
    assert out.read_text().startswith("# STOPPED before the end") and "\nrule syn-" in out.read_text()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["s.eqr"]  # no scratch left
    assert os.access(out, os.R_OK)


def test_a_companion_name_taken_while_synthesis_runs_is_said_on_ctrl_c_not_a_traceback(tmp_path):
    mine = tmp_path / "s_ref.py"
    code, err = _interrupted_at_first_checkpoint(tmp_path, str(ROOT / "examples/acsum/acsum.eqr"),
                                                 lambda: mine.write_text("# the user's\n"))
    assert code == 130 and "rules verified so far are not kept" in err and "Traceback" not in err, err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["s_ref.py"] and mine.read_text() == "# the user's\n"


def test_a_companion_name_taken_before_synthesis_starts_is_refused_at_once(tmp_path, run_cli):
    (tmp_path / "s_ref.py").write_text("# the user's\n")
    code, _, err = run_cli("synthesize", ROOT / "examples/acsum/acsum.eqr", "-o", tmp_path / "s.eqr")
    assert code == 2 and "s_ref.py already exists" in err and not (tmp_path / "s.eqr").exists()


def test_a_candidate_is_an_equation_unless_its_reverse_would_grow_without_end(tmp_path):
    from eqdsl.synth.candidates import Candidate

    def candidate(text: str) -> Candidate:
        lang = load_language(_one_rule_file(tmp_path, text))
        return Candidate(lang.rules[0], 0, 0)

    assert candidate("relu(relu(?a)) => relu(?a)").both_ways is False  # relu(?a) => relu(relu(?a)) grows
    assert candidate("concat(0, relu(?a), relu(?b)) => relu(concat(0, ?a, ?b))").both_ways
    assert candidate("ewadd(?a, ewmul(?a, ?b)) => ?a").both_ways is False  # a bare variable
    both = candidate("ewmul(?a, ewadd(?b, ?c)) => ewadd(ewmul(?a, ?b), ewmul(?a, ?c))")
    assert both.both_ways and [r.name for r in both.rules] == ["r", "r-rev"]


def _one_rule_file(folder, text: str) -> str:
    file = folder / f"one{len(list(folder.iterdir()))}.eqr"
    file.write_text(f"language one\ninclude tensor\nrule r: {text}\n")
    return str(file)


def test_derivations_in_one_e_graph_are_proofs_and_the_prover_grows(tmp_path):
    from eqdsl.synth.derive import Prover

    tensat = load_language("tensat")
    prover = Prover(tensat, LIMITS)
    sample = [r for r in tensat.single_rules[::5]]
    unsound = [r for r in mutants(tensat.rules) if not r.is_multi][::7]
    together = prover.derived_together(tensat, [*sample, *unsound])
    assert not any(together[len(sample):])  # no mutant is joined, though all share one e-graph
    assert sum(together[:len(sample)]) >= len(sample) // 2
    alone = [prover.prove(tensat, r).verdict is Verdict.DERIVED for r in sample]
    assert all(a for a, t in zip(alone, together) if t)  # what the batch proves, one by one proves too
    commute = load_language(_one_rule_file(tmp_path, "ewadd(?a, ?b) => ewadd(?b, ?a)"))
    empty = Prover(replace(tensat, rules=()), LIMITS)
    goal = load_language(_one_rule_file(tmp_path, "ewadd(?a, ewadd(?b, ?c)) => ewadd(ewadd(?c, ?b), ?a)")).rules[0]
    assert empty.prove(tensat, goal).verdict is Verdict.NOT_DERIVED
    empty.add(commute.rules[0])
    assert empty.prove(tensat, goal).verdict is Verdict.DERIVED


def test_a_proof_among_some_rules_uses_only_those(tmp_path):
    from eqdsl.synth.derive import Prover

    tensat = load_language("tensat")
    rules = load_language(_one_rule_file(tmp_path, "ewadd(?a, ?b) => ewadd(?b, ?a)")).rules
    idempotent = load_language(_one_rule_file(tmp_path, "relu(relu(?a)) => relu(?a)")).rules[0]
    two = replace(tensat, rules=(*rules, replace(idempotent, name="s")))
    prover = Prover(two, LIMITS)
    goal = load_language(_one_rule_file(tmp_path, "ewadd(?a, ewadd(?b, ?c)) => ewadd(ewadd(?c, ?b), ?a)")).rules[0]
    assert prover.prove(tensat, goal, among=two.rules[:1]).verdict is Verdict.DERIVED
    assert prover.prove(tensat, goal, among=two.rules[1:]).verdict is Verdict.NOT_DERIVED
    assert prover.prove(tensat, goal).verdict is Verdict.DERIVED  # all of them again after a subset
    with pytest.raises(ValueError, match="not declared with"):
        prover.prove(tensat, goal, among=tensat.rules[:1])


def test_the_screen_refutes_wrong_rules_and_passes_a_law(tmp_path):
    from eqdsl.verify.rules import refuted
    from eqdsl.verify.semantics import load_semantics

    tensor = load_language("tensor")
    sem = load_semantics(tensor)
    sides_of_two_shapes = load_language(_one_rule_file(tmp_path, "concat(0, ?a, ?b) => concat(1, ?a, ?b)")).rules[0]
    assert refuted(tensor, sem, sides_of_two_shapes)  # equal shapes only where a and b are square
    wrong = load_language(_one_rule_file(tmp_path, "matmul(0, ?a, ?b) => matmul(0, ?b, ?a)")).rules[0]
    assert refuted(tensor, sem, wrong)  # only square matrices make both sides well-shaped
    right = load_language(_one_rule_file(tmp_path, "ewadd(?a, ?b) => ewadd(?b, ?a)")).rules[0]
    assert not refuted(tensor, sem, right)


def test_synthesis_at_two_shapes_with_parameter_values(tmp_path, run_cli):
    out = tmp_path / "c.eqr"
    code, _, err = run_cli("synthesize", "tensor", "-o", out, "--ops", "relu,conv2d", "--vars", "2",
                           "--size", "2", "--shape", "3,3", "--shape", "2,2,3,3", "--values", "stride_h=1",
                           "--values", "stride_w=1", "--values", "pad=0", "--values", "act=0,2", "--generalize")
    assert code == 0, err
    text = out.read_text()
    assert "--shape 3,3 --shape 2,2,3,3 --values stride_h=1" in text.splitlines()[0]
    assert "--generalize` from the reference semantics" in text.splitlines()[0]
    # seen at stride 1 and padding 0 only, and lifted to every stride and padding (act stays)
    assert "relu(conv2d(?i0, ?i1, ?i2, 0, ?a, ?b)) <=> conv2d(?i0, ?i1, ?i2, 2, ?a, ?b)" in text
    assert "at shape [2, 2, 3, 3]" in text and "at shape [3, 3]" in text  # relu's laws: first seen at [3, 3]


def test_a_law_seen_at_one_shape_gets_the_weakest_shape_condition_that_verifies(tmp_path):
    """Conv2d distributes over its weights' sum only where the two weights agree on their input
    channels and kernel (a weight broadcast over input channels makes the right side a grouped
    convolution; one broadcast over output channels is fine): TASO asks for equal shapes."""
    from eqdsl.synth.synthesize import Candidate, _verified
    from eqdsl.verify.rules import Status, verify_rule
    from eqdsl.verify.semantics import load_semantics

    tensor = load_language("tensor")
    text = "ewadd(conv2d(1, 1, 0, 0, ?a, ?b), conv2d(1, 1, 0, 0, ?a, ?c)) => conv2d(1, 1, 0, 0, ?a, ewadd(?b, ?c))"
    law = Candidate(load_language(_one_rule_file(tmp_path, text)).rules[0], 5, 0, (2, 2, 3, 3))
    kept = _verified(tensor, load_semantics(tensor), law, 60)
    wanted = " if " + ", ".join(f"shape(?b)[{i}] == shape(?c)[{i}]" for i in (1, 2, 3))
    assert kept is not None and kept.text == text.replace("=>", "<=>") + wanted
    assert verify_rule(tensor, load_semantics(tensor), kept.rule, 300, seed=5).status is Status.PASSED
    assert [line.split(":")[0] for line in kept.lines()] == [f"rule {kept.rule.name}", f"rule {kept.rule.name}-rev"]
    wrong = Candidate(load_language(_one_rule_file(tmp_path, "ewadd(?a, ?b) => ?a")).rules[0], 1, 0)
    assert _verified(tensor, load_semantics(tensor), wrong, 60) is None


def test_a_condition_is_cut_to_the_axes_the_law_needs(tmp_path):
    from eqdsl.synth.synthesize import Candidate, _verified
    from eqdsl.verify.semantics import load_semantics

    tensor = load_language("tensor")
    text = "concat(1, conv2d(1, 1, 0, 0, ?a, ?b), conv2d(1, 1, 0, 0, ?a, ?c)) => conv2d(1, 1, 0, 0, ?a, concat(0, ?b, ?c))"
    law = Candidate(load_language(_one_rule_file(tmp_path, text)).rules[0], 5, 0, (2, 2, 3, 3))
    kept = _verified(tensor, load_semantics(tensor), law, 60)
    assert kept is not None and kept.text.endswith(" if shape(?a)[1] == shape(?b)[1]"), kept  # TASO's s115


def test_an_equation_over_a_concat_lifts_to_tasos_merge_which_verifies_and_derives_tasos(tmp_path):
    """TASO's multi-pattern merges (m05, m06) from single-pattern equations: the joint rewrite is
    verified on its own (a wrong equation's lift fails), guarded as TASO guards it, and derives
    TASO's rules; an equation that needs two concats, or a language without split, lifts nothing."""
    from eqdsl.synth.merges import guarded, joints, merge_candidates
    from eqdsl.synth.synthesize import Candidate, _verified
    from eqdsl.verify.semantics import load_semantics

    tensor, sem = load_language("tensor"), load_semantics(load_language("tensor"))
    texts = ["concat(1, matmul(0, ?a, ?b), matmul(0, ?a, ?c)) => matmul(0, ?a, concat(1, ?b, ?c))",
             "matmul(0, concat(0, ?a, ?c), ?b) => concat(0, matmul(0, ?a, ?b), matmul(0, ?c, ?b))",
             "concat(0, ewadd(?a, ?b), ewadd(?c, ?d)) => ewadd(concat(0, ?a, ?c), concat(0, ?b, ?d))",
             "concat(1, matmul(0, ?c, ?a), matmul(0, ?c, ?b)) => matmul(0, ?c, concat(1, ?b, ?a))"]  # wrong
    pool = [Candidate(load_language(_one_rule_file(tmp_path, t)).rules[0], 5, k, (3, 3)) for k, t in enumerate(texts)]
    found = joints(tensor, sem, 2)
    assert [j.join for j in found] == ["concat"]  # TASO's, by its names; no other operator gives its operands back
    lifted = merge_candidates(tensor, pool, found)
    assert [c.text for c in lifted] == [
        "matmul(0, ?a, ?b), matmul(0, ?a, ?c) => split0(split(1, k, matmul(0, ?a, concat(1, ?b, ?c)))), "
        "split1(split(1, k, matmul(0, ?a, concat(1, ?b, ?c)))) where k = shape(matmul(0, ?a, ?b))[1]",
        "matmul(0, ?a, ?b), matmul(0, ?c, ?b) => split0(split(0, k, matmul(0, concat(0, ?a, ?c), ?b))), "
        "split1(split(0, k, matmul(0, concat(0, ?a, ?c), ?b))) where k = shape(matmul(0, ?a, ?b))[0]",
        "matmul(0, ?c, ?a), matmul(0, ?c, ?b) => split0(split(1, k, matmul(0, ?c, concat(1, ?b, ?a)))), "
        "split1(split(1, k, matmul(0, ?c, concat(1, ?b, ?a)))) where k = shape(matmul(0, ?c, ?a))[1]"]
    assert _verified(tensor, sem, lifted[2], 60) is None
    kept = [guarded(v) for c in lifted[:2] if (v := _verified(tensor, sem, c, 60)) is not None]
    assert [c.text.split(" if ")[1] for c in kept] == ["?b != ?c", "?a != ?c"]
    ours, theirs = tmp_path / "merges.eqr", tmp_path / "taso.eqr"
    ours.write_text("language merges\ninclude tensor\n" + "\n".join(line for c in kept for line in c.lines()) + "\n")
    taso = {r.name: r for r in load_language("tensat").rules}
    theirs.write_text("language taso\ninclude tensor\n" + "\n".join(
        f"rule {name}: {rule_text(taso[name])}" for name in ("taso-m05", "taso-m06")) + "\n")
    assert set(_verdicts(str(ours), str(theirs)).values()) == {Verdict.DERIVED}
    assert joints(load_language("arith"), load_semantics(load_language("arith")), 0) == []


def test_a_literal_parameter_is_lifted_to_a_variable_where_the_rule_holds_at_every_value(tmp_path):
    """Ruler's generalization: conv2d distributes over a weight sum at any stride and padding, so
    those literals become variables; not through an activation (act 2 is relu), so act stays 0;
    a slot with two values (concat's axis 1 on the left, 0 on the right) is never lifted."""
    from eqdsl.synth.generalize import generalized
    from eqdsl.verify.rules import Status, verify_rule
    from eqdsl.verify.semantics import load_semantics

    tensor = load_language("tensor")
    sem = load_semantics(tensor)

    def holds(rule: ir.Rule) -> bool:
        return verify_rule(tensor, sem, rule, 100, shrink=False).status is Status.PASSED

    text = ("ewadd(conv2d(1, 1, 0, 0, ?a, ?b), conv2d(1, 1, 0, 0, ?a, ?c)) => conv2d(1, 1, 0, 0, ?a, ewadd(?b, ?c))"
            " if shape(?b) == shape(?c)")
    wide = generalized(load_language(_one_rule_file(tmp_path, text)).rules[0], holds)
    assert rule_text(wide) == text.replace("1, 1, 0, 0", "?i0, ?i1, ?i2, 0")
    assert wide.name.startswith("syn-") and holds(wide)
    merge = "concat(1, conv2d(1, 1, 0, 0, ?a, ?b), conv2d(1, 1, 0, 0, ?a, ?c)) => conv2d(1, 1, 0, 0, ?a, concat(0, ?b, ?c))"
    seen: list[str] = []
    generalized(load_language(_one_rule_file(tmp_path, merge)).rules[0], lambda r: seen.append(rule_text(r)) or False)
    # all four conv2d slots at once, then each alone; never concat's axis
    assert len(seen) == 5 and seen[0].count("?i3") == 3 and not any("concat(?i" in t for t in seen)


def test_a_merge_generalizes_with_its_split_point(tmp_path):
    """A merge's `where k = shape(term)` holds the slot too: lifted with the sides, else the term
    would name stride 1 while the sides match any stride."""
    from eqdsl.synth.generalize import generalized
    from eqdsl.verify.rules import Status, verify_rule
    from eqdsl.verify.semantics import load_semantics

    tensor = load_language("tensor")
    sem = load_semantics(tensor)
    conv = "conv2d(1, 1, 0, 0, ?a, {})"
    merged = f"split(1, k, {conv.format('concat(0, ?b, ?c)')})"
    text = (f"{conv.format('?b')}, {conv.format('?c')} => split0({merged}), split1({merged}) "
            f"where k = shape({conv.format('?b')})[1] if shape(?a)[1] == shape(?b)[1], shape(?a)[1] == shape(?c)[1]")
    wide = generalized(load_language(_one_rule_file(tmp_path, text)).rules[0],
                       lambda r: verify_rule(tensor, sem, r, 60, shrink=False).status is Status.PASSED)
    assert rule_text(wide) == text.replace("1, 1, 0, 0", "?i0, ?i1, ?i2, ?i3")


def test_a_rule_that_reads_an_analysis_is_derived_only_by_the_same_rule_up_to_names(tmp_path):
    (tmp_path / "b.eqr").write_text("language b\ninclude arith\n"
                                    "rule fold: mul(?x, ?y) => num(n)  where n = const(mul(?x, ?y))\n"
                                    "rule fold-if: mul(?x, ?y) => num(n)  where n = const(mul(?x, ?y))  if n != 0\n")
    arith, b = load_language("arith"), own_rules(load_language(tmp_path / "b.eqr"))
    assert [d.verdict for d in derive(arith, b, LIMITS)] == [Verdict.DERIVED, Verdict.NOT_INSTANTIABLE]
    without_folds = replace(arith, rules=tuple(r for r in arith.rules if not r.name.startswith("fold")))
    assert [d.verdict for d in derive(without_folds, b, LIMITS)] == [Verdict.NOT_INSTANTIABLE] * 2


def test_synthesize_refuses_bad_settings_with_the_flag_and_writes_nothing(tmp_path, run_cli):
    cases = [(["arith", "--vars", "100"], "--vars: error: expected 1 to 16 variables per sort, got 100"),
             (["tensor", "--shape", "0,0"], "--shape: error: expected a shape of dimensions ≥ 1"),
             (["tensor", "--shape", "100000,100000"], "with at most 4,194,304 elements, got 100000,100000"),
             (["arith", "--ints", "99999999999999999999999"], "--ints: error: expected Int literals that fit 64"),
             (["arith", "--values", "foo=1"], "--values: error: synthesize: no Int parameter foo in language arith")]
    for argv, said in cases:
        code, _, err = run_cli("synthesize", *argv, "--time-limit", "5", "-o", tmp_path / "s.eqr")
        assert code == 2 and said in err and "Traceback" not in err, (argv, err)
    assert list(tmp_path.iterdir()) == []


def test_a_reference_that_never_returns_is_stopped_past_the_time_limit(tmp_path):
    import subprocess
    import sys

    (tmp_path / "acsum.eqr").write_text((ROOT / "examples/acsum/acsum.eqr").read_text())
    (tmp_path / "acsum_ref.py").write_text("from eqdsl.languages.base import Leaf\ndef spin(a, b):\n    while True:\n"
                                           "        pass\nSEMANTICS = {'var': Leaf(lambda name: ()), 'add': spin}\n")
    done = subprocess.run([sys.executable, "-m", "eqdsl", "synthesize", "acsum.eqr", "--time-limit", "1", "-o", "s.eqr"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert done.returncode == 1 and "stopped: still running 11.5 s after the start" in done.stderr, done.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["acsum.eqr", "acsum_ref.py"]


def test_the_confirming_seeds_answer_alike_in_one_process_and_side_by_side(tmp_path):
    from eqdsl.synth import checked
    from eqdsl.synth.synthesize import Candidate
    from eqdsl.verify.semantics import load_semantics

    tensor = load_language("tensor")
    sem = load_semantics(tensor)
    rules = {text: Candidate(load_language(_one_rule_file(tmp_path, text)).rules[0], 2, 0)
             for text in ("ewadd(?a, ?b) => ewadd(?b, ?a)", "ewadd(?a, ?b) => ewmul(?a, ?b)")}
    alone = {text: checked.confirmed(tensor, sem, c, 20) for text, c in rules.items()}
    with checked.processes_for(tensor, sem, 2):
        assert checked._pool is not None  # forked: the seeds go to its processes
        together = {text: checked.confirmed(tensor, sem, c, 20) for text, c in rules.items()}
    assert alone == together == {"ewadd(?a, ?b) => ewadd(?b, ?a)": True, "ewadd(?a, ?b) => ewmul(?a, ?b)": False}
    assert checked._pool is None  # the block's processes end with it


def _where_and_what(lang, sem, k: int) -> tuple[int, str]:
    return os.getpid(), f"{lang.name} {k * k}"


def test_side_by_side_answers_in_order_in_the_processes_or_here():
    from eqdsl.synth import checked
    from eqdsl.verify.semantics import load_semantics

    tensor = load_language("tensor")
    sem = load_semantics(tensor)
    here = list(checked.side_by_side(tensor, sem, _where_and_what, [(k,) for k in range(6)]))
    with checked.processes_for(tensor, sem, 2):
        there = list(checked.side_by_side(tensor, sem, _where_and_what, [(k,) for k in range(6)]))
        other = list(checked.side_by_side(load_language("arith"), sem, _where_and_what, [(2,)]))
    assert [w for w, _ in here] == [os.getpid()] * 6 and os.getpid() not in {w for w, _ in there}
    assert [a for _, a in here] == [a for _, a in there] == [f"tensor {k * k}" for k in range(6)]
    assert other == [(os.getpid(), "arith 4")]  # another language's tasks run here
