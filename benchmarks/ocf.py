"""The PACT 2024 study's Table 1 on eqdsl's cost model: how each extractor prices and extracts.

For every model builder (published sizes), two e-graphs:
- the *initial* e-graph (the input program, no rewrite): every extractor picks the input, so what
  differs is the cost each one *believes* — tree greedy (egg's default cost function, DCF) a tree
  cost that pays a shared subterm once per use, OCF / greedy-dag / CP-SAT the DAG cost;
- the e-graph TENSAT's schedule grows (k_multi 1, efficient cycle filter, `--node-limit`,
  `--iter-limit`): the DAG cost of each extractor's choice, relative to CP-SAT's (proven optimal
  where the status says so), and seconds.
Usage: python benchmarks/ocf.py [--models all|nasrnn,bert,...] [--target a100] [--node-limit 50000]
       [--iter-limit 15] [--extract-limit 60]
"""
from __future__ import annotations

import argparse
import platform
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from eqdsl.cost.targets import bind_target, load_target  # noqa: E402
from eqdsl.extract.egraph import tree_cost  # noqa: E402
from eqdsl.extract.registry import ExtractConfig  # noqa: E402
from eqdsl.frontend import load_language  # noqa: E402
from eqdsl.languages.tensat.models import MODELS, build_model  # noqa: E402
from eqdsl.pipeline import optimize  # noqa: E402
from eqdsl.schedule.saturate import SaturateConfig  # noqa: E402

GREEDY = ("greedy", "greedy-dag", "greedy-ocf")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--models", default="all")
    ap.add_argument("--target", default="a100")
    ap.add_argument("--node-limit", type=int, default=50_000)
    ap.add_argument("--iter-limit", type=int, default=15)
    ap.add_argument("--extract-limit", type=float, default=60.0)
    args = ap.parse_args()
    names = list(MODELS) if args.models == "all" else args.models.split(",")
    lang = load_language("tensat")
    params = bind_target(lang, load_target(args.target))
    extract = ExtractConfig(method="cpsat", time_limit_s=args.extract_limit, compare=GREEDY)
    print(f"# {platform.machine()}, python {platform.python_version()}, target {args.target}, node limit "
          f"{args.node_limit}, iter limit {args.iter_limit}, CP-SAT {args.extract_limit:g} s")
    print("| model | initial DAG cost (ms) | DCF tree estimate | DCF / DAG | OCF estimate | "
          "saturated nodes | CP-SAT (status) | greedy / CP-SAT | greedy-dag / CP-SAT | greedy-ocf / CP-SAT "
          "| greedy-dag s | greedy-ocf s | CP-SAT s |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for name in names:
        program = build_model(lang, name)
        initial = optimize(lang, program, SaturateConfig(iter_limit=0, node_limit=10**9), extract, params)
        problem = initial.live.problem  # type: ignore[union-attr]
        dcf = tree_cost(problem, initial.extractions["greedy"].selection)
        ocf = initial.extractions["greedy-ocf"].cost
        t0 = time.perf_counter()
        grown = optimize(lang, program, SaturateConfig(iter_limit=args.iter_limit, node_limit=args.node_limit,
                                                       k_multi=1, cycle_filter="efficient", class_counts=False),
                         extract, params)
        best = grown.extractions["cpsat"]
        ratio = {m: grown.extractions[m].cost / best.cost for m in GREEDY}
        print(f"| {name} | {initial.original_cost / 1e6:.4f} | {dcf / 1e6:.4f} | {dcf / initial.original_cost:.3f} | "
              f"{ocf / 1e6:.4f} | {grown.outcome.nodes} | {best.cost / 1e6:.4f} ({best.status.value}) | "  # type: ignore[union-attr]
              f"{ratio['greedy']:.4f} | {ratio['greedy-dag']:.4f} | {ratio['greedy-ocf']:.4f} | "
              f"{grown.extractions['greedy-dag'].seconds:.2f} | {grown.extractions['greedy-ocf'].seconds:.2f} | "
              f"{best.seconds:.2f} |", flush=True)
        del t0


if __name__ == "__main__":
    main()
