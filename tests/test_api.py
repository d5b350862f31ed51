"""`import eqdsl` as a library (`eqdsl/api.py`): the interface docs/python-api.md promises."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

import eqdsl
from eqdsl import ir
from eqdsl.diagnostics import EqdslError

from conftest import EXAMPLES, ROOT


def test_import_eqdsl_loads_nothing_heavy():
    code = ("import sys, eqdsl; heavy = [m for m in ('egglog', 'ortools', 'numba', 'onnxruntime', 'lark') "
            "if m in sys.modules]; print(heavy)")
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert done.stdout.strip() == "[]", done.stderr


def test_help_and_check_load_no_solver_engine_or_runtime():
    code = ("import sys\nfrom eqdsl.cli import main\ntry:\n    main(sys.argv[1:])\nexcept SystemExit:\n    pass\n"
            "print([m for m in ('egglog', 'ortools', 'numba', 'onnxruntime') if m in sys.modules])")
    for argv in (["--help"], ["check", "rulesets/arith.eqr"]):
        done = subprocess.run([sys.executable, "-c", code, *argv], cwd=ROOT, text=True, capture_output=True,
                              timeout=60, env={**os.environ, "EQDSL_IN_PROCESS": "1"})
        assert done.stdout.strip().splitlines()[-1] == "[]", (argv, done.stdout, done.stderr)


def test_load_program_optimize_and_the_result():
    lang = eqdsl.load("arith")
    assert isinstance(lang, ir.Language) and lang.name == "arith"
    program = eqdsl.program(lang, 'program p:\n  root div(mul(var("a"), num(2)), num(2))\n')
    result = eqdsl.optimize(lang, program, iter_limit=5)
    assert (result.original_cost, result.cost, result.status) == (12.0, 0.0, "optimal")
    assert isinstance(result.program, ir.Program) and 'root var("a")' in result.text
    assert result.report_html().startswith("<!DOCTYPE html>")


def test_a_target_gives_a_languages_params_and_a_file_its_program():
    lang = eqdsl.load(EXAMPLES / "sharing" / "sharing.eqr")
    program = eqdsl.program(lang, Path(EXAMPLES / "sharing" / "input.eqr"))
    assert eqdsl.optimize(lang, program, extractor="greedy").cost > 0
    tensor = eqdsl.load("tensat")
    relu = eqdsl.program(tensor, 'program q:\n  root relu(relu(input("x", [1, 8])))\n')
    with pytest.raises(EqdslError, match="target params"):
        eqdsl.optimize(tensor, relu, iter_limit=2)
    assert eqdsl.optimize(tensor, relu, iter_limit=2, target="t4").cost > 0


@pytest.mark.parametrize("source, name, expected", [
    ("", None, "0 programs"),
    ("program a:\n  root num(1)\nprogram b:\n  root num(2)\n", None, "2 programs (a, b)"),
    ("program a:\n  root num(1)\n", "c", "no program named 'c'"),
    ("program a:\n  root nope(1)\n", None, "unknown operator"),
])
def test_program_says_what_it_found(source, name, expected):
    with pytest.raises(EqdslError) as err:
        eqdsl.program(eqdsl.load("arith"), source, name)
    assert expected in str(err.value.diagnostics[0].message)


def test_an_unknown_attribute_is_an_attribute_error():
    with pytest.raises(AttributeError, match="no attribute 'optimise'"):
        eqdsl.optimise  # noqa: B018


def test_a_term_is_a_program_and_bad_arguments_are_named():
    lang = eqdsl.load("arith")
    assert eqdsl.optimize(lang, 'div(mul(var("a"), num(2)), num(2))', iter_limit=5).cost == 0.0
    for argument, value, expected in [("iter_limit", -1, "an int ≥ 0"), ("node_limit", 0, "an int ≥ 1"),
                                      ("extract_time_s", -1.0, "a number > 0"), ("extractor", "nosuch", "one of")]:
        with pytest.raises(eqdsl.EqdslError, match=rf"optimize\({argument}=\): error: expected {expected}"):
            eqdsl.optimize(lang, 'mul(var("a"), num(2))', **{argument: value})
    with pytest.raises(TypeError, match="expected a program"):
        eqdsl.optimize(lang, None)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="load: expected a .eqr path"):
        eqdsl.load(None)  # type: ignore[arg-type]
    with pytest.raises(eqdsl.EqdslError, match="got an empty name"):
        eqdsl.load(" ")
    assert eqdsl.EqdslError is EqdslError
