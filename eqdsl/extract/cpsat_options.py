"""The `extract:` keys of `cpsat` extraction (`CpSatOptions`) and the searches it can run."""
from __future__ import annotations

import os
from dataclasses import dataclass

from eqdsl.extract.starts import start_names
from eqdsl.fields import is_bool, one_of, option

# CP-SAT threads. With two or more, two complete searches, both with every constraint in the LP:
# on the LP folded by the model's symmetries first (it closes the gap on CNNs' repeated blocks,
# which the plain LP does not) and on the LP as is (which closes what the folded one cannot). No
# neighbourhood-search thread: on two cores it slows both complete searches, and the case it
# helped is answered by the lower bound without a solve.
DEFAULT_WORKERS = 2 if (os.cpu_count() or 1) >= 2 else 1
# `search`: which complete searches the first threads run. `lp`: the full-LP searches above.
# `core`: CP-SAT's core-based (MaxSAT) search, unstratified — every cost at once, so its first
# solution is optimal and its bound rises core by core — beside a search without LP that finds
# programs fast and shares them (BENCHMARKS.md, "Where Inception-v3 k1's gap lives").
SEARCHES = {"lp": ("max_lp_sym", "max_lp"), "core": ("core", "no_lp")}
SEARCH_NAMES = ("auto", *SEARCHES, "hs")  # hs: `eqdsl.extract.hitting`, no CP-SAT model
ACYCLIC = ("hybrid", "order", "lazy", "filter-list")


@dataclass(frozen=True)
class CpSatOptions:
    """`cpsat`'s own keys of the `extract:` section (its time and threads come as an `ExtractBudget`)."""

    acyclic: str = option("hybrid", one_of(ACYCLIC), f"one of {', '.join(ACYCLIC)}",
                          help="how cycles are kept out: hybrid, order (TENSAT's order variables), lazy "
                               "(cycle cuts), filter-list (a cycle filter first)")
    warm_start: str | None = option("greedy-dag", lambda v: v is None or v in start_names(),
                                    lambda: f"one of {', '.join(start_names())}, or null",
                                    help="the program the search starts from and falls back to")
    parts: bool = option(False, is_bool, "true or false",
                         help="solve independent parts one model each (layered models: BERT; loses on "
                              "repeated cells)")
    search: str = option("auto", one_of(SEARCH_NAMES), f"one of {', '.join(SEARCH_NAMES)}",
                         help="auto (lp on the whole model first, then core on the parts, or hs where there are "
                              "none and cycles remain), lp, core, or hs (implicit hitting sets, costs ≥ 0)")
