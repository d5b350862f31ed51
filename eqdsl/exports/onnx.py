"""`export: onnx`: the optimized program as an ONNX model, checked and timed under ONNX Runtime.

Writes `optimized.onnx` (and `input.onnx`, the input program with the same weights, when the input
was not an ONNX file). With `runtime_check` (the default), ONNX Runtime (CPU) runs the input model
(the user's own file when there is one) and the optimized one on the same random inputs: outputs
must agree, and both are timed with one thread and with all of them.
"""
from __future__ import annotations

from eqdsl.exports.base import ExportJob, ExportOutcome
from eqdsl.onnx import require_onnx
from eqdsl.onnx.runtime import RuntimeCheck, compare
from eqdsl.onnx.weights import random_weights


class OnnxExport:
    name = "onnx"

    def run(self, job: ExportJob) -> ExportOutcome:
        require_onnx()
        from eqdsl.onnx.write import write_program  # onnx is optional (`eqdsl[onnx]`): imported when used

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
