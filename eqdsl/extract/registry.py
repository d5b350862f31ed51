"""The extractors by name, and the `extract:` config section they are built from.

Contract: `EXTRACTORS` maps a name to an `ExtractorKind`; it feeds config validation
(`extract.method`, `extract.compare`, a pulsed schedule's `epoch_extract`), the CLI's
`--extractor` choices, `make_extractor` and the tests' parametrisation. Adding an extractor is
one module with an `extract(problem) -> Extraction` method plus one `register_extractor` line
(or an entry point in the `eqdsl.extractors` group).
"""
from __future__ import annotations

from dataclasses import dataclass
from importlib.metadata import entry_points
from typing import Callable

from eqdsl.diagnostics import EqdslError
from eqdsl.extract.cpsat import DEFAULT_WORKERS, SEARCH_NAMES, CpSatExtractor
from eqdsl.extract.dag import GreedyDagExtractor
from eqdsl.extract.greedy import GreedyExtractor
from eqdsl.extract.ocf import GreedyOcfExtractor
from eqdsl.extract.result import Extractor
from eqdsl.fields import int_at_least, is_bool, names, one_of, option, positive_number


@dataclass(frozen=True)
class ExtractorKind:
    name: str
    make: Callable[[ExtractConfig], Extractor]
    summary: str
    dag_cost: bool = True  # minimises DAG cost (shared subterms counted once), not tree cost
    exact: bool = False  # returns the minimum, where it proves it (so costs never rise as an e-graph grows)


EXTRACTORS: dict[str, ExtractorKind] = {}


def register_extractor(kind: ExtractorKind) -> None:
    EXTRACTORS[kind.name] = kind


def extractor_names() -> list[str]:
    _load_plugins()
    return list(EXTRACTORS)


def dag_extractor_names() -> list[str]:
    return [name for name in extractor_names() if EXTRACTORS[name].dag_cost]


def is_exact(name: str) -> bool:
    """`name` (a registered extractor) returns the minimum DAG cost wherever it proves it."""
    _load_plugins()
    return EXTRACTORS[name].exact


_plugins_loaded = False


def _load_plugins() -> None:
    global _plugins_loaded
    if not _plugins_loaded:
        _plugins_loaded = True
        for point in entry_points(group="eqdsl.extractors"):
            register_extractor(point.load())


ACYCLIC = ("hybrid", "order", "lazy", "filter-list")
WARM_STARTS = ("greedy", "greedy-dag")


def _extractor_list(v: object) -> bool:
    return isinstance(v, list) and all(isinstance(x, str) and x in extractor_names() for x in v)


@dataclass(frozen=True)
class ExtractConfig:
    method: str = option("cpsat", one_of(extractor_names), lambda: "one of " + names(extractor_names)())
    time_limit_s: float = option(60.0, positive_number, "a number > 0", float)
    acyclic: str = option("hybrid", one_of(ACYCLIC), f"one of {', '.join(ACYCLIC)}")
    warm_start: str | None = option("greedy-dag", lambda v: v is None or v in WARM_STARTS,
                                    "greedy, greedy-dag or null")
    compare: tuple[str, ...] = option(("greedy", "greedy-dag"), lambda v: _extractor_list(v),
                                      lambda: "a list of extractors from " + names(extractor_names)(), tuple)
    # CP-SAT threads: two full-LP searches (plain, symmetry-folded), the rest neighbourhood search
    workers: int = option(DEFAULT_WORKERS, int_at_least(1), "an int ≥ 1")
    # cpsat: solve independent parts one model each (layered models: BERT; loses on repeated cells)
    parts: bool = option(False, is_bool, "true or false")
    # cpsat: auto (lp on the whole model for a sixth of the time, then core on the parts), lp, core
    search: str = option("auto", one_of(SEARCH_NAMES), f"one of {', '.join(SEARCH_NAMES)}")


def make_extractor(method: str, cfg: ExtractConfig, path: str = "extract.method") -> Extractor:
    _load_plugins()
    kind = EXTRACTORS.get(method)
    if kind is None:
        raise EqdslError.one(f"unknown extractor {method!r}; expected one of {', '.join(extractor_names())}",
                             path=path)
    return kind.make(cfg)


register_extractor(ExtractorKind("greedy", lambda cfg: GreedyExtractor(),
                                 "egg's bottom-up extractor: cheapest node per class by tree cost", dag_cost=False))
register_extractor(ExtractorKind("greedy-dag", lambda cfg: GreedyDagExtractor(),
                                 "bottom-up with node sets: shared subterms counted once (DAG cost)"))
register_extractor(ExtractorKind("greedy-ocf", lambda cfg: GreedyOcfExtractor(),
                                 "PACT 2024's OCF: greedy with node sets, iterated to a fixpoint (DAG cost)"))
register_extractor(ExtractorKind(
    "cpsat", lambda cfg: CpSatExtractor(cfg.time_limit_s, cfg.acyclic, cfg.warm_start, cfg.workers, parts=cfg.parts,
                                search=cfg.search),
    "OR-Tools CP-SAT: proven-optimal DAG cost, or a labelled feasible result at the time limit", exact=True))
