"""Match-limited multi-pattern steps (eqdsl.schedule.sampled): k random matches fire, the rest
do not, the draw is reproducible, and an MCTS action uses them."""
from __future__ import annotations

import random

from eqdsl.egglog.lower import egg_name, lower_language
from eqdsl.egglog.session import EGraphSession
from eqdsl.extract.registry import ExtractConfig
from eqdsl.frontend import load_language, load_program_file
from eqdsl.pipeline import optimize
from eqdsl.schedule.mcts import MctsConfig
from eqdsl.schedule.sampled import step_sampled

from conftest import EXAMPLES


def _sharing_session() -> EGraphSession:
    lang = load_language(EXAMPLES / "sharing" / "sharing.eqr")
    session = EGraphSession(lower_language(lang))
    session.load(next(iter(load_program_file(EXAMPLES / "sharing" / "input.eqr", lang).values())))
    return session


def _concats(session: EGraphSession) -> list[tuple]:
    return sorted(n.children for n in session.frozen().nodes if n.fn == egg_name("concat"))


def test_the_multi_pattern_rule_has_a_sampled_form_and_all_matches_fire_without_it():
    session = _sharing_session()
    assert set(session.lowered.sampled) == {"merge-matmuls"}
    session.step(session.lowered.rulesets["merge-matmuls"])
    assert len(_concats(session)) == 2  # (w1, w2) and (w2, w1)


def test_one_sampled_match_fires_then_the_other():
    session = _sharing_session()
    first = step_sampled(session, "merge-matmuls", 1, random.Random(0))
    assert first.updated and len(_concats(session)) == 1
    second = step_sampled(session, "merge-matmuls", 1, random.Random(0))  # the first is not drawn again
    assert second.updated and len(_concats(session)) == 2


def test_a_rule_without_a_match_reports_none(tmp_path):
    lang = load_language(EXAMPLES / "sharing" / "sharing.eqr")
    source = tmp_path / "one.eqr"
    source.write_text('program main:\n  root matmul(input("x", 4, 8), weight("w", 8, 8))\n')
    session = EGraphSession(lower_language(lang))
    session.load(next(iter(load_program_file(source, lang).values())))
    step = step_sampled(session, "merge-matmuls", 4, random.Random(0))
    assert step.matches == {} and not step.updated and _concats(session) == []


def test_the_draw_depends_only_on_the_generator():
    picks = set()
    for seed in range(8):
        runs = []
        for _ in range(2):
            session = _sharing_session()
            step_sampled(session, "merge-matmuls", 1, random.Random(seed))
            runs.append(_concats(session))
        assert runs[0] == runs[1]
        picks.add(tuple(runs[0]))
    assert len(picks) == 2  # both matches get drawn by some seed


def test_mcts_with_sampled_multi_matches_finds_the_merge():
    lang = load_language(EXAMPLES / "sharing" / "sharing.eqr")
    program = next(iter(load_program_file(EXAMPLES / "sharing" / "input.eqr", lang).values()))
    extract = ExtractConfig(method="cpsat", time_limit_s=10, compare=())
    result = optimize(lang, program, MctsConfig(budget=8, node_limit=1000, main_extract="cpsat", multi_matches=1),
                      extract)
    assert result.best.cost < result.original_cost
    assert result.outcome.steps[0].rule == "merge-matmuls"
