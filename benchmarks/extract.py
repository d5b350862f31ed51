"""Extractors side by side on seeded TENSAT-like e-graphs of growing size (one run, one machine).

For each graph: DAG cost of every extractor relative to the best cost found in this run, its
status (optimal / feasible / heuristic), CP-SAT's gap, and seconds. CP-SAT variants:
  cpsat        eqdsl's model: pruned nodes, order variables only on cyclic components
  cpsat-plain  the textbook model: order variables on every class, no pruning
  cpsat-lazy   no order variables; cycles cut lazily and re-solved
Usage: python benchmarks/extract.py [--sizes 20,100,400,1000] [--partners 4] [--time-limit 60]
       [--json out.json]
"""
from __future__ import annotations

import argparse
import json
import platform
import sys
import time

from eqdsl.extract.cpsat import CpSatExtractor
from eqdsl.extract.dag import GreedyDagExtractor
from eqdsl.extract.egraph import dag_cost, problem_from_json
from eqdsl.extract.greedy import GreedyExtractor

from synthetic import tensat_like


def extractors(time_limit: float) -> dict:
    return {
        "greedy": GreedyExtractor(),
        "greedy-dag": GreedyDagExtractor(),
        "cpsat": CpSatExtractor(time_limit, "order"),
        "cpsat-plain": CpSatExtractor(time_limit, "order", plain=True),
        "cpsat-lazy": CpSatExtractor(time_limit, "lazy"),
    }


def run(sizes: list[int], partners: int, time_limit: float, seed: int) -> list[dict]:
    rows = []
    for n in sizes:
        problem = problem_from_json(tensat_like(n, seed=seed, partners=partners))
        results = {}
        for name, extractor in extractors(time_limit).items():
            t0 = time.perf_counter()
            e = extractor.extract(problem)
            assert abs(dag_cost(problem, e.selection) - e.cost) < 1e-9  # valid, acyclic, complete
            results[name] = (e, time.perf_counter() - t0)
        best = min(e.cost for e, _ in results.values())
        for name, (e, seconds) in results.items():
            rows.append({"ops": n, "classes": problem.num_classes, "nodes": len(problem.nodes),
                         "extractor": name, "cost": e.cost, "ratio": e.cost / best if best else 1.0,
                         "status": e.status.value, "gap": e.gap, "seconds": seconds})
    return rows


def print_table(rows: list[dict]) -> None:
    print(f"{'ops':>5} {'classes':>7} {'nodes':>6}  {'extractor':<12} {'DAG cost':>10} "
          f"{'/best':>7} {'status':<9} {'gap':>7} {'seconds':>8}")
    for r in rows:
        gap = "" if r["gap"] is None else f"{100 * r['gap']:.2f}%"
        print(f"{r['ops']:>5} {r['classes']:>7} {r['nodes']:>6}  {r['extractor']:<12} "
              f"{r['cost']:>10.4f} {r['ratio']:>7.4f} {r['status']:<9} {gap:>7} {r['seconds']:>8.3f}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="20,100,400,1000")
    ap.add_argument("--partners", type=int, default=4)
    ap.add_argument("--time-limit", type=float, default=60.0)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--json")
    args = ap.parse_args()
    print(f"# {platform.node()} {platform.processor() or platform.machine()}, python "
          f"{sys.version.split()[0]}, seed {args.seed}, partners {args.partners}, "
          f"CP-SAT limit {args.time_limit:g} s, {CpSatExtractor().workers} worker(s), linearization 2")
    rows = run([int(s) for s in args.sizes.split(",")], args.partners, args.time_limit, args.seed)
    print_table(rows)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
