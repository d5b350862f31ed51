"""The extractors by name, and the `extract:` config section they are built from.

Contract: `EXTRACTORS` maps a name to an `ExtractorKind`: how to make one from its own options (a
dataclass of `eqdsl.fields.option`s, or None) and an `ExtractBudget`, and optionally a warm start it
offers (`eqdsl.extract.starts`). It feeds config validation (`extract.method`, `extract.compare`,
a schedule's extractor), the CLI's `--extractor` choices and flags (`eqdsl.fields.add_flags` on
`ExtractConfig` and every kind's options), `make_extractor` and the tests. Adding an extractor is
one module with an `extract(problem) -> Extraction` method plus one `register_extractor` line (or
an entry point in the `eqdsl.extractors` group).

The `extract:` section is flat: `method`, `compare` and the budget (`time_limit_s`, `workers`,
`deterministic`) apply to every extractor; any other key is an option of the kind(s) whose options
class declares it (`acyclic`, `warm_start`, `parts`, `search`: cpsat's).
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Callable

from eqdsl.extract import starts
from eqdsl.extract.cpsat_options import DEFAULT_WORKERS, CpSatOptions
from eqdsl.extract.dag import GreedyDagExtractor, best_greedy
from eqdsl.extract.greedy import GreedyExtractor
from eqdsl.extract.ocf import GreedyOcfExtractor
from eqdsl.extract.result import ExtractBudget, Extractor
from eqdsl.extract.starts import Start, tree_start
from eqdsl.fields import Reader, int_at_least, is_bool, names, one_of, option, positive_number, read_fields
from eqdsl.registry import Registry


@dataclass(frozen=True)
class ExtractorKind:
    name: str
    make: Callable[[Any, ExtractBudget], Extractor]  # (its options or None, the budget) → an extractor
    summary: str
    options: type | None = None  # its own keys of the `extract:` section
    dag_cost: bool = True  # minimises DAG cost (shared subterms counted once), not tree cost
    exact: bool = False  # returns the minimum, where it proves it (so costs never rise as an e-graph grows)
    start: Start | None = None  # a warm start it offers other extractors (`extract.warm_start`)


def _offer_start(name: str, kind: ExtractorKind) -> None:
    if kind.start is not None:
        starts.register_start(name, kind.start)


EXTRACTORS: Registry[ExtractorKind] = Registry("extractor", "eqdsl.extractors", on_register=_offer_start)


def register_extractor(kind: ExtractorKind) -> None:
    EXTRACTORS.register(kind)


def extractor_names() -> list[str]:
    return EXTRACTORS.names()


def dag_extractor_names() -> list[str]:
    return [name for name in extractor_names() if EXTRACTORS[name].dag_cost]


def is_exact(name: str) -> bool:
    """`name` (a registered extractor) returns the minimum DAG cost wherever it proves it."""
    return EXTRACTORS[name].exact


def option_classes() -> dict[type, list[str]]:
    """Every registered kind's options class, with the kinds that use it."""
    classes: dict[type, list[str]] = {}
    for name in extractor_names():
        options = EXTRACTORS[name].options
        if options is not None:
            classes.setdefault(options, []).append(name)
    return classes


def _extractor_list(v: object) -> bool:
    return isinstance(v, list) and all(isinstance(x, str) and x in extractor_names() for x in v)


@dataclass(frozen=True)
class ExtractConfig:
    method: str = option("cpsat", one_of(extractor_names), lambda: "one of " + names(extractor_names)(), flag=None)
    compare: tuple[str, ...] = option(("greedy", "greedy-dag"), lambda v: _extractor_list(v),
                                      lambda: "a list of extractors from " + names(extractor_names)(), tuple,
                                      flag=None)
    time_limit_s: float = option(60.0, positive_number, "a number > 0", float, flag="--time-limit",
                                 help="seconds an extractor may take: an exact one then returns its best program, "
                                      "a greedy one (no partial program) fails")
    # CP-SAT threads: two full-LP searches (plain, symmetry-folded), the rest neighbourhood search
    workers: int = option(DEFAULT_WORKERS, int_at_least(1), "an int ≥ 1", help="threads an extractor may use")
    deterministic: bool = option(False, is_bool, "true or false",
                                 help="the same e-graph gives the same program every time (cpsat: one thread)")
    candidates: int = option(1, int_at_least(1), "an int ≥ 1", flag=None,
                             help="programs handed to a measuring export: the cheapest and up to this many − 1 "
                                  "next ones (eqdsl.extract.candidates); the fastest measured wins")
    options: dict[str, Any] = field(default_factory=dict)  # kind name → its options (defaults where absent)

    def options_for(self, name: str) -> Any:
        kind = EXTRACTORS[name]
        return self.options.get(name) or (kind.options() if kind.options else None)

    def budget(self) -> ExtractBudget:
        return ExtractBudget(self.time_limit_s, self.workers, self.deterministic)


def read_extract(data: Any, path: str = "extract") -> ExtractConfig:
    """The `extract:` section (see the module docstring); `EqdslError` naming the bad key."""
    reader = Reader(data if data is not None else {}, path)
    general = read_fields(ExtractConfig, reader)
    options = {name: read_fields(cls, reader) for cls, kinds in option_classes().items() for name in kinds}
    reader.finish()
    return replace(general, options=options)


def make_extractor(method: str, cfg: ExtractConfig, path: str = "extract.method",
                   budget: ExtractBudget | None = None) -> Extractor:
    """`method` made with its options from `cfg` and `budget` (default: `cfg`'s own)."""
    kind = EXTRACTORS.lookup(method, path)
    return kind.make(cfg.options_for(method), budget or cfg.budget())


def _cpsat(options: CpSatOptions, budget: ExtractBudget) -> Extractor:
    from eqdsl.extract.cpsat import CpSatExtractor  # OR-Tools (and the pandas it loads): when used

    return CpSatExtractor(time_limit_s=budget.time_s, acyclic=options.acyclic,
                          warm_start=starts.STARTS.get(options.warm_start or "", best_greedy),
                          workers=1 if budget.deterministic else budget.threads, parts=options.parts,
                          search=options.search)


register_extractor(ExtractorKind("greedy", lambda options, budget: GreedyExtractor(budget.time_s),
                                 "egg's bottom-up extractor: cheapest node per class by tree cost", dag_cost=False,
                                 start=tree_start))
register_extractor(ExtractorKind("greedy-dag", lambda options, budget: GreedyDagExtractor(budget.time_s),
                                 "bottom-up with node sets: shared subterms counted once (DAG cost)",
                                 start=best_greedy))
register_extractor(ExtractorKind("greedy-ocf", lambda options, budget: GreedyOcfExtractor(),
                                 "PACT 2024's OCF: greedy with node sets, iterated to a fixpoint (DAG cost)"))
register_extractor(ExtractorKind(
    "cpsat", _cpsat, "OR-Tools CP-SAT: proven-optimal DAG cost, or a labelled feasible result at the time limit",
    options=CpSatOptions, exact=True))
