"""Parse `.eqr` text into an AST `Module`; syntax errors become `EqdslError` with a caret."""
from __future__ import annotations

import functools
import re
from dataclasses import fields, is_dataclass
from importlib import resources
from typing import Any, Callable

from lark import Lark, Token, Transformer, v_args
from lark.exceptions import UnexpectedCharacters, UnexpectedEOF, UnexpectedInput, UnexpectedToken
from lark.tree import Meta

from eqdsl.diagnostics import Diagnostic, EqdslError, Span
from eqdsl.frontend import ast
from eqdsl.user_cache import user_cache_dir

# Human names for the grammar's terminals, used in "expected ..." messages.
_TERMINAL_NAMES = {
    "NAME": "a name", "VAR": "a pattern variable (?x)", "INT": "an integer", "STRING": "a string",
    "ARROW": "'=>' or '<=>'", "CMP_OP": "a comparison", "SLICE_COLON": "':'", "LPAR": "'('",
    "RPAR": "')'", "LSQB": "'['", "RSQB": "']'", "LBRACE": "'{'", "RBRACE": "'}'", "COMMA": "','",
    "COLON": "':'", "EQUAL": "'='", "MINUS": "'-'", "PLUS": "'+'", "STAR": "'*'", "SLASH": "'/'",
    "PERCENT": "'%'", "__ANON_0": "'->'", "$END": "end of file",
}


@functools.cache
def _parser() -> Lark:
    """The LALR parser, its tables from lark's cache where one holds this grammar (building them
    takes 0.3-0.45 s of every command's start): keyed by the grammar's and options' hash, written
    whole or not used (lark falls back to building them); a cache that cannot be written is skipped."""
    grammar = resources.files("eqdsl.grammars").joinpath("eqr.lark").read_text()
    cache: str | bool = False
    try:
        folder = user_cache_dir()
        folder.mkdir(parents=True, exist_ok=True)
        cache = str(folder / "eqr-grammar.lark-cache")
    except OSError:  # a read-only home: build the tables each time
        pass
    return Lark(grammar, parser="lalr", strict=True, propagate_positions=True, maybe_placeholders=True, cache=cache)


BOM = "\ufeff"  # editors on Windows start UTF-8 files with it; it is no part of the text


def parse_text(text: str, file: str) -> ast.Module:
    text = text.removeprefix(BOM)
    try:
        tree = _parser().parse(text)
    except UnexpectedInput as err:
        raise _syntax_error(err, text, file) from None
    try:
        items = _ToAst(file).transform(tree)
    except RecursionError:
        raise EqdslError.one(f"{file}: terms nested too deeply to read (thousands of levels); "
                             "expected nesting of at most a few hundred levels: name subterms "
                             "with `let`") from None
    # an operator block stands for its declaration and its shape and cost rules
    flat = [item for child in items.children for item in (child if isinstance(child, list) else [child])]
    module = ast.Module(file, tuple(flat))
    _check_int_ranges(module)
    return module


def comments_of(text: str) -> list[tuple[int, int, str]]:
    """Every `# ...` comment of a `.eqr` text as (line, column, text), both 1-based; a `#` inside
    a string literal is not one (strings do not span lines)."""
    found = []
    for number, line in enumerate(text.splitlines(), 1):
        in_string = escaped = False
        for col, ch in enumerate(line, 1):
            if in_string:
                in_string, escaped = (not (ch == '"' and not escaped)), (ch == "\\" and not escaped)
            elif ch == '"':
                in_string = True
            elif ch == "#":
                found.append((number, col, line[col - 1:]))
                break
    return found


I64 = (-(1 << 63), (1 << 63) - 1)  # egglog's i64: the Int every rule, cost and program uses


def _check_int_ranges(module: ast.Module) -> None:
    """Every int literal fits egglog's i64 (a larger one would pass `check` and fail in `run`)."""
    bad = []
    stack: list[object] = list(module.items)
    while stack:
        node = stack.pop()
        if isinstance(node, ast.IntLit) and node.value > I64[1]:  # literals are unsigned; `-` is an operator
            bad.append(Diagnostic(f"integer {node.value} is out of range; expected an Int of at most {I64[1]} "
                                  "(64 bits, signed)", node.span))
        elif is_dataclass(node):
            stack += [getattr(node, f.name) for f in fields(node)]
        elif isinstance(node, (tuple, list)):
            stack += node
    if bad:
        raise EqdslError(sorted(bad, key=lambda d: (d.span.line, d.span.col) if d.span else (0, 0)))


