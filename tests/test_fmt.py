"""`eqdsl fmt`: one canonical layout that keeps every comment, parses to the same items and is
idempotent, on every shipped ruleset and example."""
from __future__ import annotations

import dataclasses

import pytest

from eqdsl.frontend.fmt import format_text
from eqdsl.frontend.parse import comments_of, parse_text

from conftest import ROOT

FILES = sorted([*(ROOT / "rulesets").glob("*.eqr"), *(ROOT / "examples").glob("*/*.eqr"),
                *(ROOT / "tests" / "data").glob("*.eqr")])


def _without_spans(x):
    if dataclasses.is_dataclass(x) and not isinstance(x, type):
        return (type(x).__name__, *(_without_spans(getattr(x, f.name)) for f in dataclasses.fields(x)
                                    if not f.name.endswith("span")))
    if isinstance(x, (tuple, list)):
        return tuple(_without_spans(i) for i in x)
    return x


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_formatting_keeps_the_items_and_comments_and_is_idempotent(path):
    text = path.read_text()
    once = format_text(text, str(path))
    assert format_text(once, str(path)) == once
    assert _without_spans(parse_text(once, "f").items) == _without_spans(parse_text(text, "f").items)
    assert [c[2] for c in comments_of(once)] == [c[2] for c in comments_of(text)]


BLOCK_COMMENTS = """language cm
sort Q
op num(v: Int) -> Q
op add(a: Q, b: Q) -> Q {  # an addition
    # its cost
    cost = 1   # one unit
    # done
}
analysis c(x: Q) -> Int {
    merge agree   # must agree
    # what it means
    means c == x
    num(v) = v
    add(a, b) = a + b
}
program p:
  # the input
  let x = num(1)  # one
  root add(x, num(2))
"""


def test_comments_inside_program_analysis_and_operator_blocks_stay_in_place():
    assert format_text(BLOCK_COMMENTS, "cm.eqr") == BLOCK_COMMENTS.replace("cost = 1   #", "cost = 1  #").replace(
        "merge agree   #", "merge agree  #").replace("  # the input\n  let x = num(1)  # one\n  root",
                                                     "    # the input\n    let x = num(1)  # one\n    root")


RULE_COMMENTS = """language m
include arith
rule r:  # why r holds
    # the left side
    mul(?x, num(?n))  # left
 => num(k)  # right
    where k = ?n
    if ?n != 0  # a guard
    if ?n != 1
rule s: mul(?x, ?y) => mul(?y, ?x)  # commutes
"""


def test_comments_inside_a_rule_stay_beside_their_part_and_the_layout_is_a_fixed_point():
    assert format_text(RULE_COMMENTS, "r.eqr") == RULE_COMMENTS
    squeezed = "language m\ninclude arith\nrule r: mul(?x,   # left\n  num(?n)) => num(k)  # right\n" \
               "  where k = ?n if ?n != 0, ?n != 1  # guards\n"
    once = format_text(squeezed, "r.eqr")
    assert once.splitlines()[2:] == ["rule r:", "    mul(?x, num(?n))  # left", " => num(k)  # right",
                                     "    where k = ?n", "    if ?n != 0", "    if ?n != 1  # guards"]
    assert format_text(once, "r.eqr") == once


def test_fmt_prints_checks_and_writes(tmp_path, run_cli):
    messy = ("language mats\nsort Mat{shape:[Int]}   # matrices\n\n\nop mm(a:Mat,b:Mat)->Mat{shape=[a[0],b[1]] "
             "require a[1]==b[0];cost=a[0]*a[1]*(b[1]+1)}\nrule r:mm(mm(?x,?y),?z)<=>mm(?x,mm(?y,?z))\n")
    (tmp_path / "m.eqr").write_text(messy)
    code, out, _ = run_cli("fmt", tmp_path / "m.eqr")
    assert code == 0 and out == (
        "language mats\nsort Mat { shape: [Int] }  # matrices\n\nop mm(a: Mat, b: Mat) -> Mat {\n"
        "    shape = [a[0], b[1]] require a[1] == b[0]\n    cost = a[0] * a[1] * (b[1] + 1)\n}\n"
        "rule r: mm(mm(?x, ?y), ?z) <=> mm(?x, mm(?y, ?z))\n")
    assert run_cli("fmt", tmp_path / "m.eqr", "--check")[0] == 1 and (tmp_path / "m.eqr").read_text() == messy
    assert run_cli("fmt", tmp_path / "m.eqr", "--write")[0] == 0
    assert (tmp_path / "m.eqr").read_text() == out and run_cli("fmt", tmp_path / "m.eqr", "--check")[0] == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.eqr"]  # no temporary file left
    (tmp_path / "bad.eqr").write_text("language x\nop f( -> T\n")
    code, _, err = run_cli("fmt", tmp_path / "bad.eqr")
    assert code == 2 and "bad.eqr:2:" in err and "Traceback" not in err
    for not_a_file in ("/dev/null", tmp_path):  # a device reads as an empty file: refused, as `check` refuses it
        code, out, err = run_cli("fmt", not_a_file)
        assert code == 2 and out == "" and "not a regular file" in err


