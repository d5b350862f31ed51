"""Random interrupts of long commands (issue 42's bar): SIGINT, SIGTERM, SIGHUP, SIGQUIT or SIGKILL
sent to the `eqdsl` process at a random moment. Per run: every process of the command (its whole
tree, read from /proc just before the signal) is gone within 2 s, nothing is published after the
signal, no file is left in the run's temporary folder (TMPDIR) or beside the output, no traceback,
and (but for SIGKILL, which no process can answer) exit 130.

Workloads, each in a fresh folder with its own TMPDIR: `run` (the 16-term associative-commutative
sum, examples/acsum, with validation), `sweep` (two acsum tasks at once), `extract` (CP-SAT on a
2,000-class cyclic e-graph it cannot prove in 120 s), `verify` (every TASO rule), `export` (ONNX
export of BERT, 115 MB of weights). The signal lands uniformly in [`--earliest`, `--latest`] s after the
start (0: from the very start, during Python's imports and the config's reading).

    .venv/bin/python benchmarks/interrupts.py --runs 100 --seed 0 [--workloads run,sweep] [--earliest 0.3] [--latest 8]
        [--signals INT]
"""
from __future__ import annotations

import argparse
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
from test_reliability import hard_egraph  # noqa: E402

# the command as users type it (bin/eqdsl, installed beside the interpreter), else `python -m eqdsl`
EQDSL = ([str(Path(sys.executable).parent / "eqdsl")] if (Path(sys.executable).parent / "eqdsl").exists()
         else [sys.executable, "-m", "eqdsl"])
SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT, signal.SIGKILL)
ACSUM = (ROOT / "examples/acsum/config.yaml").read_text().replace(
    "ruleset: acsum.eqr", f"ruleset: {ROOT / 'examples/acsum/acsum.eqr'}")


def _prepare(kind: str, d: Path) -> list[str]:
    """The command line of workload `kind` in the folder `d` (its inputs written there)."""
    if kind == "run":
        (d / "c.yaml").write_text(ACSUM)
        return ["run", "c.yaml", "--output", "out", "--quiet"]
    if kind == "sweep":
        (d / "c.yaml").write_text(ACSUM.replace("validate: true", "validate: false"))
        (d / "s.yaml").write_text("base: c.yaml\ngrid: {schedule.iter_limit: [29, 30]}\nworkers: 2\noutput: out\n")
        return ["sweep", "s.yaml"]
    if kind == "extract":
        (d / "g.json").write_text(json.dumps(hard_egraph(2000)))
        return ["extract", "g.json", "--time-limit", "120", "--out", "out"]
    if kind == "verify":
        return ["verify", "tensat", "--examples", "100"]
    if kind == "export":
        return ["export", "onnx", "--builder", "bert", "-o", "out"]
    raise ValueError(kind)


