"""Data safety and hard limits (issue 42): --force never deletes a user's file, protected places,
`~`, inputs found through includes and targets, killed supervisors, temporary files, limits in
MCTS and sweeps, YAML bombs, disk errors, `--no-ref`."""
from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from interrupts import alive, descendants  # benchmarks/: the process-tree readers

from conftest import EXAMPLES

EQDSL = [sys.executable, "-m", "eqdsl"]


def _arith(folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for f in ("config.yaml", "input.eqr"):
        shutil.copy(EXAMPLES / "arith" / f, folder / f)
    return folder / "config.yaml"


def _tree(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in folder.rglob("*") if p.is_file()}


def test_an_included_ruleset_in_the_output_folder_is_refused_even_with_force(tmp_path, run_cli):
    common = tmp_path / "common"
    common.mkdir()
    (common / "base.eqr").write_text("include arith\n")
    (tmp_path / "mine.eqr").write_text('include "common/base.eqr"\n')
    config = _arith(tmp_path)
    config.write_text(config.read_text().replace("ruleset: arith", "ruleset: mine.eqr"))
    before = _tree(tmp_path)
    code, _, err = run_cli("run", config, "--output", common, "--force", "--quiet")
    assert code == 2 and "contains the input" in err and "base.eqr" in err
    assert _tree(tmp_path) == before


def test_the_target_file_in_the_output_folder_is_refused(tmp_path, run_cli):
    config = _arith(tmp_path)
    (tmp_path / "tgt").mkdir()
    (tmp_path / "tgt" / "mytarget.yaml").write_text("params: {bw: 1}\n")
    config.write_text(config.read_text() + "target: tgt/mytarget.yaml\n")
    code, _, err = run_cli("run", config, "--output", tmp_path / "tgt", "--force", "--quiet")
    assert code == 2 and "contains the input" in err and "mytarget.yaml" in err
    assert (tmp_path / "tgt" / "mytarget.yaml").exists()


@pytest.mark.parametrize("where, why", [("home", "home folder"), ("/", "filesystem root"),
                                        ("/proc", "mount point"), ("/dev", "mount point")])
def test_protected_folders_are_refused_even_with_force(tmp_path, run_cli, monkeypatch, where, why):
    home = tmp_path / "home"
    (home / "keep").mkdir(parents=True)
    (home / ".profile").write_text("mine\n")
    monkeypatch.setenv("HOME", str(home))
    config = _arith(tmp_path / "work")
    monkeypatch.chdir(tmp_path / "work")
    target = home if where == "home" else Path(where)
    code, _, err = run_cli("run", config, "--output", target, "--force", "--quiet")
    assert code == 2 and "refusing to write results" in err and why in err, err
    assert (home / ".profile").read_text() == "mine\n"


def test_tilde_is_written_where_it_is_checked(tmp_path, run_cli, monkeypatch):
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    config = _arith(tmp_path / "work")
    monkeypatch.chdir(tmp_path / "work")
    code, _, err = run_cli("run", config, "--output", "~/res", "--quiet")
    assert code == 0, err
    assert (home / "res" / "report.json").exists() and not (tmp_path / "work" / "~").exists()


def test_force_merges_keeps_user_files_and_drops_only_eqdsls_stale_ones(tmp_path, run_cli):
    config = _arith(tmp_path)
    out = tmp_path / "out"
    out.mkdir()
    (out / "notes.txt").write_text("mine\n")
    (out / "sub").mkdir()
    (out / "sub" / "data.bin").write_bytes(b"\0" * 10)
    for _ in range(2):
        code, _, err = run_cli("run", config, "--output", out, "--force", "--quiet")
        assert code == 0, err
    assert (out / "notes.txt").read_text() == "mine\n" and (out / "sub" / "data.bin").exists()
    assert {"report.json", "optimized.eqr", "egraph.json", ".eqdsl-output"} <= {p.name for p in out.iterdir()}
    assert "report.json" in (out / ".eqdsl-output").read_text()


def test_an_empty_folder_of_the_users_is_written_into_not_replaced(tmp_path, run_cli):
    config = _arith(tmp_path)
    mine = tmp_path / "mine"
    mine.mkdir(mode=0o750)
    before = mine.stat()
    code, _, err = run_cli("run", config, "--output", mine, "--quiet")
    assert code == 0, err
    after = mine.stat()
    assert (after.st_ino, after.st_mode) == (before.st_ino, before.st_mode)
    assert (mine / "report.json").exists() and (mine / ".eqdsl-output").exists()


def test_a_symlinked_output_is_resolved_and_its_target_protected(tmp_path, run_cli):
    config = _arith(tmp_path)
    real = tmp_path / "real"
    real.mkdir()
    (real / "notes.txt").write_text("mine\n")
    (tmp_path / "link").symlink_to(real)
    code, _, err = run_cli("run", config, "--output", tmp_path / "link", "--quiet")
    assert code == 2 and "notes.txt" in err
    assert (tmp_path / "link").is_symlink() and (real / "notes.txt").read_text() == "mine\n"


def test_a_failed_write_is_one_line_and_leaves_no_folders(tmp_path, run_cli, monkeypatch):
    import errno

    import eqdsl.report

    def full_disk(result, scratch):
        raise OSError(errno.ENOSPC, "No space left on device", str(scratch.new / "egraph.json"))

    monkeypatch.setattr(eqdsl.report, "write_outputs", full_disk)
    config = _arith(tmp_path)
    code, _, err = run_cli("run", config, "--output", tmp_path / "a" / "b" / "out", "--quiet")
    assert code == 1 and "No space left on device" in err and "Traceback" not in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["config.yaml", "input.eqr"]


def test_extract_out_onto_an_existing_file_is_refused_before_extracting(tmp_path, run_cli):
    (tmp_path / "taken.json").write_text("mine")
    code, _, err = run_cli("extract", tmp_path / "missing-egraph.json", "--out", tmp_path / "taken.json")
    assert code == 2 and "already exists" in err and "missing-egraph" not in err
    assert (tmp_path / "taken.json").read_text() == "mine"


def test_a_yaml_alias_bomb_is_refused_at_once(tmp_path, run_cli):
    lines = ['a0: &a0 ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    lines += [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 9)}]" for i in range(1, 10)]
    (tmp_path / "bomb.yaml").write_text("\n".join(lines) + "\nruleset: *a9\n")
    t0 = time.perf_counter()
    code, _, err = run_cli("run", tmp_path / "bomb.yaml", "--quiet")
    assert code == 2 and "aliases" in err and time.perf_counter() - t0 < 5
    (tmp_path / "self.yaml").write_text("a: &a [1, *a]\n")
    code, _, err = run_cli("run", tmp_path / "self.yaml", "--quiet")
    assert code == 2 and "recursive alias" in err


def test_a_huge_sweep_grid_is_refused_before_it_expands(tmp_path, run_cli):
    grid = "\n".join(f"  k{i}: [{', '.join(str(v) for v in range(10))}]" for i in range(6))
    (tmp_path / "sweep.yaml").write_text(f"base: {{ruleset: arith}}\ngrid:\n{grid}\n")
    t0 = time.perf_counter()
    code, _, err = run_cli("sweep", tmp_path / "sweep.yaml")
    assert code == 2 and "at most 10,000 tasks" in err and "1,000,000" in err
    assert time.perf_counter() - t0 < 5


def test_no_ref_never_runs_a_rulesets_python(tmp_path, run_cli):
    shutil.copy(EXAMPLES / "acsum" / "acsum.eqr", tmp_path / "acsum.eqr")
    ran = tmp_path / "ran"
    (tmp_path / "acsum_ref.py").write_text(f"open({str(ran)!r}, 'w').close()\nSEMANTICS = {{}}\n")
    code, _, err = run_cli("verify", tmp_path / "acsum.eqr", "--no-ref")
    assert code == 2 and "--no-ref" in err and "acsum_ref.py" in err and not ran.exists()


def test_a_non_eqr_program_path_is_never_read_or_echoed(tmp_path, run_cli):
    secret = tmp_path / "secret.txt"
    secret.write_text("TOPSECRET line\n")
    config = _arith(tmp_path / "cfg")
    config.write_text(f"ruleset: arith\nprogram: {{file: {secret}}}\n")
    code, _, err = run_cli("run", config, "--quiet")
    assert code == 2 and "expected a .eqr program file" in err and "TOPSECRET" not in err


def test_one_dying_task_fails_only_itself(tmp_path, monkeypatch):
    import eqdsl.sweep.run as sweep_run
    from eqdsl.sweep.spec import Sweep, Task

    def work(config, source):
        def run() -> bytes:
            if config["die"]:
                os.kill(os.getpid(), signal.SIGKILL)
            return json.dumps({"ok": True, "value": config["value"]}).encode()
        return run

    monkeypatch.setattr(sweep_run, "task_work", work)
    tasks = [Task(str(i), (), {"die": i == 1, "value": i}) for i in range(4)]
    sweep = Sweep(tmp_path / "s.yaml", tuple(tasks), (), tmp_path / "out", 2, "local", None)
    got: dict[str, dict] = {}
    sweep_run._local(sweep, tasks, lambda task, result: got.__setitem__(task.id, result))
    assert got["1"]["ok"] is False and "SIGKILL" in got["1"]["error"]
    assert [got[k]["value"] for k in ("0", "2", "3")] == [0, 2, 3]


def test_a_sweep_task_is_held_to_its_memory_limit(tmp_path):
    """In a fresh `eqdsl` process, as users run it (pytest's own memory would count otherwise)."""
    base = (EXAMPLES / "acsum" / "config.yaml").read_text().replace("memory_limit_mb: 4096", "memory_limit_mb: 200")
    base = base.replace("ruleset: acsum.eqr", f"ruleset: {EXAMPLES / 'acsum' / 'acsum.eqr'}")
    (tmp_path / "run.yaml").write_text(base.replace("validate: true", "validate: false"))
    (tmp_path / "sweep.yaml").write_text(f"base: run.yaml\noutput: {tmp_path / 'out'}\n")
    done = subprocess.run(EQDSL + ["sweep", str(tmp_path / "sweep.yaml")], capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    [result] = [json.loads(p.read_text()) for p in (tmp_path / "out" / "tasks").iterdir()]
    assert result["stop"] == "memory limit"


def test_mcts_search_is_held_to_the_memory_limit(tmp_path, run_cli):
    (tmp_path / "c.yaml").write_text(
        "ruleset: tensat\nprogram: {builder: nasrnn}\ntarget: a100\n"
        "schedule: {kind: mcts, budget: 4, memory_limit_mb: 64}\nextract: {method: greedy-dag}\n")
    code, _, err = run_cli("run", tmp_path / "c.yaml", "--output", tmp_path / "out", "--quiet")
    assert code == 0, err
    schedule = json.loads((tmp_path / "out" / "report.json").read_text())["schedule"]
    # stopped in the search itself: before, only the step applied after it was guarded (it would
    # show as a rolled-back iteration)
    assert schedule["stop_reason"] == "memory limit" and schedule["iterations"] == []


def _default_stop_signals() -> None:
    """eqdsl keeps a stop signal it was started with ignored (`nohup`, a background job of a
    script): the child gets the default handlers, whatever way the test suite itself was started."""
    for s in (signal.SIGHUP, signal.SIGQUIT, signal.SIGINT, signal.SIGTERM):
        signal.signal(s, signal.SIG_DFL)


def _acsum_config() -> str:
    """examples/acsum (iterations that grow without end) with its ruleset by absolute path."""
    return (EXAMPLES / "acsum" / "config.yaml").read_text().replace(
        "ruleset: acsum.eqr", f"ruleset: {EXAMPLES / 'acsum' / 'acsum.eqr'}")


def _all_gone(family: set[int], tmp_path: Path, within_s: float) -> None:
    """Every process of `family` ended within `within_s`, and nothing but the inputs is left."""
    deadline = time.monotonic() + within_s
    while alive(family) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not alive(family)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["c.yaml", "tmp"]
    assert list((tmp_path / "tmp").iterdir()) == []


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGHUP, signal.SIGQUIT])
def test_killing_eqdsl_takes_the_worker_and_leaves_nothing(tmp_path, sig):
    config = tmp_path / "c.yaml"
    config.write_text(_acsum_config())
    (tmp_path / "tmp").mkdir()
    env = {**os.environ, "TMPDIR": str(tmp_path / "tmp")}
    proc = subprocess.Popen(EQDSL + ["run", str(config), "--output", str(tmp_path / "out"), "--quiet"],
                            cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            preexec_fn=_default_stop_signals)
    deadline = time.monotonic() + 30.0  # start-up takes 1-3 s on this VM, more when it is loaded
    while not (family := descendants(proc.pid)) and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.1)
    assert family, "the worker should be running"
    time.sleep(1.0)  # into the run, not at its first line
    family = descendants(proc.pid)
    os.kill(proc.pid, sig)
    proc.wait(timeout=10)
    _all_gone(family, tmp_path, 2.0)
    if sig != signal.SIGKILL:
        assert proc.returncode == 130 and b"Traceback" not in proc.stderr.read()


