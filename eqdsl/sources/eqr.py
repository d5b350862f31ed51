"""`.eqr` programs: `program: path.eqr`, or `{file, name, text}`, or the ruleset's own programs
(also when `file` is the ruleset's file, or one it includes).

Contract: `name` picks one program; without it the source must hold exactly one.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from eqdsl import ir
from eqdsl.diagnostics import EqdslError
from eqdsl.frontend import load_program_file, load_program_text
from eqdsl.sources.base import ProgramRef, SourceProgram


@dataclass(frozen=True)
class EqrSource:
    name: str = "eqr"
    builder: bool = False
    file_key: str | None = None

    def load(self, ref: ProgramRef, language: ir.Language) -> SourceProgram:
        programs = dict(language.programs)
        file, text, name = ref.get("file"), ref.get("text"), ref.get("name")
        if file is not None and not _declares(language, ref.base / file):
            programs = load_program_file(ref.base / file, language)
        elif text is not None:
            programs = load_program_text(text, "<config program.text>", language)
        if name is not None:
            if name not in programs:
                raise EqdslError.one(f"no program named {name!r}; found: {', '.join(programs) or 'none'}",
                                     path="program.name")
            return SourceProgram(programs[name])
        if len(programs) != 1:
            raise EqdslError.one(f"expected exactly one program (or `program.name`), found "
                                 f"{len(programs)}: {', '.join(programs) or 'none'}", path="program")
        return SourceProgram(next(iter(programs.values())))

    def inputs(self, ref: ProgramRef) -> list[Path]:
        file = ref.get("file")
        return [] if file is None else [ref.base / file]


def _declares(language: ir.Language, path: Path) -> bool:
    """Whether `path` is one of the language's own files (its programs are the language's)."""
    return any(Path(file).resolve() == path.resolve() for _, file in language.lineage)
