"""Only the rules that can fire are lowered (`eqdsl.ir.reachable`): the same e-graphs, fewer rules."""
from __future__ import annotations

from eqdsl.egglog.lower import lower_language
from eqdsl.egglog.session import EGraphSession
from eqdsl.frontend import load_language
from eqdsl.frontend.load import load_program_text
from eqdsl.ir.reachable import rules_that_can_fire

LANG = """language r
sort E
op a(x: E) -> E
op b(x: E) -> E
op c(x: E) -> E
op d(x: E) -> E
op v(n: Str) -> E
rule ab: a(?x) => b(?x)
rule bc: b(b(?x)) => c(?x)
rule dd: d(?x) => a(?x)
rule cd: c(?x) => c(c(?x)) if ?x != v("z")
cost a, b, c, d, v = 1
"""


def _program(lang, text: str):
    return next(iter(load_program_text(f"program p:\n  root {text}\n", "p.eqr", lang).values()))


def test_a_rule_whose_left_side_needs_an_operator_that_never_appears_is_left_out(tmp_path):
    src = tmp_path / "r.eqr"
    src.write_text(LANG)
    lang = load_language(src)
    # a(·) builds b, b(b(·)) builds c: only `dd` needs d, which nothing holds or builds
    kept = rules_that_can_fire(lang, [_program(lang, 'a(a(v("x")))')])
    assert [r.name for r in kept.rules] == ["ab", "bc", "cd"]
    assert [r.name for r in rules_that_can_fire(lang, [_program(lang, 'v("x")')]).rules] == []
    assert len(rules_that_can_fire(lang, [_program(lang, 'd(v("x"))')]).rules) == 4
    blocks = tmp_path / "e.eqr"  # egglog blocks may build anything: the language is kept whole
    blocks.write_text(LANG + "egglog {\n  (ruleset extra)\n}\n")
    with_blocks = load_language(blocks)
    assert len(rules_that_can_fire(with_blocks, [_program(with_blocks, 'v("x")')]).rules) == 4


def test_the_e_graph_is_the_same_with_the_rules_that_cannot_fire_left_out():
    lang = load_language("tensat")
    program = _program(lang, 'relu(conv2d(1, 1, 0, 0, input("x", [1, 8, 6, 6]), weight("w", [8, 8, 3, 3])))')
    sizes = []
    for language in (lang, rules_that_can_fire(lang, [program])):
        session = EGraphSession(lower_language(language))
        session.load(program)
        for _ in range(3):
            session.step("all")
        sizes.append(session.size())
    assert len(rules_that_can_fire(lang, [program]).rules) < len(lang.rules) and sizes[0] == sizes[1]
