"""End to end: `eqdsl run` on the examples, the report, and bad configs."""
from __future__ import annotations

import gc
import json
import shutil

import pytest

from eqdsl.config import load_config
from eqdsl.diagnostics import EqdslError
from eqdsl.pipeline import run_pipeline

from conftest import EXAMPLES, run_let_chain


def test_arith_simplifies_to_a(tmp_path, run_cli):
    code, out, err = run_cli("run", EXAMPLES / "arith" / "config.yaml", "--output", tmp_path / "r", "--quiet")
    assert code == 0, err
    report = json.loads((tmp_path / "r" / "report.json").read_text())
    assert report["optimized_program"] == 'program optimized:\n  root var("a")\n'
    assert report["original_cost"] == 12 and report["best_cost"] == 0
    assert report["predicted_speedup"] is None  # 12 / 0: none, in JSON any reader parses (not NaN)
    assert report["extractor"]["status"] == "optimal"
    assert report["schedule"]["stop_reason"] in ("saturated", "iteration limit")
    assert report["schedule"]["iterations"][0]["matches"]
    assert set(report["stages_s"]) >= {"check", "lower", "load", "schedule", "extract:cpsat"}
    assert report["config"]["ruleset"] == "arith"
    assert (tmp_path / "r" / "optimized.eqr").read_text().startswith("program optimized:")


def test_sharing_cpsat_beats_tree_greedy():
    result = run_pipeline(load_config(EXAMPLES / "sharing" / "config.yaml"))
    greedy, cpsat = result.extractions["greedy"], result.extractions["cpsat"]
    assert cpsat.cost < greedy.cost == result.original_cost
    assert "concat(" in result.optimized_text and "cols-before(256" in result.optimized_text


def test_optimized_program_reloads_and_costs_the_same(tmp_path):
    """The written optimized.eqr is a valid program of the language with the reported cost."""
    result = run_pipeline(load_config(EXAMPLES / "sharing" / "config.yaml"))
    (tmp_path / "opt.eqr").write_text(result.optimized_text)
    cfg = tmp_path / "c.yaml"
    shutil.copy(EXAMPLES / "sharing" / "sharing.eqr", tmp_path / "sharing.eqr")
    cfg.write_text("ruleset: sharing.eqr\nprogram: opt.eqr\nschedule: {iter_limit: 0}\n"
                   "extract: {method: greedy, compare: []}\n")
    again = run_pipeline(load_config(cfg))
    assert again.original_cost == result.best.cost


def test_a_run_leaves_the_garbage_collector_as_it_found_it(tmp_path):
    """A run keeps full collections off while it works (see pipeline._no_full_collections) and
    puts the thresholds back, also when the run fails."""
    before = gc.get_threshold()
    run_pipeline(load_config(EXAMPLES / "sharing" / "config.yaml"))
    assert gc.get_threshold() == before
    (tmp_path / "c.yaml").write_text("ruleset: arith\nprogram: {text: 'program p: root mul(num(1), num(2))'}\n"
                                     "schedule: {node_limit: 1}\n")
    with pytest.raises(EqdslError):
        run_pipeline(load_config(tmp_path / "c.yaml"))
    assert gc.get_threshold() == before


@pytest.mark.parametrize("yaml_text, message", [
    ("ruleset: arith\nschedule: {k_multi: one}\n", "schedule.k_multi: error: expected an int ≥ 0, got 'one'"),
    ("ruleset: arith\nschedule: {kmulti: 1}\n", "schedule.kmulti: error: unknown key"),
    ("ruleset: arith\nextract: {method: ilp}\n", "extract.method: error: expected one of greedy, greedy-dag, greedy-ocf, cpsat"),
    ("schedule: {}\n", "ruleset: error: missing required key"),
    ("ruleset: arith\nprogram: {file: none.eqr}\n", "cannot read program file"),
    ("ruleset: nosuch\n", "unknown ruleset 'nosuch'"),
    ("ruleset: [\n", "invalid YAML"),
    ("ruleset: arith\nschedule: {node_limit: 5}\nschedule: {node_limit: 9}\n",
     "c.yaml:3:1: invalid YAML: duplicate key 'schedule' (first at line 2)"),
    ("ruleset: arith\nprogram: {text: 'program p: root nope(1)'}\n", "unknown operator or name 'nope'"),
    ("ruleset: arith\nprogram: {text: 'program p: root num(1)'}\nschedule: {node_limit: 0}\n",
     "schedule.node_limit: error: expected an int ≥ 1, got 0"),
])
def test_bad_config_is_a_clean_error(tmp_path, run_cli, yaml_text, message):
    cfg = tmp_path / "c.yaml"
    cfg.write_text(yaml_text)
    code, out, err = run_cli("run", cfg, "--output", tmp_path / "out", "--quiet")
    assert code == 2
    assert message in err, err
    assert "Traceback" not in err
    assert not (tmp_path / "out").exists()  # nothing half-written