def stat_fields(pid: int) -> list[str] | None:
    """The fields of /proc/PID/stat after the command name (state, ppid, pgrp, …), or None."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None


def descendants(pid: int) -> set[int]:
    children: dict[int, list[int]] = defaultdict(list)
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and (fields := stat_fields(int(entry.name))) is not None:
            children[int(fields[1])].append(int(entry.name))
    found, todo = set(), [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.add(child)
            todo.append(child)
    return found


def alive(pids: set[int]) -> set[int]:
    """The processes of `pids` that still run (zombies have ended)."""
    return {pid for pid in pids if (fields := stat_fields(pid)) is not None and fields[0] != "Z"}


def one_run(kind: str, sig: signal.Signals, delay: float) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        d, private_tmp = Path(tmp) / "work", Path(tmp) / "tmp"
        d.mkdir()
        private_tmp.mkdir()
        argv = _prepare(kind, d)
        inputs = {p.name for p in d.iterdir()}
        env = {**os.environ, "TMPDIR": str(private_tmp)}
        proc = subprocess.Popen(EQDSL + argv, cwd=d, env=env, stdout=subprocess.DEVNULL,
                                stderr=subprocess.PIPE, text=True, preexec_fn=_as_from_a_terminal)
        time.sleep(delay)
        family = descendants(proc.pid)
        finished_before = proc.poll() is not None
        at_signal = _contents(d / "out")
        sent = time.monotonic()
        proc.send_signal(sig)
        while alive(family | {proc.pid}) and time.monotonic() - sent < 10:
            time.sleep(0.01)
        gone_s = time.monotonic() - sent
        try:
            _, err = proc.communicate(timeout=10)
        except subprocess.TimeoutExpired:  # something kept the command's stderr open: a failure, recorded
            for pid in alive(descendants(proc.pid) | family | {proc.pid}):
                os.kill(pid, signal.SIGKILL)
            _, err = proc.communicate()
            err += "\n<stderr still open 10 s after the process ended: a process outlived the command>"
            gone_s = max(gone_s, 10.0)
        time.sleep(1.0)  # anything still writing would show now
        left = sorted(p.name for p in d.iterdir() if p.name not in inputs and p.name != "out")
        left += sorted(f"TMPDIR/{p.name}" for p in private_tmp.iterdir())
        return {"kind": kind, "signal": sig.name, "delay": round(delay, 2), "code": proc.returncode,
                "started": bool(family), "gone_s": round(gone_s, 3), "finished_before_signal": finished_before,
                "published": _contents(d / "out") != at_signal, "left": left, "traceback": "Traceback" in err}


def _as_from_a_terminal() -> None:
    """Stop signals at their defaults, as a command typed at a terminal gets them: this script run
    as a background job of a non-interactive shell has SIGINT and SIGQUIT ignored, the command
    would inherit that (and rightly keep it), and no signal would be answered."""
    for s in SIGNALS[:-1]:
        signal.signal(s, signal.SIG_DFL)


def _contents(folder: Path) -> dict[str, tuple[int, int]]:
    """(size, mtime) of every file under `folder` (a file itself, or nothing)."""
    files = [folder] if folder.is_file() else list(folder.rglob("*")) if folder.is_dir() else []
    return {str(p): (p.stat().st_size, p.stat().st_mtime_ns) for p in files if p.is_file()}


def ok(row: dict) -> bool:
    """SIGKILL can't be answered; a signal that lands before Python ran eqdsl's first line (no
    process started yet) ends it by the signal's default action: both are fine if nothing is left."""
    code_ok = (row["code"] == 130 or row["signal"] == "SIGKILL"
               or (not row["started"] and row["code"] == -signal.Signals[row["signal"]].value))
    return code_ok and row["gone_s"] < 2 and not row["published"] and not row["left"] and not row["traceback"]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=100, help="runs per workload")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--workloads", default="run,sweep,extract,verify,export")
    ap.add_argument("--latest", type=float, default=8.0, help="the latest signal time, in seconds")
    ap.add_argument("--earliest", type=float, default=0.3, help="the earliest signal time, in seconds")
    ap.add_argument("--signals", help="only these, e.g. INT,TERM (default: INT, TERM, HUP, QUIT, KILL)")
    args = ap.parse_args()
    signals = tuple(getattr(signal, f"SIG{name}") for name in args.signals.split(",")) if args.signals else SIGNALS
    rng = random.Random(args.seed)
    rows = []
    for _ in range(args.runs):
        for kind in args.workloads.split(","):
            row = one_run(kind, rng.choice(signals), rng.uniform(args.earliest, args.latest))
            rows.append(row)
            print(json.dumps(row), flush=True)
    _summary(rows, args)


def _summary(rows: list[dict], args: argparse.Namespace) -> None:
    print(f"\n# {len(rows)} runs, seed {args.seed}, signal in [{args.earliest}, {args.latest}] s")
    print(f"{'workload':10} {'runs':>5} {'interrupted':>11} {'ok':>4} {'worst gone':>10}  failures")
    for kind in args.workloads.split(","):
        mine = [r for r in rows if r["kind"] == kind]
        hit = [r for r in mine if not r["finished_before_signal"]]
        bad = [r for r in hit if not ok(r)]
        worst = max((r["gone_s"] for r in hit), default=0.0)
        what = "; ".join(f"{r['signal']}@{r['delay']}s: code {r['code']}, gone {r['gone_s']} s, "
                         f"published {r['published']}, left {r['left'][:3]}" for r in bad[:3])
        print(f"{kind:10} {len(mine):5} {len(hit):11} {len(hit) - len(bad):4} {worst:9.3f}s  {what or 'none'}")
    per_signal = defaultdict(int)
    for r in rows:
        if not r["finished_before_signal"]:
            per_signal[r["signal"]] += 1
    print("interrupted runs per signal: " + ", ".join(f"{s} {n}" for s, n in sorted(per_signal.items())))


if __name__ == "__main__":
    main()
