"""Extractors side by side on seeded TENSAT-like e-graphs of growing size (one run, one machine).

For each graph: DAG cost of every extractor relative to the best cost found in this run, its
status (optimal / feasible / heuristic), CP-SAT's gap, and seconds. CP-SAT variants:
  cpsat        eqdsl's default: pruned nodes and cycle conflicts as exit clauses (eqdsl.extract.prune),
               `hybrid` acyclicity (no order variables and lazy cycle cuts for a third of the time,
               then order variables), CP-SAT on 2 threads (2+ cores), `search: auto`: the `lp`
               searches on the whole model for a sixth of the time, then, unproven, the `core`
               search on the independent parts
  cpsat-lp     `search: lp` (the default before commit 7da6b35): full-LP search on the symmetry-folded
               LP, the same on the plain LP, the whole time
  cpsat-parts  `search: lp`, split at the classes every program holds into independent parts,
               solved one model each (`parts: true`)
  cpsat-core   `search: core`: CP-SAT's core-based search, unstratified, beside a search without LP
  cpsat-core-parts  the same on the independent parts
  cpsat-1w     the same on one CP-SAT thread (commit e90a4ae's default raced this against cpsat-order)
  cpsat-3w     the same on three threads, the third running neighbourhood searches (the default
               of commit a61122e, then with the plain-LP search listed first)
  cpsat-order  the model before cycle conflicts: pruned nodes, order variables on cyclic components
  cpsat-unpruned  the model before eqdsl.extract.prune: only unusable nodes removed
  cpsat-plain  the textbook model: order variables on every class, no pruning
  cpsat-lazy   cycle conflicts, no order variables; cycles cut lazily and re-solved
Usage: python benchmarks/extract.py [--sizes 20,100,400,1000] [--partners 4] [--time-limit 60]
       [--json out.json]
       python benchmarks/extract.py --real [--models bert,vgg19,...] [--k-multi 1,2,3] [--qgym] ...
With --real, the e-graphs are the pipeline's own: every TENSAT model saturated at each k_multi
*without* cycle filtering (cyclic, like public extraction benchmarks), a 45-matrix chain
(15,225 nodes, no sharing) and, with --qgym, Q-gym
layers explored two iterations; each is saved once to results/extract/NAME.json (egraph-serialize
JSON, also readable by `eqdsl extract`) and read from there on later runs.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from pathlib import Path

from eqdsl.extract.cpsat import DEFAULT_WORKERS, CpSatExtractor
from eqdsl.extract.dag import GreedyDagExtractor
from eqdsl.extract.egraph import ExtractionProblem, dag_cost, problem_from_json, read_problem
from eqdsl.extract.greedy import GreedyExtractor

from synthetic import matrix_chain, tensat_like


def extractors(time_limit: float) -> dict:
    return {
        "greedy": GreedyExtractor(),
        "greedy-dag": GreedyDagExtractor(),
        "cpsat": CpSatExtractor(time_limit),
        "cpsat-parts": CpSatExtractor(time_limit, parts=True, search="lp"),
        "cpsat-core": CpSatExtractor(time_limit, search="core"),
        "cpsat-core-parts": CpSatExtractor(time_limit, parts=True, search="core"),
        "cpsat-lp": CpSatExtractor(time_limit, search="lp"),
        "cpsat-order": CpSatExtractor(time_limit, "order", conflicts=False, search="lp"),
        "cpsat-1w": CpSatExtractor(time_limit, workers=1, search="lp"),
        "cpsat-3w": CpSatExtractor(time_limit, workers=3, search="lp"),
        "cpsat-unpruned": CpSatExtractor(time_limit, "order", prune=False, search="lp"),
        "cpsat-plain": CpSatExtractor(time_limit, "order", plain=True, search="lp"),
        "cpsat-lazy": CpSatExtractor(time_limit, "lazy", search="lp"),
    }


def synthetic(sizes: list[int], partners: int, seed: int):
    for n in sizes:
        yield str(n), problem_from_json(tensat_like(n, seed=seed, partners=partners))


def saved(name: str, make) -> ExtractionProblem:
    """The e-graph saved under results/extract/, made (and saved) on first use."""
    from eqdsl.output import write_file_atomically
    from eqdsl.report import problem_json

    path = Path("results/extract") / f"{name}.json"
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        write_file_atomically(path, json.dumps(problem_json(make())))
    return read_problem(path)


def tensat_egraph(model: str, k_multi: int) -> ExtractionProblem:
    from eqdsl.config import parse_config
    from eqdsl.pipeline import run_pipeline

    data = {"ruleset": "tensat", "target": "t4", "program": {"builder": model},
            "schedule": {"iter_limit": 15, "node_limit": 50_000, "time_limit_s": 600, "k_multi": k_multi,
                         "cycle_filter": "none", "class_counts": False},
            "extract": {"method": "greedy", "compare": []}}
    return run_pipeline(parse_config(data, Path(__file__))).live.problem


def qgym_egraph(r: int, c: int, q: int) -> ExtractionProblem:
    from eqdsl.config import parse_config
    from eqdsl.pipeline import run_pipeline

    data = {"ruleset": "qgym", "program": {"builder": "conv_layer", "R": r, "S": r, "C": c, "K": c, "Q": q, "seed": 0},
            "schedule": {"iter_limit": 2, "node_limit": 200_000, "class_counts": False},
            "extract": {"method": "greedy", "compare": []}}
    return run_pipeline(parse_config(data, Path(__file__))).live.problem


def real(models: list[str], k_multis: list[int], qgym: bool, chain: bool = True):
    if chain:
        yield "matrix-chain-45", problem_from_json(matrix_chain(45))
    for model in filter(None, models):
        for k in k_multis:
            name = f"tensat-{model}-k{k}"
            yield name, saved(name, lambda m=model, k=k: tensat_egraph(m, k))
    if qgym:
        for r, c, q in [(3, 16, 2), (3, 16, 4), (1, 32, 4), (3, 32, 2)]:
            name = f"qgym-{r}x{r}x{c}x{c}-q{q}"
            yield name, saved(name, lambda r=r, c=c, q=q: qgym_egraph(r, c, q))


def run(problems, time_limit: float, only: str | None = None) -> list[dict]:
    rows = []
    for n, problem in problems:
        results = {}
        chosen = {k: v for k, v in extractors(time_limit).items() if only is None or k in only.split(",")}
        for name, extractor in chosen.items():
            t0 = time.perf_counter()
            e = extractor.extract(problem)
            assert abs(dag_cost(problem, e.selection) - e.cost) < 1e-9  # valid, acyclic, complete
            results[name] = (e, time.perf_counter() - t0)
        best = min(e.cost for e, _ in results.values())
        for name, (e, seconds) in results.items():
            rows.append({"egraph": n, "classes": problem.num_classes, "nodes": len(problem.nodes),
                         "extractor": name, "cost": e.cost, "ratio": e.cost / best if best else 1.0,
                         "status": e.status.value, "gap": e.gap, "seconds": seconds})
        print_table(rows[-len(results):])
    return rows


HEADER = (f"{'e-graph':<24} {'classes':>7} {'nodes':>6}  {'extractor':<12} {'DAG cost':>10} "
          f"{'/best':>7} {'status':<9} {'gap':>7} {'seconds':>8}")


def print_table(rows: list[dict]) -> None:
    for r in rows:
        gap = "" if r["gap"] is None else f"{100 * r['gap']:.2f}%"
        print(f"{r['egraph']:<24} {r['classes']:>7} {r['nodes']:>6}  {r['extractor']:<12} "
              f"{r['cost']:>10.4f} {r['ratio']:>7.4f} {r['status']:<9} {gap:>7} {r['seconds']:>8.3f}", flush=True)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="20,100,400,1000")
    ap.add_argument("--partners", type=int, default=4)
    ap.add_argument("--time-limit", type=float, default=60.0)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--json")
    ap.add_argument("--real", action="store_true", help="the pipeline's own e-graphs instead of synthetic ones")
    ap.add_argument("--models", default="nasrnn,bert,resnext50,nasneta,squeezenet,vgg19,inceptionv3,resnet50,mobilenetv2")
    ap.add_argument("--k-multi", default="1,2")
    ap.add_argument("--qgym", action="store_true")
    ap.add_argument("--extractors", help="comma-separated subset (default: all)")
    args = ap.parse_args()
    print(f"# {platform.node()} {platform.processor() or platform.machine()}, python "
          f"{sys.version.split()[0]}, seed {args.seed}, partners {args.partners}, "
          f"CP-SAT limit {args.time_limit:g} s, {DEFAULT_WORKERS} CP-SAT thread(s) for cpsat, linearization 2, "
          f"{os.cpu_count()} cores")
    problems = (real(args.models.split(","), [int(k) for k in args.k_multi.split(",")], args.qgym) if args.real
                else synthetic([int(s) for s in args.sizes.split(",")], args.partners, args.seed))
    print(HEADER)
    rows = run(problems, args.time_limit, args.extractors)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
