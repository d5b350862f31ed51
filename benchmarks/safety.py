"""Issue 42's goals, measured: user files lost, limits held, sweeps that lose a task.

Parts (`--parts files,limits,sweep`):
- files: a sandbox (a fake $HOME, a project whose ruleset includes `common/base.eqr`, a target
  YAML, an ONNX model with its weights, a user's folder, a symlink to it, an earlier eqdsl output)
  and `eqdsl run` into every output path × with and without `--force`; every file is hashed
  before and after: lost = a file that existed before and is gone or changed (eqdsl's own results
  excepted). Filesystem roots and mount points are tried too (the run must be refused).
- limits: examples/acsum (a 16-term associative-commutative sum whose iterations grow without
  end) under `saturate`, `pulsed`, `mcts` and in a one-task sweep, once held by
  `memory_limit_mb` and once by `time_limit_s`. The peak RSS of the e-graph process (the largest
  process of the command's tree, sampled every 10 ms from /proc) and the schedule's seconds are
  compared with the limits.
- sweep: four acsum tasks, two at once; one task's whole lineage is SIGKILLed mid-run: that task
  is recorded failed, the other three finish.

    .venv/bin/python benchmarks/safety.py [--parts files,limits,sweep] [--memory-mb 500] [--time-s 10]
        [--schedules saturate,pulsed,mcts] [--trials 5]
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))
from interrupts import alive, descendants, stat_fields  # noqa: E402

EQDSL = [sys.executable, "-m", "eqdsl"]
ACSUM = (ROOT / "examples/acsum/config.yaml").read_text().replace(
    "ruleset: acsum.eqr", f"ruleset: {ROOT / 'examples/acsum/acsum.eqr'}").replace("validate: true", "validate: false")


# ---- files ------------------------------------------------------------------------------------

def _sandbox(root: Path) -> tuple[Path, Path]:
    home, proj = root / "home", root / "proj"
    for folder in (home / "docs", proj / "common", proj / "tgt", proj / "keep", proj / "model"):
        folder.mkdir(parents=True)
    (home / ".profile").write_text("export PATH\n")
    (home / "docs" / "thesis.txt").write_text("years of work\n")
    (proj / "common" / "base.eqr").write_text("include arith\n")
    (proj / "mine.eqr").write_text('include "common/base.eqr"\n')
    shutil.copy(ROOT / "examples/arith/input.eqr", proj / "input.eqr")
    (proj / "tgt" / "mytarget.yaml").write_text("name: mine\nparams: {bandwidth: 1}\n")
    (proj / "config.yaml").write_text("ruleset: mine.eqr\nprogram: input.eqr\ntarget: tgt/mytarget.yaml\n"
                                      "schedule: {iter_limit: 5}\nextract: {method: greedy-dag}\n")
    (proj / "keep" / "notes.txt").write_text("precious\n")
    (proj / "keep" / "report.json").write_text('{"mine": true}\n')
    for name in USER_RESULT_NAMES:  # every name some stage writes (issue 60: --force overwrote these)
        (proj / "keep" / name).write_text(f"the user's own {name}\n")
    (proj / "link").symlink_to(proj / "keep")
    _onnx_model(proj / "model")
    (proj / "onnx.yaml").write_text("ruleset: tensat\nprogram: {onnx: model/m.onnx}\ntarget: t4\n"
                                    "schedule: {iter_limit: 2}\nextract: {method: greedy-dag, candidates: 3}\n"
                                    "report: html\n")
    subprocess.run(EQDSL + ["run", "config.yaml", "--output", "earlier", "--quiet"], cwd=proj, check=True,
                   env={**os.environ, "HOME": str(home)}, capture_output=True)
    return home, proj


def _onnx_model(folder: Path) -> None:
    subprocess.run(EQDSL + ["export", "onnx", "--builder", "nasrnn", "-o", str(folder / "m.onnx")],
                   check=True, capture_output=True)


def _hashes(root: Path) -> dict[str, str]:
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in root.rglob("*") if p.is_file() and not p.is_symlink()}


USER_RESULT_NAMES = ("report.html", "candidate-2.onnx", "candidate-3.onnx", "written.onnx", "optimized.onnx")
OUTPUTS = ["new-results", "nested/a/b", "earlier", "keep", "link", "common", "tgt", "model", ".", "..",
           "input.eqr", "~", "~/x", "~/docs", "{home}", "{root}"]
SYSTEM = ["/", "/proc", "/dev", "/sys"]


def files_part() -> list[dict]:
    rows = []
    for output in OUTPUTS + SYSTEM:
        for force in (False, True):
            for config in ("config.yaml", "onnx.yaml") if output in ("model", "new-results", "keep") else ("config.yaml",):
                rows.append(_one_output(output, force, config))
                print(json.dumps(rows[-1]), flush=True)
    return rows


def _one_output(output: str, force: bool, config: str) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        home, proj = _sandbox(root)
        where = output.format(home=home, root=root)
        before = _hashes(root)
        done = subprocess.run(EQDSL + ["run", config, "--output", where, "--quiet"] + (["--force"] if force else []),
                              cwd=proj, env={**os.environ, "HOME": str(home)}, capture_output=True, text=True)
        after = _hashes(root)
        ours = {k for k in before if k.startswith("proj/earlier/")}  # eqdsl's own results
        lost = sorted(k for k, h in before.items() if k not in ours and after.get(k) != h)
        return {"output": output, "force": force, "config": config, "code": done.returncode, "lost": lost,
                "replaced_by_name": [k for k in lost if Path(k).name in ("report.json", *USER_RESULT_NAMES)],
                "message": done.stderr.strip().splitlines()[-1][:160] if done.stderr.strip() else ""}


# ---- limits -----------------------------------------------------------------------------------

SCHEDULES = {
    "saturate": "kind: saturate",
    "pulsed": "kind: pulsed\n  epochs: 10\n  explore_iter: 30\n  epoch_extract: greedy-dag",
    "mcts": "kind: mcts\n  budget: 64\n  max_sim_steps: 10\n  main_extract: greedy-dag",
}


class PeakSampler(threading.Thread):
    """The largest RSS of any process of `pid`'s tree, and the tree's summed PSS, every 10 ms."""

    def __init__(self, pid: int) -> None:
        super().__init__(daemon=True)
        self.pid, self.peak_rss, self.peak_pss, self.done = pid, 0, 0, False

    def run(self) -> None:
        while not self.done:
            tree = descendants(self.pid) | {self.pid}
            self.peak_rss = max([self.peak_rss] + [_kb(p, "statm") for p in tree])
            self.peak_pss = max(self.peak_pss, sum(_kb(p, "pss") for p in tree))
            time.sleep(0.01)


def _kb(pid: int, what: str) -> int:
    try:
        if what == "statm":
            return int(Path(f"/proc/{pid}/statm").read_text().split()[1]) * os.sysconf("SC_PAGE_SIZE") // 1024
        for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
            if line.startswith("Pss:"):
                return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        pass
    return 0


def _limited_config(schedule: str, memory_mb: int, time_s: float) -> str:
    lines = [f"  {line}" for line in SCHEDULES[schedule].replace("\n  ", "\n").splitlines()]
    lines += ["  node_limit: 2000000", f"  time_limit_s: {time_s}", f"  memory_limit_mb: {memory_mb}"]
    if schedule == "saturate":
        lines.append("  iter_limit: 30")
    return (f"ruleset: {ROOT / 'examples/acsum/acsum.eqr'}\nschedule:\n" + "\n".join(lines)
            + "\nextract: {method: greedy-dag, compare: []}\n")


def limits_part(memory_mb: int, time_s: float, schedules: list[str]) -> list[dict]:
    rows = []
    for schedule in schedules:
        for via in ("run", "sweep"):
            for bound, mem, secs in (("memory", memory_mb, 120.0), ("time", 16384, time_s)):
                rows.append(_one_limit(schedule, via, bound, mem, secs))
                print(json.dumps(rows[-1]), flush=True)
    return rows


def _one_limit(schedule: str, via: str, bound: str, memory_mb: int, time_s: float) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp)
        (d / "c.yaml").write_text(_limited_config(schedule, memory_mb, time_s))
        (d / "s.yaml").write_text("base: c.yaml\noutput: out\n")
        argv = ["run", "c.yaml", "--output", "out", "--quiet"] if via == "run" else ["sweep", "s.yaml"]
        t0 = time.perf_counter()
        proc = subprocess.Popen(EQDSL + argv, cwd=d, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        sampler = PeakSampler(proc.pid)
        sampler.start()
        out, err = proc.communicate()
        wall = time.perf_counter() - t0
        sampler.done = True
        sampler.join()
        stop, schedule_s, extract_s = _outcome(d / "out", via)
        return {"schedule": schedule, "via": via, "bound": bound, "memory_limit_mb": memory_mb,
                "time_limit_s": time_s, "code": proc.returncode, "stop": stop,
                "peak_rss_mb": round(sampler.peak_rss / 1024), "tree_pss_mb": round(sampler.peak_pss / 1024),
                "schedule_s": schedule_s, "extract_s": extract_s, "wall_s": round(wall, 2),
                "error": "" if proc.returncode == 0 else (err or out)[-300:]}


def _outcome(out: Path, via: str) -> tuple[str, float, float]:
    try:
        if via == "run":
            report = json.loads((out / "report.json").read_text())
            stages = report["stages_s"]
            return report["schedule"]["stop_reason"], round(stages["schedule"], 2), round(
                sum(v for k, v in stages.items() if k.startswith("extract")), 2)
        [task] = [json.loads(p.read_text()) for p in (out / "tasks").iterdir()]
        stages = task.get("stages_s", {})
        return task.get("stop", task.get("error", "")[:80]), round(stages.get("schedule", 0), 2), round(
            sum(v for k, v in stages.items() if k.startswith("extract")), 2)
    except (OSError, ValueError, KeyError) as err:
        return f"no result ({type(err).__name__})", 0.0, 0.0


# ---- a sweep losing a task ---------------------------------------------------------------------

def sweep_part(trials: int) -> list[dict]:
    rows = []
    for trial in range(trials):
        with tempfile.TemporaryDirectory() as tmp:
            d = Path(tmp)
            (d / "c.yaml").write_text(ACSUM.replace("time_limit_s: 60", "time_limit_s: 8"))
            (d / "s.yaml").write_text("base: c.yaml\ngrid: {schedule.iter_limit: [27, 28, 29, 30]}\n"
                                      "workers: 2\noutput: out\n")
            proc = subprocess.Popen(EQDSL + ["sweep", "s.yaml"], cwd=d, stdout=subprocess.PIPE,
                                    stderr=subprocess.PIPE, text=True)
            time.sleep(3.0 + trial)
            killed = _kill_one_task(proc.pid)
            out, err = proc.communicate()
            results = [json.loads(p.read_text()) for p in (d / "out" / "tasks").iterdir()]
            rows.append({"trial": trial, "killed_processes": killed, "code": proc.returncode,
                         "ok": sum(r["ok"] for r in results), "failed": sum(not r["ok"] for r in results),
                         "errors": [r["error"][:100] for r in results if not r["ok"]]})
            print(json.dumps(rows[-1]), flush=True)
    return rows


def _kill_one_task(supervisor: int) -> int:
    """SIGKILL one task lineage: a child of the command's worker and everything below it."""
    workers = [p for p in descendants(supervisor) if _ppid(p) == supervisor and _pgid(p) == p]
    tasks = sorted(p for w in workers for p in descendants(w) if _ppid(p) == w)
    if not tasks:
        return 0
    lineage = descendants(tasks[0]) | {tasks[0]}
    for pid in lineage:
        try:
            os.kill(pid, 9)
        except ProcessLookupError:
            pass
    while alive(lineage):
        time.sleep(0.01)
    return len(lineage)


