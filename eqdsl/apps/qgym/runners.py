"""`execute:` and `he:` for a `conv_layer` run: the extracted program as Q-gym's convolution kernel
(CPU or CUDA) timed beside ONNX Runtime's Conv, and as a TenSEAL BFV circuit.

Contract: `KernelRunner(layer)` and `HeRunner(layer, summerge)` are `eqdsl.sources.base.ProgramRunner`s:
`check(settings)` refuses up front what cannot run here (no GPU, no TenSEAL, outputs too large for
BFV's plain modulus), raising `EqdslError`; `run(program, settings)` returns a `RunnerOutcome`,
`ok` only when every output equals the integer convolution (kernels: on a random integer input;
HE: the decrypted outputs). Timings are medians of `settings.runs` calls after one untimed call,
the CPU kernel and ORT taking turns; a CUDA kernel is timed alone with CUDA events, its input
already on the device (`eqdsl.kernels.cuda.time_launch`), beside ORT's CPU Conv.
"""
from __future__ import annotations

import statistics
import time
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from eqdsl import ir
from eqdsl.apps.qgym import he
from eqdsl.apps.qgym.layer import QuantizedLayer
from eqdsl.diagnostics import EqdslError
from eqdsl.sources.base import RunnerOutcome

INPUT_SIZE = 64  # the timed input: C × 64 × 64 integer values, as benchmarks/qgym.py
BFV_MODULUS = 1032193  # he.run_bfv's plain modulus
BFV_X_MAX = 15  # he.run_bfv's largest input value


@dataclass(frozen=True)
class KernelRunner:
    layer: QuantizedLayer

    def check(self, settings: Any) -> None:
        if settings.device == "cuda":
            from eqdsl.execute.executor import require_cuda

            require_cuda()

    def run(self, program: ir.Program, settings: Any) -> RunnerOutcome:
        from eqdsl.apps.qgym.kernels import CudaConv, cpu_kernel, cuda_kernel, direct_conv
        from eqdsl.apps.qgym.ort import ort_conv

        spec = self.layer.spec
        rng = np.random.default_rng(settings.seed)
        x = rng.integers(-127, 128, size=(spec.C, INPUT_SIZE, INPUT_SIZE + spec.tpr)).astype(np.float32)
        expected = direct_conv(x.astype(np.int64), self.layer.weights)
        t0 = time.perf_counter()
        kernel = cuda_kernel(program, spec) if settings.device == "cuda" else cpu_kernel(program, spec)
        exact = bool(np.array_equal(kernel(x).astype(np.int64), expected))  # the first call compiles
        compile_s = time.perf_counter() - t0
        ort = ort_conv(self.layer.weights.astype(np.float32), threads=2)
        if settings.device == "cuda":  # the kernel alone, input on the device, CUDA events
            from eqdsl.kernels.cuda import time_launch

            assert isinstance(kernel, CudaConv)
            times = {"kernel": time_launch(kernel.launch, (kernel.device_input(x),), settings.runs),
                     **_alternating({"ort": lambda: ort(x)}, settings.runs)}
        else:
            times = _alternating({"kernel": lambda: kernel(x), "ort": lambda: ort(x)}, settings.runs)
        report = {"device": settings.device, "ok": exact, "exact": exact, "input": [spec.C, INPUT_SIZE, INPUT_SIZE],
                  "kernel_ms": 1e3 * times["kernel"], "ort_conv_ms": 1e3 * times["ort"], "runs": settings.runs,
                  "compile_s": compile_s, "ort_over_kernel": times["ort"] / times["kernel"]}
        verdict = "equal the integer convolution" if exact else "DIFFER from the integer convolution"
        line = (f"executed as Q-gym's {settings.device} kernel on a {spec.C}×{INPUT_SIZE}×{INPUT_SIZE} integer input: "
                f"outputs {verdict}; {1e3 * times['kernel']:.3f} ms vs ONNX Runtime's CPU Conv "
                f"{1e3 * times['ort']:.3f} ms ({times['ort'] / times['kernel']:.2f}×), medians of "
                f"{settings.runs}; compiled in {compile_s:.1f} s")
        return RunnerOutcome(exact, report, (line,))


def _alternating(fns: dict[str, Callable[[], Any]], runs: int) -> dict[str, float]:
    """Median seconds of each function, called in turn `runs` times (after one untimed call)."""
    samples: dict[str, list[float]] = {name: [] for name in fns}
    for fn in fns.values():
        fn()
    for _ in range(runs):
        for name, fn in fns.items():
            t0 = time.perf_counter()
            fn()
            samples[name].append(time.perf_counter() - t0)
    return {name: statistics.median(s) for name, s in samples.items()}


@dataclass(frozen=True)
class HeRunner:
    layer: QuantizedLayer
    summerge: ir.Program

    def check(self, settings: Any) -> None:
        try:
            import tenseal  # noqa: F401
        except ImportError:
            raise EqdslError.one("he: needs TenSEAL (`pip install tenseal`); it is not installed", path="he") from None
        if self.layer.spec.tpr:
            raise EqdslError.one(f"he: runs one output position (tpr 0); this layer has tpr {self.layer.spec.tpr}",
                                 path="he")
        bound = int(np.abs(self.layer.weights).sum(axis=(1, 2, 3)).max()) * BFV_X_MAX
        if 2 * bound >= BFV_MODULUS:
            raise EqdslError.one(f"he: outputs up to ±{bound} on inputs in [0, {BFV_X_MAX}] do not fit BFV's plain "
                                 f"modulus {BFV_MODULUS}", path="he")

    def run(self, program: ir.Program, settings: Any) -> RunnerOutcome:
        equal, seconds = he.run_bfv(program, self.layer.weights, settings.batch, settings.seed, BFV_X_MAX)
        counts = {"optimized": he.he_counts(program), "summerge": he.he_counts(self.summerge),
                  "dense": he.dense_he_counts(self.layer.spec)}
        report = {"ok": equal, "batch": settings.batch, "seconds": seconds, **{k: vars(c) for k, c in counts.items()}}
        shown = "; ".join(f"{name} {c.pt_ct_mul} / {c.ct_ct_add} / {c.pt_ct_add}" for name, c in counts.items())
        verdict = "equal" if equal else "DIFFER from"
        lines = (f"HE (TenSEAL BFV, batch {settings.batch}): decrypted outputs {verdict} the integer layer "
                 f"({seconds:.2f} s)",
                 f"  pt×ct multiplies / ct+ct adds / pt+ct adds: {shown}")
        return RunnerOutcome(equal, report, lines)
