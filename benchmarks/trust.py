"""Issue 60's goals, measured: guards judged as egglog applies them, big inputs within limits.

Parts (`--parts verify,report,extract,validate`):
- verify: `eqdsl verify` on every shipped ruleset (every rule must pass; `tensat` within 120 s)
  and on the unsound guarded rules of `tests/data/unsound_guards_*.eqr` (every one must fail).
- report: `eqdsl run` of a 3,000-deep program with `report: html` (exit 0, page published), and
  the report page of a 100,000-node program (within 30 s).
- extract: acsum's million-node e-graph (examples/acsum, 5 iterations; written once into
  `--scratch`), read once, then greedy, greedy-dag and CP-SAT under `extract.time_limit_s`:
  seconds each took against its limit (goal: within 10 %).
- validate: ten 3x3 convolutions of 64-128 channels on a 1x64x901x161 input, input program
  against itself (3 samples; goal ≤ 60 s); and one 128-channel conv by the reference's
  per-offset products against the einsum it replaced, side by side.

    .venv/bin/python benchmarks/trust.py [--parts verify,report,extract,validate] [--scratch /tmp/eqdsl-trust]
"""
from __future__ import annotations

import argparse
import json
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
EQDSL = [sys.executable, "-m", "eqdsl"]
SHIPPED = [["arith"], ["tensor"], ["tensat"], ["fusions"], ["qgym"], ["glenside", "--target", "systolic-16"],
           ["glenside-blocked", "--target", "systolic-16"]]
UNSOUND = [ROOT / "tests/data/unsound_guards_arith.eqr", ROOT / "tests/data/unsound_guards_tensor.eqr"]


def _verify(ruleset: str, *extra: str) -> dict:
    t0 = time.perf_counter()
    done = subprocess.run(EQDSL + ["verify", ruleset, *extra], capture_output=True, text=True)
    lines = done.stdout.splitlines()
    failed = [line.split()[1] for line in lines if line.startswith(("FAIL", "VACUOUS"))]
    return {"ruleset": Path(ruleset).name, "code": done.returncode, "seconds": round(time.perf_counter() - t0, 1),
            "summary": lines[-1] if lines else done.stderr[-200:], "not_passed": failed}


def verify_part() -> list[dict]:
    rows = [_verify(*r) for r in SHIPPED]
    for path in UNSOUND:
        row = _verify(str(path))
        names = [line.split()[1].rstrip(":") for line in path.read_text().splitlines() if line.startswith("rule ")]
        row["mutants"], row["mutants_failed"] = len(names), sum(n in row["not_passed"] for n in names)
        rows.append(row)
    return rows


def report_part() -> list[dict]:
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        lines = ["program deep:", '  let t0 = var("a")'] + [f"  let t{i} = shl(t{i - 1}, 0)" for i in range(1, 3001)]
        (folder / "deep.eqr").write_text("\n".join(lines + ["  root t3000"]) + "\n")
        (folder / "c.yaml").write_text("ruleset: arith\nprogram: deep.eqr\nschedule: {iter_limit: 2}\n"
                                       "extract: {method: greedy}\nreport: html\noutput: out\nvalidate: true\n")
        t0 = time.perf_counter()
        done = subprocess.run(EQDSL + ["run", "c.yaml", "--quiet"], cwd=folder, capture_output=True, text=True)
        rows.append({"case": "3000-deep run, report: html", "code": done.returncode,
                     "page": (folder / "out" / "report.html").is_file(), "seconds": round(time.perf_counter() - t0, 1)})
        report = json.loads((folder / "out" / "report.json").read_text())
        chain = [{"op": "var", "args": ["a"]}] + [{"op": "shl", "args": [{"node": i}, 0]} for i in range(100_000)]
        report["programs"] = {"input": {"nodes": chain, "roots": [100_000]},
                              "optimized": {"nodes": chain[:-1], "roots": [99_999]}}
        (folder / "out" / "report.json").write_text(json.dumps(report))
        t0 = time.perf_counter()
        done = subprocess.run(EQDSL + ["report", "out"], cwd=folder, capture_output=True, text=True)
        rows.append({"case": "eqdsl report, 100,000-node program", "code": done.returncode,
                     "seconds": round(time.perf_counter() - t0, 1)})
    return rows


