"""`eqdsl fmt FILE`: a `.eqr` file in one canonical layout.

Contract: `format_text(text, file)` parses `text` (a syntax error is an `EqdslError` with its
position) and prints every item in source order, one layout per kind: single spaces around
operators and after commas, a rule's patterns on one line when it fits in `WIDTH` columns (else
one pattern per line), `where`/`if`/`require` clauses on the item's line or the next, an operator
block's members one per line. Comments are kept where they are: one on an item's (or a block
member's) last line stays after it, one on its own line stays before the item (or member) it
precedes, inside a block too (a program's statements, an analysis's and an operator block's
members). A rule with a comment inside is printed one part per line (head, each pattern, each
`where`, each `if`) and each comment stays beside its part; only one inside another multi-line
item or member (a `shape` with `require`s) moves above it. One blank line is kept
where the source had any. Formatting is idempotent and
parses to the same items (tests check both). Expressions are printed with the fewest parentheses
the grammar's precedence allows.
"""
from __future__ import annotations

import json
import textwrap
from dataclasses import dataclass

from eqdsl.frontend import ast
from eqdsl.frontend.parse import BOM, comments_of, parse_text

WIDTH = 100
INDENT = "    "
# binding strength, as the grammar nests them: or < and < not < comparison < with < sum < product < unary
_LEVEL = {"or": 1, "and": 2, "not": 3, "compare": 4, "with": 5, "add": 6, "sub": 6, "cat": 6,
          "mul": 7, "div": 7, "mod": 7, "neg": 8}
_SYMBOL = {"or": "or", "and": "and", "add": "+", "sub": "-", "cat": "++", "mul": "*", "div": "/", "mod": "%"}


@dataclass(frozen=True)
class _Comment:
    line: int
    col: int
    text: str


def format_text(text: str, file: str) -> str:
    text = text.removeprefix(BOM)
    module = parse_text(text, file)
    comments = [_Comment(line, col, body.rstrip()) for line, col, body in comments_of(text)]
    lines = text.splitlines()
    out: list[str] = []
    last_end = 0
    for item, members in _grouped(module.items):
        start, end = item.span.line, max([item.span.end_line, *(m.span.end_line for m in members)])
        inner = [c for c in comments if start <= c.line <= end]
        gap = any(not lines[k - 1].strip() for k in range(last_end + 1, start)) if last_end else False
        if out and gap:
            out.append("")
        out += [c.text for c in comments if last_end < c.line < start]
        children = _children(item, members)
        if children is not None:
            out += _block(item, children, inner)
        elif isinstance(item, ast.RuleDecl) and any(c.line < end for c in inner):
            out += _rule_with_comments(item, inner, lines)
        else:
            out += _with_comments(_item(item, members).split("\n"), inner, end)
        last_end = end
    out += [c.text for c in comments if c.line > last_end]
    return "\n".join(out).rstrip() + "\n"


def _with_comments(printed: list[str], inner: list[_Comment], end: int) -> list[str]:
    """A one-piece item: the comment on its last line stays after it, the others go above it."""
    trailing = [c for c in inner if c.line == end and c.col > 1]
    above = [c.text for c in inner if c not in trailing[:1]]
    return above + printed[:-1] + [printed[-1] + ("  " + trailing[0].text if trailing else "")]


Child = tuple[int, int, str]  # a block member's first and last source line, and its printed text


def _children(item: ast.Item, members: list[ast.Item]) -> list[Child] | None:
    """The members of a block item printed one per line (None: not a block), so that comments
    between and after them stay where they are."""
    match item:
        case ast.ProgramDecl(stmts=stmts):
            return [(st.span.line, st.span.end_line, _stmt(st)) for st in stmts]
        case ast.AnalysisDecl(merge=merge, means=means, rules=rules):
            heads = [(f"merge {expr(e)}", e) if k == 0 else (f"means {expr(e)}", e)
                     for k, e in enumerate((merge, means)) if e is not None]
            return [(e.span.line, e.span.end_line, text) for text, e in heads] + [
                (r.span.line, r.span.end_line,
                 _clauses(f"{r.op}({', '.join(r.params)}) = {expr(r.body)}", [("require", r.requires)], INDENT * 2))
                for r in rules]
        case ast.OpDecl() if members:
            return [(m.span.line, m.span.end_line, _member(m)) for m in members]
    return None


