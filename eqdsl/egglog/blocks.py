"""`egglog { ... }` blocks of a `.eqr` file, checked by egglog itself (`eqdsl check`).

Contract: `egglog_block_errors(lang)` declares the lowered language (without its blocks) in a
fresh egglog (`Lowered.before_blocks`: everything `lower_language` writes before them), then runs
each block in order; an egglog error becomes a `Diagnostic` at the
block's line plus the line egglog names (`In 2:19-25: ...`), with egglog's message. Blocks are
passed through verbatim after the lowered program (`lower.lower_language`); `eqdsl verify` cannot
see what they do.
"""
from __future__ import annotations

import re

from eqdsl import ir
from eqdsl.diagnostics import Diagnostic, Span
from eqdsl.egglog.bindings import bindings
from eqdsl.egglog.lower import lower_language

_WHERE = re.compile(r"In (\d+):(\d+)")


def egglog_block_errors(lang: ir.Language) -> list[Diagnostic]:
    if not lang.egglog:
        return []
    egraph = bindings().EGraph()
    egraph.parse_and_run_program(lower_language(lang).before_blocks)
    problems = []
    for text, span in lang.egglog:
        try:
            egraph.parse_and_run_program(text)
        except bindings().EggSmolError as err:
            message = str(err)
            where = _WHERE.search(message)
            line, col = (span.line + int(where[1]) - 1, int(where[2])) if where else (span.line, 1)
            problems.append(Diagnostic(f"egglog rejects this block: {message.splitlines()[-1]}",
                                       Span(span.file, line, col)))
    return problems
