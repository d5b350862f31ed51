"""`egglog { ... }` blocks of a `.eqr` file, checked by egglog itself (`eqdsl check`).

Contract: `egglog_block_errors(lang)` declares the lowered language (without its blocks) in a
fresh egglog (`Lowered.before_blocks`: everything `lower_language` writes before them), then runs
each block in order; an egglog error becomes a `Diagnostic` at the
block's line plus the line egglog names (`In 2:19-25: ...`), with egglog's message. A block runs
under `BLOCK_TIME_S` and half the memory (`eqdsl.worker.guarded`, inside a command's worker): one
that does not finish (a `(run N)` over facts that never saturate) is a `Diagnostic` too, not a hung
`check`. Blocks are passed through verbatim after the lowered program (`lower.lower_language`);
`eqdsl verify` cannot see what they do.
"""
from __future__ import annotations

import re
import time
from functools import partial

from eqdsl import ir
from eqdsl.diagnostics import Diagnostic, Span
from eqdsl.egglog.bindings import bindings
from eqdsl.egglog.lower import lower_language
from eqdsl.worker import Budget, Stopped, default_memory_bytes, guarded

BLOCK_TIME_S = 20.0

_WHERE = re.compile(r"In (\d+):(\d+)")


def egglog_block_errors(lang: ir.Language) -> list[Diagnostic]:
    if not lang.egglog:
        return []
    egraph = bindings().EGraph()
    egraph.parse_and_run_program(lower_language(lang).before_blocks)
    problems = []
    for text, span in lang.egglog:
        budget = Budget(default_memory_bytes(), time.monotonic() + BLOCK_TIME_S)
        outcome = guarded(partial(_rejection, egraph, text), budget)
        if isinstance(outcome, Stopped):
            problems.append(Diagnostic(f"egglog did not finish this block: stopped at the {outcome.cause.value} "
                                       f"({BLOCK_TIME_S:g} s, half the memory); a block runs once, when the "
                                       "language is declared; its rewrites run in the schedule (ruleset `user`), "
                                       "a `(run ...)` in it runs then, on the block's own facts", span))
        elif outcome.value is not None:
            message = outcome.value
            where = _WHERE.search(message)
            line, col = (span.line + int(where[1]) - 1, int(where[2])) if where else (span.line, 1)
            problems.append(Diagnostic(f"egglog rejects this block: {message.splitlines()[-1]}",
                                       Span(span.file, line, col)))
    return problems


def _rejection(egraph, text: str) -> str | None:
    """egglog's message where it refuses `text`; None where it runs it."""
    try:
        egraph.parse_and_run_program(text)
    except bindings().EggSmolError as err:
        return str(err)
    return None
