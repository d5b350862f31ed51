"""The exports by name, and the `export:` config section that selects one.

Contract: `EXPORTS` maps a name to an `Export`; `read_export(data)` turns an `export:` value (a
name, or `{format, runtime_check, runs, seed, keep_if_slower, device}`, or false) into `ExportSettings` or None,
raising `EqdslError` that names the YAML path (also for `device: cuda` where this ONNX Runtime has no
CUDA execution provider). Adding an export is one module and one `EXPORTS.register` line here, or
an entry point in the `eqdsl.exports` group.
"""
from __future__ import annotations

from typing import Any

from eqdsl.exports.base import Export, ExportSettings
from eqdsl.exports.onnx import OnnxExport
from eqdsl.fields import Reader, fail, int_at_least, is_bool
from eqdsl.onnx.runtime import PROVIDERS, missing_device
from eqdsl.registry import Registry

EXPORTS: Registry[Export] = Registry("export", "eqdsl.exports")
EXPORTS.register(OnnxExport())


def read_export(data: Any) -> ExportSettings | None:
    if data is None or data is False:
        return None
    if isinstance(data, str):
        data = {"format": data}
    if not isinstance(data, dict):
        raise fail("export", f"one of {', '.join(EXPORTS)}, false, or a mapping with format/runtime_check/runs",
                   data)
    r = Reader(data, "export")
    fmt = r.get("format", "onnx", lambda v: v in EXPORTS, f"one of: {', '.join(EXPORTS)}")
    check = r.get("runtime_check", True, is_bool, "true or false")
    runs = r.get("runs", ExportSettings.runs, int_at_least(20), "an integer >= 20")
    seed = r.get("seed", ExportSettings.seed, int_at_least(0), "an integer >= 0")
    keep = r.get("keep_if_slower", False, is_bool, "true or false")
    device = r.get("device", "cpu", lambda v: v in PROVIDERS, f"one of: {', '.join(PROVIDERS)}")
    r.finish()
    if device != "cpu" and check and (instead := missing_device(device)) is not None:
        raise fail("export.device", f"a device this ONNX Runtime runs on ({instead}; {device} needs "
                   "onnxruntime-gpu and a CUDA GPU)", device)
    return ExportSettings(fmt, check, runs, seed, keep, device)
