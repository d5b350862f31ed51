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
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from models import CORPUS, SATURATE, fetch, fetch_ok, run_eqdsl  # noqa: E402

TARGET = "{measure: ort, fallback: cpu, runs: 10}"
MCTS = "{{kind: mcts, budget: {budget}, node_limit: 20000, main_extract: greedy-dag, max_steps: {steps}, time_limit_s: 600}}"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--models", default="ppocr-cls-v2,zoo-squeezenet,zoo-shufflenet,torch-mobilenet_v3_large")
    parser.add_argument("--out", default="results/bench/mcts-measured")
    parser.add_argument("--corpus", default="results/bench/models", help="benchmarks/models.py's --out (its cache)")
    parser.add_argument("--budget", type=int, default=16)
    parser.add_argument("--max-steps", type=int, default=20)
    args = parser.parse_args()
    corpus = Path(args.corpus)
    schedules = {"saturate": SATURATE, "mcts": MCTS.format(budget=args.budget, steps=args.max_steps)}
    print("| model | schedule | predicted (measured costs) | eqdsl's check, 1 thread | handed back | e-graph nodes | s |")
    print("|---|---|---|---|---|---|---|")
    for model in [m for m in CORPUS if m.name in args.models.split(",") and fetch_ok(m, corpus)]:
        path = fetch(model, corpus / "cache")
        for name, schedule in schedules.items():
            r = run_eqdsl(model, path, Path(args.out) / model.name / name, False, ruleset="fusions",
                          target=TARGET, schedule=schedule)
            if "predicted" not in r:
                print(f"| {model.name} | {name} | {r['error'][:120]} | | | | {r['seconds']:.0f} |", flush=True)
                continue
            measured = "—" if r["measured"] is None else f"{r['measured']:.3f}×"
            print(f"| {model.name} | {name} | {r['predicted']:.3f}× | {measured} | {r['handed_back']} | {r['nodes']} | "
                  f"{r['seconds']:.0f} |", flush=True)


if __name__ == "__main__":
    main()
