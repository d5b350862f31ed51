"""The .eqr front end: valid corpus checks clean, every invalid file gets its expected diagnostics."""
from __future__ import annotations

import json
import re

import pytest

from eqdsl.diagnostics import EqdslError
from eqdsl.frontend import ast, load_language
from eqdsl.frontend.parse import parse_text

from conftest import CORPUS

VALID = sorted((CORPUS / "valid").glob("*.eqr"))
INVALID = sorted((CORPUS / "invalid").glob("*.eqr"))
EXPECT = re.compile(r"^# expect: (\d+):(\d+): (.*)$", re.M)


@pytest.mark.parametrize("path", VALID, ids=lambda p: p.name)
def test_valid_corpus_checks(path, run_cli):
    code, out, err = run_cli("check", path)
    assert code == 0, err
    assert out.startswith("ok: language")


@pytest.mark.parametrize("path", INVALID, ids=lambda p: p.name)
def test_invalid_corpus_diagnostics(path, run_cli):
    expected = EXPECT.findall(path.read_text())
    assert expected, f"{path.name} declares no `# expect:` line"
    code, out, err = run_cli("check", path)
    assert code == 2
    assert "Traceback" not in err
    for line, col, message in expected:
        assert f"{path.name}:{line}:{col}: error: {message}" in err, err
    assert "^" in err  # the caret under the source line


def test_every_diagnostic_shows_source_line_and_caret():
    path = CORPUS / "invalid" / "unknown_op.eqr"
    with pytest.raises(EqdslError) as info:
        load_language(path)
    rendered = info.value.diagnostics[0].render()
    assert "rule r: a(?x) => b(?x)" in rendered
    caret_line = rendered.splitlines()[-1]
    source_line = rendered.splitlines()[-2]
    assert source_line[caret_line.index("^")] == "b"


def test_spans_on_ast_nodes():
    module = parse_text("sort N\nop a(x: N) -> N\nrule r: a(?x) => ?x\n", "m.eqr")
    rule = module.items[2]
    assert isinstance(rule, ast.RuleDecl)
    assert (rule.span.line, rule.span.col) == (3, 1)
    assert (rule.lhs[0].span.line, rule.lhs[0].span.col) == (3, 9)
    assert rule.name == "r" and rule.arrow == "=>"


def test_bidirectional_rule_gives_two_named_rules():
    lang = load_language(CORPUS / "valid" / "features.eqr")
    names = [r.name for r in lang.rules]
    assert "cat-swap" in names and "cat-swap-rev" in names


def test_include_by_name_merges_languages():
    lang = load_language(CORPUS / "valid" / "features.eqr")
    assert {"num", "mul", "leaf", "pad"} <= set(lang.ops)
    assert len(lang.multi_rules) == 1


def test_include_cycle_is_an_error(tmp_path):
    (tmp_path / "a.eqr").write_text('include "b.eqr"\n')
    (tmp_path / "b.eqr").write_text('include "a.eqr"\n')
    with pytest.raises(EqdslError, match="include cycle"):
        load_language(tmp_path / "a.eqr")


def test_unknown_ruleset_name():
    with pytest.raises(EqdslError, match="unknown ruleset 'nosuch'"):
        load_language("nosuch")


def test_shipped_rulesets_check():
    lang = load_language("arith")
    assert lang.name == "arith"
    assert [r.name for r in lang.rules] == ["mul-two", "reassoc", "div-self", "mul-one", "mul-comm",
                                             "fold-mul", "fold-div"]


@pytest.mark.parametrize("written, value", [('"名前"', "名前"), (r'"x\u"', "x\\u"), (r'"\u540d\n\"\\"', '名\n"\\'),
                                            (r'"a\qb"', "a\\qb")])
def test_string_literals_read_json_escapes_and_utf8(written, value):
    """UTF-8 text as written, JSON's escapes decoded, any other backslash kept (never a traceback);
    what `ir.text.literal` prints reads back as the same string."""
    from eqdsl.frontend.parse import _unquote
    from eqdsl.ir.text import literal
    assert _unquote(written) == value
    assert _unquote(literal(value)) == value


