"""Whether a candidate rule of `eqdsl synthesize` holds: `verify` on it, then the confirming check.

Contract: `passes(lang, sem, c, examples, seed)` is whether candidate `c` survives the screen at
sizes where no dimensions coincide (`verify.rules.refuted`) and `verify` with `examples` examples
on `seed`. `confirmed(lang, sem, c, examples)` is the confirming check a rule gets before it is
kept: `passes` on each of the seeds `CONFIRMING_SEEDS` with `examples` examples each (five times
the first check's, on other seeds). Inside `processes_for(lang, sem, jobs)` the seeds of `lang`'s
candidates run in up to `jobs` processes (at most the CPUs), forked once when the block opens,
before a synthesis grows (a fork of a process that holds millions of
enumerated terms costs more than the check); else one after another. Each seed's answer is its
own, so `confirmed` answers the same for any number of processes. `passes_twice` is `passes` on
seed 0, then `confirmed`. `side_by_side(lang, sem, fn, tasks)` is `fn(lang, sem, *task)` for each
task, in order, in those processes where they are `lang`'s (else here): other work of a synthesis
that splits into independent tasks (`fn` a module-level function, tasks and results picklable).
"""
from __future__ import annotations

import multiprocessing
import os
from contextlib import contextmanager
from typing import Any, Callable, Iterator, Sequence, TypeVar

from eqdsl import ir
from eqdsl.synth.candidates import Candidate
from eqdsl.verify.rules import Status, refuted, verify_rule

CONFIRMING_SEEDS = (1, 2, 3, 4, 5)
T = TypeVar("T")

_JOB: tuple[Any, ...] = ()  # the language and semantics the forked processes check: set before the fork
_pool: Any = None  # `processes_for`'s processes, forked with `_JOB`


@contextmanager
def processes_for(lang: ir.Language, sem: dict[str, Any], jobs: int) -> Iterator[None]:
    """Up to `jobs` processes (at most the CPUs) that check `lang`'s candidates side by side,
    forked now (see the module); one process checks them where that leaves one."""
    global _JOB, _pool
    jobs = min(jobs, os.cpu_count() or 1, len(CONFIRMING_SEEDS))
    if jobs <= 1 or not hasattr(os, "fork"):
        yield
        return
    before = _JOB, _pool
    _JOB = (lang, sem)
    with multiprocessing.get_context("fork").Pool(jobs) as _pool:
        try:
            yield
        finally:
            _JOB, _pool = before


def passes(lang: ir.Language, sem: dict[str, Any], c: Candidate, examples: int, seed: int) -> bool:
    """Whether `c` survives the screen at sizes where no dimensions coincide and `verify`."""
    return not refuted(lang, sem, c.rule) and verify_rule(lang, sem, c.rule, examples, seed=seed,
                                                          shrink=False).status is Status.PASSED


def passes_twice(lang: ir.Language, sem: dict[str, Any], c: Candidate, examples: int) -> bool:
    """`passes` with `examples` on seed 0, then `confirmed`."""
    return passes(lang, sem, c, examples, seed=0) and confirmed(lang, sem, c, examples)


def confirmed(lang: ir.Language, sem: dict[str, Any], c: Candidate, examples: int) -> bool:
    """`passes` on every confirming seed, `examples` examples each (see the module docstring)."""
    if _pool is None or _JOB[0] is not lang:
        return all(passes(lang, sem, c, examples, seed) for seed in CONFIRMING_SEEDS)
    return all(_pool.imap_unordered(_there, [(passes, (c, examples, seed)) for seed in CONFIRMING_SEEDS]))


def side_by_side(lang: ir.Language, sem: dict[str, Any], fn: Callable[..., T], tasks: Sequence[tuple]) -> Iterator[T]:
    """`fn(lang, sem, *task)` for each task, in order (see the module docstring)."""
    if _pool is None or _JOB[0] is not lang:
        return (fn(lang, sem, *task) for task in tasks)
    return _pool.imap(_there, [(fn, task) for task in tasks])


def _there(job: tuple[Callable[..., T], tuple]) -> T:
    """`fn(lang, sem, *task)` in a forked process, over the language and semantics it was forked with."""
    fn, task = job
    lang, sem = _JOB
    return fn(lang, sem, *task)
