"""One read-back: the node table made from egglog's `freeze()` lists the e-graph exactly as egglog's
own JSON does (ids, classes, order, subsumed flags), and prices and reads back what the JSON could not."""
from __future__ import annotations

import pytest

from eqdsl.egglog.lower import lower_language
from eqdsl.egglog.readback import program_text
from eqdsl.egglog.session import EGraphSession
from eqdsl.egglog.table import node_table
from eqdsl.frontend import load_language, load_program_text
from eqdsl.ir.params import bind_params
from eqdsl.languages.tensat.models import build_model
from eqdsl.schedule.runner import Limits
from eqdsl.schedule.saturate import SaturateScheduler


def _as_json_lists(session: EGraphSession) -> tuple[list, list]:
    """(the table's rows, the JSON's nodes), both as (id, op, class, child classes, subsumed)."""
    data = session.serialize()["nodes"]
    table = node_table(session._freeze(), session._egraph, session._class_sorts, {})
    ours = [(r.id, r.fn, r.eclass, list(r.children), r.subsumed) for r in table.rows]
    theirs = [(nid, n["op"], n["eclass"], [data[k]["eclass"] for k in n["children"]], n.get("subsumed", False))
              for nid, n in data.items()]
    return ours, theirs


def _session(ruleset: str, program_text_: str) -> EGraphSession:
    lang = load_language(ruleset)
    session = EGraphSession(lower_language(bind_params(lang, {})))
    session.load(load_program_text(program_text_, "p.eqr", lang)["p"])
    return session


def test_table_lists_the_arith_e_graph_as_egglogs_json():
    session = _session("arith", 'program p:\n  root div(mul(num(-3), var("a\\\\b")), num(2))\n'
                                '  root mul(var("q\\"t"), shl(num(-9223372036854775807), -1))\n')
    SaturateScheduler(Limits(4, 10_000, 60), cycle_filter="efficient").run(session)
    ours, theirs = _as_json_lists(session)
    assert ours == theirs


@pytest.mark.parametrize("cycle_filter", ["none", "efficient"])
def test_table_lists_a_tensat_e_graph_as_egglogs_json(cycle_filter):
    """Shapes (vectors of i64), strings, split/concat cycles, subsumed nodes."""
    lang = load_language("tensat")
    session = EGraphSession(lower_language(bind_params(lang, {"gflops": 1, "gbps": 1, "launch_ns": 1})))
    session.load(build_model(lang, "nasrnn", steps=2, hidden=16))
    outcome = SaturateScheduler(Limits(3, 20_000, 60), 1, False, cycle_filter).run(session)
    assert (sum(r.filtered for r in outcome.iterations) > 0) == (cycle_filter != "none")
    ours, theirs = _as_json_lists(session)
    assert ours == theirs


def test_non_ascii_strings_read_back():
    """egglog's JSON could not carry them (a JSONDecodeError); the table reads the string itself."""
    session = _session("arith", 'program p:\n  root mul(var("名前"), num(1))\n')
    SaturateScheduler(Limits(3, 10_000, 60)).run(session)
    live = session.live()
    assert "名前" in live.values.values()
    from eqdsl.extract.registry import ExtractConfig, make_extractor
    extraction = make_extractor("greedy", ExtractConfig()).extract(live.problem)
    assert 'var("名前")' in program_text(live, extraction.selection)


def test_one_freeze_per_state():
    session = _session("arith", 'program p:\n  root mul(var("a"), num(2))\n')
    first = session._freeze()
    assert session._freeze() is first and session.live() and session._freeze() is first
    session.saturate_analysis()  # any command: a new state
    assert session._freeze() is not first