def test_killing_eqdsls_whole_group_leaves_no_process_and_the_next_run_sweeps_its_scratch(tmp_path):
    """`kill -9 -PGID` (a shell's `kill -9 %1`) took the janitor too: the worker ran on and ended
    in a BrokenPipeError traceback, and its scratch stayed. The janitor now has a group of its own,
    and a scratch folder whose run is dead is swept by the next run."""
    config = tmp_path / "c.yaml"
    config.write_text(_acsum_config())
    (tmp_path / "tmp").mkdir()
    env = {**os.environ, "TMPDIR": str(tmp_path / "tmp")}
    argv = EQDSL + ["run", str(config), "--output", str(tmp_path / "out"), "--quiet"]
    proc = subprocess.Popen(argv, cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            start_new_session=True)
    deadline = time.monotonic() + 30.0
    while len(descendants(proc.pid)) < 2 and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.1)
    time.sleep(1.0)
    family = descendants(proc.pid)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(timeout=10)
    _all_gone(family, tmp_path, 5.0)
    # a dead run's scratch, as a kill of every process would leave it: swept by the next run
    stale = tmp_path / ".out.eqdsl-dead"
    stale.mkdir()
    (stale / ".eqdsl-output").touch()
    (stale / ".eqdsl-lock").touch()
    (tmp_path / "tmp" / "eqdsl-dead").mkdir()
    (tmp_path / "tmp" / "eqdsl-dead" / ".eqdsl-lock").touch()
    (tmp_path / "tmp" / "eqdsl-notours").mkdir()  # no lock file: not eqdsl's scratch, kept
    config.write_text(config.read_text().replace("validate: true", "validate: false").replace("iter_limit: 30", "iter_limit: 2"))
    done = subprocess.run(EQDSL + ["run", str(config), "--output", str(tmp_path / "out"), "--quiet"],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert not stale.exists() and sorted(p.name for p in (tmp_path / "tmp").iterdir()) == ["eqdsl-notours"]


@pytest.mark.parametrize("argv, mid_run", [
    (["verify", "tensat", "--examples", "100000"], None),
    # the export's own temporary file marks it mid-write (a fixed delay raced it: 3 s in all here)
    (["export", "onnx", "--builder", "bert", "-o", "b.onnx"], ".b.onnx."),
])
def test_interrupted_commands_leave_no_temporary_files(tmp_path, argv, mid_run):
    pytest.importorskip("onnx")
    (tmp_path / "tmp").mkdir()
    env = {**os.environ, "TMPDIR": str(tmp_path / "tmp")}
    proc = subprocess.Popen(EQDSL + argv, cwd=tmp_path, env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE)
    if mid_run is None:
        time.sleep(4.0)
    else:
        deadline = time.monotonic() + 30.0
        while not any(p.name.startswith(mid_run) for p in tmp_path.iterdir()) and time.monotonic() < deadline:
            assert proc.poll() is None, "the command ended before it wrote anything"
            time.sleep(0.01)
    proc.send_signal(signal.SIGINT)
    code = proc.wait(timeout=10)
    said = proc.stderr.read().decode(errors="replace") if proc.stderr else ""
    assert code == 130, said[-3000:]
    assert list((tmp_path / "tmp").iterdir()) == []
    if "stopped after the results were published to" in said:  # the stop came as the file went in
        import onnx

        assert sorted(p.name for p in tmp_path.iterdir()) == ["b.onnx", "tmp"]
        onnx.checker.check_model(str(tmp_path / "b.onnx"))
    else:
        assert "nothing written" in said and sorted(p.name for p in tmp_path.iterdir()) == ["tmp"]


def test_a_stop_during_a_publish_waits_for_it_and_names_what_was_published(tmp_path):
    """The supervisor's side of the status pipe (eqdsl.worker.reports): a publish under way is
    finished, not cut in two, and what it published is named."""
    from eqdsl.worker.reports import StatusReader

    r, w = os.pipe()
    os.write(w, b"publishing\n")
    reader = StatusReader(r)
    reader.drain()
    assert not reader.publish_finished(0.05) and reader.published is None  # still under way
    os.write(w, b'published "/x/b.onnx"\n0\n')
    os.close(w)
    assert reader.publish_finished(1.0) and reader.published == "/x/b.onnx"
    reader.read_to_end()
    assert reader.code == 0
    os.close(r)


@pytest.mark.parametrize("name", ["candidate-2.onnx", "candidate-3.onnx.data", "written.onnx", "report.html"])
def test_force_refuses_a_users_file_with_any_name_a_stage_may_write(tmp_path, run_cli, name):
    """The check knew only the fixed result names: --force overwrote a user's candidate-N.onnx
    and written.onnx, and its "kept" note left them out."""
    config = _arith(tmp_path)
    out = tmp_path / "out"
    out.mkdir()
    (out / name).write_text("mine\n")
    code, _, err = run_cli("run", config, "--output", out, "--force", "--quiet")
    assert code == 2 and name in err and "never overwrites" in err
    assert (out / name).read_text() == "mine\n"


@pytest.mark.parametrize("name", ["written.onnx", "candidate-2.onnx", "report.json"])
def test_force_publishes_beside_a_folder_where_a_result_name_appeared_during_the_run(tmp_path, name):
    from eqdsl.output import Scratch, check_output

    out = tmp_path / "out"
    out.mkdir()
    (out / "notes.txt").write_text("mine\n")
    scratch = Scratch(check_output(out, force=True), force=True)
    (scratch.new / "report.json").write_text("{}")
    (scratch.new / name).write_text("eqdsl's")
    (out / name).write_text("mine\n")  # arrives while the run works
    try:
        written = scratch.publish()
    finally:
        scratch.discard()
    assert written == tmp_path / "out-1" and (out / name).read_text() == "mine\n"
    assert (written / name).read_text() == "eqdsl's"


def test_a_name_added_to_the_marker_by_hand_is_not_eqdsls(tmp_path, run_cli):
    """The marker listed names only: one appended by hand (or a copied old folder's) was
    deleted on a plain re-run. Now each name carries its file's size and modification time."""
    config = _arith(tmp_path)
    out = tmp_path / "out"
    code, _, err = run_cli("run", config, "--output", out, "--quiet")
    assert code == 0, err
    (out / "notes.txt").write_text("mine\n")
    with open(out / ".eqdsl-output", "a") as marker:
        marker.write("notes.txt\n")
    (out / "optimized.eqr").write_text("edited by hand\n")  # listed, but no longer what eqdsl wrote
    code, _, err = run_cli("run", config, "--output", out, "--quiet")
    assert code == 2 and "notes.txt" in err and "optimized.eqr" in err
    assert (out / "notes.txt").read_text() == "mine\n"
    assert (out / "optimized.eqr").read_text() == "edited by hand\n"


def test_a_file_command_never_replaces_a_file_that_appeared_during_its_work(tmp_path):
    """`extract --out`, `import -o`, `export -o` checked the target only before the work."""
    from eqdsl.diagnostics import EqdslError
    from eqdsl.output import FileScratch

    target = tmp_path / "choice.json"
    scratch = FileScratch(target, force=False, flag="--out")
    target.write_text("mine\n")  # arrives while the command works
    written = scratch.write_text("eqdsl's\n")
    scratch.discard()
    assert target.read_text() == "mine\n" and written == tmp_path / "choice-1.json"
    assert written.read_text() == "eqdsl's\n"
    # with --force, a file that was there before the work is replaced, one that arrived is not
    (tmp_path / "old.json").write_text("old\n")
    scratch = FileScratch(tmp_path / "old.json", force=True, flag="--out")
    assert scratch.write_text("new\n") == tmp_path / "old.json"
    scratch.discard()
    assert (tmp_path / "old.json").read_text() == "new\n"
    scratch = FileScratch(tmp_path / "m.onnx", force=True, flag="-o")
    for name in ("m.onnx", "m.onnx.data"):
        (scratch.folder / name).write_text("eqdsl's\n")
    (tmp_path / "m.onnx.data").write_text("mine\n")
    with pytest.raises(EqdslError, match="appeared while eqdsl ran"):
        scratch.publish(["m.onnx", "m.onnx.data"])
    scratch.discard()
    assert (tmp_path / "m.onnx.data").read_text() == "mine\n" and not (tmp_path / "m.onnx").exists()


def test_eqdsl_forks_only_single_threaded_processes_on_a_terminal(tmp_path):
    """Python warns when it forks a multi-threaded process (a thread holding a lock at the fork
    leaves it locked forever in the child). The status line's redraw thread ran through every
    guarded step's fork; it is now stopped and joined first. Run as users run it: on a terminal."""
    import pty
    import select

    config = tmp_path / "c.yaml"
    config.write_text(_acsum_config().replace("iter_limit: 30", "iter_limit: 4")
                      .replace("validate: true", "validate: false"))
    leader, follower = pty.openpty()
    env = {**os.environ, "PYTHONWARNINGS": "always::DeprecationWarning"}
    proc = subprocess.Popen(EQDSL + ["run", str(config), "--output", str(tmp_path / "out")],
                            stdin=follower, stdout=follower, stderr=follower, env=env, cwd=tmp_path)
    os.close(follower)
    seen = b""
    while proc.poll() is None or select.select([leader], [], [], 0.2)[0]:
        if select.select([leader], [], [], 0.2)[0]:
            try:
                seen += os.read(leader, 65536)
            except OSError:  # the terminal closed with the process
                break
    os.close(leader)
    text = seen.decode(errors="replace")
    assert proc.wait(timeout=60) == 0, text[-2000:]
    at = text.find("multi-threaded")
    assert at < 0, text[max(0, at - 600):at + 300]
    assert "iteration 4" in text, text[-2000:]


def test_an_output_through_a_symlink_loop_is_a_clear_error(tmp_path, run_cli):
    """It was a RuntimeError traceback."""
    config = _arith(tmp_path)
    (tmp_path / "loop1").symlink_to(tmp_path / "loop2")
    (tmp_path / "loop2").symlink_to(tmp_path / "loop1")
    for output in ("loop1", "loop1/inner"):
        code, _, err = run_cli("run", config, "--output", tmp_path / output, "--quiet")
        assert code == 2 and "symlink loop" in err and "Traceback" not in err


def test_a_stop_while_a_command_prepares_its_output_removes_the_scratch(tmp_path):
    """A stop that lands after the scratch folder is made and before the command hands it to its
    clean-up (`eqdsl export` under load) removes it too (`cli.main` calls `remove_prepared`)."""
    from eqdsl.output import FileScratch, remove_prepared

    scratch = FileScratch(tmp_path / "b.onnx", False, "--output")
    assert scratch.folder.is_dir()
    remove_prepared()
    assert list(tmp_path.iterdir()) == []


def test_a_file_replaced_atomically_leaves_no_scratch_and_sweeps_a_dead_runs(tmp_path):
    """`replace_atomically` (`fmt --write`, a sweep's tables) writes in a locked scratch folder
    beside the file: nothing is left after it, and the scratch of a run killed mid-write (its
    lock no longer held) is swept by the next write of that file; an unmarked folder of the
    user's with a like name stays."""
    from eqdsl.output import write_file_atomically
    from eqdsl.output.sibling import MARKER
    from eqdsl.worker.locks import LOCK_NAME

    target = tmp_path / "rules.eqr"
    target.write_text("old\n")
    dead = tmp_path / ".rules.eqr.eqdsl-dead1"  # as a SIGKILLed write leaves it
    dead.mkdir()
    (dead / MARKER).touch()
    (dead / LOCK_NAME).touch()
    (dead / "new.eqr").write_text("half")
    users = tmp_path / ".rules.eqr.eqdsl-mine"
    users.mkdir()
    write_file_atomically(target, "new\n")
    assert target.read_text() == "new\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == [".rules.eqr.eqdsl-mine", "rules.eqr"]