def _block(item: ast.Item, children: list[Child], inner: list[_Comment]) -> list[str]:
    """The block's head, its members indented one per line, and its close: a comment on a
    member's last line stays after it, one between members on its own line before the next, one
    on the head's line after the head, one inside a multi-line member above that member."""
    head, close = _block_ends(item)
    placed: dict[int, list[str]] = {k: [] for k in range(len(children) + 1)}  # own lines before child k
    trailing: dict[int, str] = {}  # -1: the head
    for c in inner:
        ends_here = [k for k, (_, end, _) in enumerate(children) if end == c.line]
        within = next((k for k, (start, end, _) in enumerate(children) if start <= c.line < end), None)
        if ends_here and ends_here[-1] not in trailing:
            trailing[ends_here[-1]] = c.text
        elif within is not None:
            placed[within].append(c.text)
        elif c.line == item.span.line and -1 not in trailing:
            trailing[-1] = c.text
        else:  # between members, or after the last: before the next one, or the close
            following = next((k for k, (start, _, _) in enumerate(children) if start > c.line), len(children))
            placed[following].append(c.text)
    out = [head + ("  " + trailing[-1] if -1 in trailing else "")]
    for k, (_, _, text) in enumerate(children):
        printed = [INDENT + line for line in [*placed[k], *text.split("\n")]]
        out += printed[:-1] + [printed[-1] + ("  " + trailing[k] if k in trailing else "")]
    out += [INDENT + t for t in placed[len(children)]] + ([close] if close else [])
    return out


def _block_ends(item: ast.Item) -> tuple[str, str]:
    match item:
        case ast.ProgramDecl(name=name):
            return f"program {name}:", ""
        case ast.AnalysisDecl(name=name, param=param, sort=sort, type=t):
            return f"analysis {name}({param}: {sort}) -> {t} {{", "}"
        case ast.OpDecl():
            return _op_head(item) + " {", "}"
    raise AssertionError(item)


def _grouped(items: tuple[ast.Item, ...]) -> list[tuple[ast.Item, list[ast.Item]]]:
    """Each item with the shape and cost rules written in its operator block (inside its span)."""
    groups: list[tuple[ast.Item, list[ast.Item]]] = []
    for item in items:
        if groups and isinstance(groups[-1][0], ast.OpDecl) and isinstance(item, (ast.ShapeDecl, ast.CostDecl)) \
                and _inside(item.span, groups[-1][0].span):
            groups[-1][1].append(item)
        else:
            groups.append((item, []))
    return groups


def _inside(inner, outer) -> bool:
    return (outer.line, outer.col) <= (inner.line, inner.col) and \
        (inner.end_line, inner.end_col) <= (outer.end_line, outer.end_col)


def _item(item: ast.Item, members: list[ast.Item]) -> str:
    match item:
        case ast.LanguageDecl(name=name):
            return f"language {name}"
        case ast.IncludeDecl(target=target, is_path=is_path):
            return f"include {json.dumps(target) if is_path else target}"
        case ast.SortDecl(name=name, fields=fields):
            return f"sort {name}" + (" { " + ", ".join(f"{f.name}: {f.type}" for f in fields) + " }" if fields else "")
        case ast.TargetParamDecl(name=name, type=t, default=default):
            return f"param {name}: {t}" + ("" if default is None else f" = {default}")
        case ast.OpDecl():
            return _op_head(item)  # with members: a block (`_children`)
        case ast.RuleDecl():
            return _rule(item)
        case ast.ShapeDecl(op=op, params=params, body=body, requires=requires):
            return _clauses(f"shape {op}({', '.join(params)}) = {expr(body)}", [("require", requires)])
        case ast.CostDecl(ops=ops, params=None, body=body):
            return f"cost {', '.join(ops)} = {expr(body)}"
        case ast.CostDecl(ops=ops, params=params, body=body):
            return f"cost {ops[0]}({', '.join(params or ())}) = {expr(body)}"
        case ast.EgglogDecl(text=text):  # verbatim, re-indented
            verbatim = textwrap.dedent("\n".join(line.rstrip() for line in text.strip("\n").splitlines()))
            return "\n".join(["egglog {", *(INDENT + line if line else "" for line in verbatim.splitlines()), "}"])
    raise AssertionError(item)


def _op_head(op: ast.OpDecl) -> str:
    return (f"op {op.name}({', '.join(f'{p.name}: {p.type}' for p in op.params)}) -> {op.result}"
            + (" const" if op.const else ""))


def _member(m: ast.Item) -> str:
    """A shape or cost rule written in an operator block, over the operator's parameter names."""
    if isinstance(m, ast.ShapeDecl):
        return _clauses(f"shape = {expr(m.body)}", [("require", m.requires)], INDENT * 2)
    assert isinstance(m, ast.CostDecl)
    return f"cost = {expr(m.body)}"


def _rule(rule: ast.RuleDecl) -> str:
    lhs, rhs = ", ".join(map(expr, rule.lhs)), ", ".join(map(expr, rule.rhs))
    clauses = [("where", tuple(f"{b.name} = {expr(b.value)}" for b in rule.wheres)), ("if", rule.conds)]
    one_line = f"rule {rule.name}: {lhs} {rule.arrow} {rhs}"
    if len(rule.lhs) == 1 and len(one_line) <= WIDTH:
        return _clauses(one_line, clauses)
    return _clauses("\n".join(text for _, text in _pattern_lines(rule)), clauses, force_break=True)


