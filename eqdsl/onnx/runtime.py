"""ONNX Runtime runs two models on the same random inputs: do they agree, and how fast is each?

Contract: `compare(original, optimized, runs, seed, thread_counts, fixed)` loads both models (bytes
or a path), feeds the original's inputs (normal, seeded; scaled down where the original overflows
float32; `fixed` ones as given) to both, and returns a `RuntimeCheck`: `ok` when every output pair agrees within `RTOL`
of the output's magnitude, and the median of `runs` timed runs (after `WARMUP` untimed ones) with
each thread count (default: one intra-op thread, and all of them). The two models are timed
alternately, run by run, so that load on a shared machine hits both alike. Outputs are matched by
position. `device` "cuda" runs both on ONNX Runtime's CUDA execution provider instead (onnxruntime-gpu;
`missing_device` says whether this ONNX Runtime has it): inputs and outputs stay on the GPU while
timed (IOBinding), one timing column (key 1: intra-op threads do not apply).
"""
from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Sequence

import numpy as np

# Float32 execution of two different but equivalent programs (re-associated sums, merged matmuls)
# differs by float32 rounding, ~1e-7 per operation, accumulated through the model; translation
# validation (float64) uses 1e-6, the same measure (largest difference / max(1, max |output|)).
RTOL = 1e-4
WARMUP = 3


@dataclass(frozen=True)
class RuntimeCheck:
    ok: bool
    max_error: float
    runs: int
    original_ms: dict[int, float]  # threads (1, and the machine's count) → median milliseconds
    optimized_ms: dict[int, float]
    message: str
    ratio_interval: tuple[float, float] = (1.0, 1.0)  # one thread: 95 % interval of optimized ÷ input time
    ratio_medians: dict[int, float] = field(default_factory=dict)  # threads → median per-run optimized ÷ input

    def speedup(self, threads: int) -> float:
        """Input time ÷ optimized time: 1 / the median of the per-run ratios, the statistic the
        interval bounds (so the two never disagree in direction); from the medians where the runs
        were not kept."""
        if threads in self.ratio_medians:
            return 1.0 / self.ratio_medians[threads]
        return self.original_ms[threads] / self.optimized_ms[threads]

    @property
    def slower(self) -> bool:
        """The optimized model is slower beyond noise, one thread: even the low end of the 95 %
        interval of its time ÷ the input's is above 1."""
        return self.ratio_interval[0] > 1.0


PROVIDERS = {"cpu": "CPUExecutionProvider", "cuda": "CUDAExecutionProvider"}  # `device` → ONNX Runtime's


def session(model: bytes | Path, threads: int, device: str = "cpu"):
    """An ONNX Runtime session on `device` with `threads` intra-op threads (one inter-op thread)."""
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    options.log_severity_level = 3
    source = str(model) if isinstance(model, Path) else model
    return ort.InferenceSession(source, options, providers=[PROVIDERS[device]])


def missing_device(device: str) -> str | None:
    """None where this ONNX Runtime can run on `device`, else what it can run on instead."""
    import onnxruntime as ort

    available = ort.get_available_providers()
    return None if PROVIDERS[device] in available else ", ".join(available)


def is_runtime_error(err: BaseException) -> bool:
    """ONNX Runtime refused a model or an input (its error types derive from Exception only)."""
    return type(err).__module__.startswith("onnxruntime")


def random_feeds(session, seed: int, scale: float = 1.0, shapes: dict[str, list[int]] | None = None,
                 fixed: dict[str, np.ndarray] | None = None) -> dict[str, np.ndarray]:
    """Inputs for every input of `session`: `fixed` ones as given (an input the import fixed to a
    constant), float ones normal, other types zeros; `shapes` gives the dims of inputs the model
    leaves dynamic (the static model eqdsl imported; 1 where neither says)."""
    rng = np.random.default_rng(seed)
    known, fixed = shapes or {}, fixed or {}
    feeds = {}
    for i in session.get_inputs():
        dims = [d if isinstance(d, int) else 1 for d in known.get(i.name, i.shape)]
        kind = np.dtype(ORT_TYPES.get(i.type, "float32"))
        if i.name in fixed:
            feeds[i.name] = np.broadcast_to(np.asarray(fixed[i.name], kind), dims).copy()
        elif kind.kind == "f":
            feeds[i.name] = np.asarray(scale * rng.standard_normal(dims), kind)  # a 0-d input: an array too
        else:
            feeds[i.name] = np.zeros(dims, kind)
    return feeds


