"""Rules verified side by side.

Contract: `verified(lang, sem, rules, examples, seed, limit_s, jobs)` yields each rule's
`RuleResult` in the order of `rules`, as `verify_rule` under `within(limit_s)` gives it. With
`jobs` > 1 the rules are checked in that many forked processes (at most twice the CPUs): each
rule is seeded on its own, so the results are those of one process, only sooner. A stop kills the
processes with the command's (`eqdsl.worker.supervise` ends the whole group).
"""
from __future__ import annotations

import multiprocessing
import os
from functools import partial
from typing import Any, Iterator, Sequence

from eqdsl import ir
from eqdsl.verify.rules import RuleResult, verify_rule, within

_JOB: tuple[Any, ...] = ()  # what the forked processes check: set before the fork, read there


def verified(lang: ir.Language, sem: dict[str, Any], rules: Sequence[ir.Rule], examples: int, seed: int,
             limit_s: float | None, jobs: int) -> Iterator[RuleResult]:
    global _JOB
    _JOB = (lang, sem, tuple(rules), examples, seed, limit_s)
    if jobs <= 1 or len(rules) < 2 or not hasattr(os, "fork"):
        yield from map(_checked, range(len(rules)))
        return
    processes = min(jobs, len(rules), 2 * (os.cpu_count() or 1))  # more than the CPUs only waits
    with multiprocessing.get_context("fork").Pool(processes) as pool:
        yield from pool.imap(_checked, range(len(rules)))


def _checked(k: int) -> RuleResult:
    lang, sem, rules, examples, seed, limit_s = _JOB
    return within(limit_s, rules[k].name, partial(verify_rule, lang, sem, rules[k], examples, seed))
