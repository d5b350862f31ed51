"""The file `eqdsl synthesize` writes: the language's declarations without its rules, then the
kept rules one per line with where each came from, and the `_ref.py` companion a user's language
needs beside it.

Contract: `rules_text(lang, synthesis, header, declarations(lang, name))` is the `.eqr` text;
`semantics_companion(lang)` the companion's text, or None where `lang`'s semantics ship with eqdsl.
"""
from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from eqdsl import ir

if TYPE_CHECKING:
    from eqdsl.synth.synthesize import Synthesis


def rules_text(lang: ir.Language, synthesis: Synthesis, header: str, declarations: str) -> str:
    """The kept rules as a `.eqr` file: `declarations` (the language without its rules), then one
    rule per line with where it came from."""
    lines = [f"# {line}" if line else "#" for line in header.splitlines()]
    lines += [declarations.rstrip(), ""]
    for c in synthesis.kept:
        lines += c.lines()
    return "\n".join(lines) + "\n"


def declarations(lang: ir.Language, name: str) -> str:
    """A `.eqr` language `name` with `lang`'s sorts, operators, shape and cost rules but none of
    its rules: `include` of it where it has none, else its files' text with every `rule` (and
    `language`, `include`, `program`) left out, in include order. Named as `lang` itself, the
    file finds `lang`'s shipped reference semantics (`verify.semantics.load_semantics`)."""
    from eqdsl.frontend import ast, load_modules

    files = [file for _, file in lang.lineage]
    if not any(r.span.file in files for r in lang.rules):
        return f"language {name}\ninclude {_include_ref(files[-1])}\n"
    text = [f"language {name}"]
    skipped = (ast.LanguageDecl, ast.IncludeDecl, ast.RuleDecl, ast.ProgramDecl)
    for module in load_modules(Path(files[-1])):
        source = Path(module.file).read_text().splitlines()
        drop = {line for item in module.items if isinstance(item, skipped) for line in _lines_of(item, source)}
        text += [f"# from {module.file}"] + [line for k, line in enumerate(source, 1) if k not in drop]
    return "\n".join(text) + "\n"


def _lines_of(item: Any, source: list[str]) -> range:
    """An item's lines (1-based); a rule's or program's with the comment lines right above it,
    which speak of it (the file's opening comment stays: it sits above `language`)."""
    from eqdsl.frontend import ast

    first = item.span.line
    talks_of_it = isinstance(item, (ast.RuleDecl, ast.ProgramDecl))
    while talks_of_it and first > 1 and source[first - 2].lstrip().startswith("#"):
        first -= 1
    return range(first, max(item.span.line, item.span.end_line) + 1)


def _include_ref(file: str) -> str:
    from eqdsl.frontend.load import shipped_rulesets

    stem = Path(file).stem
    return stem if stem in shipped_rulesets() and Path(file).parent.name == "rulesets" else f'"{file}"'


def semantics_companion(lang: ir.Language) -> str | None:
    """The `_ref.py` a synthesized file needs beside it when `lang`'s reference semantics are not
    shipped with eqdsl (a user's `_ref.py`): it loads `lang`'s own, from where they are now."""
    import importlib.util

    name = lang.name.replace("-", "_")
    try:
        if importlib.util.find_spec(f"eqdsl.languages.{name}.semantics") is not None:
            return None
    except ModuleNotFoundError:
        pass
    source = lang.lineage[-1][1]
    return (f'"""Reference semantics of {lang.name}: those of {source} (written by `eqdsl synthesize`)."""\n'
            "from eqdsl.frontend import load_language\n"
            "from eqdsl.verify.semantics import load_semantics\n\n"
            f"SEMANTICS = load_semantics(load_language({source!r}))\n")
