"""Match-limited application of a multi-pattern rule: one iteration on at most k of its matches.

One iteration of a multi-pattern rule adds every match at once; on TENSAT's models a single one
passes the PACT study's 2,000-node limit (NasRNN, ResNeXt-50), so an all-matches search can
never use those rules. egglog 14 has no per-rule match limit, so a step goes through the rule's
`Sampled` form (`eqdsl.egglog.lower`): under a new generation the recording ruleset lists every
current match's root classes (matches last recorded earlier are ignored: a match can stop being one,
e.g. when `?w1 != ?w2` meet in one class), `rng` chooses k of those not allowed before, the
chosen rows are added to the rule's `allowed` relation, and the gated rule fires on them.

Contract: `step_sampled(session, rule, k, rng)` (the sampled forms declared first, see
`EGraphSession.declare_sampled`, or the session at no push) returns the gated step's `StepResult` (matches
empty when no new match was left); the same e-graph, `rule`, `k` and `rng` state give the same
e-graph after it. Allowed rows stay (a class pair once allowed may fire again later: the same
rewrite, so nothing new, unless a new match shares those roots).
"""
from __future__ import annotations

import random

from eqdsl.egglog.session import EGraphSession, StepResult
from eqdsl.schedule.cycles import witnesses


def step_sampled(session: EGraphSession, rule: str, k: int, rng: random.Random) -> StepResult:
    form = session.lowered.sampled[rule]
    session.declare_sampled()
    current = f"i64:{session.new_generation()}"
    if not any(session.step(form.record).matches.values()):
        return StepResult({}, False)  # no current match: skip the freeze (a copy of the e-graph)
    graph = session.frozen((form.candidates, form.allowed))
    matches = {row[:-1] for row in graph.relations.get(form.candidates, ()) if row[-1] == current}
    fresh = sorted(matches - set(graph.relations.get(form.allowed, ())))
    if not fresh:
        return StepResult({}, False)
    witness = witnesses(graph, set())
    fresh = [row for row in fresh if all(key in witness for key in row)]
    chosen = fresh if len(fresh) <= k else rng.sample(fresh, k)
    if not chosen:
        return StepResult({}, False)
    session.add_rows(graph, witness, form.allowed, chosen)
    return session.step(form.gated)
