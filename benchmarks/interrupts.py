"""SIGINT at random moments (issue 12's bar): every run must exit 130 within 2 s, never hang,
abort or leave a result behind.

Three workloads, each in a fresh temporary folder: saturation (the 16-term associative-commutative
sum, examples/acsum), CP-SAT (a 2,000-class cyclic e-graph CP-SAT cannot prove in 30 s), verify
(every TASO rule). The signal lands uniformly in [0.5, 12] s after the start.

    .venv/bin/python benchmarks/interrupts.py --runs 50 --seed 0
"""
from __future__ import annotations

import argparse
import json
import random
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
from test_reliability import hard_egraph  # noqa: E402

EQDSL = [sys.executable, "-m", "eqdsl.cli"]
WORKLOADS = {
    "saturation": lambda d: ["run", str(ROOT / "examples/acsum/config.yaml"), "--output", str(d / "out")],
    "cpsat": lambda d: ["extract", str(d / "g.json"), "--time-limit", "120", "--out", str(d / "c.json")],
    "verify": lambda d: ["verify", "tensat", "--examples", "100"],
}


def one_run(kind: str, delay: float) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp)
        if kind == "cpsat":
            (d / "g.json").write_text(json.dumps(hard_egraph(2000)))
        proc = subprocess.Popen(EQDSL + WORKLOADS[kind](d), cwd=d, stdout=subprocess.DEVNULL,
                                stderr=subprocess.PIPE, text=True)
        time.sleep(delay)
        finished_before = proc.poll() is not None
        sent = time.monotonic()
        proc.send_signal(signal.SIGINT)
        try:
            _, err = proc.communicate(timeout=10)
            latency, code = time.monotonic() - sent, proc.returncode
        except subprocess.TimeoutExpired:
            proc.kill()
            _, err = proc.communicate()
            latency, code = float("inf"), "hang"
        left = sorted(p.name for p in d.iterdir() if p.name != "g.json")
        return {"kind": kind, "delay": round(delay, 2), "code": code, "latency_s": round(latency, 3),
                "finished_before_signal": finished_before, "left": left, "traceback": "Traceback" in err}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=50)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    rng = random.Random(args.seed)
    rows = []
    for i in range(args.runs):
        kind = list(WORKLOADS)[i % len(WORKLOADS)]
        row = one_run(kind, rng.uniform(0.5, 12.0))
        rows.append(row)
        print(json.dumps(row), flush=True)
    interrupted = [r for r in rows if not r["finished_before_signal"]]
    good = [r for r in interrupted if r["code"] == 130 and r["latency_s"] < 2 and not r["left"]
            and not r["traceback"]]
    worst = max((r["latency_s"] for r in interrupted), default=0)
    print(f"{len(good)}/{len(interrupted)} interrupted runs exited 130 within 2 s with nothing left "
          f"behind (worst latency {worst:.3f} s); {len(rows) - len(interrupted)} had finished before "
          "the signal")


if __name__ == "__main__":
    main()
