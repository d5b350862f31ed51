"""TENSAT's models under TENSAT's settings, one row per model and setting, TENSAT's numbers beside.

Usage: python benchmarks/tensat.py [--models bert,nasrnn,...|all] [--k-multi 1[,2,3]|pact] [--ruleset FILE]
       [--cycle-filter efficient[,vanilla,none]] [--acyclic order] [--target t4[,a100]]
       [--extract-limit 60] [--node-limit 50000] [--iter-limit 15] [--explore-limit 3600]
       [--ort] [--ort-runs 20] [--ort-threads 1] [--measure ort|cpu] [--measure-runs 5]
       [--execute cpu|cuda] [--execute-runs 5] [--by-op]
`--k-multi pact` uses the PACT study's k_multi per model. With `--ort`, the input and the optimized
program are exported to ONNX (same random weights) and ONNX Runtime (CPU) runs both on the same
inputs, alternately, `--ort-runs` times each: outputs must agree, and the medians are printed.
With `--measure`, the costs are measured (`target: {measure: ..., fallback: TARGET}`, timings
cached in results/timings.sqlite) and a last column gives Spearman's rank correlation between the
measured cost of every operator configuration in the e-graph and the cost rules' prediction on
each shipped target. With `--execute`, eqdsl's executor runs input and output with eqdsl's own
kernels (same weights and inputs, alternately): outputs must agree; medians are printed.
With `--by-op`, a line per run gives each operator's cost in the input and the optimized program.
Runs the same pipeline as `eqdsl run` (config built in code). Prints per run: e-graph nodes and
classes, iterations, stop reason, exploration / extraction / total seconds, CP-SAT status and gap,
original and optimized cost (roofline ms on the target), speedup %, matmul and conv2d counts
before → after (multi-pattern merges show as fewer of them), and TENSAT's Table 1 search time
and speedup (measured on a real T4: our costs are analytic, so speedups compare only loosely).
"""
from __future__ import annotations

import argparse
import itertools
import platform
import sys
from collections import Counter
from pathlib import Path

import numpy as np

from eqdsl.config import parse_config
from eqdsl.extract.egraph import cost_by_op, reachable
from eqdsl.pipeline import RunResult, run_pipeline

TENSAT_TABLE1 = {  # model: (search seconds, speedup %), TENSAT Table 1, k_multi = 1
    "nasrnn": (0.5, 68.9), "bert": (1.4, 9.2), "resnext50": (0.7, 8.8), "nasneta": (10.6, 7.3),
    "squeezenet": (0.3, 24.5), "vgg19": (0.4, 8.9), "inceptionv3": (5.1, 10.0),
}
TENSAT_MODELS = "nasrnn,bert,resnext50,nasneta,squeezenet,vgg19,inceptionv3,resnet50,mobilenetv2"
PACT_K_MULTI = {"inceptionv3": 2, "resnext50": 4, "bert": 1, "nasneta": 1, "squeezenet": 3, "vgg19": 1,
                "mobilenetv2": 1, "resnet50": 4, "nasrnn": 3}


def run_model(name: str, k_multi: int, cycle_filter: str, target: str, args) -> RunResult:
    measured = {"measure": args.measure, "fallback": target, "runs": args.measure_runs,
                "cache": str(Path("results/timings.sqlite").resolve())}
    ruleset = str(Path(args.ruleset).resolve()) if args.ruleset.endswith(".eqr") else args.ruleset
    data = {"ruleset": ruleset, "target": measured if args.measure else target, "program": {"builder": name},
            "schedule": {"iter_limit": args.iter_limit, "node_limit": args.node_limit,
                         "time_limit_s": args.explore_limit, "k_multi": k_multi,
                         "cycle_filter": cycle_filter, "class_counts": False},
            "extract": {"method": "cpsat", "time_limit_s": args.extract_limit,
                        "acyclic": args.acyclic, "compare": []}}
    return run_pipeline(parse_config(data, Path(__file__)))


