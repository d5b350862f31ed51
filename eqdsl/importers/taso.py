"""Import TENSAT rule files (`converted.txt`, `converted_multi.txt`, `predefined.txt`) as `.eqr`.

TENSAT's format: one `LHS=>RHS` per line, s-expressions over its `Mdl` operators; in the multi
file lines 2k and 2k+1 form one rule. Differences from TENSAT, made explicit here:
- `concat axis ndim a b` → `concat(axis, a, b)` (the rank is known from the shapes);
- `split axis x` cuts "where the most recent concat joined": we write the cut point, computed
  from shapes: the size along the concat's axis of the first input of the first `concat` inside
  x — `split(axis, k, x) where k = shape(first)[concat axis]`;
- `split_0`/`split_1` → `split0`/`split1`;
- a multi-pattern rule requires its two matches to differ (`if ?a != ?b` on the first pair of
  variables private to each side), so a pattern is not merged with itself;
- TASO's unstated assumptions (equal shapes for element-wise ops, convolution grouping, odd
  kernels for `enlarge`, `merge` of all groups) become `if` conditions: see taso_assumptions.py.
Contract: `import_rules(...)` returns `.eqr` text; malformed input raises `EqdslError` with
file:line:col.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from eqdsl.diagnostics import EqdslError, Span
from eqdsl.importers.taso_assumptions import assumptions

# TENSAT operator → (eqdsl operator, which TENSAT arguments to keep, in eqdsl's order)
OPERATORS: dict[str, tuple[str, tuple[int, ...]]] = {
    "matmul": ("matmul", (0, 1, 2)),
    "conv2d": ("conv2d", (0, 1, 2, 3, 4, 5)),
    "concat": ("concat", (0, 2, 3)),  # drops ndim
    "split_0": ("split0", (0,)),
    "split_1": ("split1", (0,)),
    "merge": ("merge", (0, 1)),
    "enlarge": ("enlarge", (0, 1)),
    "ewadd": ("ewadd", (0, 1)),
    "ewmul": ("ewmul", (0, 1)),
    "relu": ("relu", (0,)),
    "tanh": ("tanh", (0,)),
    "sigmoid": ("sigmoid", (0,)),
    "smul": ("smul", (0, 1)),
}
_TOKEN = re.compile(r"\s*(\(|\)|[^\s()]+)")


@dataclass(frozen=True)
class SExpr:
    head: str
    args: tuple["SExpr | str", ...]


Term = SExpr | str


def parse_sexpr(text: str, span: Span) -> Term:
    tokens = [(m.group(1), m.start(1)) for m in _TOKEN.finditer(text) if m.group(1)]
    pos = 0

    def fail(message: str, at: int) -> EqdslError:
        return EqdslError.one(message, Span(span.file, span.line, span.col + at, span.line, span.col + at + 1))

    def term() -> Term:
        nonlocal pos
        if pos >= len(tokens):
            raise fail("expected a term, found end of line", len(text))
        tok, at = tokens[pos]
        pos += 1
        if tok == ")":
            raise fail("expected a term, found ')'", at)
        if tok != "(":
            return tok
        if pos >= len(tokens) or tokens[pos][0] in "()":
            raise fail("expected an operator name after '('", at)
        head = tokens[pos][0]
        pos += 1
        args = []
        while pos < len(tokens) and tokens[pos][0] != ")":
            args.append(term())
        if pos >= len(tokens):
            raise fail("expected ')', found end of line", len(text))
        pos += 1
        return SExpr(head, tuple(args))

    result = term()
    if pos != len(tokens):
        raise fail(f"expected end of term, found {tokens[pos][0]!r}", tokens[pos][1])
    return result


class _Converter:
    """One TENSAT rule side → eqdsl term text, collecting `where` bindings for split points."""

    def __init__(self, span: Span) -> None:
        self.span = span
        self.wheres: list[str] = []
        self.split_points: dict[str, str] = {}  # split subterm text → its where name

    def convert(self, t: Term) -> str:
        if isinstance(t, str):
            return _var(t) if t.startswith("?") else t
        if t.head == "split":
            return self._split(t)
        if t.head not in OPERATORS:
            raise EqdslError.one(f"unknown TENSAT operator '{t.head}'; expected one of: "
                                 f"split, {', '.join(sorted(OPERATORS))}", self.span)
        name, keep = OPERATORS[t.head]
        if len(t.args) < max(keep, default=-1) + 1:
            raise EqdslError.one(f"'{t.head}' needs {max(keep) + 1} arguments, found {len(t.args)}", self.span)
        return f"{name}({', '.join(self.convert(t.args[i]) for i in keep)})"

    def _split(self, t: SExpr) -> str:
        if len(t.args) != 2 or not isinstance(t.args[0], str):
            raise EqdslError.one("'split' takes an axis and a term", self.span)
        inner = self.convert(t.args[1])
        key = f"{t.args[0]}:{inner}"
        if key not in self.split_points:
            name = "k" if not self.split_points else f"k{len(self.split_points) + 1}"
            self.split_points[key] = name
            self.wheres.append(f"{name} = {self._cut_point(t.args[1])}")
        return f"split({t.args[0]}, {self.split_points[key]}, {inner})"

    def _cut_point(self, t: Term) -> str:
        concat = _first_concat(t)
        if concat is None:
            raise EqdslError.one("'split' of a term with no 'concat' inside: TENSAT's split point "
                                 "is undefined", self.span)
        axis, first = concat.args[0], concat.args[2]
        return f"shape({self.convert(first)})[{axis}]"


def _var(name: str) -> str:
    m = re.fullmatch(r"\?input_(\d+)", name)
    return f"?t{m.group(1)}" if m else name


def _first_concat(t: Term) -> SExpr | None:
    if isinstance(t, str):
        return None
    if t.head == "concat":
        return t
    for a in t.args:
        found = _first_concat(a)
        if found is not None:
            return found
    return None


def _vars(t: Term) -> set[str]:
    if isinstance(t, str):
        return {t} if t.startswith("?") else set()
    return set().union(*(_vars(a) for a in t.args)) if t.args else set()


@dataclass(frozen=True)
class _Line:
    lhs: Term
    rhs: Term
    span: Span


def read_lines(path: Path) -> list[_Line]:
    try:
        text = path.read_text()
    except (OSError, UnicodeDecodeError) as err:
        raise EqdslError.one(f"cannot read TENSAT rules {path}: {err}") from None
    lines = []
    for number, raw in enumerate(text.split("\n"), start=1):
        if not raw.strip():
            continue
        if raw.count("=>") != 1:
            raise EqdslError.one("expected one 'LHS=>RHS' rule per line", Span(str(path), number, 1))
        left, right = raw.split("=>")
        span = Span(str(path), number, 1)
        lines.append(_Line(parse_sexpr(left, span),
                           parse_sexpr(right, Span(str(path), number, len(left) + 3)), span))
    return lines


def single_rule(name: str, line: _Line) -> str:
    conv = _Converter(line.span)
    lhs, rhs = conv.convert(line.lhs), conv.convert(line.rhs)
    unbound = _vars(line.rhs) - _vars(line.lhs)
    if unbound:
        raise EqdslError.one(f"right side uses {', '.join(sorted(unbound))}, not bound on the left", line.span)
    where = f"\n    where {', '.join(conv.wheres)}" if conv.wheres else ""
    conds = assumptions([line.lhs], [line.rhs], conv.convert)
    cond = f"\n    if {', '.join(conds)}" if conds else ""
    return f"rule {name}: {lhs}\n    => {rhs}{where}{cond}"


def multi_rule(name: str, first: _Line, second: _Line) -> str:
    conv = _Converter(first.span)
    lhs = [conv.convert(first.lhs), conv.convert(second.lhs)]
    rhs = [conv.convert(first.rhs), conv.convert(second.rhs)]
    left_vars = _vars(first.lhs) | _vars(second.lhs)
    unbound = (_vars(first.rhs) | _vars(second.rhs)) - left_vars
    if unbound:
        raise EqdslError.one(f"right sides use {', '.join(sorted(unbound))}, not bound on the left", first.span)
    only_first = sorted(_vars(first.lhs) - _vars(second.lhs))
    only_second = sorted(_vars(second.lhs) - _vars(first.lhs))
    clauses = []
    if conv.wheres:
        clauses.append(f"    where {', '.join(conv.wheres)}")
    conds = [f"{_var(only_first[0])} != {_var(only_second[0])}"] if only_first and only_second else []
    conds += assumptions([first.lhs, second.lhs], [first.rhs, second.rhs], conv.convert)
    if conds:
        clauses.append(f"    if {', '.join(conds)}")
    return (f"rule {name}:\n    {lhs[0]},\n    {lhs[1]}\n => {rhs[0]},\n    {rhs[1]}"
            + "".join("\n" + c for c in clauses))


def import_rules(single: Path | None, multi: Path | None, predefined: Path | None,
                 include: str = "tensor") -> str:
    out = ["# TASO's rewrite rules, imported from TENSAT's rule files by `eqdsl import tensat`.",
           "# (TENSAT: uwplse/tensat, MIT licence; TASO's rules, proved by TASO with an SMT solver.)",
           "language tensat", f"include {include}", ""]
    n_single = n_multi = 0
    singles = read_lines(single) if single else []
    pre = read_lines(predefined) if predefined else []
    for line in singles + pre[:4]:
        n_single += 1
        out.append(single_rule(f"taso-s{n_single:03d}", line))
    pairs = read_lines(multi) if multi else []
    pairs += pre[4:]
    if len(pairs) % 2:
        raise EqdslError.one("multi-pattern rules come in pairs of lines; found an odd number",
                             pairs[-1].span)
    for i in range(0, len(pairs), 2):
        n_multi += 1
        out.append(multi_rule(f"taso-m{n_multi:02d}", pairs[i], pairs[i + 1]))
    out.insert(4, f"# {n_single} single-pattern and {n_multi} multi-pattern rules\n")
    return "\n".join(out) + "\n"