def _acsum_egraph(scratch: Path) -> Path:
    graph = scratch / "acsum" / "egraph.json"
    if not graph.exists():
        scratch.mkdir(parents=True, exist_ok=True)
        config = (ROOT / "examples/acsum/config.yaml").read_text().replace(
            "ruleset: acsum.eqr", f"ruleset: {ROOT / 'examples/acsum/acsum.eqr'}").replace(
            "iter_limit: 30", "iter_limit: 5").replace("validate: true", "validate: false")
        (scratch / "acsum.yaml").write_text(config)
        subprocess.run(EQDSL + ["run", str(scratch / "acsum.yaml"), "--output", str(scratch / "acsum"), "--quiet"],
                       check=True, capture_output=True)
    return graph


def extract_part(scratch: Path) -> list[dict]:
    from eqdsl.extract.egraph import read_problem
    from eqdsl.extract.greedy import OutOfTime
    from eqdsl.extract.registry import make_extractor, read_extract

    t0 = time.perf_counter()
    problem = read_problem(_acsum_egraph(scratch))
    rows = [{"case": f"read {len(problem.nodes):,} nodes, {problem.num_classes:,} classes",
             "seconds": round(time.perf_counter() - t0, 1)}]
    for method, limit in [("greedy", 30), ("greedy", 2), ("greedy-dag", 30), ("cpsat", 8), ("cpsat", 30)]:
        t0 = time.perf_counter()
        try:
            e = make_extractor(method, read_extract({"method": method, "time_limit_s": limit})).extract(problem)
            outcome = f"{e.status.value}, cost {e.cost:g}" + (f" ({e.note[:80]})" if e.note else "")
        except OutOfTime as late:
            outcome = "no program: " + late.diagnostics[0].message[:90]
        seconds = time.perf_counter() - t0
        rows.append({"case": f"{method}, time_limit_s {limit}", "seconds": round(seconds, 2),
                     "over_limit_pct": round(100 * (seconds / limit - 1), 1), "outcome": outcome})
        print(json.dumps(rows[-1]), flush=True)
    return rows


def validate_part() -> list[dict]:
    import numpy as np

    from eqdsl.frontend import load_language, load_program_text
    from eqdsl.languages.tensor import reference
    from eqdsl.verify.validate import validate

    lang = load_language("tensat")
    channels = [64, 64, 64, 96, 96, 96, 128, 128, 128, 128]
    lines, previous, c_in = ["program speech:", '  let x = input("x", [1, 64, 901, 161])'], "x", 64
    for i, c in enumerate(channels):
        lines.append(f'  let c{i} = conv2d(1, 1, 0, 2, {previous}, weight("w{i}", [{c}, {c_in}, 3, 3]))')
        previous, c_in = f"c{i}", c
    program = load_program_text("\n".join(lines + [f"  root {previous}"]) + "\n", "speech.eqr", lang)["speech"]
    t0 = time.perf_counter()
    v = validate(lang, program, program, samples=3, seed=0)
    rows = [{"case": "validate ten 3x3 convs (64-128 ch, 901x161), 3 samples", "ok": v.ok,
             "seconds": round(time.perf_counter() - t0, 1)}]
    rng = np.random.default_rng(0)
    x, w = rng.standard_normal((1, 128, 901, 161)), rng.standard_normal((128, 128, 3, 3))
    t0 = time.perf_counter()
    ours = reference.conv2d(1, 1, 0, 0, x, w)
    per_offset = time.perf_counter() - t0
    t0 = time.perf_counter()
    win = reference._windows(reference._pad_spatial(x, 3, 3, 1, 1, 0, 0.0), 3, 3, 1, 1)
    plain = np.einsum("nchwij,ocij->nohw", win, w)
    einsum = time.perf_counter() - t0
    rows.append({"case": "one 128-channel 3x3 conv on 901x161", "per_offset_s": round(per_offset, 2),
                 "einsum_s": round(einsum, 2), "ratio": round(einsum / per_offset, 1),
                 "same": bool(np.allclose(ours, plain))})
    return rows


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--parts", default="verify,report,extract,validate")
    ap.add_argument("--scratch", default=str(Path(tempfile.gettempdir()) / "eqdsl-trust"))
    args = ap.parse_args()
    print(f"# {platform.machine()}, {platform.python_version()}, {subprocess.getoutput('nproc')} cores", flush=True)
    parts = {"verify": verify_part, "report": report_part, "extract": lambda: extract_part(Path(args.scratch)),
             "validate": validate_part}
    for name in args.parts.split(","):
        print(f"## {name}", flush=True)
        for row in parts[name]():
            print(json.dumps(row), flush=True)


if __name__ == "__main__":
    main()
