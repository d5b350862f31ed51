"""Issue 45, item 4: MCTS against saturation on corpus models, both on measured costs.

    .venv/bin/python benchmarks/mcts_measured.py [--models ppocr-cls-v2,zoo-squeezenet] [--out results/bench/mcts-measured]
        [--budget 16] [--max-steps 20]

Per model, two `eqdsl run`s in their own processes, the same but for the schedule: `fusions`
rules, `target: {measure: ort, fallback: cpu}` (each operator configuration timed alone under ONNX
Runtime CPU, one thread, through the timing cache; the CPU roofline for what cannot be timed; the
input priced as ONNX Runtime runs it), CP-SAT 30 s, validated, exported and runtime-checked (20
runs). `saturate`: k_multi 1, 10 iterations, 50k nodes (the corpus benchmark's). `mcts`: the
PACT 2024 search, greedy-dag pricing its rollouts on the measured costs. Printed per run: the
predicted speedup (measured costs), eqdsl's own runtime check (1 thread), what it handed back,
e-graph nodes and seconds. Models come from `benchmarks/models.py`'s corpus and cache.
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from models import CORPUS, fetch, fetch_ok  # noqa: E402

SCHEDULES = {
    "saturate": "{{kind: saturate, iter_limit: 10, node_limit: 50000, k_multi: 1, cycle_filter: efficient}}",
    "mcts": "{{kind: mcts, budget: {budget}, node_limit: 20000, main_extract: greedy-dag, max_steps: {steps}, "
            "time_limit_s: 600}}",
}


def run(model, path: Path, folder: Path, schedule: str) -> dict:
    folder.mkdir(parents=True, exist_ok=True)
    extra = f", shapes: {json.dumps(model.shapes)}" if model.shapes else ""
    extra += f", constants: {json.dumps(model.constants)}" if model.constants else ""
    (folder / "run.yaml").write_text(
        f"ruleset: fusions\ntarget: {{measure: ort, fallback: cpu, runs: 10}}\n"
        f"program: {{onnx: {path.resolve()}{extra}}}\nschedule: {schedule}\n"
        "extract: {method: cpsat, time_limit_s: 30, compare: []}\nvalidate: {samples: 1}\n"
        "export: {format: onnx, runs: 20}\n")
    out = folder / "out"
    subprocess.run(["rm", "-rf", str(out)], check=True)
    t0 = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "eqdsl", "run", str(folder / "run.yaml"), "--output", str(out),
                           "--quiet"], capture_output=True, text=True, timeout=3600)
    seconds = time.perf_counter() - t0
    if not (out / "report.json").exists():
        return {"error": (done.stderr.strip().splitlines() or ["no report"])[0][:120], "seconds": seconds}
    report = json.loads((out / "report.json").read_text())
    runtime = (report.get("export") or {}).get("runtime") or {}
    base = report.get("runtime_input_cost") or report["original_cost"]
    return {"predicted": base / report["best_cost"], "measured": (runtime.get("speedup") or {}).get("1"),
            "handed_back": runtime.get("handed_back"), "nodes": report["egraph"]["nodes"], "seconds": seconds}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--models", default="ppocr-cls-v2,zoo-squeezenet,zoo-shufflenet,torch-mobilenet_v3_large")
    parser.add_argument("--out", default="results/bench/mcts-measured")
    parser.add_argument("--corpus", default="results/bench/models", help="benchmarks/models.py's --out (its cache)")
    parser.add_argument("--budget", type=int, default=16)
    parser.add_argument("--max-steps", type=int, default=20)
    args = parser.parse_args()
    corpus = Path(args.corpus)
    print("| model | schedule | predicted (measured costs) | eqdsl's check, 1 thread | handed back | e-graph nodes | s |")
    print("|---|---|---|---|---|---|---|")
    for model in [m for m in CORPUS if m.name in args.models.split(",") and fetch_ok(m, corpus)]:
        path = fetch(model, corpus / "cache")
        for name, schedule in SCHEDULES.items():
            r = run(model, path, Path(args.out) / model.name / name,
                    schedule.format(budget=args.budget, steps=args.max_steps))
            if "error" in r:
                print(f"| {model.name} | {name} | {r['error']} | | | | {r['seconds']:.0f} |", flush=True)
                continue
            measured = "—" if r["measured"] is None else f"{r['measured']:.3f}×"
            print(f"| {model.name} | {name} | {r['predicted']:.3f}× | {measured} | {r['handed_back']} | {r['nodes']} | "
                  f"{r['seconds']:.0f} |", flush=True)


if __name__ == "__main__":
    main()
