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
from eqdsl.fields import fail, read_section
from eqdsl.onnx.runtime import missing_device
from eqdsl.registry import Registry

EXPORTS: Registry[Export] = Registry("export", "eqdsl.exports")
EXPORTS.register(OnnxExport())


def read_export(data: Any) -> ExportSettings | None:
    settings = read_section(data, ExportSettings, "export", shorthand="format")
    if settings is None:
        return None
    device = settings.device
    if device != "cpu" and settings.runtime_check and (instead := missing_device(device)) is not None:
        raise fail("export.device", f"a device this ONNX Runtime runs on ({instead}; {device} needs "
                   "onnxruntime-gpu and a CUDA GPU)", device)
    return settings
