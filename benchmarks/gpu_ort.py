"""eqdsl's programs under ONNX Runtime's CUDA execution provider (issue 45, item 5), in two steps:
the search needs egglog and CP-SAT (here), the timing a GPU (the device machine, where neither is).

    .venv/bin/python benchmarks/gpu_ort.py prepare .gpu/ort [--tensat nasrnn,...] [--corpus a,b] [--target a100]
    python3 benchmarks/gpu_ort.py time .gpu/ort [--runs 50]           # on the GPU, onnxruntime-gpu importable

`prepare` optimizes TENSAT's nine models (their builders, TENSAT's settings as in
`benchmarks/tensat.py`, k_multi 1) and the named corpus models (`benchmarks/models.py`'s runs,
ruleset tensat) for a GPU roofline target, writes each input and optimized program as ONNX, and
keeps of each file its graph: float initializers above `KEEP` elements lose their data (the
device fills them with seeded normal values, so a 300 MB BERT travels as kilobytes; speed does
not depend on the values). Inputs are saved beside them (`feeds.npz`), and `manifest.json` holds
eqdsl's predicted speedup and TENSAT's published one. The outputs of both programs were already
compared on real weights here (eqdsl's validation and its ONNX Runtime CPU check).

`time` loads each pair with `CUDAExecutionProvider` (PyTorch is imported first: its CUDA 13,
cuBLAS and cuDNN libraries are the ones onnxruntime-gpu 1.31 loads), binds inputs and outputs on
the GPU (IOBinding: no host copies timed), warms up, then times input and optimized program
alternately, run by run, `--runs` times each, and prints the medians and their ratio.
"""
from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

KEEP = 4096  # float initializers with more elements travel without their data
TENSAT_NINE = "nasrnn,bert,resnext50,nasneta,squeezenet,vgg19,inceptionv3,resnet50,mobilenetv2"
CORPUS = "zoo-squeezenet,zoo-inception_v1,ppocr-det-v4,ppocr-rec-v4,ppocr-cls-v2,torch-resnet50," \
         "torch-mobilenet_v3_large,torch-efficientnet_b0,torch-bert_base,torch-vit_b_16,torch-gpt2_small"


def strip(source: Path, target: Path) -> int:
    """`source` without the data of its large float initializers (marked for the device to fill);
    the number of bytes left out."""
    import onnx

    model = onnx.load(str(source))
    dropped = 0
    for init in model.graph.initializer:
        size = int(np.prod(init.dims)) if init.dims else 1
        if init.data_type == onnx.TensorProto.FLOAT and size > KEEP:
            dropped += 4 * size
            init.ClearField("raw_data")
            init.ClearField("float_data")
            init.doc_string = "eqdsl:random"
    target.parent.mkdir(parents=True, exist_ok=True)
    onnx.save(model, str(target))
    return dropped


def prepare_tensat(name: str, target: str, out: Path) -> dict:
    from tensat import TENSAT_TABLE1, run_model

    from eqdsl.onnx.runtime import random_feeds, session
    from eqdsl.onnx.weights import random_weights
    from eqdsl.onnx.write import write_program

    settings = argparse.Namespace(measure=None, measure_runs=5, iter_limit=15, node_limit=50_000,
                                  explore_limit=3600.0, extract_limit=60.0, acyclic="order")
    r = run_model(name, 1, "efficient", target, settings)
    weights = random_weights(r.program)
    published = TENSAT_TABLE1.get(name)
    with tempfile.TemporaryDirectory() as scratch:  # the full-weight files; `_pair` keeps stripped copies
        full = Path(scratch)
        write_program(r.language, r.program, weights, full / "input.onnx")
        write_program(r.language, r.optimized_program(), weights, full / "optimized.onnx")
        feeds = random_feeds(session(full / "input.onnx", 1), 0, 0.5)
        return _pair(name, full / "input.onnx", full / "optimized.onnx", feeds, out,
                     predicted=r.original_cost / r.best.cost, published=published[1] if published else None)


def prepare_corpus(name: str, target: str, out: Path) -> dict | None:
    import models

    from eqdsl.onnx.runtime import session

    model = next(m for m in models.CORPUS if m.name == name)
    bench = Path("results/bench/models")
    path = models.fetch(model, bench / "cache")
    ran = models.run_eqdsl(model, path, out / "runs" / name, reuse=True, target=target,
                           export="{format: onnx, runtime_check: false}")  # the GPU is the judge, not the CPU
    if not ran.get("ok"):
        print(f"{name}: eqdsl {ran.get('error', '')[:100]}", file=sys.stderr)
        return None
    feeds = models.model_feeds(session(path, 1), model)
    return _pair(name, path, ran["optimized"], feeds, out, predicted=ran["predicted"], published=None)


