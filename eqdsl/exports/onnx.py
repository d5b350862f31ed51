"""`export: onnx`: the optimized program as an ONNX model, checked and timed under ONNX Runtime.

Writes `optimized.onnx` (and `input.onnx`, the input program with the same weights, when the input
was not an ONNX file). With `runtime_check` (the default), ONNX Runtime (CPU) runs the input model
(the user's own file when there is one) and the optimized one on the same random inputs: outputs
must agree, and both are timed with one thread and with all of them.
"""
from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from eqdsl import ir
from eqdsl.exports.base import ExportJob, ExportOutcome
from eqdsl.importers.onnx import require_onnx
from eqdsl.importers.onnx.runtime import RuntimeCheck, compare
from eqdsl.importers.onnx.weights import Weights, random_weights

if TYPE_CHECKING:  # onnx is an optional dependency (`eqdsl[onnx]`): imported when an export runs
    import onnx

EXTERNAL_DATA_BYTES = 1 << 30  # protobuf cannot hold 2 GiB: larger models keep weights beside the file


def save_model(model: onnx.ModelProto, path: Path) -> list[str]:
    """Write `model` to `path` (weights in `path.data` when large); the names of the files written."""
    import onnx

    size = sum(len(t.raw_data) for t in model.graph.initializer)
    if size < EXTERNAL_DATA_BYTES:
        onnx.save_model(model, str(path))
        return [path.name]
    data = f"{path.name}.data"
    onnx.save_model(model, str(path), save_as_external_data=True, all_tensors_to_one_file=True, location=data)
    return [path.name] + ([data] if (path.parent / data).exists() else [])  # small tensors stay inline


def write_program(lang: ir.Language, program: ir.Program, weights: Weights, path: Path) -> list[str]:
    """`program` as an ONNX model at `path`, checked by `onnx.checker` (full check) as written."""
    import onnx

    from eqdsl.importers.onnx.write import to_onnx

    files = save_model(to_onnx(lang, program, weights), path)
    onnx.checker.check_model(str(path), full_check=True)
    return files


class OnnxExport:
    name = "onnx"

    def run(self, job: ExportJob) -> ExportOutcome:
        require_onnx()
        weights = dict(job.weights) if job.weights is not None else random_weights(job.original, job.settings.seed)
        files = write_program(job.language, job.optimized, weights, job.folder / "optimized.onnx")
        original = job.source_file
        if original is None:
            files += write_program(job.language, job.original, weights, job.folder / "input.onnx")
            original = job.folder / "input.onnx"
        outcome = ExportOutcome(files, {"files": files, "weights": "model" if job.weights else "random (seeded)"})
        if job.settings.runtime_check:
            check = compare(original, job.folder / "optimized.onnx", job.settings.runs, job.settings.seed)
            outcome.ok = check.ok
            outcome.report["runtime"] = _report(check, job.predicted_speedup)
            outcome.summary += _summary(check, job.predicted_speedup)
        return outcome


def _report(check: RuntimeCheck, predicted: float) -> dict:
    return {"runtime": "onnxruntime-cpu", "ok": check.ok, "max_error": check.max_error, "runs": check.runs,
            "original_ms": check.original_ms, "optimized_ms": check.optimized_ms,
            "speedup": {t: check.speedup(t) for t in check.original_ms}, "predicted_speedup": predicted}


def _summary(check: RuntimeCheck, predicted: float) -> list[str]:
    lines = [check.message]
    for t in check.original_ms:
        lines.append(f"ORT CPU ({t} thread{'s' if t > 1 else ''}): {check.original_ms[t]:.2f} ms → "
                     f"{check.optimized_ms[t]:.2f} ms ({check.speedup(t):.2f}×; cost model predicted "
                     f"{predicted:.2f}×)")
    return lines