def compute_ops(result: RunResult, original: bool) -> Counter:
    """matmul/conv2d nodes that run (not folded into constants) in the input or the output."""
    if original:  # the builders never emit weight-only matmuls/convs
        return Counter(n.op for n in result.program.nodes if n.op in ("matmul", "conv2d"))
    p = result.live.problem
    chosen = [p.nodes[result.best.selection[c]] for c in reachable(p, result.best.selection)]
    return Counter(n.op for n in chosen if n.op in ("matmul", "conv2d") and n.cost > 0)


def ort_columns(r: RunResult, args) -> str:
    """ONNX Runtime CPU: input → optimized medians (ms) and the measured speedup; '!' if outputs differ."""
    import tempfile

    from eqdsl.onnx.runtime import compare
    from eqdsl.onnx.weights import random_weights
    from eqdsl.onnx.write import write_program

    weights = random_weights(r.program)
    with tempfile.TemporaryDirectory() as folder:
        a, b = Path(folder) / "input.onnx", Path(folder) / "optimized.onnx"
        write_program(r.language, r.program, weights, a)
        write_program(r.language, r.optimized_program(), weights, b)
        check = compare(a, b, args.ort_runs, 0, [args.ort_threads])
    t = args.ort_threads
    flag = "" if check.ok else f" DISAGREE {check.max_error:.2g}"
    return f" | {check.original_ms[t]:>8.2f} {check.optimized_ms[t]:>8.2f} {check.speedup(t):>6.3f}x{flag}"


def _ranks(values: list[float]) -> np.ndarray:
    order = np.argsort(values, kind="stable")
    ranks = np.empty(len(values))
    ranks[order] = np.arange(len(values))
    for v in set(values):  # ties share their mean rank
        tied = [i for i, x in enumerate(values) if x == v]
        ranks[tied] = ranks[tied].mean()
    return ranks


def rank_correlations(r: RunResult) -> str:
    """Spearman's rho of measured vs rule-predicted operator costs, per shipped target."""
    from eqdsl.cost.registry import RooflineTarget

    m = r.measured
    keys = sorted(m.last, key=repr)
    measured = [m.cache.get(m.device, op, a) for op, a in keys]
    cols = []
    for target in ("t4", "a100", "cpu"):
        rules = RooflineTarget(target, Path.cwd()).cost_model(r.language)
        predicted = rules.price([(op, a, m.last[(op, a)]) for op, a in keys])
        rho = float(np.corrcoef(_ranks(predicted), _ranks(measured))[0, 1])
        cols.append(f"{target} {rho:.2f}")
    return f" | rho({len(keys)} ops): " + " ".join(cols)


def execute_columns(r: RunResult, args) -> str:
    from eqdsl.execute.executor import compare
    from eqdsl.onnx.weights import random_weights

    check = compare(r.language, r.program, r.optimized_program(), random_weights(r.program), args.execute,
                    args.execute_runs)
    flag = "" if check.ok else f" DISAGREE {check.max_error:.2g}"
    return (f" | {args.execute} {check.original_ms:>9.2f} {check.optimized_ms:>9.2f} {check.speedup:>6.3f}x"
            f" (ref: {','.join(check.fallback_ops) or '-'}){flag}")