ORT_TYPES = {"tensor(float)": "float32", "tensor(float16)": "float16", "tensor(double)": "float64",
             "tensor(int64)": "int64", "tensor(int32)": "int32", "tensor(int8)": "int8", "tensor(uint8)": "uint8",
             "tensor(bool)": "bool"}


def finite_feeds(session, seed: int, shapes: dict[str, list[int]] | None = None,
                 fixed: dict[str, np.ndarray] | None = None) -> tuple[dict[str, np.ndarray], float]:
    """Random inputs on which the model's outputs are finite, and their scale (`halved_until_finite`)."""
    feeds = random_feeds(session, seed, shapes=shapes, fixed=fixed)
    feeds, scale, _ = halved_until_finite(lambda f: session.run(None, f), feeds)
    return feeds, scale


def halved_until_finite(run: Callable[[dict[str, np.ndarray]], Sequence[np.ndarray]],
                        feeds: dict[str, np.ndarray]) -> tuple[dict[str, np.ndarray], float, Sequence[np.ndarray]]:
    """(inputs, their scale, `run`'s outputs) with every output finite. Some graphs overflow
    float32 on unit-variance inputs (TASO's BERT: attention without softmax is a cubic map, eight
    times over), so the inputs are halved until every output is finite (down to 2^-30; halving
    is exact in float32). Shared by the ONNX Runtime check and eqdsl's executor."""
    for k in range(31):
        scaled = {name: np.asarray(v * v.dtype.type(2.0 ** -k)) if v.dtype.kind == "f" else v
                  for name, v in feeds.items()}
        outputs = run(scaled)
        if all(np.all(np.isfinite(o)) for o in outputs):
            return scaled, 2.0 ** -k, outputs
    return feeds, 1.0, run(feeds)


def median_ms(sessions: list, feeds: dict[str, np.ndarray], runs: int) -> list[float]:
    """Per session, the median milliseconds of `runs` runs after `WARMUP` untimed ones; the
    sessions take turns run by run."""
    return [float(np.median(t)) for t in timed_ms(sessions, feeds, runs)]


def ratio_interval(original: list[float], optimized: list[float], seed: int = 0) -> tuple[float, float]:
    """95 % bootstrap interval of the median of the per-run ratios optimized ÷ original (runs
    taken in turns, so a load spike hits both of a pair alike)."""
    ratios = np.asarray(optimized) / np.asarray(original)
    rng = np.random.default_rng(seed)
    medians = np.median(rng.choice(ratios, size=(BOOTSTRAP, len(ratios))), axis=1)
    low, high = np.percentile(medians, [2.5, 97.5])
    return float(low), float(high)


BOOTSTRAP = 2000


def _interval(timings: dict[int, list[list[float]]], seed: int) -> tuple[float, float]:
    original, optimized = timings[min(timings)]  # one thread, where it was timed
    return ratio_interval(original, optimized, seed)


def timed_ms(sessions: list, feeds: dict[str, np.ndarray], runs: int, device: str = "cpu") -> list[list[float]]:
    """Per session, the milliseconds of each of `runs` runs after `WARMUP` untimed ones; the
    sessions take turns run by run. Off the CPU, inputs and outputs stay on `device`."""
    calls = [_on_host(s, feeds) if device == "cpu" else bound_run(s, feeds, device) for s in sessions]
    for call in calls:
        for _ in range(WARMUP):
            call()
    times: list[list[float]] = [[] for _ in sessions]
    for _ in range(runs):
        for k, call in enumerate(calls):
            t0 = time.perf_counter()
            call()  # returns once the device's work is done (ONNX Runtime synchronizes its stream)
            times[k].append(1000 * (time.perf_counter() - t0))
    return times


def _on_host(s, feeds: dict[str, np.ndarray]) -> Callable[[], object]:
    return lambda: s.run(None, feeds)


