"""Issue 12's defects, one regression test each: output safety, interrupts, memory budget,
CLI flag validation, diagnostics."""
from __future__ import annotations

import json
import os
import random
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import EXAMPLES, ROOT

EQDSL = [sys.executable, "-m", "eqdsl"]


def _arith_copy(folder: Path) -> Path:
    for f in ("config.yaml", "input.eqr"):
        shutil.copy(EXAMPLES / "arith" / f, folder / f)
    (folder / "notes.txt").write_text("my notes\n")
    return folder / "config.yaml"


def _listing(folder: Path) -> dict[str, str]:
    return {p.name: p.read_text() for p in folder.iterdir() if p.is_file()}


def test_output_dot_is_refused_and_nothing_is_touched(tmp_path, run_cli, monkeypatch):
    config = _arith_copy(tmp_path)
    before = _listing(tmp_path)
    monkeypatch.chdir(tmp_path)
    code, _, err = run_cli("run", config, "--output", ".", "--quiet")
    assert code == 2 and "it is the current directory" in err
    assert _listing(tmp_path) == before


@pytest.mark.parametrize("output", ["..", "sub/.."])
def test_output_above_the_current_directory_is_refused(tmp_path, run_cli, monkeypatch, output):
    config = _arith_copy(tmp_path)
    (tmp_path / "sub").mkdir()
    monkeypatch.chdir(tmp_path / "sub")
    code, _, err = run_cli("run", config, "--output", output, "--quiet")
    assert code == 2 and "refusing to write results" in err
    assert (tmp_path / "notes.txt").read_text() == "my notes\n"


def test_output_folder_holding_an_input_is_refused(tmp_path, run_cli, monkeypatch):
    config = _arith_copy(tmp_path / "")
    monkeypatch.chdir(ROOT)
    code, _, err = run_cli("run", config, "--output", tmp_path, "--quiet")
    assert code == 2 and "contains the input" in err


def test_a_users_folder_is_never_replaced_without_force(tmp_path, run_cli):
    config = _arith_copy(tmp_path)
    keep = tmp_path / "keep"
    keep.mkdir()
    (keep / "notes.txt").write_text("precious\n")
    code, _, err = run_cli("run", config, "--output", keep, "--quiet")
    assert code == 2 and "holds files eqdsl did not write (notes.txt)" in err
    assert (keep / "notes.txt").read_text() == "precious\n"
    code, _, err = run_cli("run", config, "--output", keep, "--quiet", "--force")
    assert code == 0 and (keep / "report.json").exists() and "--force kept 1 file(s)" in err
    assert (keep / "notes.txt").read_text() == "precious\n"  # --force never deletes a user's file


def test_eqdsl_replaces_its_own_output_and_leaves_no_scratch(tmp_path, run_cli):
    config = _arith_copy(tmp_path)
    out = tmp_path / "res"
    for _ in range(2):
        code, _, _ = run_cli("run", config, "--output", out, "--quiet")
        assert code == 0
    assert sorted(p.name for p in out.iterdir()) == [".eqdsl-output", "egraph.json", "optimized.eqr",
                                                     "report.json"]
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".res.")]
    assert out.stat().st_mode & 0o777 == 0o777 & ~_umask()  # not mkdtemp's 0700


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def test_output_naming_a_file_is_an_error_before_the_run(tmp_path, run_cli):
    config = _arith_copy(tmp_path)
    (tmp_path / "afile").write_text("x")
    code, _, err = run_cli("run", config, "--output", tmp_path / "afile", "--quiet")
    assert code == 2 and "found a file" in err and "Traceback" not in err