def _ppid(pid: int) -> int:
    fields = stat_fields(pid)
    return -1 if fields is None else int(fields[1])


def _pgid(pid: int) -> int:
    fields = stat_fields(pid)
    return -1 if fields is None else int(fields[2])


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--parts", default="files,limits,sweep")
    ap.add_argument("--memory-mb", type=int, default=500)
    ap.add_argument("--time-s", type=float, default=10.0)
    ap.add_argument("--trials", type=int, default=5)
    ap.add_argument("--schedules", default=",".join(SCHEDULES))
    args = ap.parse_args()
    print(f"# {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}")
    parts = args.parts.split(",")
    if "files" in parts:
        _files_table(files_part())
    if "limits" in parts:
        _limits_table(limits_part(args.memory_mb, args.time_s, args.schedules.split(",")))
    if "sweep" in parts:
        rows = sweep_part(args.trials)
        good = sum(r["failed"] == 1 and r["ok"] == 3 for r in rows)
        print(f"\nsweep: {good}/{len(rows)} trials with exactly the killed task failed and the other 3 ok")


def _files_table(rows: list[dict]) -> None:
    lost = [r for r in rows if r["lost"]]
    print(f"\nfiles: {len(rows)} runs (output × --force × config); {sum(len(r['lost']) for r in rows)} user "
          f"file(s) lost in {len(lost)} run(s)")
    print(f"{'output':14} {'force':5} {'config':11} {'code':>4}  lost / message")
    for r in rows:
        print(f"{r['output'][:14]:14} {str(r['force']):5} {r['config']:11} {r['code']:>4}  "
              f"{r['lost'] or r['message'][:90]}")


def _limits_table(rows: list[dict]) -> None:
    print(f"\n{'schedule':9} {'via':6} {'bound':7} {'limit':>9} {'stop':14} {'peak RSS':>9} {'tree PSS':>9} "
          f"{'schedule s':>10} {'extract s':>9} {'wall s':>7}  goal")
    for r in rows:
        limit = f"{r['memory_limit_mb']} MB" if r["bound"] == "memory" else f"{r['time_limit_s']:g} s"
        met = (r["peak_rss_mb"] <= 1.1 * r["memory_limit_mb"] if r["bound"] == "memory"
               else r["schedule_s"] <= 1.1 * r["time_limit_s"])
        print(f"{r['schedule']:9} {r['via']:6} {r['bound']:7} {limit:>9} {r['stop'][:14]:14} "
              f"{r['peak_rss_mb']:>6} MB {r['tree_pss_mb']:>6} MB {r['schedule_s']:>10} {r['extract_s']:>9} "
              f"{r['wall_s']:>7}  {'met' if met else 'MISSED'}")


if __name__ == "__main__":
    main()
