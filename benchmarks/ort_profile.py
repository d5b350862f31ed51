"""Where ONNX Runtime (CPU) spends a corpus model's time, per operator type, from its own profiler:
the ceiling of what graph rewrites that keep the matrix products can win (issue 45's goals).

    .venv/bin/python benchmarks/ort_profile.py [--models torch-bert_base,...] [--runs 20] [--threads 1]

Per model: the input file, ORT's default optimizations (as users run it), `--threads` intra-op
threads; after 5 warm-up runs, `--runs` profiled runs. Kernel time per operator type (the
profiler's `*_kernel_time` events, as ORT runs them after its own fusions); "dense" = the matrix
products and convolutions (MatMul, Gemm, Conv and ORT's fused forms of them, Attention's products
included); ceiling = all kernel time ÷ dense kernel time: the speedup a rewrite would reach that
made everything else free and left the dense products as they are.
"""
from __future__ import annotations

import argparse
import collections
import json
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from models import CORPUS, fetch, fetch_ok, model_feeds  # noqa: E402

DENSE = {"MatMul", "Gemm", "Conv", "FusedConv", "FusedMatMul", "FusedGemm", "NchwcConv", "QLinearConv",
         "MatMulInteger", "Attention", "MultiHeadAttention", "ConvTranspose"}


def profile(path: Path, feeds: dict, runs: int, threads: int) -> collections.Counter:
    """Microseconds of kernel time per operator type over `runs` profiled runs."""
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads, options.inter_op_num_threads = threads, 1
    options.log_severity_level = 3
    with tempfile.TemporaryDirectory() as folder:
        options.enable_profiling = True
        options.profile_file_prefix = str(Path(folder) / "p")
        s = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
        for _ in range(5 + runs):
            s.run(None, feeds)
        events = json.loads(Path(s.end_profiling()).read_text())
    per_op: collections.Counter = collections.Counter()
    kernel = [e for e in events if e.get("cat") == "Node" and e["name"].endswith("_kernel_time")]
    for e in kernel[len(kernel) * 5 // (5 + runs):]:  # the profiled runs, not the warm-ups
        per_op[e["args"]["op_name"]] += e["dur"]
    return per_op


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", default="torch-bert_base,torch-vit_b_16,torch-gpt2_small")
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--out", default="results/bench/models", help="benchmarks/models.py's --out (its cache)")
    args = ap.parse_args()
    out = Path(args.out)
    from eqdsl.onnx.runtime import session

    print(f"| model | kernel ms per run ({args.threads} thread(s)) | dense share | ceiling | top operators (share) |")
    print("|---|---|---|---|---|")
    for model in [m for m in CORPUS if m.name in args.models.split(",") and fetch_ok(m, out)]:
        path = fetch(model, out / "cache")
        per_op = profile(path, model_feeds(session(path, 1), model), args.runs, args.threads)
        total = sum(per_op.values())
        dense = sum(v for k, v in per_op.items() if k in DENSE)
        top = ", ".join(f"{k} {100 * v / total:.1f} %" for k, v in per_op.most_common(6))
        print(f"| {model.name} | {total / 1e3 / args.runs:.2f} | {100 * dense / total:.1f} % | "
              f"{total / max(dense, 1):.3f}× | {top} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
