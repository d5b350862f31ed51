"""Whether a candidate rule of `eqdsl synthesize` holds: `verify` on it, then the confirming check.

Contract: `passes(lang, sem, c, examples, seed)` is whether candidate `c` survives the screen at
sizes where no dimensions coincide (`verify.rules.refuted`) and `verify` with `examples` examples
on `seed`. `confirmed(lang, sem, c, examples)` is the confirming check a rule gets before it is
kept: `passes` on each of the seeds `CONFIRMING_SEEDS` with `examples` examples each (five times
the first check's, on other seeds). The seeds run side by side in forked processes while
`side_by_side(jobs)` is open (at most `jobs` and the CPUs), else one after another: each seed's
answer is its own, so `confirmed` answers the same for any number of processes. `passes_twice`
is `passes` on seed 0, then `confirmed`.
"""
from __future__ import annotations

import multiprocessing
import os
from contextlib import contextmanager
from typing import Any, Iterator

from eqdsl import ir
from eqdsl.synth.candidates import Candidate
from eqdsl.verify.rules import Status, refuted, verify_rule

CONFIRMING_SEEDS = (1, 2, 3, 4, 5)

_jobs = 1  # processes `confirmed` may use: set by `side_by_side`
_JOB: tuple[Any, ...] = ()  # what the forked processes check: set before the fork, read there


@contextmanager
def side_by_side(jobs: int) -> Iterator[None]:
    """`confirmed` runs its seeds in up to `jobs` processes (at most the CPUs) inside this block."""
    global _jobs
    before, _jobs = _jobs, max(1, min(jobs, os.cpu_count() or 1, len(CONFIRMING_SEEDS)))
    try:
        yield
    finally:
        _jobs = before


def passes(lang: ir.Language, sem: dict[str, Any], c: Candidate, examples: int, seed: int) -> bool:
    """Whether `c` survives the screen at sizes where no dimensions coincide and `verify`."""
    return not refuted(lang, sem, c.rule) and verify_rule(lang, sem, c.rule, examples, seed=seed,
                                                          shrink=False).status is Status.PASSED


def passes_twice(lang: ir.Language, sem: dict[str, Any], c: Candidate, examples: int) -> bool:
    """`passes` with `examples` on seed 0, then `confirmed`."""
    return passes(lang, sem, c, examples, seed=0) and confirmed(lang, sem, c, examples)


def confirmed(lang: ir.Language, sem: dict[str, Any], c: Candidate, examples: int) -> bool:
    """`passes` on every confirming seed, `examples` examples each (see the module docstring)."""
    global _JOB
    if _jobs == 1 or not hasattr(os, "fork"):
        return all(passes(lang, sem, c, examples, seed) for seed in CONFIRMING_SEEDS)
    _JOB = (lang, sem, c, examples)
    with multiprocessing.get_context("fork").Pool(_jobs) as pool:
        return all(pool.imap_unordered(_passes_at, CONFIRMING_SEEDS))  # the first failure ends it


def _passes_at(seed: int) -> bool:
    lang, sem, c, examples = _JOB
    return passes(lang, sem, c, examples, seed)
