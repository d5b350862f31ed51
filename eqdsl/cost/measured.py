"""Measured operator costs: each (operator, argument shapes, parameters) an e-graph holds is timed
on a real backend once, kept in the timing cache, and priced at its median.

Contract: `MeasuredCosts(lang, backend, fallback, cache, runs)` is a `CostModel`. Requests the
backend has a kernel for, with every operand shape known, are priced at the backend's median of
`runs` timed runs (after a warm-up) in nanoseconds; the rest — no kernel, an unknown shape, a
configuration the kernel cannot take (`time_ns` gives None) — by `fallback` (the target's cost
rules). Each distinct configuration is timed at most once per device: cached timings are reused
across runs. Requests are timed one after another: timing two at once on a shared machine would
disturb both. Each timing is taken twice: two medians further apart than `NOISE_RATIO` mean the
machine was busy (another process, a descheduled thread); up to `NOISE_TRIES` pairs are taken,
and a configuration that never agrees is priced at the lowest median seen (load only adds time)
for this run, never cached, and counted in `stats.noisy` (the summary says so). The backends
themselves (ONNX Runtime, Numba CPU and CUDA) are in `eqdsl.execute.backends`.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Protocol, Sequence

from eqdsl import ir
from eqdsl.cost.cache import TimingCache
from eqdsl.cost.model import CostModel, Request

ProgressFn = Callable[[int, int, str], None]  # (done, total, what)
NOISE_RATIO = 1.25  # two medians of one configuration further apart than this: not a steady timing
NOISE_TRIES = 3  # pairs of medians taken before a configuration counts as noisy


class Backend(Protocol):
    name: str

    def device(self) -> str:
        """Everything a timing depends on (backend, runtime version, processor, threads): the cache key."""
        ...

    def supports(self, op: str) -> bool: ...

    def time_ns(self, lang: ir.Language, op: str, args: tuple[Any, ...], runs: int) -> float | None:
        """The median of `runs` runs; None when the kernel cannot take these arguments."""
        ...


@dataclass
class MeasureStats:
    timed: set = field(default_factory=set)  # configurations timed by this process
    cached: int = 0  # of the last batch: configurations timed by an earlier run (in the cache)
    rule_priced: set[str] = field(default_factory=set)  # operators without a kernel (cost rules price them)
    noisy: set = field(default_factory=set)  # configurations whose timings never agreed: used, not cached


class MeasuredCosts:
    def __init__(self, lang: ir.Language, backend: Backend, fallback: CostModel, cache: TimingCache, runs: int,
                 progress: ProgressFn | None = None, not_timed: frozenset[str] = frozenset()) -> None:
        self.lang, self.backend, self.fallback, self.cache = lang, backend, fallback, cache
        self.runs, self.progress, self.not_timed = runs, progress, not_timed
        self.device = backend.device()
        self.stats = MeasureStats()
        self.last: dict[tuple[str, tuple[Any, ...]], Any] = {}  # the last batch: configuration → output shape
        self.unsteady: dict[tuple[str, tuple[Any, ...]], float] = {}  # noisy configurations' prices (this run only)

    def price(self, requests: Sequence[Request]) -> list[float]:
        measured = self.measure(requests)
        fallback = self.fallback.price([r for r, m in zip(requests, measured) if m is None])
        priced = iter(fallback)
        return [m if m is not None else next(priced) for m in measured]

    def measure(self, requests: Sequence[Request]) -> list[float | None]:
        """Nanoseconds per request, or None where the fallback prices it."""
        timeable = [(r.op, _plain(r.args), r.out) for r in requests
                    if self.backend.supports(r.op) and all(a is not None for a in r.args)]
        self.last = {(op, args): out for op, args, out in timeable}
        self.stats.rule_priced = {r.op for r in requests if not self.backend.supports(r.op)} - self.not_timed
        self._time_missing()
        out: list[float | None] = []
        for op, args, *_ in requests:
            key = (op, _plain(args)) if all(a is not None for a in args) else None
            if key in self.unsteady:
                out.append(self.unsteady[key])
            else:
                out.append(self.cache.get(self.device, *key) if key in self.last else None)
        return out

    def _time_missing(self) -> None:
        keys = set(self.last)
        todo = sorted(k for k in keys if k not in self.unsteady and self.cache.get(self.device, k[0], k[1]) is None)
        self.stats.cached = len(keys - self.stats.timed) - len(todo)
        for done, (op, args) in enumerate(todo):
            if self.progress is not None:
                self.progress(done, len(todo), op)
            ns, steady = self._steady_ns(op, args)
            if ns is None:  # e.g. broadcasting on CUDA: the fallback prices this configuration
                self.last.pop((op, args), None)
                self.stats.rule_priced.add(op)
                continue
            if steady:
                self.cache.put(self.device, op, args, ns, self.runs)
            else:
                self.unsteady[op, args] = ns
                self.stats.noisy.add((op, args))
            self.stats.timed.add((op, args))
        if self.progress is not None and todo:
            self.progress(len(todo), len(todo), "")


    def _steady_ns(self, op: str, args: tuple[Any, ...]) -> tuple[float | None, bool]:
        """The lower of two medians that agree within NOISE_RATIO, and True; after NOISE_TRIES
        pairs that did not, the lowest median seen and False."""
        lowest = None
        for _ in range(NOISE_TRIES):
            a = self.backend.time_ns(self.lang, op, args, self.runs)
            b = None if a is None else self.backend.time_ns(self.lang, op, args, self.runs)
            if a is None or b is None:
                return None, True
            lowest = min(a, b) if lowest is None else min(lowest, a, b)
            if max(a, b) <= NOISE_RATIO * min(a, b):
                return lowest, True
        return lowest, False


def noisy_text(stats: MeasureStats) -> str:
    """The summary's warning about unsteady timings ('' when every timing was steady)."""
    if not stats.noisy:
        return ""
    return (f"; {len(stats.noisy)} timing(s) never steady (two medians more than {NOISE_RATIO - 1:.0%} apart, "
            f"{NOISE_TRIES} tries: the machine is busy): priced at the lowest median for this run, not cached")


def _plain(args: tuple[Any, ...]) -> tuple[Any, ...]:
    """Arguments as JSON-stable values (tuples of ints stay tuples; numpy ints become ints)."""
    return tuple(tuple(int(v) for v in a) if isinstance(a, (tuple, list)) else a for a in args)
