"""`eqdsl extract` on e-graph files (extraction-gym's public TENSAT e-graphs, results/extract/*.json),
this checkout beside another one, in one run.

Each file is extracted by `python -m eqdsl extract FILE --extractor cpsat --time-limit T --search S`
for every search named, first from `--baseline` (a checkout of an earlier commit, e.g. made with
`git worktree add /tmp/base COMMIT`) then from this checkout, alternating file by file, `--runs`
times. Seconds are the extractor's own (read from its summary line: pruning, warm start and solve,
not reading the file). Prints one row per run: status, cost, gap, seconds.

Usage: python benchmarks/extraction_gym.py FILE... [--baseline DIR] [--searches auto,hs]
       [--time-limit 60] [--runs 1]
"""
from __future__ import annotations

import argparse
import os
import platform
import re
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent.parent
SUMMARY = re.compile(r"extractor cpsat: cost (\S+), status (\w+)(?:, bound \S+, gap (\S+) %)?, (\S+) s")


def extract(checkout: Path, file: str, search: str, time_limit: float) -> tuple[str, float, str, float]:
    """(status, cost, gap, seconds) from one `eqdsl extract` run of `checkout`'s code."""
    env = {**os.environ, "PYTHONPATH": str(checkout)}
    out = subprocess.run([sys.executable, "-m", "eqdsl", "extract", file, "--extractor", "cpsat",
                          "--time-limit", str(time_limit), "--search", search],
                         cwd=checkout, env=env, capture_output=True, text=True, check=True).stdout
    found = SUMMARY.search(out)
    if found is None:
        raise SystemExit(f"no summary line in the output of {checkout} on {file}:\n{out}")
    cost, status, gap, seconds = found.groups()
    return status, float(cost), gap or "0.00", float(seconds)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("files", nargs="+")
    ap.add_argument("--baseline", type=Path, help="an earlier checkout, run with --search auto")
    ap.add_argument("--searches", default="auto,hs", help="this checkout's searches (comma-separated)")
    ap.add_argument("--time-limit", type=float, default=60.0)
    ap.add_argument("--runs", type=int, default=1)
    args = ap.parse_args()
    print(f"# {platform.node()} {platform.machine()}, python {sys.version.split()[0]}, {os.cpu_count()} cores, "
          f"time limit {args.time_limit:g} s, baseline {args.baseline}")
    print(f"{'file':<28} {'code':<10} {'search':<6} {'status':<9} {'cost':>12} {'gap %':>7} {'seconds':>8}")
    sides = ([(args.baseline.resolve(), "baseline", "auto")] if args.baseline else []) + \
        [(HERE, "this", s) for s in args.searches.split(",")]
    for _ in range(args.runs):
        for file in args.files:
            for checkout, name, search in sides:
                status, cost, gap, seconds = extract(checkout, str(Path(file).resolve()), search, args.time_limit)
                print(f"{Path(file).name:<28} {name:<10} {search:<6} {status:<9} {cost:>12.6g} {gap:>7} "
                      f"{seconds:>8.2f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