def _syntax_error(err: UnexpectedInput, text: str, file: str) -> EqdslError:
    line, col = max(err.line, 1), max(err.column, 1)
    match err:
        case UnexpectedToken():
            found = "end of file" if err.token.type == "$END" else repr(str(err.token))
            expected = _describe_expected(err.expected)
        case UnexpectedCharacters():
            pos = err.pos_in_stream
            found = repr(text[pos]) if pos is not None and pos < len(text) else "end of file"
            expected = _describe_expected(err.allowed or set())
        case UnexpectedEOF():
            found, expected = "end of file", _describe_expected({str(t) for t in err.expected})
            line = text.count("\n") + 1
            col = len(text.rsplit("\n", 1)[-1]) + 1
        case _:
            found, expected = "unexpected input", "valid .eqr syntax"
    span = Span(file, line, col, line, col + 1)
    return EqdslError.one(f"syntax error: expected {expected}, found {found}", span)


def _describe_expected(names: set[str] | frozenset[str]) -> str:
    shown = sorted({_TERMINAL_NAMES.get(n, _keyword(n)) for n in names})
    if len(shown) > 8:
        shown = shown[:8] + ["..."]
    return " or ".join(shown) if shown else "something else"


def _keyword(terminal: str) -> str:
    return f"'{terminal.lower()}'" if terminal.isupper() and terminal.isalpha() else terminal


def _span(file: str, meta: Meta | Token) -> Span:
    if isinstance(meta, Token):
        return Span(file, meta.line or 0, meta.column or 0, meta.end_line or 0, meta.end_column or 0)
    if getattr(meta, "empty", True):
        return Span(file, 0, 0)
    return Span(file, meta.line, meta.column, meta.end_line, meta.end_column)


_ESCAPES = {"\\": "\\", '"': '"', "/": "/", "n": "\n", "t": "\t", "r": "\r", "b": "\b", "f": "\f"}  # JSON's
_ESCAPE = re.compile(r"\\(u[0-9a-fA-F]{4}|.)")


def _unquote(s: str) -> str:
    r"""A string literal's text: JSON's escapes (`\\ \" \/ \n \t \r \b \f \uXXXX`); any other backslash stays as
    written; every other character (UTF-8 text included) as it is."""
    def one(m: re.Match[str]) -> str:
        code = m.group(1)
        return chr(int(code[1:], 16)) if len(code) == 5 else _ESCAPES.get(code, m.group(0))
    return _ESCAPE.sub(one, s[1:-1])


def _binary(op: str) -> Callable[[Any, Any, list], ast.Binary]:
    """A `_ToAst` method that builds `ast.Binary(op, ...)` (one per binary grammar rule)."""
    def method(self: Any, meta: Any, c: list) -> ast.Binary:
        return ast.Binary(op, c[0], c[1], self._s(meta))
    return method


