"""Generated egglog: snapshots for the examples, shape checks in rule queries, and it runs."""
from __future__ import annotations

import os
import re

import pytest
from egglog import bindings

from eqdsl.egglog.lower import egg_name, lower_language
from eqdsl.frontend import load_language

from conftest import EXAMPLES, ROOT

SNAPSHOTS = ROOT / "tests" / "snapshots"
# every shipped ruleset and example language: lowering changes must be deliberate
CASES = {"arith": "arith", "sharing": str(EXAMPLES / "sharing" / "sharing.eqr"), "tensor": "tensor",
         "tensat": "tensat", "qgym": "qgym", "acsum": str(EXAMPLES / "acsum" / "acsum.eqr")}


@pytest.mark.parametrize("name", sorted(CASES))
def test_snapshot(name):
    text = lower_language(load_language(CASES[name])).text
    snap = SNAPSHOTS / f"{name}.egg"
    if os.environ.get("UPDATE_SNAPSHOTS"):
        snap.write_text(text)
    assert snap.exists(), f"no snapshot {snap.name}; create it with UPDATE_SNAPSHOTS=1"

    assert text == snap.read_text(), "regenerate with UPDATE_SNAPSHOTS=1 if the change is intended"


@pytest.mark.parametrize("name", sorted(CASES))
def test_generated_program_is_accepted_by_egglog(name):
    text = lower_language(load_language(CASES[name])).text
    bindings.EGraph().parse_and_run_program(text)


def test_rule_names_and_rulesets_in_output():
    lowered = lower_language(load_language("arith"))
    for rule in ["mul-two", "reassoc", "div-self", "mul-one", "mul-comm"]:
        assert f':name "{rule}"' in lowered.text
        assert f"(ruleset rule_{rule})" in lowered.text
    assert "(unstable-combined-ruleset single" in lowered.text


def test_right_side_shape_requirements_are_in_the_query():
    text = lower_language(load_language(CASES["sharing"])).text
    merge = next(block for block in text.split("(ruleset ") if ':name "merge-matmuls"' in block)
    query = merge.split("\n")[1]
    # concat's requirement (equal rows) and matmul's (inner dims) on the new right-side nodes
    assert "(= (vec-get _s_w1 0) (vec-get _s_w2 0))" in query
    assert re.search(r"\(= \(vec-get _s_x 1\) \(vec-get _r\d+ 0\)\)", query)
    # cols-before's `0 < at < x[1]` with at = k
    assert "(< 0 ?k)" in query


def test_ill_shaped_right_side_is_never_built():
    """x is 64x128 but the second weights have 100 rows: the merged matmul would be ill-shaped.
    (The program is ill-shaped itself, which loading rejects: it is read without shape rules.)"""
    import dataclasses

    from eqdsl.egglog.session import EGraphSession
    from eqdsl.frontend import load_program_text

    lang = load_language(CASES["sharing"])
    session = EGraphSession(lower_language(lang))
    program = load_program_text(
        'program p:\n let x = input("x", 64, 128)\n'
        ' root matmul(x, weight("a", 128, 32))\n root matmul(x, weight("b", 100, 32))\n',
        "p.eqr", dataclasses.replace(lang, shapes={}))["p"]
    session.load(program)
    before = session.size()
    step = session.step("all")
    assert step.matches.get("merge-matmuls", 0) == 0
    assert session.size() == before


def test_op_names_that_clash_with_egglog_primitives_are_renamed():
    assert egg_name("max") == "max_"
    assert egg_name("matmul") == "matmul"


def _queries(text: str) -> dict[str, str]:
    return {block.split(")")[0]: block.split("\n")[1] for block in text.split("(ruleset rule_")[1:]}


