"""Source spans, diagnostics and the one exception type user mistakes raise.

Contract: every error a user can cause (a bad `.eqr`, YAML, e-graph JSON, an infeasible
extraction) is raised as `EqdslError` carrying one or more `Diagnostic`s; the CLI renders them and
exits non-zero. Anything else escaping is a bug in eqdsl.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, TypeVar

T = TypeVar("T")


@dataclass(frozen=True)
class Span:
    """A region of a source file; `line`/`col` are 1-based, `end_*` inclusive-exclusive."""

    file: str
    line: int
    col: int
    end_line: int = 0
    end_col: int = 0

    def __str__(self) -> str:
        return f"{self.file}:{self.line}:{self.col}"


NO_SPAN = Span("<generated>", 0, 0)


@dataclass(frozen=True)
class Diagnostic:
    """One message: where, what was expected, what was found."""

    message: str
    span: Span | None = None
    path: str | None = None  # a YAML/JSON path such as `schedule.k_multi`
    notes: tuple[str, ...] = ()
    level: str = "error"  # or "warning": reported, but the input is accepted

    def render(self, sources: dict[str, str] | None = None) -> str:
        where = f"{self.span}: " if self.span else (f"{self.path}: " if self.path else "")
        head = f"{where}{self.level}: {self.message}"
        lines = [head]
        if self.span and self.span.line > 0:
            lines.extend(_caret_lines(self.span, sources or {}))
        lines.extend(f"  note: {n}" for n in self.notes)
        return "\n".join(lines)


def _caret_lines(span: Span, sources: dict[str, str]) -> list[str]:
    text = sources.get(span.file)
    if text is None:
        try:
            text = Path(span.file).read_text()
        except OSError:
            return []
    src_lines = text.splitlines()
    if not 0 < span.line <= len(src_lines):
        return []
    src = src_lines[span.line - 1]
    width = 1
    if span.end_line == span.line and span.end_col > span.col:
        width = span.end_col - span.col
    gutter = f"{span.line:>4} | "
    return [gutter + src, " " * (len(gutter) + span.col - 1) + "^" * width]


@dataclass
class EqdslError(Exception):
    """A user-facing failure; `diagnostics` holds every problem found, in source order."""

    diagnostics: list[Diagnostic] = field(default_factory=list)

    def __str__(self) -> str:
        return "\n".join(d.render() for d in self.diagnostics)

    @classmethod
    def one(cls, message: str, span: Span | None = None, path: str | None = None,
            notes: tuple[str, ...] = ()) -> EqdslError:
        return cls([Diagnostic(message, span, path, notes)])


class DiagnosticSink:
    """Collects diagnostics so a pass can report all of them instead of the first."""

    def __init__(self) -> None:
        self.items: list[Diagnostic] = []

    def error(self, message: str, span: Span | None, notes: tuple[str, ...] = ()) -> None:
        self.items.append(Diagnostic(message, span, notes=notes))

    def raise_if_any(self) -> None:
        if self.items:
            raise EqdslError(sorted(self.items, key=_order))


def all_present(items: Iterable[T | None]) -> list[T] | None:
    """Checkers return None for what they reported to the sink: `items` without a None, or None."""
    listed = list(items)
    present = [item for item in listed if item is not None]
    return present if len(present) == len(listed) else None


def _order(d: Diagnostic) -> tuple[str, int, int]:
    s = d.span or NO_SPAN
    return (s.file, s.line, s.col)