def test_scientific_notation_is_a_number(tmp_path):
    """Issue 46 item 7: `time_limit_s: 1e3` was "expected a number > 0, got '1e3'" (YAML 1.1 text)."""
    (tmp_path / "c.yaml").write_text("ruleset: arith\nextract: {method: cpsat, time_limit_s: 1e3}\n")
    assert load_config(tmp_path / "c.yaml").extract.budget().time_s == 1000.0


def test_ill_shaped_input_program_is_rejected(tmp_path, run_cli):
    shutil.copy(EXAMPLES / "sharing" / "sharing.eqr", tmp_path / "sharing.eqr")
    (tmp_path / "p.eqr").write_text('program p:\n  root matmul(input("x", 2, 3), weight("w", 4, 5))\n')
    (tmp_path / "c.yaml").write_text("ruleset: sharing.eqr\nprogram: p.eqr\n")
    code, _, err = run_cli("run", tmp_path / "c.yaml", "--output", tmp_path / "out", "--quiet")
    assert code == 2 and "ill-shaped" in err and "matmul" in err


def test_unsound_rule_merging_shapes_is_reported(tmp_path, run_cli):
    """A rule that unions terms of different shapes trips egglog's :no-merge: a clean error."""
    text = (EXAMPLES / "sharing" / "sharing.eqr").read_text()
    text += "\nrule bad: matmul(?x, ?w) => ?x\n"
    (tmp_path / "bad.eqr").write_text(text)
    (tmp_path / "c.yaml").write_text(
        "ruleset: bad.eqr\nprogram: {text: 'program p: root matmul(input(\"x\", 2, 3), weight(\"w\", 3, 5))'}\n")
    code, _, err = run_cli("run", tmp_path / "c.yaml", "--output", tmp_path / "out", "--quiet")
    assert code == 2 and "rule bad unioned two terms with different shapes" in err and "bad.eqr:" in err


def test_check_on_a_device_or_a_folder_says_what_it_is(tmp_path, run_cli):
    """Issue 46 item 7: `check /dev/null` said "file not found"."""
    for target in ("/dev/null", tmp_path):
        code, _, err = run_cli("check", target)
        assert code == 2 and "not a regular file" in err and "Traceback" not in err


def test_costs_print_as_people_read_them():
    """Issue 46 item 11: costs printed as `1.03957e+06` and `635383.999906`."""
    from eqdsl.report import cost_text

    assert [cost_text(c) for c in (635383.999906, 1.03957e6, 0.717254, 12, 0.0)] == [
        "635,384", "1,039,570", "0.717254", "12", "0"]


def test_a_language_files_own_program_is_named_from_the_config(tmp_path, run_cli):
    """Issue 46 item 10: `program: mini.eqr` (the ruleset's own file) gave a copy of "a program
    file holds only program blocks" per declaration."""
    (tmp_path / "mini.eqr").write_text(
        "language mini\nsort T { shape: [Int] }\nop x() -> T\nop neg(a: T) -> T\nshape x() = [1]\n"
        "shape neg(a) = a\ncost x() = 0\ncost neg(a) = 1\nrule twice: neg(neg(?a)) => ?a\n"
        "program main:\n  root neg(neg(x()))\n")
    for program in ("mini.eqr", "{file: mini.eqr, name: main}"):
        (tmp_path / "c.yaml").write_text(f"ruleset: mini.eqr\nprogram: {program}\n")
        code, out, err = run_cli("run", tmp_path / "c.yaml", "--output", tmp_path / "out", "--force", "--quiet")
        assert code == 0, err
    (tmp_path / "c.yaml").write_text("ruleset: arith\nprogram: mini.eqr\n")
    code, _, err = run_cli("run", tmp_path / "c.yaml", "--output", tmp_path / "out2", "--quiet")
    assert code == 2 and err.count("a program file holds only `program` blocks") == 1


