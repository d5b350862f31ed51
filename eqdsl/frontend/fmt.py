"""`eqdsl fmt FILE`: a `.eqr` file in one canonical layout.

Contract: `format_text(text, file)` parses `text` (a syntax error is an `EqdslError` with its
position) and prints every item in source order, one layout per kind: single spaces around
operators and after commas, a rule's patterns on one line when it fits in `WIDTH` columns (else
one pattern per line), `where`/`if`/`require` clauses on the item's line or the next, an operator
block's members one per line. Comments are kept: a comment on an item's last line stays there,
every other one goes on its own line before the item it precedes (one inside a multi-line item
moves above it); one blank line is kept where the source had any. Formatting is idempotent and
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
        before = [c for c in comments if last_end < c.line < start or (start <= c.line < end)]
        gap = any(not lines[k - 1].strip() for k in range(last_end + 1, start)) if last_end else False
        if out and gap:
            out.append("")
        out += [c.text for c in before]
        printed = _item(item, members).split("\n")
        trailing = [c for c in comments if c.line == end and c.col > 1]
        if trailing:
            printed[-1] += "  " + trailing[0].text
        out += printed
        last_end = end
    out += [c.text for c in comments if c.line > last_end]
    return "\n".join(out).rstrip() + "\n"


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
            return _op(item, members)
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
        case ast.ProgramDecl(name=name, stmts=stmts):
            return "\n".join([f"program {name}:"] + [INDENT + _stmt(s) for s in stmts])
        case ast.AnalysisDecl():
            return _analysis(item)
    raise AssertionError(item)


def _analysis(a: ast.AnalysisDecl) -> str:
    body = [*([f"merge {expr(a.merge)}"] if a.merge is not None else []),
            *([f"means {expr(a.means)}"] if a.means is not None else [])]
    body += [_clauses(f"{r.op}({', '.join(r.params)}) = {expr(r.body)}", [("require", r.requires)], INDENT * 2)
             for r in a.rules]
    head = f"analysis {a.name}({a.param}: {a.sort}) -> {a.type} {{"
    return "\n".join([head, *(INDENT + line for text in body for line in text.split("\n")), "}"])


def _op(op: ast.OpDecl, members: list[ast.Item]) -> str:
    head = (f"op {op.name}({', '.join(f'{p.name}: {p.type}' for p in op.params)}) -> {op.result}"
            + (" const" if op.const else ""))
    if not members:
        return head
    body = []
    for m in members:
        if isinstance(m, ast.ShapeDecl):
            body.append(_clauses(f"shape = {expr(m.body)}", [("require", m.requires)], INDENT * 2))
        elif isinstance(m, ast.CostDecl):
            body.append(f"cost = {expr(m.body)}")
    return "\n".join([head + " {", *(INDENT + line for text in body for line in text.split("\n")), "}"])


def _rule(rule: ast.RuleDecl) -> str:
    lhs, rhs = ", ".join(map(expr, rule.lhs)), ", ".join(map(expr, rule.rhs))
    clauses = [("where", tuple(f"{b.name} = {expr(b.value)}" for b in rule.wheres)), ("if", rule.conds)]
    one_line = f"rule {rule.name}: {lhs} {rule.arrow} {rhs}"
    if len(rule.lhs) == 1 and len(one_line) <= WIDTH:
        return _clauses(one_line, clauses)
    lines = [f"rule {rule.name}:"] + [INDENT + expr(p) + ("," if k < len(rule.lhs) - 1 else "")
                                      for k, p in enumerate(rule.lhs)]
    lines += [f" {rule.arrow} " + expr(p) + ("," if k < len(rule.rhs) - 1 else "") if k == 0 else
              INDENT + expr(p) + ("," if k < len(rule.rhs) - 1 else "") for k, p in enumerate(rule.rhs)]
    return _clauses("\n".join(lines), clauses, force_break=True)


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