@pytest.mark.parametrize("argv, expected", [
    (["verify", "arith", "--examples", "0"], "expected an integer ≥ 1"),
    (["extract", "g.json", "--time-limit", "-1"], "argument --time-limit: expected a number > 0, got '-1'"),
    (["extract", "g.json", "--workers", "0"], "argument --workers: expected an int ≥ 1, got '0'"),
    (["extract", "g.json", "--time-limit", "nan"], "argument --time-limit: expected a number > 0, got 'nan'"),
    (["extract", "g.json", "--time-limit", ".nan"], "argument --time-limit: expected a number > 0, got '.nan'"),
    (["extract", "g.json", "--acyclic", "cyclic"], "argument --acyclic: expected one of hybrid, order, lazy"),
])
def test_cli_flags_are_validated(argv, expected, capfd):
    from eqdsl.cli import main

    with pytest.raises(SystemExit) as info:
        main(argv)
    assert info.value.code == 2 and expected in capfd.readouterr().err


def test_extract_out_in_a_missing_folder_is_an_error(tmp_path, run_cli):
    graph = tmp_path / "g.json"
    graph.write_text('{"nodes": {"a": {"op": "a", "eclass": "c", "children": []}}, "root_eclasses": ["c"]}')
    code, _, err = run_cli("extract", graph, "--out", tmp_path / "nodir" / "x.json")
    assert code == 2 and "does not exist" in err and "Traceback" not in err
    (tmp_path / "mine.json").write_text("user data")
    code, _, err = run_cli("extract", graph, "--out", tmp_path / "mine.json")
    assert code == 2 and "already exists" in err and (tmp_path / "mine.json").read_text() == "user data"


def test_empty_eqr_and_digit_after_hyphen(tmp_path, run_cli):
    (tmp_path / "empty.eqr").write_text("")
    code, _, err = run_cli("check", tmp_path / "empty.eqr")
    assert code == 2 and "empty.eqr:1:1" in err and "declares nothing" in err
    (tmp_path / "h.eqr").write_text("language h\nsort N\nop a() -> N\nrule poolavg-1x1-relu: a() => a()\n"
                                    "cost a = 1\n")
    code, out, _ = run_cli("check", tmp_path / "h.eqr")
    assert code == 0 and "1 rule(s)" in out


def test_verify_draws_edge_values(tmp_path, run_cli):
    """div(?x, ?x) => num(1) without its `if ?x != num(0)` passed 1,000 normal draws."""
    (tmp_path / "d.eqr").write_text("language d\nsort Num\nop num(v: Int) -> Num\nop var(name: Str) -> Num\n"
                                    "op div(a: Num, b: Num) -> Num\nrule div-self: div(?x, ?x) => num(1)\n"
                                    "cost num, var = 0\ncost div = 1\n")
    (tmp_path / "d_ref.py").write_text("from eqdsl.languages.arith.semantics import SEMANTICS\n")
    code, out, _ = run_cli("verify", tmp_path / "d.eqr", "--rule", "div-self", "--examples", "200")
    assert code == 1 and "FAIL    div-self" in out and "?x = 0." in out and "reproduce: eqdsl verify" in out
    code, out, _ = run_cli("verify", "arith", "--rule", "div-self", "--examples", "200")
    assert code == 0


def test_verify_reports_a_shape_mismatch_as_such(tmp_path, run_cli):
    (tmp_path / "t.eqr").write_text(
        "language t\nsort M { shape: [Int] }\nop input(name: Str, rows: Int, cols: Int) -> M\nop t(x: M) -> M\n"
        "shape input(name, rows, cols) = [rows, cols]\nshape t(x) = [x[1], x[0]]\nrule bad-t: t(?x) => ?x\n"
        "cost input = 0\ncost t = 1\n")
    (tmp_path / "t_ref.py").write_text("import numpy as np\nfrom eqdsl.verify.semantics import Leaf\n"
                                       "SEMANTICS = {'input': Leaf(lambda n, r, c: (r, c)), 't': np.transpose}\n")
    code, out, _ = run_cli("verify", tmp_path / "t.eqr", "--rule", "bad-t", "--examples", "50")
    assert code == 1 and "different shapes" in out and "max error inf" in out


