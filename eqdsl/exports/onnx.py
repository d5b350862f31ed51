"""`export: onnx`: the optimized program as an ONNX model, checked and timed under ONNX Runtime.

Writes `optimized.onnx` (your model itself, unchanged, when the optimized program is the input
program; else the program written out, with your model's input and output names) and, when the
input was not an ONNX file, `input.onnx` (the input program with the same weights). With
`runtime_check` (the default), ONNX Runtime (CPU) runs the input model (the user's own file when
there is one) and the optimized one on the same random inputs: outputs must agree, and both are
timed with one thread and with all of them. Never slower: when the optimized model is slower with
one thread beyond noise (`RuntimeCheck.slower`), `optimized.onnx` is the input model and the
summary and report say so with both times (unless `keep_if_slower`).
"""
from __future__ import annotations

from pathlib import Path

from eqdsl.exports.base import ExportJob, ExportOutcome
from eqdsl.ir.builder import same_terms
from eqdsl.onnx import require_onnx
from eqdsl.onnx.runtime import RuntimeCheck, compare
from eqdsl.onnx.weights import random_weights


class OnnxExport:
    name = "onnx"

    def run(self, job: ExportJob) -> ExportOutcome:
        require_onnx()
        import onnx  # optional (`eqdsl[onnx]`): imported when used

        from eqdsl.onnx.write import interface_of, save_model, write_program

        weights = dict(job.weights) if job.weights is not None else random_weights(job.original, job.settings.seed)
        original = job.source_file
        unchanged = original is not None and same_terms(job.original, job.optimized)
        if unchanged:  # no rewrite won: the user's model itself, node for node
            files = save_model(onnx.load(str(original)), job.folder / "optimized.onnx")
        else:
            interface = interface_of(original) if original is not None else None
            files = write_program(job.language, job.optimized, weights, job.folder / "optimized.onnx", interface)
        if original is None:
            files += write_program(job.language, job.original, weights, job.folder / "input.onnx")
            original = job.folder / "input.onnx"
        outcome = ExportOutcome(files, {"files": files, "weights": "model" if job.weights else "random (seeded)",
                                        "unchanged": unchanged})
        if unchanged:
            outcome.summary.append("the optimized program is the input program: optimized.onnx is your model, "
                                   "unchanged")
        if job.settings.runtime_check:
            check = compare(original, job.folder / "optimized.onnx", job.settings.runs, job.settings.seed,
                            fixed=dict(job.fixed_inputs))
            outcome.ok = check.ok
            outcome.report["runtime"] = _report(check, job.predicted_speedup)
            outcome.summary += _summary(check, job.predicted_speedup)
            replaced = check.ok and check.slower and not job.settings.keep_if_slower
            if check.ok and check.slower:
                outcome.summary.append(_kept(job, check, original))
            outcome.report["runtime"]["kept"] = "input" if replaced else "optimized"
        return outcome


def _kept(job: ExportJob, check: RuntimeCheck, original: Path) -> str:
    """The never-slower guard: the input model becomes `optimized.onnx`, unless told to keep it."""
    low, high = check.ratio_interval
    measured = (f"the optimized model is slower with 1 thread ({check.original_ms[1]:.2f} → "
                f"{check.optimized_ms[1]:.2f} ms; its time ÷ the input's is in [{low:.3f}, {high:.3f}], 95 %)")
    if job.settings.keep_if_slower:
        return f"{measured}: kept anyway (export.keep_if_slower)"
    import onnx

    from eqdsl.onnx.write import save_model

    save_model(onnx.load(str(original)), job.folder / "optimized.onnx")
    return f"{measured}: optimized.onnx is the input model (`export: {{keep_if_slower: true}}` keeps the optimized one)"


def _report(check: RuntimeCheck, predicted: float) -> dict:
    return {"runtime": "onnxruntime-cpu", "ok": check.ok, "max_error": check.max_error, "runs": check.runs,
            "original_ms": check.original_ms, "optimized_ms": check.optimized_ms,
            "speedup": {t: check.speedup(t) for t in check.original_ms}, "predicted_speedup": predicted,
            "ratio_interval_1_thread": list(check.ratio_interval), "slower": check.slower}


def _summary(check: RuntimeCheck, predicted: float) -> list[str]:
    lines = [check.message]
    for t in check.original_ms:
        lines.append(f"ORT CPU ({t} thread{'s' if t > 1 else ''}): {check.original_ms[t]:.2f} ms → "
                     f"{check.optimized_ms[t]:.2f} ms ({check.speedup(t):.2f}×; cost model predicted "
                     f"{predicted:.2f}×)")
    return lines