def test_write_goes_through_a_link_keeps_the_mode_and_never_replaces_a_newer_edit(tmp_path, run_cli, monkeypatch):
    import eqdsl.frontend.fmt as fmt

    messy = "language x\nsort S\nop f(a:S)->S\n"
    mine = tmp_path / "mine.eqr"
    mine.write_text(messy)
    mine.chmod(0o640)
    (tmp_path / "link.eqr").symlink_to("mine.eqr")
    assert run_cli("fmt", tmp_path / "link.eqr", "--write")[0] == 0
    assert (tmp_path / "link.eqr").is_symlink() and mine.read_text() == "language x\nsort S\nop f(a: S) -> S\n"
    assert mine.stat().st_mode & 0o777 == 0o640
    mine.write_text(messy)
    original = fmt.format_text

    def edited_meanwhile(text: str, file: str) -> str:
        mine.write_text(messy + "# the user's newer edit\n")
        return original(text, file)

    monkeypatch.setattr(fmt, "format_text", edited_meanwhile)
    code, _, err = run_cli("fmt", mine, "--write")
    assert code == 2 and "changed while it was formatted" in err and mine.read_text().endswith("newer edit\n")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["link.eqr", "mine.eqr"]


@pytest.mark.parametrize("cost", ["a[0] - (a[1] - 1)", "(a[0] - a[1]) - 1", "-(a[0] + 1) * 2", "a[0] / (2 * a[1])",
                                  "max(a[0], 1) % (3 + a[1])"])
def test_parentheses_are_kept_exactly_where_precedence_needs_them(cost):
    text = f"language x\nsort M {{ shape: [Int] }}\nop f(a: M) -> M\nshape f(a) = a\ncost f(a) = {cost}\n"
    once = format_text(text, "x.eqr")
    assert _without_spans(parse_text(once, "f").items) == _without_spans(parse_text(text, "f").items)
    assert once.splitlines()[-1] == f"cost f(a) = {cost}".replace("(a[0] - a[1]) - 1", "a[0] - a[1] - 1")


def test_an_egglog_block_is_kept_verbatim_and_verify_says_it_cannot_see_it(tmp_path, run_cli):
    from test_front_end import BLOCKY

    once = format_text(BLOCKY, "b.eqr")
    assert "egglog {\n    (rewrite (mul x (num 1)) x :ruleset user)\n}" in once and format_text(once, "b.eqr") == once
    (tmp_path / "blocky.eqr").write_text(BLOCKY)
    (tmp_path / "blocky_ref.py").write_text(
        "from eqdsl.languages.base import Leaf\nSEMANTICS = {'num': Leaf(lambda v: ()), 'var': Leaf(lambda n: ()),"
        " 'mul': lambda a, b: a * b}\n")
    code, out, _ = run_cli("verify", tmp_path / "blocky.eqr")
    assert "not verified: the egglog block at" in out and "blocky.eqr:10" in out


def test_a_byte_order_mark_and_crlf_lines_read_as_plain_text(tmp_path, run_cli):
    (tmp_path / "win.eqr").write_bytes(b"\xef\xbb\xbflanguage x\r\nsort S\r\nop f(a:S)->S\r\ncost f = 1\r\n")
    assert run_cli("check", tmp_path / "win.eqr")[0] == 0
    code, out, _ = run_cli("fmt", tmp_path / "win.eqr")
    assert code == 0 and out == "language x\nsort S\nop f(a: S) -> S\ncost f = 1\n"
