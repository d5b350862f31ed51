"""Load `.eqr` files (following `include`s) and check them into an `ir.Language`.

Contract: `load_language(ref)` returns a fully checked Language or raises `EqdslError` with every
diagnostic found. `ref` is a path to a `.eqr` file or the name of a shipped ruleset (`arith`).
"""
from __future__ import annotations

import functools
from importlib import resources
from pathlib import Path

from eqdsl import ir
from eqdsl.diagnostics import DiagnosticSink, EqdslError, Span
from eqdsl.frontend import ast
from eqdsl.frontend.ast_cache import cached_parse
from eqdsl.frontend.check.analyses import check_analyses
from eqdsl.frontend.check.costs import check_costs
from eqdsl.frontend.check.declarations import check_ops, check_params, check_shapes, check_sorts
from eqdsl.frontend.check.rules import check_program, check_rules
from eqdsl.frontend.parse import parse_text


def shipped_rulesets() -> list[str]:
    folder = resources.files("eqdsl.rulesets")
    return sorted(p.name[:-4] for p in folder.iterdir() if p.name.endswith(".eqr"))


def resolve_ruleset(ref: str, base: Path | None = None) -> Path:
    """A path (relative to `base`) if it names a file, else a shipped ruleset by name."""
    candidate = (base / ref) if base is not None and not Path(ref).is_absolute() else Path(ref)
    if candidate.suffix == ".eqr" or candidate.exists():
        if not candidate.exists():
            raise EqdslError.one(f"ruleset file not found: {candidate}")
        if not candidate.is_file():
            raise EqdslError.one(f"ruleset {candidate}: not a regular file (a directory or a device); expected a "
                                 ".eqr file")
        return candidate
    shipped = resources.files("eqdsl.rulesets").joinpath(ref + ".eqr")
    if not shipped.is_file():
        raise EqdslError.one(f"unknown ruleset '{ref}'; expected a .eqr path or one of: "
                             f"{', '.join(shipped_rulesets())}")
    return Path(str(shipped))


def load_modules(path: Path) -> list[ast.Module]:
    """The file and everything it includes, included files first, each file once."""
    ordered: list[ast.Module] = []
    _load(path, ordered, seen=set(), stack=[])
    return ordered


def _load(path: Path, out: list[ast.Module], seen: set[Path], stack: list[Path],
          span: Span | None = None) -> None:
    try:
        path = path.resolve()
    except (RuntimeError, OSError) as err:  # a symlink loop
        raise EqdslError.one(f"cannot follow {path}: {err}", span) from None
    if path in stack:
        cycle = " -> ".join(p.name for p in [*stack, path])
        raise EqdslError.one(f"include cycle: {cycle}", span)
    if path in seen:
        return
    text = read_eqr(path, "ruleset", span)
    module = _parse_cached(text, str(path))
    stack.append(path)
    for item in module.items:
        if isinstance(item, ast.IncludeDecl):
            target = Path(item.target) if item.is_path else resolve_ruleset(item.target)
            if item.is_path and not target.is_absolute():
                target = path.parent / target
            if not target.is_file():
                raise EqdslError.one(f"included file not found: {target}", item.span)
            _load(target, out, seen, stack, item.span)
    stack.pop()
    seen.add(path)
    out.append(module)


@functools.lru_cache(maxsize=64)
def _parse_cached(text: str, file: str) -> ast.Module:
    """`parse_text`, once per file content: `eqdsl run` reads the ruleset's includes to protect
    them before the run (`pipeline.config_inputs`), and its worker, forked after, loads them again;
    across runs, from the user's cache (`ast_cache`)."""
    return cached_parse(text, file, parse_text)


def read_eqr(path: Path, what: str, span: Span | None = None) -> str:
    """The text of a `.eqr` file. Any other file is refused unread: an error shows the line it is
    about, and a config naming, say, a key file must not get its first line printed."""
    if path.suffix != ".eqr":
        raise EqdslError.one(f"expected a .eqr {what} file, got {path}", span)
    try:
        return path.read_text()
    except (OSError, UnicodeDecodeError) as err:
        raise EqdslError.one(f"cannot read {what} file {path}: {err}", span) from None


def check_modules(modules: list[ast.Module]) -> ir.Language:
    items = [item for m in modules for item in m.items]
    of = lambda kind: [i for i in items if isinstance(i, kind)]  # noqa: E731
    sink = DiagnosticSink()
    languages = of(ast.LanguageDecl)
    name = languages[-1].name if languages else Path(modules[-1].file).stem
    sorts = check_sorts(of(ast.SortDecl), sink)
    ops = check_ops(of(ast.OpDecl), sorts, sink)
    shapes = check_shapes(of(ast.ShapeDecl), ops, sorts, sink)
    params = check_params(of(ast.TargetParamDecl), sink)
    analyses = check_analyses(of(ast.AnalysisDecl), ops, sorts, sink)
    costs = check_costs(of(ast.CostDecl), ops, sorts, sink, params, analyses)
    rules = check_rules(of(ast.RuleDecl), ops, sorts, sink, params, analyses)
    programs: dict[str, ir.Program] = {}
    for decl in of(ast.ProgramDecl):
        if decl.name in programs:
            sink.error(f"duplicate program '{decl.name}'", decl.span)
            continue
        program = check_program(decl, ops, sink, shapes, sorts)
        if program is not None:
            programs[decl.name] = program
    sink.raise_if_any()
    lineage = tuple((decl.name, m.file) for m in modules for decl in m.items
                    if isinstance(decl, ast.LanguageDecl))
    egglog = tuple((d.text, Span(d.span.file, d.text_line, 1)) for d in of(ast.EgglogDecl))
    return ir.Language(name, sorts, ops, tuple(rules), shapes, costs, programs, params, lineage, egglog, analyses)


def load_language(ref: str | Path, base: Path | None = None) -> ir.Language:
    modules = load_modules(resolve_ruleset(str(ref), base))
    main = modules[-1]
    if not main.items:
        raise EqdslError.one("the file declares nothing; expected `language NAME` followed by "
                             "sorts, operators and rules", Span(main.file, 1, 1))
    return check_modules(modules)


def load_program_file(path: Path, language: ir.Language) -> dict[str, ir.Program]:
    """Programs written in a separate `.eqr` file against an already-loaded language."""
    text = read_eqr(path, "program")
    return load_program_text(text, str(path), language)


def load_program_text(text: str, file: str, language: ir.Language) -> dict[str, ir.Program]:
    module = parse_text(text, file)
    sink = DiagnosticSink()
    programs: dict[str, ir.Program] = {}
    for item in module.items:
        if not isinstance(item, ast.ProgramDecl):
            others = sum(not isinstance(i, ast.ProgramDecl) for i in module.items)
            sink.error(f"a program file holds only `program` blocks; this one declares a language ({others} "
                       "declaration(s)): name it as the `ruleset:` and its own programs are used, or move the "
                       "programs to a file of their own", item.span)
            break
    for item in module.items:
        if not isinstance(item, ast.ProgramDecl):
            continue
        program = check_program(item, language.ops, sink, language.shapes, language.sorts)
        if program is not None:
            programs[item.name] = program
    sink.raise_if_any()
    return programs
