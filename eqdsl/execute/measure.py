"""Measured operator costs: time each (operator, argument shapes, parameters) an e-graph holds on
a real backend, once, and keep the result in the timing cache.

Contract: `MeasuredCosts(lang, backend, cache, runs)` is called with a batch of requests
`(op, args, out)` — `args` in the operator's declared order, shapes for tensor operands, literals
for the rest — and returns nanoseconds per request (the median of `runs` timed runs after a
warm-up), or None where the backend has no kernel for the operator (the `.eqr` cost rule then
prices the node). Each distinct request is timed at most once per device: cached timings are
reused across runs. Backends: `ort` (ONNX Runtime CPU, one thread, a one-operator model made by
the ONNX exporter), `cpu` (eqdsl's Numba CPU kernels), `cuda` (eqdsl's Numba CUDA kernels, CUDA
events). Requests are timed one after another: timing two at once on a shared machine would
disturb both.
"""
from __future__ import annotations

import platform
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Protocol

import numpy as np

from eqdsl import ir
from eqdsl.diagnostics import EqdslError
from eqdsl.execute.cache import TimingCache
from eqdsl.ir.builder import GraphBuilder
from eqdsl.kernels.shapes import Unsupported
from eqdsl.languages.tensor.ops import OPS

Request = tuple[str, tuple[Any, ...], Any]  # (op, args, output shape)
ProgressFn = Callable[[int, int, str], None]  # (done, total, what)
NOT_TIMED = {spec.name for spec in OPS if not spec.timed}  # leaves, roots, free views


def processor() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


class Backend(Protocol):
    name: str

    def device(self) -> str: ...

    def supports(self, op: str) -> bool: ...

    def time_ns(self, lang: ir.Language, op: str, args: tuple[Any, ...], runs: int) -> float: ...


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

        return op in EMITTERS and op not in NOT_TIMED

    def time_ns(self, lang: ir.Language, op: str, args: tuple[Any, ...], runs: int) -> float:
        from eqdsl.onnx.runtime import median_ms, random_feeds

        one = one_op_session(lang, op, args, threads=1)
        return 1e6 * median_ms([one], random_feeds(one, 0), runs)[0]


def one_op_session(lang: ir.Language, op: str, args: tuple[Any, ...], threads: int) -> Any:
    """An ONNX Runtime session of a model holding one `op` node (tensor operands: shapes in
    `args`, as `Backend.time_ns` takes them), its operands as the model's inputs."""
    from eqdsl.onnx.runtime import session
    from eqdsl.onnx.write import to_onnx

    g = GraphBuilder(lang)
    operands = [g.input(f"in{k}", list(a)) if is_tensor else a
                for k, (a, is_tensor) in enumerate(zip(args, _tensor_params(lang, op)))]
    node = g.op(op, *operands)
    roots = [g.split0(node), g.split1(node)] if op == "split" else [node]
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

    def time_ns(self, lang: ir.Language, op: str, args: tuple[Any, ...], runs: int) -> float:
        from eqdsl.kernels.cpu import time_op

        return 1e9 * time_op(op, _arrays(lang, op, args), runs)


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

    def time_ns(self, lang: ir.Language, op: str, args: tuple[Any, ...], runs: int) -> float:
        from eqdsl.kernels.cuda import time_op, to_device

        return 1e9 * time_op(op, to_device(_arrays(lang, op, args)), runs)


BACKENDS: dict[str, Callable[[], Backend]] = {"ort": OrtBackend, "cpu": NumbaCpuBackend, "cuda": NumbaCudaBackend}


@dataclass
class MeasureStats:
    timed: set = field(default_factory=set)  # configurations timed by this process
    cached: int = 0  # of the last batch: configurations timed by an earlier run (in the cache)
    rule_priced: set[str] = field(default_factory=set)  # operators without a kernel (cost rules price them)


class MeasuredCosts:
    def __init__(self, lang: ir.Language, backend: Backend, cache: TimingCache, runs: int,
                 progress: ProgressFn | None = None) -> None:
        self.lang, self.backend, self.cache, self.runs, self.progress = lang, backend, cache, runs, progress
        self.device = backend.device()
        self.stats = MeasureStats()
        self.last: dict[tuple[str, tuple[Any, ...]], Any] = {}  # the last batch: configuration → output shape

    def __call__(self, requests: list[Request]) -> list[float | None]:
        self.last = {(op, _plain(args)): out for op, args, out in requests if self.backend.supports(op)}
        keys = set(self.last)
        todo = sorted(k for k in keys if self.cache.get(self.device, k[0], k[1]) is None)
        self.stats.cached = len(keys - self.stats.timed) - len(todo)
        self.stats.rule_priced = {op for op, _, _ in requests if not self.backend.supports(op)} - NOT_TIMED
        for done, (op, args) in enumerate(todo):
            if self.progress is not None:
                self.progress(done, len(todo), op)
            try:
                ns = self.backend.time_ns(self.lang, op, args, self.runs)
            except Unsupported:  # e.g. broadcasting on CUDA: the cost rule prices this configuration
                self.last.pop((op, args), None)
                self.stats.rule_priced.add(op)
                continue
            self.cache.put(self.device, op, args, ns, self.runs)
            self.stats.timed.add((op, args))
        if self.progress is not None and todo:
            self.progress(len(todo), len(todo), "")
        out: list[float | None] = []
        for op, args, _ in requests:
            out.append(self.cache.get(self.device, op, _plain(args)) if (op, _plain(args)) in self.last else None)
        return out


def _plain(args: tuple[Any, ...]) -> tuple[Any, ...]:
    """Arguments as JSON-stable values (tuples of ints stay tuples; numpy ints become ints)."""
    return tuple(tuple(int(v) for v in a) if isinstance(a, (tuple, list)) else a for a in args)


@dataclass(frozen=True)
class MeasureConfig:
    """`target: {measure: ort|cpu|cuda, fallback: TARGET, runs: 20, cache: PATH}` in a run config."""

    backend: str
    runs: int = 20
    cache: Path | None = None  # None: default_cache_path()

    @property
    def cache_path(self) -> Path:
        from eqdsl.execute.cache import default_cache_path

        return self.cache or default_cache_path()

    def costs(self, lang: ir.Language, progress: ProgressFn | None = None) -> MeasuredCosts:
        backend = BACKENDS[self.backend]()
        return MeasuredCosts(lang, backend, TimingCache(self.cache_path), self.runs, progress)


def read_target(data: Any, base: Path) -> tuple[str | None, MeasureConfig | None]:
    """A `target:` value: a target name or path, or a mapping that measures (its `fallback` is the
    target whose cost rules price operators the backend has no kernel for)."""
    from eqdsl.fields import Reader, int_at_least

    if data is None or isinstance(data, str):
        return data, None
    r = Reader(data, "target")
    backend = r.get("measure", None, lambda v: v in BACKENDS, f"one of: {', '.join(BACKENDS)}")
    fallback = r.get("fallback", None, lambda v: v is None or (isinstance(v, str) and v != ""),
                     "a target name or .yaml path (prices operators without a kernel)")
    runs = r.get("runs", MeasureConfig.runs, int_at_least(1), "an integer >= 1")
    cache = r.get("cache", None, lambda v: v is None or (isinstance(v, str) and v != ""), "a .sqlite path")
    r.finish()
    if backend is None:
        raise EqdslError.one(f"expected `measure: {'|'.join(BACKENDS)}` in a target mapping", path="target.measure")
    return fallback, MeasureConfig(backend, runs, None if cache is None else base / cache)