def test_requirements_implied_by_the_left_side_are_dropped(tmp_path):
    """A right-side requirement that the left side already met is not checked again (shape-table
    joins in the query are what made BERT's exploration slow); a new one is."""
    eqr = tmp_path / "bc.eqr"
    eqr.write_text("language bc\ninclude tensor\n"
                   "rule same: ewadd(?a, ?b) => ewadd(?a, dropout(?b))\n"
                   "rule flip: ewadd(?a, ?b) => ewadd(?b, ?a)\n")
    query = _queries(lower_language(load_language(str(eqr))).text)
    assert "vec-get" not in query["same"] and "vec-get" in query["flip"]
    # matmul(t1, t4) + matmul(t1, t5) → matmul(t1, t4 + t5): t5 must still broadcast to t4
    tensat = _queries(lower_language(load_language("tensat")).text)
    assert "(= true (bool-<= (vec-length _s_t5) (vec-length _s_t4)))" in tensat["taso-s031"]


def _arith(build):
    from eqdsl.ir.builder import GraphBuilder

    g = GraphBuilder(load_language("arith"))
    return g.program("p", build(g))


def test_alternatives_join_the_programs_roots_and_every_extraction_keeps_the_cheapest_loaded():
    from eqdsl.egglog.readback import program_selection, selection_program
    from eqdsl.egglog.session import EGraphSession
    from eqdsl.extract.egraph import dag_cost
    from eqdsl.extract.result import Extraction, ExtractStatus
    from eqdsl.ir.builder import same_terms

    lang = load_language("arith")
    dear = _arith(lambda g: [g.div(g.mul(g.var("a"), g.num(2)), g.num(2)), g.var("b")])
    cheap = _arith(lambda g: [g.shl(g.var("a"), 0), g.var("b")])  # a·1 spelt another way: cost 1
    session = EGraphSession(lower_language(lang))
    session.load(dear)
    session.union_alternatives(dear, (cheap,))
    assert session.loaded == (dear, cheap)
    live = session.live()
    selections = [program_selection(live, p) for p in (dear, cheap)]
    first = live.problem.roots[0]
    assert selections[0] and selections[1] and selections[0][first] != selections[1][first]  # one class, two nodes
    for program, selection, cost in zip((dear, cheap), selections, (12, 1)):  # found back node for node
        assert dag_cost(live.problem, selection) == cost
        assert same_terms(selection_program(live, selection), program)

    class Dear:  # an extractor that returns the dearer program
        name = "dear"

        def extract(self, problem):
            return Extraction("dear", selections[0], 12.0, ExtractStatus.HEURISTIC, 0.0)

    assert session.extract_now(Dear(), "x")[1].cost == 12
    program, extraction = session.extract_now(Dear(), "x", session.loaded)
    assert extraction.cost == 1 and same_terms(program, cheap)


def test_an_alternative_with_other_roots_is_refused():
    from eqdsl.diagnostics import EqdslError
    from eqdsl.egglog.session import EGraphSession

    lang = load_language("arith")
    one = _arith(lambda g: [g.var("a")])
    two = _arith(lambda g: [g.var("a"), g.var("b")])
    session = EGraphSession(lower_language(lang))
    session.load(one)
    with pytest.raises(EqdslError, match="alternative program 'p' has roots of sorts"):
        session.union_alternatives(one, (two,))


def test_egglog_runs_from_its_bindings_alone():
    """eqdsl loads egglog's extension without egglog's Python layer (0.15 s of every start), and
    one probe names all of a language's operators where none clashes with a primitive."""
    import subprocess
    import sys

    code = ("import sys\nfrom eqdsl.frontend import load_language\nfrom eqdsl.egglog.lower import lower_language\n"
            "from eqdsl.egglog.session import EGraphSession\n"
            "EGraphSession(lower_language(load_language('arith')))\n"
            "print(sorted(m for m in sys.modules if m.startswith('egglog')))\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "['egglog.bindings']"


def test_one_probe_names_operators_and_a_clash_is_probed_alone():
    from eqdsl.egglog import names

    names.probe_names(["fresh_op_a", "fresh_op_b"])
    assert names._NAMES["fresh_op_a"] == "fresh_op_a" and names._NAMES["fresh_op_b"] == "fresh_op_b"
    names.probe_names(["fresh_op_c", "vec-of"])  # `vec-of` is an egglog primitive: the batch fails
    assert "fresh_op_c" not in names._NAMES
    assert egg_name("vec-of") == "vec-of_" and egg_name("fresh_op_c") == "fresh_op_c"
