"""The graph executor: run a tensor-language program end to end with eqdsl's kernels.

Contract: `Executor(lang, program, weights, device)` plans the program once — weight-only
subterms are computed ahead with the reference semantics (as an exporter folds them), every other
node runs on the device's kernel for its operator (`eqdsl.kernels.cpu` / `.cuda`), or, where the
kernel has none (or cannot take the arguments), the NumPy reference semantics (on the host for
`cuda`); `fallback_ops` lists those. `run(feeds)` returns the outputs (float32, host arrays, `noop`
roots unpacked); `time(feeds, runs)` the median seconds of `runs` whole-program runs after one
untimed run (which compiles). `compare(...)` runs an input and an optimized program on the same
random inputs (halved until the input program's outputs are finite: `halved_until_finite`) and weights:
outputs must agree within `RTOL` of their magnitude (float32).
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Callable, Mapping

import numpy as np

from eqdsl import ir
from eqdsl.diagnostics import EqdslError
from eqdsl.fields import int_at_least, one_of, option, read_section
from eqdsl.kernels.shapes import Unsupported
from eqdsl.languages.tensor.folding import const_nodes, output_nodes
from eqdsl.languages.tensor.ops import INPUTS, SEMANTICS, SPECS
from eqdsl.languages.tensor.reference import typed_values
from eqdsl.onnx.runtime import RTOL, halved_until_finite, largest_error  # float32, as the ORT check

# Operators that only re-label memory: their reference is a view on host and device arrays alike.
VIEWS: dict[str, Callable[..., Any]] = {op: spec.reference for op, spec in SPECS.items()
                                        if spec.view and callable(spec.reference)}


def _reference(op: str) -> Callable[..., Any]:
    fn = SEMANTICS[op]
    assert callable(fn)

    def run(*args: Any) -> Any:
        out = fn(*args)
        return tuple(_contiguous(o) for o in out) if isinstance(out, tuple) else _contiguous(out)
    return run


class _Host:
    name = "cpu"

    def __init__(self) -> None:
        from eqdsl.kernels import fork_safe_threads
        from eqdsl.kernels.cpu import RUNNERS

        fork_safe_threads()
        self.kernels: dict[str, Callable[..., Any]] = RUNNERS

    def to_device(self, x: np.ndarray) -> Any:
        return _contiguous(x)

    def to_host(self, x: Any) -> np.ndarray:
        return x

    def sync(self) -> None:
        pass


class _Cuda:
    name = "cuda"

    def __init__(self) -> None:
        from numba import cuda

        from eqdsl.kernels.cuda import LAUNCHERS

        self.cuda, self.kernels = cuda, LAUNCHERS

    def to_device(self, x: np.ndarray) -> Any:
        return self.cuda.to_device(_contiguous(x))

    def to_host(self, x: Any) -> np.ndarray:
        return x.copy_to_host() if hasattr(x, "copy_to_host") else x

    def sync(self) -> None:
        self.cuda.synchronize()


DEVICES: dict[str, Callable[[], Any]] = {"cpu": _Host, "cuda": _Cuda}


class Executor:
    def __init__(self, lang: ir.Language, program: ir.Program, weights: Mapping[str, np.ndarray],
                 device: str = "cpu") -> None:
        self.program, self.device = program, DEVICES[device]()
        self.const = const_nodes(lang, program)
        self.values: dict[int, Any] = {}
        self._fold(weights)
        self.fallback_ops: set[str] = set()
        self.outputs = output_nodes(program)

    def _fold(self, weights: Mapping[str, np.ndarray]) -> None:
        for i in sorted(self.const):
            node = self.program.nodes[i]
            if node.op == "weight":
                value = _contiguous(weights[str(node.args[0])]).reshape(tuple(node.args[1]))  # type: ignore[arg-type]
            else:
                value = _reference(node.op)(*[self.values[a.index] if isinstance(a, ir.Child) else a
                                              for a in node.args])
            self.values[i] = value

    def _step(self, op: str, args: list[Any]) -> Any:
        if op in VIEWS:
            return VIEWS[op](*args)
        kernel = self.device.kernels.get(op)
        if kernel is not None:
            try:
                return kernel(*args)
            except Unsupported:
                pass
        self.fallback_ops.add(op)
        host = [self.device.to_host(a) if not isinstance(a, (int, str, tuple)) else a for a in args]
        out = _reference(op)(*host)
        return tuple(self.device.to_device(o) for o in out) if isinstance(out, tuple) else self.device.to_device(out)

    def run(self, feeds: Mapping[str, np.ndarray]) -> list[np.ndarray]:
        values = {i: (self.device.to_device(v) if isinstance(v, np.ndarray) else v) for i, v in self.values.items()}
        for i, node in enumerate(self.program.nodes):
            if i in values or node.op == "noop":
                continue
            if node.op in INPUTS:
                values[i] = self.device.to_device(feeds[str(node.args[0])])
                continue
            values[i] = self._step(node.op, [values[a.index] if isinstance(a, ir.Child) else a for a in node.args])
        self.device.sync()
        return [np.asarray(self.device.to_host(values[i]), np.float32) for i in self.outputs]

    def time(self, feeds: Mapping[str, np.ndarray], runs: int) -> float:
        self.run(feeds)
        times = []
        for _ in range(runs):
            t0 = time.perf_counter()
            self.run(feeds)
            times.append(time.perf_counter() - t0)
        return float(np.median(times))


@dataclass(frozen=True)
class ExecutionCheck:
    device: str
    ok: bool
    max_error: float
    runs: int
    original_ms: float
    optimized_ms: float
    fallback_ops: tuple[str, ...]
    input_scale: float = 1.0  # < 1: the random inputs were halved until the original's outputs were finite

    @property
    def speedup(self) -> float:
        return self.original_ms / self.optimized_ms


def _contiguous(x: np.ndarray) -> np.ndarray:
    """Float values as float32 (the kernels' type); other element types (token ids, a mask an opaque
    operator computed) as they are."""
    x = np.asarray(x)
    return np.ascontiguousarray(x, np.float32 if x.dtype.kind == "f" else x.dtype)


def input_feeds(program: ir.Program, seed: int) -> dict[str, np.ndarray]:
    """Normal float32 values for each `input`; a typed one's as validation draws them."""
    rng = np.random.default_rng(seed)
    return {str(n.args[0]): (rng.standard_normal(tuple(n.args[1])).astype(np.float32)  # type: ignore[arg-type]
                             if n.op == "input" else typed_values(rng, tuple(n.args[1]), *n.args))  # type: ignore[arg-type]
            for n in program.nodes if n.op in INPUTS}