def _pair(name: str, original: Path, optimized: Path, feeds: dict, out: Path, predicted: float,
          published: float | None) -> dict:
    folder = out / "pairs" / name
    same = original.read_bytes() == optimized.read_bytes()
    if not same:  # a handed-back file is the input itself: nothing to time
        strip(original, folder / "input.onnx")
        strip(optimized, folder / "optimized.onnx")
        np.savez(folder / "feeds.npz", **feeds)
    return {"name": name, "predicted": predicted, "tensat_published_pct": published, "handed_back": same}


def prepare(out: Path, tensat: list[str], corpus: list[str], target: str) -> None:
    rows = []
    for name in tensat:
        t0 = time.perf_counter()
        rows.append({**prepare_tensat(name, target, out), "source": "tensat"})
        print(f"{name}: predicted {rows[-1]['predicted']:.3f}x ({time.perf_counter() - t0:.0f} s)", flush=True)
    for name in corpus:
        row = prepare_corpus(name, target, out)
        if row:
            rows.append({**row, "source": "corpus"})
            print(f"{name}: predicted {row['predicted']:.3f}x, handed back {row['handed_back']}", flush=True)
    (out / "manifest.json").write_text(json.dumps({"target": target, "rows": rows}, indent=1))


def filled(path: Path, seed: int) -> bytes:
    """The model at `path` with its marked initializers filled with seeded normal values (× 0.05)."""
    import onnx
    from onnx import numpy_helper

    model = onnx.load(str(path))
    rng = np.random.default_rng(seed)
    for i, init in enumerate(model.graph.initializer):
        if init.doc_string == "eqdsl:random":
            values = (0.05 * rng.standard_normal(tuple(init.dims))).astype(np.float32)
            model.graph.initializer[i].CopyFrom(numpy_helper.from_array(values, init.name))
    return model.SerializeToString()


def time_pair(folder: Path, runs: int, device: str = "cuda") -> tuple[float, float]:
    """Median ms of the input and of the optimized program on `device`, taking turns run by run
    (`eqdsl.onnx.runtime.timed_ms`: inputs and outputs bound on the device)."""
    from eqdsl.onnx.runtime import session, timed_ms

    feeds = dict(np.load(folder / "feeds.npz"))
    sessions = [session(filled(folder / name, 0), 1, device) for name in ("input.onnx", "optimized.onnx")]
    base, ours = timed_ms(sessions, feeds, runs, device)
    return float(np.median(base)), float(np.median(ours))


def time_all(out: Path, runs: int) -> None:
    import torch  # noqa: F401, I001  first: its CUDA 13 runtime, cuBLAS and cuDNN are what onnxruntime-gpu loads
    import onnxruntime as ort

    from eqdsl.onnx.runtime import missing_device

    if hasattr(ort, "preload_dlls"):
        ort.preload_dlls()  # the same libraries from the nvidia packages, where torch did not load them
    if (instead := missing_device("cuda")) is not None:
        raise SystemExit(f"ONNX Runtime has no CUDA execution provider here (only {instead})")

    manifest = json.loads((out / "manifest.json").read_text())
    print(f"# onnxruntime {ort.__version__} CUDAExecutionProvider, {torch.cuda.get_device_name(0)}, target "
          f"{manifest['target']}, median of {runs} alternating runs, IOBinding on the GPU")
    print("| model | source | eqdsl predicted | input ms | eqdsl ms | measured speedup | TENSAT published (T4) |")
    print("|---|---|---|---|---|---|---|")
    for row in manifest["rows"]:
        if row["handed_back"]:
            print(f"| {row['name']} | {row['source']} | {row['predicted']:.3f}× | | input file | 1.000× | |")
            continue
        try:
            base, ours = time_pair(out / "pairs" / row["name"], runs)
        except Exception as err:  # noqa: BLE001  ONNX Runtime's own errors, reported in the row
            print(f"| {row['name']} | {row['source']} | {row['predicted']:.3f}× | {str(err)[:90]} | | | |", flush=True)
            continue
        published = f"{1 + row['tensat_published_pct'] / 100:.3f}×" if row["tensat_published_pct"] else "—"
        print(f"| {row['name']} | {row['source']} | {row['predicted']:.3f}× | {base:.3f} | {ours:.3f} | {base / ours:.3f}× | "
              f"{published} |", flush=True)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("step", choices=["prepare", "time"])
    ap.add_argument("folder", type=Path)
    ap.add_argument("--tensat", default=TENSAT_NINE)
    ap.add_argument("--corpus", default=CORPUS)
    ap.add_argument("--target", default="a100")
    ap.add_argument("--runs", type=int, default=50)
    args = ap.parse_args()
    if args.step == "prepare":
        prepare(args.folder, [n for n in args.tensat.split(",") if n], [n for n in args.corpus.split(",") if n],
                args.target)
    else:
        time_all(args.folder, args.runs)
    return 0


if __name__ == "__main__":
    sys.exit(main())