def test_the_many_operator_cost_form_reads_out(tmp_path, run_cli):
    """Issue 46 item 10: `cost neg, dup = prod(out) + 3` was "unknown name 'out'"."""
    (tmp_path / "m.eqr").write_text(
        "language mini\nsort T { shape: [Int] }\nop x() -> T\nop neg(a: T) -> T\nop dup(a: T) -> T\n"
        "shape x() = [4]\nshape neg(a) = a\nshape dup(a) = a\ncost x() = 0\ncost neg, dup = prod(out) + 3\n"
        "rule twice: neg(neg(?a)) => dup(?a)\nprogram main:\n  root neg(neg(x()))\n")
    (tmp_path / "c.yaml").write_text("ruleset: m.eqr\nprogram: m.eqr\n")
    code, out, err = run_cli("run", tmp_path / "c.yaml", "--output", tmp_path / "out", "--quiet")
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    assert code == 0 and report["original_cost"] == 14 and report["best_cost"] == 7, err


BLOCKS = """language mats
sort Mat { shape: [Int] }
op leaf(id: Str, dims: [Int]) -> Mat const { shape = dims; cost = 0; }
op mm(a: Mat, b: Mat) -> Mat {
    shape = [a[0], b[1]]  require a[1] == b[0]
    cost = a[0] * a[1] * b[1]
}
rule mm-assoc: mm(mm(?x, ?y), ?z) <=> mm(?x, mm(?y, ?z))
"""
SCATTERED = """language mats
sort Mat { shape: [Int] }
op leaf(id: Str, dims: [Int]) -> Mat const
op mm(a: Mat, b: Mat) -> Mat
shape leaf(id, dims) = dims
shape mm(a, b) = [a[0], b[1]]  require a[1] == b[0]
cost leaf(id, dims) = 0
cost mm(a, b) = a[0] * a[1] * b[1]
rule mm-assoc: mm(mm(?x, ?y), ?z) <=> mm(?x, mm(?y, ?z))
"""


def test_an_operator_block_is_its_declaration_shape_and_cost(tmp_path):
    """`op f(...) -> T { shape = ...; cost = ... }` lowers to exactly what the scattered form does;
    its rules read the operator's parameters, and a mistake in it points into the block."""
    from eqdsl.egglog.lower import lower_language

    (tmp_path / "blocks.eqr").write_text(BLOCKS)
    (tmp_path / "scattered.eqr").write_text(SCATTERED)
    texts = [lower_language(load_language(str(tmp_path / f))).text for f in ("blocks.eqr", "scattered.eqr")]
    assert texts[0] == texts[1]
    (tmp_path / "bad.eqr").write_text(BLOCKS.replace("b[1]]  require", "c[1]]  require"))
    with pytest.raises(EqdslError) as err:
        load_language(str(tmp_path / "bad.eqr"))
    d = err.value.diagnostics[0]
    assert (d.span.line, "unknown name 'c'") == (5, d.message[:16]) and "expected one of: a, b" in d.message
    (tmp_path / "typo.eqr").write_text(BLOCKS.replace("cost = 0;", "price = 0;"))
    with pytest.raises(EqdslError, match="expected 'cost' or 'shape' or '}'"):
        load_language(str(tmp_path / "typo.eqr"))


BLOCKY = """language blocky
sort N
op num(v: Int) -> N
op var(name: Str) -> N
op mul(a: N, b: N) -> N
cost num, var = 0
cost mul = 4
# an egglog rewrite, in egglog's own syntax: `user` runs with the single-pattern rules
egglog {
    (rewrite (mul x (num 1)) x :ruleset user)
}
program main:
  root mul(var("a"), num(1))
"""


def test_an_egglog_block_runs_verbatim_and_egglog_checks_it(tmp_path, run_cli):
    (tmp_path / "blocky.eqr").write_text(BLOCKY)
    (tmp_path / "run.yaml").write_text("ruleset: blocky.eqr\nprogram: blocky.eqr\nextract: {method: greedy}\n")
    code, out, err = run_cli("run", tmp_path / "run.yaml", "--output", tmp_path / "out", "--quiet")
    assert code == 0, out + err
    assert json.loads((tmp_path / "out" / "report.json").read_text())["optimized_program"].strip().endswith(
        'root var("a")')
    (tmp_path / "bad.eqr").write_text(BLOCKY.replace("(mul x (num 1))", "(mull x (num 1))"))
    code, _, err = run_cli("check", tmp_path / "bad.eqr")
    assert code == 2 and "bad.eqr:10:" in err and "egglog rejects this block" in err and "mull" in err