def _rule_with_comments(rule: ast.RuleDecl, inner: list[_Comment], source: list[str]) -> list[str]:
    """A rule with comments inside it, one part per line (its head, each pattern, its `where`s,
    its `if`s), each comment beside the part it follows in the source: a trailing one after the
    last part that starts on or before its line, one on its own line before the first part that
    starts after it. A second trailing comment for one part goes on its own line after it."""
    parts = _rule_parts(rule)
    before: dict[int, list[str]] = {k: [] for k in range(len(parts) + 1)}
    trailing: dict[int, str] = {}
    for c in inner:
        own_line = not source[c.line - 1][:c.col - 1].strip()
        if own_line:
            before[next((k for k, (start, _) in enumerate(parts) if start > c.line), len(parts))].append(c.text)
            continue
        k = max((k for k, (start, _) in enumerate(parts) if start <= c.line), default=0)
        if k in trailing:
            before[k + 1].insert(0, c.text)
        else:
            trailing[k] = c.text
    out: list[str] = []
    for k, (_, text) in enumerate(parts):
        out += [(INDENT if k else "") + t for t in before[k]]
        out.append(text + ("  " + trailing[k] if k in trailing else ""))
    return out + [INDENT + t for t in before[len(parts)]]


def _rule_parts(rule: ast.RuleDecl) -> list[tuple[int, str]]:
    """The rule's printed lines, one part each, with the source line its part starts on."""
    parts = _pattern_lines(rule) + [(b.span.line, INDENT + f"where {b.name} = {expr(b.value)}") for b in rule.wheres]
    return parts + [(c.span.line, INDENT + f"if {expr(c)}") for c in rule.conds]


def _pattern_lines(rule: ast.RuleDecl) -> list[tuple[int, str]]:
    """`rule NAME:`, then one pattern per line (the first right one after the arrow), each with
    the source line it starts on."""
    def listed(k: int, patterns: tuple) -> str:
        return "," if k < len(patterns) - 1 else ""

    lines = [(rule.span.line, f"rule {rule.name}:")]
    lines += [(p.span.line, INDENT + expr(p) + listed(k, rule.lhs)) for k, p in enumerate(rule.lhs)]
    return lines + [(p.span.line, (f" {rule.arrow} " if k == 0 else INDENT) + expr(p) + listed(k, rule.rhs))
                    for k, p in enumerate(rule.rhs)]


def _clauses(text: str, clauses: list[tuple[str, tuple]], indent: str = INDENT, force_break: bool = False) -> str:
    parts = [f"{keyword} " + ", ".join(e if isinstance(e, str) else expr(e) for e in items)
             for keyword, items in clauses if items]
    if not parts:
        return text
    joined = text + " " + " ".join(parts)
    if not force_break and "\n" not in joined and len(joined) <= WIDTH:
        return joined
    return "\n".join([text, *(indent + p for p in parts)])


def _stmt(stmt: ast.LetStmt | ast.RootStmt) -> str:
    if isinstance(stmt, ast.LetStmt):
        return f"let {stmt.name} = {expr(stmt.value)}"
    return f"root {expr(stmt.value)}"


def expr(e: ast.Expr, context: int = 0) -> str:
    """`e` as source text, in parentheses only where binding `context` needs them."""
    text, level = _expr(e)
    return f"({text})" if level < context else text


def _expr(e: ast.Expr) -> tuple[str, int]:
    match e:
        case ast.IntLit(value=v):
            return str(v), 9
        case ast.StrLit(value=v):
            return json.dumps(v), 9
        case ast.Var(name=n):
            return f"?{n}", 9
        case ast.Name(name=n):
            return n, 9
        case ast.Call(fn=fn, args=args):
            return f"{fn}({', '.join(expr(a) for a in args)})", 9
        case ast.ListLit(items=items):
            return f"[{', '.join(expr(a) for a in items)}]", 9
        case ast.Record(entries=entries):
            return "{" + ", ".join(f"{k}: {expr(v)}" for k, v in entries) + "}", 9
        case ast.Index(base=base, index=index):
            return f"{expr(base, 9)}[{expr(index)}]", 9
        case ast.Slice(base=base, lo=lo, hi=hi):
            return f"{expr(base, 9)}[{'' if lo is None else expr(lo)}:{'' if hi is None else expr(hi)}]", 9
        case ast.Field(base=base, name=name):
            return f"{expr(base, 9)}.{name}", 9
        case ast.Unary(op="neg", arg=arg):
            return f"-{expr(arg, 8)}", 8
        case ast.Unary(op=_, arg=arg):
            return f"not {expr(arg, 3)}", 3
        case ast.Binary(op=op, left=left, right=right):
            level = _LEVEL[op]  # left-associative: the right operand binds one level tighter
            return f"{expr(left, level)} {_SYMBOL[op]} {expr(right, level + 1)}", level
        case ast.Compare(operands=operands, ops=ops):
            parts = [expr(operands[0], 5)] + [f"{o} {expr(x, 5)}" for o, x in zip(ops, operands[1:])]
            return " ".join(parts), 4
        case ast.With(base=base, index=index, value=value):
            return f"{expr(base, 6)} with [{expr(index)}] = {expr(value, 6)}", 5
    raise AssertionError(e)
