"""Target kinds: what a run config's `target:` names, and the cost model each builds.

    target: t4                                  # roofline: a shipped target or a .yaml (its params)
    target: {measure: ort, fallback: cpu, runs: 20, cache: timings.sqlite}   # measure: time kernels

Contract: `read_target(data, base)` returns a `TargetConfig` (None for no target) or raises
`EqdslError` naming the YAML path; a string is the `roofline` kind, a mapping names its kind with
`kind:` (default `measure`; `{kind: roofline, file: t4}` is the string's long form). A kind is one
class in `TARGET_KINDS` (registered under its `kind`, or by an entry point in `eqdsl.targets`)
with `read(data, base)`, and on the instance `params(lang)` (the values
its cost rules read), `cost_model(lang, progress)` (the `CostModel` the run prices with, built
once), `runtime_rules(lang)` (the language's rules whose rewrites the target's runtime makes
itself: the run prices its input as the runtime runs it), `layouts()` (the runtime's blocked
layout, `eqdsl.cost.layouts`, or None) and `inputs()` (files the run reads).
Measuring backends are named in `BACKENDS` as `module:class`, imported when a run measures: they
sit above this package (ONNX Runtime, Numba), in `eqdsl.execute.backends`.
"""
from __future__ import annotations

import importlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, Protocol

from eqdsl import ir
from eqdsl.cost.layouts import Layouts
from eqdsl.cost.model import CostModel, RuleCosts
from eqdsl.cost.targets import bind_target, load_target, target_path
from eqdsl.diagnostics import EqdslError
from eqdsl.registry import Registry

BACKENDS: dict[str, str] = {
    "ort": "eqdsl.execute.backends:OrtBackend",  # ONNX Runtime CPU, one thread, a one-operator model
    "cpu": "eqdsl.execute.backends:NumbaCpuBackend",  # eqdsl's Numba CPU kernels
    "cuda": "eqdsl.execute.backends:NumbaCudaBackend",  # eqdsl's Numba CUDA kernels, CUDA events
}


class TargetConfig(Protocol):
    kind: ClassVar[str]

    def params(self, lang: ir.Language) -> dict[str, int]: ...

    def cost_model(self, lang: ir.Language, progress: Any = None) -> CostModel: ...

    def runtime_rules(self, lang: ir.Language) -> tuple[str, ...]: ...

    def layouts(self) -> Layouts | None: ...

    def inputs(self) -> list[Path]: ...


@dataclass(frozen=True)
class RooflineTarget:
    """A target file's params read by the language's cost rules (`eqdsl.cost.targets`)."""

    kind: ClassVar[str] = "roofline"
    ref: str
    base: Path | None = None

    @classmethod
    def read(cls, data: Any, base: Path | None) -> RooflineTarget:
        if isinstance(data, str):
            return cls(data, base)
        from eqdsl.fields import REQUIRED, Reader

        r = Reader(data, "target")
        ref = r.get("file", REQUIRED, lambda v: isinstance(v, str) and v != "", "a target name or .yaml path")
        r.finish()
        return cls(ref, base)

    def params(self, lang: ir.Language) -> dict[str, int]:
        return bind_target(lang, load_target(self.ref, self.base))

    def cost_model(self, lang: ir.Language, progress: Any = None) -> CostModel:
        return RuleCosts(lang, self.params(lang))

    def runtime_rules(self, lang: ir.Language) -> tuple[str, ...]:
        """The target file's `runtime_rules` that the language has (a ruleset without a fusion
        rule leaves its input unfused, as it reads it)."""
        named = {r.name for r in lang.rules}
        return tuple(r for r in load_target(self.ref, self.base).runtime_rules if r in named)

    def layouts(self) -> Layouts | None:
        return load_target(self.ref, self.base).layouts

    def inputs(self) -> list[Path]:
        return [target_path(self.ref, self.base)]


@dataclass(frozen=True)
class MeasureTarget:
    """Operator costs timed on a backend; `fallback` (a roofline target) prices what it cannot time."""

    kind: ClassVar[str] = "measure"
    backend: str
    fallback: RooflineTarget | None = None
    runs: int = 20
    cache: Path | None = None  # None: the user's cache (eqdsl.cost.cache.default_cache_path)

    @classmethod
    def read(cls, data: Any, base: Path | None) -> MeasureTarget:
        from eqdsl.fields import Reader, int_at_least

        r = Reader(data, "target")
        backend = r.get("measure", None, lambda v: v in BACKENDS, f"one of: {', '.join(BACKENDS)}")
        fallback = r.get("fallback", None, lambda v: v is None or (isinstance(v, str) and v != ""),
                         "a target name or .yaml path (prices operators without a kernel)")
        runs = r.get("runs", cls.runs, int_at_least(1), "an integer >= 1")
        cache = r.get("cache", None, lambda v: v is None or (isinstance(v, str) and v != ""), "a .sqlite path")
        r.finish()
        if backend is None:
            raise EqdslError.one(f"expected `measure: {'|'.join(BACKENDS)}` in a target mapping",
                                 path="target.measure")
        return cls(backend, None if fallback is None else RooflineTarget(fallback, base), runs,
                   None if cache is None or base is None else base / cache)

    @property
    def cache_path(self) -> Path:
        from eqdsl.cost.cache import default_cache_path

        return self.cache or default_cache_path()

    def params(self, lang: ir.Language) -> dict[str, int]:
        return self.fallback.params(lang) if self.fallback is not None else bind_target(lang, None)

    def cost_model(self, lang: ir.Language, progress: Any = None) -> CostModel:
        from eqdsl.cost.cache import TimingCache
        from eqdsl.cost.measured import MeasuredCosts
        from eqdsl.languages.tensor.ops import OPS

        module, _, name = BACKENDS[self.backend].partition(":")
        backend = getattr(importlib.import_module(module), name)()
        not_timed = frozenset(s.name for s in OPS if not s.timed)
        return MeasuredCosts(lang, backend, RuleCosts(lang, self.params(lang)), TimingCache(self.cache_path),
                             self.runs, progress, not_timed)

    def runtime_rules(self, lang: ir.Language) -> tuple[str, ...]:
        return self.fallback.runtime_rules(lang) if self.fallback is not None else ()

    def layouts(self) -> Layouts | None:
        return None  # a timed operator's cost holds the reorders its one-operator model made

    def inputs(self) -> list[Path]:
        return [self.cache_path] + (self.fallback.inputs() if self.fallback is not None else [])


TARGET_KINDS: Registry[Any] = Registry("target kind", "eqdsl.targets")
for _kind in (RooflineTarget, MeasureTarget):
    TARGET_KINDS.register(_kind, _kind.kind)


def read_target(data: Any, base: Path | None) -> TargetConfig | None:
    if data is None:
        return None
    if isinstance(data, str):
        return RooflineTarget.read(data, base)
    if not isinstance(data, dict):
        raise EqdslError.one(f"expected a target name, a .yaml path, or a mapping naming one of: "
                             f"{', '.join(TARGET_KINDS)}", path="target")
    kind = TARGET_KINDS.lookup(data.get("kind", "measure"), "target.kind")  # a mapping without kind measures
    return kind.read({k: v for k, v in data.items() if k != "kind"}, base)
