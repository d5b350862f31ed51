"""Measuring backends (`eqdsl.cost.measured.Backend`): time one operator configuration on a real
runtime. `ort`: ONNX Runtime CPU, one thread, a one-operator model made by the ONNX exporter;
`cpu`: eqdsl's Numba CPU kernels; `cuda`: eqdsl's Numba CUDA kernels, CUDA events. Each backend
times what the operator table (`eqdsl.languages.tensor.ops`) gives it a form for; `time_ns`
returns None where the kernel cannot take the arguments (the fallback cost rule prices those).
The target kind that uses them is `measure` (`eqdsl.cost.registry`).
"""
from __future__ import annotations

import platform
from pathlib import Path
from typing import Any

import numpy as np

from eqdsl import ir
from eqdsl.diagnostics import EqdslError
from eqdsl.ir.builder import GraphBuilder
from eqdsl.kernels.shapes import Unsupported
from eqdsl.languages.tensor.ops import SPECS


def processor() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _tensor_params(lang: ir.Language, op: str) -> list[bool]:
    return [isinstance(p.type, ir.SortType) for p in lang.ops[op].params]


def _arrays(lang: ir.Language, op: str, args: tuple[Any, ...], seed: int = 0) -> tuple[Any, ...]:
    rng = np.random.default_rng(seed)
    return tuple(rng.standard_normal(a).astype(np.float32) if is_tensor else a
                 for a, is_tensor in zip(args, _tensor_params(lang, op)))


class OrtBackend:
    name = "ort"

    def device(self) -> str:
        import onnxruntime as ort

        return f"ort-cpu onnxruntime {ort.__version__} | {processor()} | 1 thread"

    def supports(self, op: str) -> bool:
        from eqdsl.onnx.write import EMITTERS  # the operators the table gives an ONNX form

        return op in EMITTERS and op in SPECS and SPECS[op].timed

    def time_ns(self, lang: ir.Language, op: str, args: tuple[Any, ...], runs: int) -> float | None:
        from eqdsl.onnx.runtime import is_runtime_error, median_ms, random_feeds

        one = one_op_session(lang, op, args, threads=1)
        try:
            return 1e6 * median_ms([one], random_feeds(one, 0), runs)[0]
        except Exception as err:  # noqa: BLE001 - ONNX Runtime's error types derive from Exception only
            if not is_runtime_error(err):
                raise
            # an operator whose operands must be constants of meaning (Resize's scales) cannot
            # run alone on random ones: the fallback prices it, as for an operator without a kernel
            return None


def one_op_session(lang: ir.Language, op: str, args: tuple[Any, ...], threads: int) -> Any:
    """An ONNX Runtime session of a model holding one `op` node (tensor operands: shapes in
    `args`, as `Backend.time_ns` takes them), its operands as the model's inputs."""
    from eqdsl.onnx.runtime import session
    from eqdsl.onnx.write import to_onnx

    g = GraphBuilder(lang)
    operands = [g.input(f"in{k}", list(a)) if is_tensor else a
                for k, (a, is_tensor) in enumerate(zip(args, _tensor_params(lang, op)))]
    node = g.op(op, *operands)
    roots = [g.op(part, node) for part in SPECS[op].parts] or [node]
    return session(to_onnx(lang, g.program(op, roots), {}).SerializeToString(), threads)


class NumbaCpuBackend:
    name = "cpu"

    def device(self) -> str:
        import numba

        from eqdsl.kernels import VERSION

        return f"numba-cpu {numba.__version__} kernels v{VERSION} | {processor()} | {numba.get_num_threads()} threads"

    def supports(self, op: str) -> bool:
        from eqdsl.kernels.cpu import RUNNERS

        return op in RUNNERS

    def time_ns(self, lang: ir.Language, op: str, args: tuple[Any, ...], runs: int) -> float | None:
        from eqdsl.kernels.cpu import time_op

        try:
            return 1e9 * time_op(op, _arrays(lang, op, args), runs)
        except Unsupported:
            return None


class NumbaCudaBackend:
    name = "cuda"

    def device(self) -> str:
        from numba import cuda

        if not cuda.is_available():
            raise EqdslError.one("target.measure: cuda needs a CUDA GPU and driver; none found "
                                 "(install eqdsl[cuda] on a machine with an NVIDIA driver)", path="target.measure")
        gpu = cuda.get_current_device()
        name = gpu.name.decode() if isinstance(gpu.name, bytes) else gpu.name
        from eqdsl.kernels import VERSION

        return f"numba-cuda kernels v{VERSION} | {name} | cc {gpu.compute_capability}"

    def supports(self, op: str) -> bool:
        from eqdsl.kernels.cuda import LAUNCHERS

        return op in LAUNCHERS

    def time_ns(self, lang: ir.Language, op: str, args: tuple[Any, ...], runs: int) -> float | None:
        from eqdsl.kernels.cuda import time_op, to_device

        try:
            return 1e9 * time_op(op, to_device(_arrays(lang, op, args)), runs)
        except Unsupported:  # e.g. broadcasting past the kernel's rank
            return None