ACSUM = EXAMPLES / "acsum" / "config.yaml"


def test_memory_limit_stops_an_iteration_and_the_run_goes_on(tmp_path):
    """In a fresh `eqdsl` process, as users run it (pytest's own memory would count otherwise)."""
    config = tmp_path / "c.yaml"
    config.write_text(ACSUM.read_text().replace("memory_limit_mb: 4096", "memory_limit_mb: 200")
                      .replace("ruleset: acsum.eqr", f"ruleset: {EXAMPLES / 'acsum' / 'acsum.eqr'}"))
    done = subprocess.run(EQDSL + ["run", str(config), "--output", str(tmp_path / "out")], cwd=tmp_path,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "stopped: memory limit" in done.stdout and "(rolled back: memory limit)" in done.stderr
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    assert report["schedule"]["stop_reason"] == "memory limit"
    assert report["schedule"]["iterations"][-1]["rollback_reason"] == "memory limit"


def _start(argv: list[str], cwd: Path) -> subprocess.Popen:
    return subprocess.Popen(EQDSL + argv, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def test_sigint_during_saturation_stops_within_two_seconds_and_writes_nothing(tmp_path):
    proc = _start(["run", str(ACSUM), "--output", str(tmp_path / "out")], tmp_path)
    time.sleep(8)  # well inside iteration 5/6 of the 16-term sum
    sent = time.monotonic()
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 130 and time.monotonic() - sent < 2.0
    assert "interrupted" in err and "Traceback" not in err
    assert list(tmp_path.iterdir()) == []


def hard_egraph(n: int, seed: int = 0) -> dict:
    """Random classes of three nodes whose children are anywhere (cycles everywhere); node 0 of
    each class points below it, so acyclic programs exist. CP-SAT cannot prove 2,000 classes in 30 s."""
    rng = random.Random(seed)
    nodes = {}
    for c in range(n):
        for k in range(3):
            kids = [] if c < 20 else [f"c{rng.randrange(c) if k == 0 else rng.randrange(n)}__0" for _ in range(2)]
            nodes[f"c{c}__{k}"] = {"op": "f", "eclass": f"c{c}", "children": kids, "cost": rng.randint(1, 100)}
    return {"nodes": nodes, "root_eclasses": [f"c{n - 1}", f"c{n - 2}", f"c{n // 2}"]}


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_signal_during_cpsat_stops_within_two_seconds(tmp_path, sig):
    (tmp_path / "g.json").write_text(json.dumps(hard_egraph(2000)))
    proc = _start(["extract", "g.json", "--extractor", "cpsat", "--time-limit", "120", "--out", "c.json"],
                  tmp_path)
    time.sleep(4)
    sent = time.monotonic()
    proc.send_signal(sig)
    proc.communicate(timeout=30)
    assert proc.returncode == 130 and time.monotonic() - sent < 2.0
    assert not (tmp_path / "c.json").exists()


def test_deep_terms_are_a_diagnostic_and_deep_results_print_with_lets(tmp_path, run_cli, monkeypatch):
    from eqdsl.diagnostics import EqdslError
    from eqdsl.frontend.parse import parse_text

    deep = 'var("a")'
    for _ in range(5000):
        deep = f'div({deep}, var("b"))'
    with pytest.raises(EqdslError, match="nested too deeply"):
        parse_text(f"program p:\n  root {deep}\n", "deep.eqr")
    lines = ["program main:", '  let v0 = var("a")']
    lines += [f'  let v{i} = div(v{i - 1}, var("b"))' for i in range(1, 400)] + ["  root v399"]
    (tmp_path / "in.eqr").write_text("\n".join(lines) + "\n")
    (tmp_path / "c.yaml").write_text("ruleset: arith\nprogram: in.eqr\nschedule: {iter_limit: 1}\n"
                                     "extract: {method: greedy, compare: []}\noutput: out\n")
    monkeypatch.chdir(tmp_path)
    code, _, err = run_cli("run", "c.yaml", "--quiet")
    assert code == 0, err
    assert (tmp_path / "out" / "optimized.eqr").read_text().count("let ") >= 400 // 16


def test_verify_leaves_nothing_in_the_current_folder(tmp_path):
    """A fresh process (inside pytest, Hypothesis's storage is already pytest's)."""
    done = subprocess.run(EQDSL + ["verify", "tensat", "--examples", "3"], cwd=tmp_path, capture_output=True,
                          text=True, timeout=120, env={k: v for k, v in os.environ.items()
                                                       if k != "HYPOTHESIS_STORAGE_DIRECTORY"})
    assert done.returncode == 0 and list(tmp_path.iterdir()) == []


def test_time_limit_stops_an_iteration_inside_it(tmp_path):
    """The 16-term sum's fifth iteration runs for seconds: a 1 s limit stops it inside (it needs 2-3 s alone)."""
    config = tmp_path / "c.yaml"
    config.write_text(ACSUM.read_text().replace("time_limit_s: 60", "time_limit_s: 1")
                      .replace("memory_limit_mb: 4096", "memory_limit_mb: 16384")
                      .replace("ruleset: acsum.eqr", f"ruleset: {EXAMPLES / 'acsum' / 'acsum.eqr'}"))
    done = subprocess.run(EQDSL + ["run", str(config), "--output", str(tmp_path / "out"), "--quiet"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    schedule = json.loads((tmp_path / "out" / "report.json").read_text())["schedule"]
    assert schedule["stop_reason"] == "time limit"
    assert schedule["iterations"][-1]["rollback_reason"] == "time limit"
    assert schedule["seconds"] < 1 + 1.0


def _check_refuses(tmp_path, run_cli, text: str, where: str, rule: str) -> str:
    """`eqdsl check` on `text` exits 2, naming `rule` at `where` as unioning different shapes."""
    (tmp_path / "t.eqr").write_text(text)
    code, _, err = run_cli("check", tmp_path / "t.eqr")
    assert code == 2 and f"t.eqr:{where}" in err and f"rule {rule} unions terms of different shapes" in err
    return err


def test_check_reports_a_rule_that_changes_the_shape(tmp_path, run_cli):
    _check_refuses(tmp_path, run_cli,
                   "language t\nsort M { shape: [Int] }\nop input(name: Str, rows: Int, cols: Int) -> M\n"
                   "op t(x: M) -> M\nshape input(name, rows, cols) = [rows, cols]\nshape t(x) = [x[1], x[0]]\n"
                   "rule bad-t: t(?x) => ?x\ncost input = 0\ncost t = 1\n", "7:1", "bad-t")
    for shipped in ("arith", "tensat", "qgym"):  # no false alarm on the shipped rules
        assert run_cli("check", shipped)[0] == 0


def test_check_probes_a_multi_pattern_rules_where_and_conditions(tmp_path, run_cli):
    """TASO's m05 with its split point taken from the wrong weight: the sizes verify would draw
    (meeting the `where` and conditions) give the first left pattern another shape than its
    right side; `check` says so before any run. TASO's own m05..m15 raise no alarm (above)."""
    err = _check_refuses(tmp_path, run_cli,
                         "language m\ninclude tensor\nrule bad-merge:\n    matmul(0, ?t1, ?t4),\n"
                         "    matmul(0, ?t1, ?t5)\n => split0(split(1, k, matmul(0, ?t1, concat(1, ?t4, ?t5)))),\n"
                         "    split1(split(1, k, matmul(0, ?t1, concat(1, ?t4, ?t5))))\n    where k = shape(?t5)[1]\n",
                         "3:1", "bad-merge")
    assert "left pattern 1 has shape" in err


def test_files_added_during_a_run_are_never_replaced(tmp_path):
    from eqdsl.output import MARKER, Scratch, check_output

    out = tmp_path / "res"
    out.mkdir()
    (out / MARKER).write_text("")
    check_output(out)  # eqdsl's folder: replaceable when the run starts
    scratch = Scratch(out)
    (scratch.new / "report.json").write_text("{}")
    (out / "notes.txt").write_text("written while the run was going")
    assert scratch.publish() == tmp_path / "res-1"
    scratch.discard()
    assert (out / "notes.txt").read_text() == "written while the run was going"
    assert (tmp_path / "res-1" / "report.json").exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["res", "res-1"]


def test_every_flag_and_positional_argument_has_help_text():
    import argparse

    from eqdsl.cli import build_parser

    missing = []

    def walk(parser: argparse.ArgumentParser, path: str) -> None:
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for name, sub in action.choices.items():
                    walk(sub, f"{path} {name}")
            elif not isinstance(action, argparse._HelpAction) and not action.help:
                missing.append(f"{path}: {'/'.join(action.option_strings) or action.dest}")

    walk(build_parser(), "eqdsl")
    assert not missing


def test_the_command_answers_stop_signals_before_its_first_import():
    import eqdsl.__main__ as command
    from eqdsl.worker import STOP_SIGNALS

    assert command._STARTING_SIGNALS == STOP_SIGNALS
    source = Path(command.__file__).read_text()
    before = source[:source.index("signal.signal(_s, _stopped_while_starting)")]
    imports = [line for line in before.splitlines() if line.startswith(("import ", "from "))]
    assert imports == ["import os", "import signal", "import sys"]  # loaded with the interpreter


WEDGED_BY_INTERRUPT = """
import os, signal, sys, threading
from eqdsl import worker
worker.STOP_GRACE_S = 0.5
try:
    with worker.stop_signals_interrupt():
        threading.Thread(target=threading.Event().wait).start()  # non-daemon: exit would wait for it
        os.kill(os.getpid(), signal.SIGINT)
        threading.Event().wait(10)
except worker.Interrupted:
    sys.exit(0)  # the interpreter now waits for the thread, forever
"""


def test_an_interrupt_that_wedges_the_exit_still_ends_in_130():
    started = time.monotonic()
    proc = subprocess.run([sys.executable, "-c", WEDGED_BY_INTERRUPT], capture_output=True, text=True, timeout=30)
    assert proc.returncode == 130 and time.monotonic() - started < 10
    assert "did not end within 0.5 s" in proc.stderr and "Traceback" not in proc.stderr


def test_a_stop_signal_ignored_at_start_stays_ignored(tmp_path):
    """`nohup` and a script's background jobs start commands with SIGINT ignored: eqdsl keeps it so,
    as Python itself does, and only SIGTERM stops it."""
    def ignore_sigint() -> None:
        signal.signal(signal.SIGINT, signal.SIG_IGN)

    proc = subprocess.Popen(EQDSL + ["run", str(ACSUM), "--output", str(tmp_path / "out")], cwd=tmp_path,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, preexec_fn=ignore_sigint)
    time.sleep(5)
    proc.send_signal(signal.SIGINT)
    time.sleep(1)
    assert proc.poll() is None
    proc.send_signal(signal.SIGTERM)
    proc.communicate(timeout=30)
    assert proc.returncode == 130 and list(tmp_path.iterdir()) == []


def test_the_installed_command_is_the_launcher_and_runs():
    """bin/eqdsl starts Python without `site` and answers stop signals first (see the file)."""
    command = Path(sys.executable).parent / "eqdsl"
    assert command.read_text() == (ROOT / "bin" / "eqdsl").read_text()
    done = subprocess.run([str(command), "check", str(ROOT / "rulesets" / "arith.eqr")], capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert "usage: eqdsl" in subprocess.run([str(command), "--bogus"], capture_output=True, text=True).stderr