def test_an_egglog_block_that_never_finishes_is_an_error_of_check_not_a_hang(tmp_path, run_cli, monkeypatch):
    from eqdsl.egglog import blocks

    monkeypatch.setattr(blocks, "BLOCK_TIME_S", 1.0)
    (tmp_path / "loop.eqr").write_text("language loop\ninclude arith\negglog {\n (let $a (num 0))\n"
                                       " (rewrite (num x) (num (+ x 1)))\n (run 100000000)\n}\n")
    code, _, err = run_cli("check", tmp_path / "loop.eqr")
    assert code == 2 and "loop.eqr:4:" in err and "egglog did not finish this block: stopped at the time limit" in err


@pytest.mark.parametrize("cache", ["garbage", "a file where the folder goes", "fresh"])
def test_the_grammar_cache_is_used_when_sound_and_never_needed(tmp_path, cache):
    """The parse tables come from lark's cache in the user's cache folder; a damaged cache, or
    one that cannot be written, only costs the time to build them."""
    import os
    import subprocess
    import sys

    home = tmp_path / "cache"
    if cache == "garbage":
        (home / "eqdsl").mkdir(parents=True)
        (home / "eqdsl" / "eqr-grammar.lark-cache").write_bytes(b"not a cache\n\x00\x01")
    elif cache == "a file where the folder goes":
        home.write_text("in the way")
    env = {**os.environ, "XDG_CACHE_HOME": str(home)}
    for _ in range(2):  # the second run reads what the first wrote, where it could write
        done = subprocess.run([sys.executable, "-m", "eqdsl", "check", "arith"], env=env, capture_output=True,
                              text=True, timeout=120)
        assert done.returncode == 0 and done.stdout.startswith("ok:") and "Traceback" not in done.stderr, done.stderr
    written = home / "eqdsl" / "eqr-grammar.lark-cache"
    assert written.is_file() == (cache != "a file where the folder goes")


def test_parsed_files_come_from_the_cache_and_a_damaged_entry_is_parsed_again(tmp_path, monkeypatch):
    """`ast_cache`: a file's parse is kept once and read back equal; an entry that is not a pickle
    of a Module is parsed again; the same text under another name is another entry (its spans
    name the file); a syntax error is raised each time, never kept."""
    from eqdsl.frontend.ast_cache import cached_parse

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    parsed: list[str] = []

    def parse(text: str, file: str) -> ast.Module:
        parsed.append(file)
        return parse_text(text, file)

    text = "language t\nsort E\nop num(n: Int) -> E\nrule r: num(?n) => num(?n)\n"
    first = cached_parse(text, "t.eqr", parse)
    assert cached_parse(text, "t.eqr", parse) == first and parsed == ["t.eqr"]
    entries = list((tmp_path / "cache" / "eqdsl" / "eqr-ast").glob("*.pickle"))
    assert len(entries) == 1
    entries[0].write_bytes(b"\x80\x05not a pickle")
    assert cached_parse(text, "t.eqr", parse) == first and parsed == ["t.eqr"] * 2
    assert cached_parse(text, "u.eqr", parse).items[0].span.file == "u.eqr"
    for _ in range(2):
        with pytest.raises(EqdslError, match="syntax error"):
            cached_parse("language t\nsort\n", "bad.eqr", parse)
    assert parsed.count("bad.eqr") == 2


def test_the_parse_cache_trims_only_its_own_entries(tmp_path, monkeypatch):
    """Past `KEPT` entries the least recently used go, and only files named as the cache names its
    entries: anything else in the folder stays."""
    import eqdsl.frontend.ast_cache as cache

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setattr(cache, "KEPT", 2)
    folder = tmp_path / "cache" / "eqdsl" / "eqr-ast"
    folder.mkdir(parents=True)
    (folder / "notes.pickle").write_text("not eqdsl's")
    for k in range(4):
        cache.cached_parse(f"language t{k}\n", f"t{k}.eqr", parse_text)
    names = sorted(p.name for p in folder.iterdir())
    assert "notes.pickle" in names and len(names) == 3