@pytest.mark.parametrize("rules, message", [
    ("[taso-m01]", "rule 'taso-m01' is a multi-pattern rule; pulsed epochs run single-pattern rules only"),
    ("[taso-s1]", "unknown rule 'taso-s1'; did you mean"),
])
def test_pulsed_rules_name_what_is_wrong_in_one_line(tmp_path, run_cli, rules, message):
    """Issue 46 item 10: a multi-pattern rule in a pulsed schedule's `rules` listed 124 names."""
    (tmp_path / "c.yaml").write_text(f"ruleset: tensat\ntarget: t4\nprogram: {{builder: bert}}\n"
                                     f"schedule: {{kind: pulsed, rules: {rules}}}\n")
    code, _, err = run_cli("run", tmp_path / "c.yaml", "--output", tmp_path / "out", "--quiet")
    assert code == 2 and message in err and err.count(",") < 10, err


def test_a_config_names_its_output_relative_to_itself_and_the_default_is_the_current_folder(tmp_path, monkeypatch):
    (tmp_path / "cfg").mkdir()
    shutil.copy(EXAMPLES / "arith" / "input.eqr", tmp_path / "cfg" / "input.eqr")
    (tmp_path / "cfg" / "named.yaml").write_text("ruleset: arith\nprogram: input.eqr\noutput: out\n")
    (tmp_path / "cfg" / "unnamed.yaml").write_text("ruleset: arith\nprogram: input.eqr\n")
    (tmp_path / "elsewhere").mkdir()
    monkeypatch.chdir(tmp_path / "elsewhere")
    assert load_config(tmp_path / "cfg" / "named.yaml").output == tmp_path / "cfg" / "out"
    assert load_config(tmp_path / "cfg" / "unnamed.yaml").output.as_posix() == "results/unnamed"


def test_a_bad_config_reports_every_error_not_only_the_first(tmp_path, run_cli):
    (tmp_path / "c.yaml").write_text("ruleset: arith\nprogram: in.eqr\nschedule: {iter_limit: x, node_limit: -1}\n"
                                     "extract: {method: nope}\nbogus: 1\n")
    code, _, err = run_cli("run", tmp_path / "c.yaml")
    assert code == 2 and "Traceback" not in err
    for path in ("schedule.iter_limit", "schedule.node_limit", "extract.method", "bogus"):
        assert f"{path}: error" in err, err


def test_an_integer_past_64_bits_is_refused_where_it_is_written(tmp_path, run_cli):
    (tmp_path / "p.eqr").write_text("program p:\n  root mul(var(\"a\"), num(10000000000000000000000000000000000000))\n")
    (tmp_path / "c.yaml").write_text("ruleset: arith\nprogram: p.eqr\n")
    code, _, err = run_cli("run", tmp_path / "c.yaml", "--output", tmp_path / "out")
    assert code == 2 and "p.eqr:2:26: error: integer 10000000000000000000000000000000000000 is out of range" in err
    assert "egglog" not in err


def test_set_overrides_one_key_checked_as_the_files_own(tmp_path, run_cli):
    config = EXAMPLES / "arith" / "config.yaml"
    code, out, err = run_cli("run", config, "--output", tmp_path / "o", "--quiet", "--set", "schedule.iter_limit=1",
                             "--set", "extract={method: greedy}")
    assert code == 0, out + err
    effective = json.loads((tmp_path / "o" / "report.json").read_text())["effective_config"]
    assert effective["schedule"]["iter_limit"] == 1 and effective["extract"]["method"] == "greedy"
    code, _, err = run_cli("run", config, "--set", "schedule.iter_limit=zero")
    assert code == 2 and "schedule.iter_limit" in err and "expected an int" in err


