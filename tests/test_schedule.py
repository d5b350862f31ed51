"""Stop reasons for every limit, the hard node limit, k_multi, per-iteration reports."""
from __future__ import annotations

import pytest

from eqdsl.diagnostics import EqdslError
from eqdsl.egglog.lower import lower_language
from eqdsl.egglog.session import EGraphSession
from eqdsl.frontend import load_language, load_program_file
from eqdsl.schedule import runner
from eqdsl.schedule.runner import Limits, StopReason
from eqdsl.schedule.saturate import SaturateScheduler

from conftest import EXAMPLES


def session_for(ruleset, program_file):
    lang = load_language(ruleset)
    program = next(iter(load_program_file(program_file, lang).values()))
    session = EGraphSession(lower_language(lang))
    session.load(program)
    return session


def arith():
    return session_for("arith", EXAMPLES / "arith" / "input.eqr")


def sharing():
    return session_for(EXAMPLES / "sharing" / "sharing.eqr", EXAMPLES / "sharing" / "input.eqr")


def test_saturated():
    outcome = SaturateScheduler(Limits(10, 1000, 60), k_multi=1).run(sharing())
    assert outcome.stop is StopReason.SATURATED
    assert [r.ruleset for r in outcome.iterations] == ["all", "single"]
    assert outcome.iterations[0].matches == {"merge-matmuls": 2}


def test_iteration_limit():
    outcome = SaturateScheduler(Limits(3, 10_000, 60)).run(arith())
    assert outcome.stop is StopReason.ITERATION_LIMIT
    assert len(outcome.iterations) == 3
    first = outcome.iterations[0]
    assert first.nodes > outcome.start_nodes and first.classes and first.seconds >= 0
    assert set(first.matches) <= {r.name for r in load_language("arith").rules}


@pytest.mark.parametrize("node_limit", [6, 12, 20, 40])
def test_node_limit_is_hard(node_limit):
    session = arith()
    outcome = SaturateScheduler(Limits(50, node_limit, 60)).run(session)
    assert outcome.stop is StopReason.NODE_LIMIT
    assert outcome.iterations[-1].rolled_back
    assert outcome.iterations[-1].nodes > node_limit
    assert session.size() == outcome.nodes <= node_limit


@pytest.mark.parametrize("margin", [0, runner.PUSH_MARGIN])
@pytest.mark.parametrize("cycle_filter, node_limit", [("none", 20), ("none", 40), ("none", 100),
                                                     ("efficient", 12), ("vanilla", 12)])
def test_node_limit_rollback_gives_the_e_graph_of_the_kept_iterations(monkeypatch, margin, cycle_filter, node_limit):
    """An overshooting iteration is undone exactly: by its own push/pop, or (margin 0: no push
    after the first iteration) by popping to the first push and replaying the steps since."""
    monkeypatch.setattr(runner, "PUSH_MARGIN", margin)
    session = arith()
    pushes = []
    session.push = lambda push=session.push: pushes.append(1) or push()
    outcome = SaturateScheduler(Limits(50, node_limit, 60), cycle_filter=cycle_filter).run(session)
    kept = [r for r in outcome.iterations if not r.rolled_back]
    assert outcome.stop is StopReason.NODE_LIMIT and kept
    if margin == 0:
        assert len(pushes) == 2  # the first iteration's, and the one made again after the replay
    again = arith()
    unlimited = SaturateScheduler(Limits(len(kept), 10**9, 60), cycle_filter=cycle_filter).run(again)
    assert session.serialize() == again.serialize()
    assert [r.filtered for r in kept] == [r.filtered for r in unlimited.iterations]


def test_time_limit():
    outcome = SaturateScheduler(Limits(10_000, 10**9, 0.05)).run(arith())
    assert outcome.stop is StopReason.TIME_LIMIT


def test_k_multi_zero_never_runs_multi_pattern_rules():
    outcome = SaturateScheduler(Limits(5, 1000, 60), k_multi=0).run(sharing())
    assert outcome.stop is StopReason.SATURATED
    assert all(r.ruleset == "single" for r in outcome.iterations)
    assert outcome.nodes == outcome.start_nodes


def test_input_larger_than_node_limit_is_an_error():
    with pytest.raises(EqdslError, match="node limit"):
        SaturateScheduler(Limits(5, 2, 60)).run(arith())