def compare(lang: ir.Language, original: ir.Program, optimized: ir.Program, weights: Mapping[str, np.ndarray],
            device: str = "cpu", runs: int = 10, seed: int = 0) -> ExecutionCheck:
    before, after = Executor(lang, original, weights, device), Executor(lang, optimized, weights, device)
    feeds, scale, want = halved_until_finite(before.run, input_feeds(original, seed))
    got = after.run(feeds)
    error = largest_error(want, got) if len(want) == len(got) else float("inf")
    times: list[list[float]] = [[], []]
    for _ in range(runs):  # the first runs compiled; alternate, so that load on a shared machine hits both alike
        for k, executor in enumerate((before, after)):
            t0 = time.perf_counter()
            executor.run(feeds)
            times[k].append(time.perf_counter() - t0)
    return ExecutionCheck(device, error <= RTOL, error, runs, 1e3 * float(np.median(times[0])),
                          1e3 * float(np.median(times[1])), tuple(sorted(before.fallback_ops | after.fallback_ops)),
                          scale)


def check_executable(program: ir.Program, device: str) -> None:
    """Before a run optimizes anything: the executor runs the tensor language's operators only,
    and `cuda` needs a GPU. Raises `EqdslError` naming what is missing."""
    foreign = sorted({n.op for n in program.nodes} - set(SPECS))
    if foreign:
        raise EqdslError.one(f"eqdsl's executor runs the tensor language's operators; this program's "
                             f"{', '.join(repr(op) for op in foreign[:6])} are not among them (use `validate:` "
                             "to check any language's programs)", path="execute")
    if device == "cuda":
        require_cuda()


def require_cuda() -> None:
    """Raises `EqdslError` for `execute: cuda` where no CUDA GPU and driver are found."""
    from numba import cuda

    if not cuda.is_available():
        raise EqdslError.one("execute: cuda needs a CUDA GPU and driver; none found (`execute: cpu` runs "
                             "on this machine's CPU kernels)", path="execute.device")


@dataclass(frozen=True)
class ExecuteSettings:
    """`execute: cpu` or `{device: cpu|cuda, runs: 10, seed: 0}` in a run config."""

    device: str = option("cpu", one_of(tuple(DEVICES)), f"one of: {', '.join(DEVICES)}")
    runs: int = option(10, int_at_least(1), "an integer >= 1")
    seed: int = option(0, int_at_least(0), "an integer >= 0")


def read_execute(data: Any) -> ExecuteSettings | None:
    return read_section(data, ExecuteSettings, "execute", shorthand="device")