def test_set_inside_a_section_written_true_keeps_it_on_and_inside_a_scalar_says_how(tmp_path, run_cli):
    config = EXAMPLES / "arith" / "config.yaml"  # validate: true
    code, out, err = run_cli("run", config, "-o", tmp_path / "o", "--quiet", "--set", "validate.samples=2")
    assert code == 0 and "agree on 2 random input(s)" in out, err
    code, _, err = run_cli("run", config, "-o", tmp_path / "p", "--set", "extract.method.x=1")
    assert code == 2 and "`x` is inside `extract.method`, which is cpsat, not a mapping; expected --set " \
                         "'extract.method={x: ...}'" in err, err


@pytest.mark.parametrize("section, flags, effective", [
    ("validate: {samples: 2}\n", ["--validate", "--no-ref"],
     {"samples": 2, "seed": 0, "run_ref": False, "time_limit_s": 600.0}),
    ("", ["--validate"], {"samples": 3, "seed": 0, "run_ref": True, "time_limit_s": 600.0}),
    ("", ["--no-ref"], None),  # --no-ref alone turns nothing on
])
def test_flags_edit_the_config_as_its_own_keys_and_the_report_keeps_the_file(tmp_path, run_cli, section, flags,
                                                                               effective):
    config = tmp_path / "c.yaml"
    config.write_text((EXAMPLES / "arith" / "config.yaml").read_text().replace("input.eqr", str(EXAMPLES / "arith" /
                                                                                                "input.eqr"))
                      .replace("validate: true", "") + section)
    code, out, err = run_cli("run", config, "--output", tmp_path / "o", "--quiet", *flags)
    report = json.loads((tmp_path / "o" / "report.json").read_text())
    assert code == 0 and report["effective_config"]["validate"] == effective, out + err
    assert ("validate" in report["config"]) == bool(section)  # `config`: the file as written


def test_version_and_a_mistyped_key_gets_the_closest_one(tmp_path, run_cli, capfd):
    from eqdsl.cli import main

    with pytest.raises(SystemExit) as done:
        main(["--version"])
    assert done.value.code == 0 and capfd.readouterr().out.startswith("eqdsl ")
    (tmp_path / "c.yaml").write_text("ruleset: arith\nprogram: x.eqr\nschedule: {iter_limt: 3}\n")
    code, _, err = run_cli("run", tmp_path / "c.yaml")
    assert code == 2 and "schedule.iter_limt" in err and "did you mean 'iter_limit'?" in err


def test_a_program_over_20_nodes_is_summarised_not_printed(tmp_path, run_cli):
    code, out, err = run_let_chain(tmp_path, run_cli, "mul({prev}, num(1))", 24,
                                   "schedule: {iter_limit: 3}\nextract: {method: greedy}\noutput: out\n")
    assert code == 0, err
    assert "mul(" not in out  # not the program itself
    assert 'program optimized: 1 nodes' not in out and "root var" in out  # mul-one folds it to var("a"): printed
    code, out, err = run_let_chain(tmp_path, run_cli, "mul({prev}, num(1))", 24,
                                   "schedule: {iter_limit: 0}\nextract: {method: greedy}\noutput: out2\n")
    assert code == 0, err
    assert "program optimized: 26 nodes (the input 26), in optimized.eqr in the output folder; operators: the same " \
           "counts" in out and "mul(" not in out


def test_the_summary_names_the_rules_whose_right_sides_the_result_holds():
    from eqdsl.frontend import load_language, load_program_text
    from eqdsl.ir.builder import new_nodes
    from eqdsl.ir.matching import built_by

    lang = load_language("arith")
    before = load_program_text('program p:\n  root div(mul(var("a"), num(2)), num(3))\n', "p.eqr", lang)["p"]
    after = load_program_text('program q:\n  root div(shl(var("a"), 1), num(3))\n', "q.eqr", lang)["q"]
    assert [after.nodes[i].op for i in new_nodes(before, after)] == ["shl", "div"]
    # shl(?x, 1) is mul-two's right side; the new div (an operand changed) is no rule's right side
    assert built_by(lang.rules, after, new_nodes(before, after)) == {"mul-two": 1}
