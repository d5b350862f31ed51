"""eqdsl as a library: `eqdsl.load`, `eqdsl.program`, `eqdsl.optimize` (the package re-exports
them lazily, so `import eqdsl` stays as light as `eqdsl --help`).

Contract:
- `load(ref)` is a checked `ir.Language`: a `.eqr` path (with its includes) or a shipped
  ruleset's name (`"arith"`); `EqdslError` with `file:line:col` for every mistake.
- `program(language, source, name=None)` is one `program` block of `.eqr` text or of a `.eqr`
  file (a `Path`): the only one there is, or the one `name`d; also one of the language's own.
  Text that holds no `program` block is one term, the program's root.
- `optimize(language, program, ...)` (`program`: an `ir.Program`, or `.eqr` text for `program()`)
  saturates (`iter_limit`, `node_limit`, `time_limit_s`; the `saturate` schedule), extracts with
  `extractor` (`cpsat` by default, under `extract_time_s`) and returns an `Optimized`. Arguments
  are checked as the YAML keys they stand for (an `EqdslError` naming the argument; a `TypeError`
  for a language or program of the wrong type). `target` (a shipped name or a `.yaml`) gives the
  values of the target params a language's costs read. Nothing forks and no limit kills the
  caller's process (the command line's guards are the command's).
- `Optimized`: `.program` (the optimized `ir.Program`), `.text` (it in `.eqr` syntax), `.cost`,
  `.original_cost`, `.status` (`optimal`, `feasible`, ...), `.run` (the whole `RunResult`) and
  `.report_html()` (the run's report page, as `eqdsl report` writes it).
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from eqdsl import ir
from eqdsl.diagnostics import EqdslError
from eqdsl.pipeline import RunResult


def load(ref: str | Path) -> ir.Language:
    from eqdsl.frontend import load_language

    if not isinstance(ref, (str, Path)):
        raise TypeError(f"load: expected a .eqr path or a shipped ruleset name, got {type(ref).__name__}")
    if not str(ref).strip():
        raise EqdslError.one("load: expected a .eqr path or a shipped ruleset name, got an empty name")
    return load_language(ref)


def program(language: ir.Language, source: str | Path, name: str | None = None) -> ir.Program:
    from eqdsl.frontend import load_program_file, load_program_text

    if isinstance(source, Path):
        found = load_program_file(source, language)
    else:
        if source.strip() and not re.search(r"^\s*(program|include|language)\b", source, re.MULTILINE):
            source = f"program main:\n  root {source.strip()}\n"  # one term: the root of a program
        found = load_program_text(source, "<program>", language) if source.strip() else {}
    found = found or dict(language.programs)
    if name is not None:
        if name not in found:
            raise EqdslError.one(f"no program named {name!r}; expected one of: {', '.join(found) or '(none)'}")
        return found[name]
    if len(found) != 1:
        raise EqdslError.one(f"{len(found)} programs ({', '.join(found) or 'none'}); expected one, or name it")
    return next(iter(found.values()))


@dataclass(frozen=True)
class Optimized:
    run: RunResult

    @property
    def program(self) -> ir.Program:
        return self.run.optimized_program()

    @property
    def text(self) -> str:
        return self.run.optimized_text

    @property
    def cost(self) -> float:
        return self.run.best.cost

    @property
    def original_cost(self) -> float:
        return self.run.original_cost

    @property
    def status(self) -> str:
        return self.run.best.status.value

    def report_html(self) -> str:
        from eqdsl.report import report_json
        from eqdsl.report_page import page

        return page(report_json(self.run))


def optimize(language: ir.Language, source: ir.Program | str, *, iter_limit: int = 10, node_limit: int = 10_000,
             time_limit_s: float = 60.0, extractor: str = "cpsat", extract_time_s: float = 60.0,
             target: str | Path | None = None) -> Optimized:
    from eqdsl.cost.targets import bind_target, load_target
    from eqdsl.extract.registry import ExtractConfig
    from eqdsl.pipeline import optimize as run_optimize
    from eqdsl.schedule.saturate import SaturateConfig

    if not isinstance(language, ir.Language):
        raise TypeError(f"optimize: expected a language from eqdsl.load, got {type(language).__name__}")
    if not isinstance(source, (ir.Program, str, Path)):
        raise TypeError(f"optimize: expected a program (ir.Program, .eqr text or a Path), got {type(source).__name__}")
    schedule = _checked(SaturateConfig, {"iter_limit": iter_limit, "node_limit": node_limit,
                                         "time_limit_s": time_limit_s})
    extract = _checked(ExtractConfig, {"extractor": extractor, "compare": [], "extract_time_s": extract_time_s})
    params = bind_target(language, None if target is None else load_target(str(target)))
    loaded = source if isinstance(source, ir.Program) else program(language, source)
    return Optimized(run_optimize(language, loaded, schedule, extract, params))


T = TypeVar("T")
_KEY_OF = {"extractor": "method", "extract_time_s": "time_limit_s"}  # optimize()'s argument → its config key


def _checked(section: type[T], arguments: dict[str, object]) -> T:
    """`section` from optimize()'s arguments, checked as the YAML section is; errors name the argument."""
    from dataclasses import replace

    from eqdsl.fields import read_section

    argument_of = {_KEY_OF.get(name, name): name for name in arguments}
    try:
        checked: T = read_section({_KEY_OF.get(k, k): v for k, v in arguments.items()}, section, "")
        return checked
    except EqdslError as err:
        raise EqdslError([replace(d, path=f"optimize({argument_of.get(d.path or '', d.path)}=)")
                          for d in err.diagnostics]) from None