def row(name: str, k: int, filt: str, r: RunResult) -> str:
    o, e = r.outcome, r.best
    explore = r.stages["schedule"]
    extract = r.stages["serialize"] + r.stages["extract:cpsat"]
    gap = "" if e.gap is None else f"{100 * e.gap:.1f}%"
    before, after = compute_ops(r, True), compute_ops(r, False)
    ops = " ".join(f"{op} {before[op]}→{after[op]}" for op in ("matmul", "conv2d") if before[op])
    ref = TENSAT_TABLE1.get(name)
    usable = len(r.live.problem.nodes) - len(r.live.problem.blocked)
    return (f"{name:<12} {k:>2} {filt:<9} {usable:>6} {r.live.problem.num_classes:>7} "
            f"{len(o.iterations):>3} {o.stop.value:<15} {explore:>8.2f} {extract:>8.2f} "
            f"{explore + extract:>8.2f} {e.status.value:<8} {gap:>6} {r.original_cost / 1e6:>8.3f} "
            f"{e.cost / 1e6:>8.3f} {100 * (r.original_cost / e.cost - 1):>7.2f}% {ops:<22} | "
            + (f"{ref[0]} s / {ref[1]} %" if ref else "-"))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", default=TENSAT_MODELS, help="comma-separated, or `all` (the 13 builders)")
    ap.add_argument("--k-multi", default="1")
    ap.add_argument("--ruleset", default="tensat", help="a shipped ruleset or a .eqr path (`eqdsl synthesize`'s)")
    ap.add_argument("--cycle-filter", default="efficient")
    ap.add_argument("--acyclic", default="order", choices=("order", "lazy", "filter-list"))
    ap.add_argument("--target", default="t4")
    ap.add_argument("--extract-limit", type=float, default=60.0)
    ap.add_argument("--explore-limit", type=float, default=3600.0)
    ap.add_argument("--node-limit", type=int, default=50_000)
    ap.add_argument("--iter-limit", type=int, default=15)
    ap.add_argument("--ort", action="store_true", help="also time input and output under ONNX Runtime CPU")
    ap.add_argument("--ort-runs", type=int, default=20)
    ap.add_argument("--ort-threads", type=int, default=1)
    ap.add_argument("--measure", choices=("ort", "cpu", "cuda"), help="measured costs (the target is the fallback)")
    ap.add_argument("--measure-runs", type=int, default=5)
    ap.add_argument("--execute", choices=("cpu", "cuda"), help="also run input and output with eqdsl's kernels")
    ap.add_argument("--execute-runs", type=int, default=5)
    ap.add_argument("--by-op", action="store_true", help="also print the cost per operator, input and optimized")
    args = ap.parse_args()
    if args.models == "all":
        from eqdsl.languages.tensat.models import MODELS

        args.models = ",".join(MODELS)
    print(f"# {platform.machine()}, python {sys.version.split()[0]}, target {args.target}, node limit "
          f"{args.node_limit}, iter limit {args.iter_limit}, CP-SAT {args.extract_limit:g} s, "
          f"acyclic {args.acyclic}")
    print(f"{'tgt':<5} {'model':<12} {'k':>2} {'filter':<9} {'nodes':>6} {'classes':>7} {'it':>3} {'stop':<15} "
          f"{'explore':>8} {'extract':>8} {'total s':>8} {'status':<8} {'gap':>6} {'orig ms':>8} "
          f"{'opt ms':>8} {'speedup':>8} {'ops before→after':<22} | TENSAT Table 1"
          + (f" | ORT in ms  ORT out ms  ORT speedup ({args.ort_threads} thread(s), median of {args.ort_runs})"
             if args.ort else ""))
    for target, name, filt in itertools.product(args.target.split(","), args.models.split(","),
                                                args.cycle_filter.split(",")):
        ks = [PACT_K_MULTI.get(name, 1)] if args.k_multi == "pact" else map(int, args.k_multi.split(","))
        for k in ks:
            r = run_model(name, k, filt, target, args)
            print(f"{target:<5} " + row(name, k, filt, r) + (ort_columns(r, args) if args.ort else "")
                  + (rank_correlations(r) if args.measure else "")
                  + (execute_columns(r, args) if args.execute else ""), flush=True)
            if args.by_op:
                print(by_op_line(r), flush=True)
    return 0


def by_op_line(r: RunResult) -> str:
    """Where the cost goes: the input's and the optimized program's cost per operator (ns, share)."""
    after = cost_by_op(r.live.problem, r.best.selection)  # type: ignore[union-attr]
    ops = sorted(set(r.input_cost_by_op) | set(after), key=lambda op: -after.get(op, 0.0))
    return "      by operator, input → optimized: " + ", ".join(
        f"{op} {r.input_cost_by_op.get(op, 0):,.0f} → {after.get(op, 0):,.0f} ({100 * after.get(op, 0) / r.best.cost:.1f} %)"
        for op in ops)


if __name__ == "__main__":
    sys.exit(main())