@v_args(meta=True)
class _ToAst(Transformer):
    """Tree → AST. Method names are the grammar's rule names and aliases."""

    def __init__(self, file: str) -> None:
        super().__init__()
        self.file = file

    def _s(self, meta: Meta | Token) -> Span:
        return _span(self.file, meta)

    # -- declarations --
    def language(self, meta, c):
        return ast.LanguageDecl(str(c[0]), self._s(meta))

    def include(self, meta, c):
        tok = c[0]
        is_path = tok.type == "STRING"
        return ast.IncludeDecl(_unquote(tok) if is_path else str(tok), is_path, self._s(meta))

    def sort(self, meta, c):
        fields = tuple(c[1]) if len(c) > 1 and c[1] is not None else ()
        return ast.SortDecl(str(c[0]), fields, self._s(meta))

    def fields(self, meta, c):
        return list(c)

    def field(self, meta, c):
        return ast.Param(str(c[0]), c[1], self._s(meta))

    param = field

    def scalar_type(self, meta, c):
        return ast.TypeRef(str(c[0]), False, self._s(meta))

    def list_type(self, meta, c):
        return ast.TypeRef(str(c[0]), True, self._s(meta))

    def target_param(self, meta, c):
        default = None if c[2] is None else int(c[2])
        return ast.TargetParamDecl(str(c[0]), c[1], self._s(meta), default)

    def op(self, meta, c):
        *head, result, const, body = c
        params = tuple(p for p in head[1:] if p is not None)
        decl = ast.OpDecl(str(c[0]), params, str(result), self._s(meta), self._s(result), const is not None)
        if body is None:
            return decl
        names = tuple(p.name for p in params)  # the block's rules read the operator's parameters
        return [decl, *(member(decl.name, names) for member in body)]

    def op_body(self, meta, c):
        return list(c)

    def op_shape(self, meta, c):
        body, *rest = c
        requires = tuple(rest[0][1]) if rest and rest[0] is not None else ()
        return lambda op, names: ast.ShapeDecl(op, names, body, requires, self._s(meta))

    def op_cost(self, meta, c):
        return lambda op, names: ast.CostDecl((op,), names, c[0], self._s(meta))

    def rule(self, meta, c):
        name, lhs, arrow, rhs, *clauses = c
        wheres = tuple(b for cl in clauses if cl[0] == "where" for b in cl[1])
        conds = tuple(e for cl in clauses if cl[0] == "if" for e in cl[1])
        return ast.RuleDecl(str(name), tuple(lhs), str(arrow), tuple(rhs), wheres, conds,
                            self._s(meta), self._s(arrow))

    def patterns(self, meta, c):
        return list(c)

    def where(self, meta, c):
        return ("where", list(c))

    def cond(self, meta, c):
        return ("if", list(c))

    def binding(self, meta, c):
        return ast.Binding(str(c[0]), c[1], self._s(meta))

    def shape(self, meta, c):
        op, *rest = c
        has_require = rest and isinstance(rest[-1], tuple) and rest[-1][:1] == ("require",)
        requires = tuple(rest[-1][1]) if has_require else ()
        body = rest[-2] if has_require else rest[-1]
        params = tuple(str(p) for p in (rest[:-2] if has_require else rest[:-1]) if p is not None)
        return ast.ShapeDecl(str(op), params, body, requires, self._s(meta))

    analysis_rule = shape  # `OP(a, b) = body require ...` inside an analysis: a shape rule's form

    def require(self, meta, c):
        return ("require", list(c))

    def cost_fn(self, meta, c):
        params = tuple(str(p) for p in c[1:-1] if p is not None)
        return ast.CostDecl((str(c[0]),), params, c[-1], self._s(meta))

    def cost_const(self, meta, c):
        return ast.CostDecl(tuple(str(n) for n in c[:-1]), None, c[-1], self._s(meta))

    def analysis(self, meta, c):
        name, param, sort, type_, *members = c
        merge = [m[1] for m in members if isinstance(m, tuple) and m[0] == "merge"]
        means = [m[1] for m in members if isinstance(m, tuple) and m[0] == "means"]
        rules = tuple(m for m in members if isinstance(m, ast.ShapeDecl))
        return ast.AnalysisDecl(str(name), str(param), str(sort), type_, merge[-1] if merge else None,
                                means[-1] if means else None, rules, self._s(meta), self._s(sort))

    def analysis_merge(self, meta, c):
        return ("merge", c[0])

    def analysis_means(self, meta, c):
        return ("means", c[0])

    def egglog(self, meta, c):
        text = "\n".join(str(t) for t in c)  # pieces around an .eqr comment
        return ast.EgglogDecl(text, self._s(meta), c[0].line if c else meta.line)

    def program(self, meta, c):
        return ast.ProgramDecl(str(c[0]), tuple(c[1:]), self._s(meta))

    def let(self, meta, c):
        return ast.LetStmt(str(c[0]), c[1], self._s(meta))

    def root(self, meta, c):
        return ast.RootStmt(c[0], self._s(meta))

    # -- expressions --
    def int_(self, meta, c):
        return ast.IntLit(int(c[0]), self._s(meta))

    def str_(self, meta, c):
        return ast.StrLit(_unquote(c[0]), self._s(meta))

    def var(self, meta, c):
        return ast.Var(str(c[0])[1:], self._s(meta))

    def name(self, meta, c):
        return ast.Name(str(c[0]), self._s(meta))

    def call(self, meta, c):
        args = tuple(a for a in c[1:] if a is not None)
        return ast.Call(str(c[0]), args, self._s(meta), self._s(c[0]))

    def list_(self, meta, c):
        return ast.ListLit(tuple(a for a in c if a is not None), self._s(meta))

    def index(self, meta, c):
        return ast.Index(c[0], c[1], self._s(meta))

    def slice(self, meta, c):
        return ast.Slice(c[0], c[1], c[3], self._s(meta))

    def dot(self, meta, c):
        return ast.Field(c[0], str(c[1]), self._s(meta))

    def entry(self, meta, c):
        return (str(c[0]), c[1])

    def record(self, meta, c):
        return ast.Record(tuple(c), self._s(meta))

    def neg(self, meta, c):
        return ast.Unary("neg", c[0], self._s(meta))

    def not_(self, meta, c):
        return ast.Unary("not", c[0], self._s(meta))

    def compare(self, meta, c):
        return ast.Compare(tuple(c[0::2]), tuple(str(t) for t in c[1::2]), self._s(meta))

    def with_(self, meta, c):
        return ast.With(c[0], c[1], c[2], self._s(meta))

    add, sub, cat = _binary("add"), _binary("sub"), _binary("cat")
    mul, div, mod = _binary("mul"), _binary("div"), _binary("mod")
    and_, or_ = _binary("and"), _binary("or")
