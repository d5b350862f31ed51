"""TENSAT's models under TENSAT's settings, one row per model, TENSAT's published numbers beside.

Usage: python benchmarks/tensat.py [--models bert,nasrnn,...] [--k-multi 1] [--extract-limit 60]
       [--node-limit 50000] [--iter-limit 15]
Prints per model: e-graph nodes/classes, iterations, stop reason, exploration and extraction
seconds, extraction status and gap, original and optimized cost (eqdsl's work model), speedup %,
and TENSAT's Table 1 search time and speedup (T4 measured costs: not comparable to our cost model).
"""
from __future__ import annotations

import argparse
import platform
import sys
import time

from eqdsl.check import load_language
from eqdsl.engine import EGraphSession
from eqdsl.extract.cpsat import CpSatExtractor
from eqdsl.extract.live import live_problem
from eqdsl.lang.models import build_model
from eqdsl.lower.egglog import lower_language
from eqdsl.pipeline import check_input
from eqdsl.schedule.runner import Limits
from eqdsl.schedule.saturate import SaturateScheduler

TENSAT_TABLE1 = {  # model: (search seconds, speedup %), TENSAT Table 1, k_multi = 1
    "nasrnn": (0.5, 68.9), "bert": (1.4, 9.2), "resnext50": (0.7, 8.8), "nasneta": (10.6, 7.3),
    "squeezenet": (0.3, 24.5), "vgg19": (0.4, 8.9), "inceptionv3": (5.1, 10.0),
}


def run_model(lang, lowered, name: str, args) -> dict:
    program = build_model(lang, name)
    session = EGraphSession(lowered)
    session.load(program)
    original = check_input(session, lowered, program)
    scheduler = SaturateScheduler(Limits(args.iter_limit, args.node_limit, 3600), args.k_multi, False)
    t0 = time.perf_counter()
    outcome = scheduler.run(session)
    explore = time.perf_counter() - t0
    t1 = time.perf_counter()
    problem = live_problem(session.serialize(), lowered).problem
    e = CpSatExtractor(args.extract_limit, "order").extract(problem)
    extract = time.perf_counter() - t1
    return {"model": name, "nodes": len(problem.nodes), "classes": problem.num_classes,
            "iters": len(outcome.iterations), "stop": outcome.stop.value, "explore_s": explore,
            "extract_s": extract, "status": e.status.value, "gap": e.gap, "original": original,
            "optimized": e.cost, "speedup": 100 * (original / e.cost - 1) if e.cost else 0.0}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", default="nasrnn,bert,resnext50,squeezenet,vgg19,resnet50,mobilenetv2")
    ap.add_argument("--k-multi", type=int, default=1)
    ap.add_argument("--extract-limit", type=float, default=60.0)
    ap.add_argument("--node-limit", type=int, default=50_000)
    ap.add_argument("--iter-limit", type=int, default=15)
    args = ap.parse_args()
    lang = load_language("tensat")
    lowered = lower_language(lang)
    print(f"# {platform.machine()}, python {sys.version.split()[0]}, k_multi {args.k_multi}, "
          f"node limit {args.node_limit}, iter limit {args.iter_limit}, CP-SAT {args.extract_limit:g} s")
    print(f"{'model':<12} {'nodes':>6} {'classes':>7} {'it':>3} {'stop':<15} {'explore s':>9} "
          f"{'extract s':>9} {'status':<9} {'gap':>7} {'speedup':>8} | TENSAT s / %")
    for name in args.models.split(","):
        r = run_model(lang, lowered, name, args)
        ref = TENSAT_TABLE1.get(name)
        gap = "" if r["gap"] is None else f"{100 * r['gap']:.1f}%"
        print(f"{name:<12} {r['nodes']:>6} {r['classes']:>7} {r['iters']:>3} {r['stop']:<15} "
              f"{r['explore_s']:>9.2f} {r['extract_s']:>9.2f} {r['status']:<9} {gap:>7} "
              f"{r['speedup']:>7.2f}% | " + (f"{ref[0]} / {ref[1]}" if ref else "-"), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
