"""Glenside's case studies (issue 19): saturation and extraction seconds, e-graph size, invocations.

    .venv/bin/python benchmarks/glenside.py [--repeat 3]

Runs `eqdsl run examples/glenside/{conv2d,matmul,mlp,matmul-blocked}.yaml` (in separate processes, one after the
other) and reads each report: the pipeline's stage seconds (median over the repeats), the final
e-graph, the systolic-array invocations in the extracted program, and the cost before and after
(cycles on the example's target). Every extracted program is validated against the input.
"""
from __future__ import annotations

import argparse
import json
import re
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
EQDSL = [sys.executable, "-m", "eqdsl"]
CASES = ("conv2d", "matmul", "mlp", "matmul-blocked")


def run_once(case: str, out: Path) -> dict:
    done = subprocess.run([*EQDSL, "run", str(ROOT / "examples" / "glenside" / f"{case}.yaml"),
                           "--output", str(out), "--force"], capture_output=True, text=True, cwd=ROOT)
    if done.returncode != 0:
        raise SystemExit(f"{case}: eqdsl run failed\n{done.stdout}{done.stderr}")
    report = json.loads((out / "report.json").read_text())
    program = (out / "optimized.eqr").read_text()
    stages = report["stages_s"]
    return {"lower": stages["lower"], "saturate": stages["schedule"], "extract": stages["extract:cpsat"],
            "nodes": report["egraph"]["nodes"], "status": report["extractor"]["status"],
            "invocations": len(re.findall(r"systolicArray\w*\(", program)), "dotProd left": program.count("dotProd"),
            "cost": (report["original_cost"], report["best_cost"]), "valid": report["validation"]["ok"]}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    print("| case | e-nodes | lower s | saturate s | extract s | saturate + extract s | invocations | "
          "dotProd left | cost (cycles) before → after | extraction | validated |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as tmp:
        for case in CASES:
            runs = [run_once(case, Path(tmp) / f"{case}{i}") for i in range(args.repeat)]
            med = {k: statistics.median(r[k] for r in runs) for k in ("lower", "saturate", "extract")}
            r = runs[0]
            print(f"| {case} | {r['nodes']} | {med['lower']:.2f} | {med['saturate']:.2f} | {med['extract']:.2f} | "
                  f"{med['saturate'] + med['extract']:.2f} | {r['invocations']} | {r['dotProd left']} | "
                  f"{r['cost'][0]:,.0f} → {r['cost'][1]:,.0f} | {r['status']} | {all(x['valid'] for x in runs)} |")


if __name__ == "__main__":
    main()
