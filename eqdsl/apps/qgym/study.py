"""One layer through every method: plain, factorisation, SumMerge, SumMerge with the level shift,
eqdsl (greedy, CP-SAT, pulsed).

Contract: `optimize(lang, layer, search)` runs eqdsl's search on the layer's expressions and
returns the best program with its outcome; `check_exact(program, layer)` evaluates a program on
random integer activations (int64, exact) and says whether every root equals the plain layer;
`compare(lang, layer, searches)` returns a `LayerResult` with each method's op count. The search
is eqdsl's public pipeline (`eqdsl.pipeline.optimize`) with a pulsed schedule.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field, replace

import numpy as np

from eqdsl import ir
from eqdsl.apps.qgym.baselines import OpCount, count_ops, factorised_count, plain_count
from eqdsl.apps.qgym.layer import QuantizedLayer
from eqdsl.apps.qgym.summerge import start_program, summerge
from eqdsl.extract.registry import ExtractConfig
from eqdsl.pipeline import optimize as optimize_program
from eqdsl.schedule.pulsed import PulsedConfig
from eqdsl.schedule.runner import ScheduleOutcome


@dataclass(frozen=True)
class Search:
    """eqdsl's search on a layer: `epochs` = 1 is a single explore + extract."""

    name: str
    extract: str = "cpsat"  # or greedy-dag
    epochs: int = 1
    explore_iter: int = 3
    node_limit: int = 200_000
    epoch_time_limit_s: float = 10.0
    time_limit_s: float = 300.0
    start: str = "layer"  # or "summerge" / "shifted": search from that program (layer.STARTS)
    cost: str = "weighted"  # what extraction minimises: "weighted" (2·mul + add) or "flops" (mul + add)
    alternatives: tuple[str, ...] = ()  # greedy programs unioned with the start ("summerge", "shifted")


def with_cost(lang: ir.Language, cost: str) -> ir.Language:
    """The qgym language with the cost extraction minimises: its own weighted cost (Q-gym's C_mul
    = 2, C_add = 1) or FLOPs (every add and mul 1: Q-gym's reported metric)."""
    if cost == "weighted":
        return lang
    if cost != "flops":
        raise ValueError(f"unknown cost {cost!r}; expected weighted or flops")
    mul = lang.costs["mul"]
    return replace(lang, costs={**lang.costs, "mul": replace(mul, body=ir.Const(1, ir.Prim.INT))})


@dataclass
class MethodResult:
    ops: OpCount
    seconds: float
    exact: bool
    notes: str = ""


@dataclass
class LayerResult:
    layer: QuantizedLayer
    methods: dict[str, MethodResult] = field(default_factory=dict)
    programs: dict[str, ir.Program] = field(default_factory=dict)

    def reduction(self, method: str) -> float:
        """% of the plain layer's weighted cost (C_mul = 2, C_add = 1) removed."""
        return 100.0 * (1 - self.methods[method].ops.cost / self.layer.spec.plain_cost)

    def flop_reduction(self, method: str) -> float:
        """% of the plain layer's FLOPs (adds + muls, Q-gym's metric) removed."""
        return 100.0 * (1 - self.methods[method].ops.ops / self.methods["plain"].ops.ops)




def optimize(lang: ir.Language, layer: QuantizedLayer, search: Search, start: ir.Program | None = None,
             built: dict[str, ir.Program] | None = None) -> tuple[ir.Program, ScheduleOutcome]:
    """`start`: the program `search.start` names, if the caller has built it already; `built`: the
    programs already built, by start name (the alternatives are taken from it, else built)."""
    built = built or {}
    start = start if start is not None else start_program(lang, layer, search.start)
    alternatives = tuple(built.get(a) or start_program(lang, layer, a) for a in search.alternatives)
    schedule = PulsedConfig(node_limit=search.node_limit, time_limit_s=search.time_limit_s, epochs=search.epochs,
                            explore_iter=search.explore_iter, epoch_extract=search.extract,
                            epoch_time_limit_s=search.epoch_time_limit_s)
    # the pulsed schedule leaves exactly its best program in the e-graph: tree greedy returns it
    result = optimize_program(with_cost(lang, search.cost), start, schedule, ExtractConfig(method="greedy", compare=()),
                              alternatives=alternatives)
    assert result.outcome is not None
    return result.optimized_program(search.name), result.outcome


def check_exact(program: ir.Program, layer: QuantizedLayer, batch: int = 4, seed: int = 0) -> bool:
    spec = layer.spec
    rng = np.random.default_rng(seed)
    x = rng.integers(-128, 128, size=(spec.R, spec.S + spec.tpr, spec.C, batch), dtype=np.int64)
    values: list = []
    for node in program.nodes:
        args = [values[a.index] if isinstance(a, ir.Child) else a for a in node.args]
        match node.op:
            case "x":
                values.append(x[args[0], args[1], args[2]])
            case "w":
                values.append(np.int64(args[0]))
            case "add":
                values.append(args[0] + args[1])
            case "mul":
                values.append(args[0] * args[1])
            case op:
                raise ValueError(f"check_exact: unexpected operator {op!r}")
    for root, value in zip(range(len(program.roots)), (values[r] for r in program.roots)):
        j, k = divmod(root, spec.K)
        window = x[:, j:j + spec.S, :, :]  # [R, S, C, batch]
        expected = np.einsum("crs,rscb->b", layer.weights[k], window)
        if not np.array_equal(np.broadcast_to(value, expected.shape), expected):
            return False
    return True


def compare(lang: ir.Language, layer: QuantizedLayer, searches: list[Search]) -> LayerResult:
    """Every method on the layer; "shifted" is the cheaper of SumMerge with and without the level
    shift (its seconds include SumMerge's, which it compares against)."""
    result = LayerResult(layer)
    result.methods["plain"] = MethodResult(plain_count(layer.spec), 0.0, True)
    t0 = time.perf_counter()
    result.methods["factorisation"] = MethodResult(factorised_count(layer), time.perf_counter() - t0, True)
    t0 = time.perf_counter()
    merged = summerge(lang, layer)
    _record(result, "summerge", merged, time.perf_counter() - t0)
    shifted = start_program(lang, layer, "shifted", merged)
    _record(result, "shifted", shifted, time.perf_counter() - t0, "no gain" if shifted is merged else "level shift")
    for search in searches:
        t0 = time.perf_counter()
        program, outcome = optimize(lang, layer, search, result.programs.get(search.start), result.programs)
        epochs = ", ".join(f"{e.cost:.0f}" for e in outcome.epochs)
        _record(result, search.name, program, time.perf_counter() - t0, epochs)
    return result


def _record(result: LayerResult, method: str, program: ir.Program, seconds: float, notes: str = "") -> None:
    result.methods[method] = MethodResult(count_ops(program), seconds, check_exact(program, result.layer), notes)
    result.programs[method] = program