def bound_run(s, feeds: dict[str, np.ndarray], device: str) -> Callable[[], object]:
    """A run of `s` with its inputs copied to `device` once and its outputs left there (IOBinding)."""
    import onnxruntime as ort

    binding = s.io_binding()
    for i in s.get_inputs():
        binding.bind_ortvalue_input(i.name, ort.OrtValue.ortvalue_from_numpy(feeds[i.name], device, 0))
    for o in s.get_outputs():
        binding.bind_output(o.name, device)
    return lambda: s.run_with_iobinding(binding)


def largest_error(want: Sequence[np.ndarray], got: Sequence[np.ndarray]) -> float:
    """The largest |difference| of output pairs, each relative to max(1, max |wanted output|)."""
    worst = 0.0
    for w, g in zip(want, got):
        if w.shape != g.shape:
            return float("inf")
        scale = max(1.0, float(np.max(np.abs(w))) if w.size else 0.0)
        diff = float(np.max(np.abs(w.astype(np.float64) - g))) if w.size else 0.0
        worst = max(worst, diff / scale if np.isfinite(diff) else float("inf"))
    return worst


def compare(original: bytes | Path, optimized: bytes | Path, runs: int = 20, seed: int = 0,
            thread_counts: list[int] | None = None, fixed: dict[str, np.ndarray] | None = None,
            device: str = "cpu") -> RuntimeCheck:
    return compare_many(original, [optimized], runs, seed, thread_counts, fixed, device=device)[0]


def _static_shapes(sessions: list) -> dict[str, list]:
    """Each input's dims from the first session where they are all static (eqdsl's models are; the
    user's file handed back unchanged may leave some dynamic), else the first session's."""
    def static(dims: list) -> bool:
        return all(isinstance(d, int) for d in dims)

    shapes: dict[str, list] = {}
    for s in sessions:
        for i in s.get_inputs():
            if i.name not in shapes or (not static(shapes[i.name]) and static(i.shape)):
                shapes[i.name] = i.shape
    return shapes


def compare_many(original: bytes | Path, others: Sequence[bytes | Path], runs: int = 20, seed: int = 0,
                 thread_counts: list[int] | None = None, fixed: dict[str, np.ndarray] | None = None,
                 shapes: dict[str, list[int]] | None = None, device: str = "cpu") -> list[RuntimeCheck]:
    """`compare` of the original with each of `others`, all timed in one interleaved pass (the
    original's times are the same in every check). `shapes`: the inputs' dims where the models
    leave them dynamic (the static program eqdsl imported)."""
    if device != "cpu":
        thread_counts = [1]  # intra-op threads do not apply off the CPU: one timing column
    thread_counts = thread_counts or sorted({1, os.cpu_count() or 1})
    first, rest = session(original, 1, device), [session(o, 1, device) for o in others]
    feeds, scale = finite_feeds(first, seed, {**_static_shapes(rest), **(shapes or {})}, fixed)
    want = first.run(None, feeds)
    timings = {t: timed_ms([first, *rest] if t == 1 else [session(m, t) for m in (original, *others)], feeds, runs,
                           device) for t in thread_counts}
    scaled = f"; inputs scaled by {scale:g} to keep outputs finite)" if scale != 1.0 else ")"
    checks = []
    for k, other in enumerate(rest, start=1):
        got = other.run(None, feeds)
        error = largest_error(want, got) if len(want) == len(got) else float("inf")
        verdict = "agree" if error <= RTOL else "DISAGREE"
        pair = {t: [times[0], times[k]] for t, times in timings.items()}
        checks.append(RuntimeCheck(error <= RTOL, error, runs,
                                   {t: float(np.median(v[0])) for t, v in pair.items()},
                                   {t: float(np.median(v[1])) for t, v in pair.items()},
                                   f"ONNX Runtime outputs {verdict} (largest relative difference {error:.3g}, "
                                   f"tolerance {RTOL:g}" + scaled, _interval(pair, seed),
                                   {t: float(np.median(np.asarray(v[1]) / np.asarray(v[0]))) for t, v in pair.items()}))
    return checks
