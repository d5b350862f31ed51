"""`mcts`: Monte Carlo tree search over rule applications (Hartmann, He, Yoneki, PACT 2024).

A search-tree node is an e-graph state, reached from the search root by applying rules one
iteration each (`path`); an action is one rule (single- or multi-pattern). One search iteration:
- selection: from the root, stop at each node with probability 1/2 (or where it has no child
  left to descend to) and expand there; else descend to the non-saturated child of highest UCB1,
  `v̄ + c·sqrt(ln N / n)`;
- expansion: a random rule not yet tried at that node (a multi-pattern rule fires on at most
  `multi_matches` random matches: eqdsl.schedule.sampled); a rule with no match there, or whose
  application passes the node limit, is blacklisted at the node; a child whose e-graph did not
  change is saturated (`unchanged`: never descended into, never applied); a node with nothing
  left to expand below it is `exhausted` (not descended into; the search ends when the root is);
- simulation: up to `max_sim_steps` steps under the node limit, each one random rule, which
  may change nothing (`simulation: draw`), or a random rewrite (`rewrite`: rules drawn until one
  changes the e-graph);
- reward: the sum of cost decreases `max(cost_{i−1} − cost_i, 0)` along the whole trajectory —
  from the search root down the tree to the new child, then the rollout — divided by the search
  root's cost (rewards in [0, 1], so that `uct_c` means the same on every cost scale). Counting
  from the root, not from the expanded node, credits a child with its own rule's gain on every
  visit (from the expanded node, a rule that lowers the cost at once scored 0.015 against 0.107
  for one that merely let later rollouts find that rule: measured on NasRNN). Costs are the
  main extractor's (`main_extract`), cached by e-graph state (the rules applied since the
  input, in order; a child whose rule changed nothing has its parent's). An exact main
  extractor (cpsat) gives minimum costs, which never rise as the e-graph grows, so the
  rollout's decreases sum to its first cost minus its last: only the last state is priced
  (the same reward wherever each pricing proves optimal; BENCHMARKS.md);
- backpropagation of visits and rewards to the root.
Every state is reached with egglog push, replay of its path, pop. A whole search runs under the
memory limit and the time left (`LimitedLoop.guard`): one that passes either is undone and ends the
schedule with that stop reason. After `budget` iterations the
root's child of best mean reward is applied to the real e-graph (an iteration of `LimitedLoop`:
node, time and memory limits as for saturate) and the search starts again from there, until no
child has a positive mean reward, the node limit, `max_steps` or the time limit. The pipeline's
`extract.method` then extracts the final program (the paper's final extractor). Seeded runs
are reproducible (one `random.Random(seed)`; the extractors are deterministic).

Contract: `run` leaves the session holding the e-graph after the applied steps, at most
`node_limit` e-nodes; `ScheduleOutcome.steps` logs each applied step (rule, visits, mean reward,
nodes, main-extractor cost, search iterations, seconds).
"""
from __future__ import annotations

import math
import random
import time
from dataclasses import dataclass, field, replace
from typing import ClassVar

from eqdsl import status as live_status
from eqdsl.egglog.session import EGraphSession, StepResult
from eqdsl.extract.registry import extractor_names, is_exact, make_extractor
from eqdsl.extract.result import Extractor
from eqdsl.fields import int_at_least, names, one_of, option, positive_number
from eqdsl.schedule.runner import (
    LimitedLoop,
    Limits,
    LimitsConfig,
    ProgressFn,
    ScheduleContext,
    ScheduleOutcome,
    SearchStep,
    StopReason,
)
from eqdsl.schedule.sampled import step_sampled

SIMULATIONS = ("draw", "rewrite")


@dataclass(frozen=True)
class MctsConfig(LimitsConfig):
    kind: ClassVar[str] = "mcts"
    elsewhere: ClassVar[dict[str, str]] = {
        "final_extract": "the final extractor is the run's `extract.method` (e.g. `extract: {method: cpsat}`)"}
    node_limit: int = option(2000, int_at_least(1), "an int ≥ 1")  # the PACT study's
    budget: int = option(128, int_at_least(1), "an int ≥ 1")  # search iterations per applied step
    max_sim_steps: int = option(10, int_at_least(0), "an int ≥ 0")
    uct_c: float = option(2 * math.sqrt(2), lambda v: positive_number(v), "a number > 0", float)
    main_extract: str = option("greedy-ocf", one_of(extractor_names), names(extractor_names))
    seed: int = option(0, int_at_least(0), "an int ≥ 0")
    max_steps: int = option(100, int_at_least(1), "an int ≥ 1")  # applied steps at most
    # a multi-pattern rule's action fires on at most this many random matches (0: all of them,
    # the paper's action, which can pass the node limit at once, so that those rules never apply)
    multi_matches: int = option(16, int_at_least(0), "an int ≥ 0")
    # a simulation step: `draw` draws one rule from all of them (a miss is a step), `rewrite` applies
    # a random rule that changes the e-graph (steadier rollouts where few rules match, at many
    # times the cost: not the default)
    simulation: str = option("draw", one_of(SIMULATIONS), ", ".join(SIMULATIONS))


@dataclass(eq=False)
class TreeNode:
    path: tuple[str, ...]  # rules applied from the search root
    untried: list[str]  # rules not yet expanded here
    parent: TreeNode | None = None
    children: dict[str, TreeNode] = field(default_factory=dict)
    visits: int = 0
    value: float = 0.0
    unchanged: bool = False  # its rule left the e-graph as it was (the paper's saturated child)
    exhausted: bool = False  # nothing below it is left to expand

    @property
    def mean(self) -> float:
        return self.value / self.visits if self.visits else 0.0

    def changed_children(self) -> list[TreeNode]:
        return [c for c in self.children.values() if not c.unchanged]

    def open_children(self) -> list[TreeNode]:
        return [c for c in self.changed_children() if not c.exhausted]


@dataclass
class MctsScheduler:
    limits: Limits  # iter_limit = max_steps
    cfg: MctsConfig
    extractor: Extractor
    rng: random.Random = field(init=False)
    costs: dict[tuple[str, ...], float] = field(default_factory=dict)  # state (rules since the input) → cost
    applied: tuple[str, ...] = ()
    rules: tuple[str, ...] = ()  # every rule of the language: the actions (set by `run`)

    def __post_init__(self) -> None:
        self.rng = random.Random(self.cfg.seed)

    @property
    def telescopes(self) -> bool:
        """The main extractor is exact: a rollout prices only its last state."""
        return is_exact(self.cfg.main_extract)

    def run(self, session: EGraphSession, progress: ProgressFn | None = None) -> ScheduleOutcome:
        loop = LimitedLoop(session, self.limits, count_classes=False)
        start_nodes = loop.check_start()
        self.rules = tuple(r.name for r in session.lowered.language.rules)
        if self.cfg.multi_matches:
            session.declare_sampled()
        steps: list[SearchStep] = []
        stop = loop.check_before()
        while stop is None:
            stop = self._step(session, loop, steps, progress)
        return ScheduleOutcome(stop, tuple(loop.reports), session.size(), loop.elapsed(), start_nodes,
                               steps=tuple(steps), details=_details(steps), lines=_lines(steps))

    def _step(self, session: EGraphSession, loop: LimitedLoop, steps: list[SearchStep],
              progress: ProgressFn | None) -> StopReason | None:
        """Search from the session's e-graph, apply the best first rule; why to stop, or None."""
        t0 = time.perf_counter()
        searched = loop.guard(lambda: self._search(session, loop))
        if isinstance(searched, StopReason):  # the search passed the memory or time limit
            return searched  # the e-graph (and the tree, and the cost cache) are as before it
        root, iterations = searched
        best = max(root.changed_children(), key=lambda c: (c.mean, -self.rules.index(c.path[-1])), default=None)
        if best is None or best.mean <= 0:
            return StopReason.NO_IMPROVEMENT
        rule = best.path[-1]
        stop = loop.iterate(session.lowered.rulesets[rule], apply=lambda: self._apply(session, best.path))
        if progress is not None:
            progress(loop.reports[-1])
        if loop.reports[-1].rolled_back:
            return stop
        self.applied += best.path
        steps.append(SearchStep(len(steps) + 1, best.path[-1], best.visits, best.mean, session.size(),
                                self._cost(session, ()), iterations, time.perf_counter() - t0))
        live_status.update(step=len(steps), best=steps[-1].cost, note=f"applied {rule}")
        return loop.check_before()  # (a rule that changed nothing more is not the end of the search)

    def _search(self, session: EGraphSession, loop: LimitedLoop) -> tuple[TreeNode, int]:
        """`budget` search iterations from the session's e-graph (restored after each)."""
        root = TreeNode((), list(self.rules))
        self._cost(session, ())
        done = 0
        while done < self.cfg.budget and not root.exhausted and loop.elapsed() < self.limits.time_limit_s:
            session.push()
            try:
                self._iteration(session, root)
            finally:
                session.pop()
            done += 1
            live_status.update(note=f"search iteration {done}/{self.cfg.budget}")
        return root, done

    def _iteration(self, session: EGraphSession, root: TreeNode) -> None:
        node = self._select(root)
        if node is None:
            return  # the whole tree is explored
        self._replay(session, node.path)
        child = self._expand(session, node)
        if child is None:
            return
        reward = self._rollout(session, child)
        on_path: TreeNode | None = child
        while on_path is not None:
            on_path.visits += 1
            on_path.value += reward
            on_path = on_path.parent

    def _select(self, root: TreeNode) -> TreeNode | None:
        node = root
        while True:
            open_children = node.open_children()
            if node.untried and (not open_children or self.rng.random() < 0.5):
                return node
            if not open_children:
                node.exhausted = True
                if node.parent is None:
                    return None
                node = node.parent
                continue
            node = max(open_children, key=lambda c: self._ucb(node, c))

    def _ucb(self, parent: TreeNode, child: TreeNode) -> float:
        if child.visits == 0:
            return math.inf
        return child.mean + self.cfg.uct_c * math.sqrt(math.log(max(parent.visits, 1)) / child.visits)

    def _expand(self, session: EGraphSession, node: TreeNode) -> TreeNode | None:
        """Apply an untried rule at `node` (the session holds its state, inside this iteration's
        push); the new child, or None when every untried rule had no match or passed the node
        limit. A rule without a match leaves the e-graph as it was, so it is tried without a push
        of its own (a push copies the e-graph); after an overshoot the node's state is replayed."""
        while node.untried:
            rule = node.untried.pop(self.rng.randrange(len(node.untried)))
            step = self._apply(session, node.path + (rule,))
            if sum(step.matches.values()) == 0:
                continue  # blacklisted here
            if session.size() > self.limits.node_limit:
                session.pop()
                session.push()
                self._replay(session, node.path)
                continue
            child = TreeNode(node.path + (rule,), list(self.rules), node, unchanged=not step.updated)
            node.children[rule] = child
            if child.unchanged:  # the same e-graph: its cost is known
                self.costs[self.applied + child.path] = self._cost_of(node.path)
            return child
        return None

    def _replay(self, session: EGraphSession, path: tuple[str, ...]) -> None:
        for k in range(len(path)):
            self._apply(session, path[:k + 1])

    def _apply(self, session: EGraphSession, path: tuple[str, ...]) -> StepResult:
        """One iteration of the rule `path[-1]` on the state `path[:-1]`. A multi-pattern rule
        with `multi_matches` set fires on that many random matches, drawn from a generator seeded
        by the seed and the state's full path, so replaying a path rebuilds the same e-graph."""
        rule = path[-1]
        if self.cfg.multi_matches and rule in session.lowered.sampled:
            rng = random.Random(f"{self.cfg.seed}:{'/'.join(self.applied + path)}")
            return step_sampled(session, rule, self.cfg.multi_matches, rng)
        return session.step(session.lowered.rulesets[rule])

    def _rollout(self, session: EGraphSession, child: TreeNode) -> float:
        """Reward of the trajectory from the search root: the tree path down to `child` (whose
        states' costs are cached from their own expansions), then up to `max_sim_steps` random
        steps (`_sim_step`). Counting from the root credits a child with the gain of its
        own rule on every visit, not only on the visit that expanded it."""
        self._cost(session, child.path)  # the session holds the child's state now
        costs = [self._cost_of(child.path[:k]) for k in range(len(child.path) + 1)]
        gain = sum(max(a - b, 0.0) for a, b in zip(costs, costs[1:]))
        path, cost = child.path, costs[-1]
        overshot = False
        for _ in range(self.cfg.max_sim_steps):  # the iteration's pop undoes all of it
            rule = self._sim_step(session, path)
            if rule is None:
                if self.cfg.simulation == "rewrite":
                    break  # no rule changes this state
                continue  # `draw`: the rule drawn changed nothing, and that was the step
            if session.size() > self.limits.node_limit:
                overshot = True
                break
            path += (rule,)
            if not self.telescopes:
                previous, cost = cost, self._cost(session, path)
                gain += max(previous - cost, 0.0)
        if self.telescopes and path != child.path:
            if overshot:  # the session holds the state past the limit: rebuild the last one
                session.pop()
                session.push()
                self._replay(session, path)
            gain += max(cost - self._cost(session, path), 0.0)
        return gain / max(self._cost_of(()), 1e-300)

    def _sim_step(self, session: EGraphSession, path: tuple[str, ...]) -> str | None:
        """One simulation step on the state `path`: the rule applied, or None where it changed
        nothing. `draw`: one random rule. `rewrite`: random rules drawn without replacement
        until one changes the e-graph (None: none does). Drawn from all rules, most steps miss:
        on BERT 2–4 of TENSAT's 139 rules change the e-graph at a search's root, and 92 % of the
        rule steps of a budget-16 search change nothing."""
        if self.cfg.simulation == "draw":
            rule = self.rng.choice(self.rules)
            return rule if self._apply(session, path + (rule,)).updated else None
        rules = list(self.rules)
        while rules:
            rule = rules.pop(self.rng.randrange(len(rules)))
            if self._apply(session, path + (rule,)).updated:
                return rule
        return None

    def _cost_of(self, path: tuple[str, ...]) -> float:
        """A state's cached cost (every state on the tree was priced when it was created)."""
        return self.costs[self.applied + path]

    def _cost(self, session: EGraphSession, path: tuple[str, ...]) -> float:
        """The main extractor's cost of the session's e-graph, which is the state `path`
        reached from the current search root."""
        key = self.applied + path
        if key not in self.costs:
            self.costs[key] = self.extractor.extract(session.live().problem).cost
        return self.costs[key]


def _details(steps: list[SearchStep]) -> dict:
    """report.json's `schedule.steps`: each applied rule with its search statistics."""
    return {"steps": [{"step": s.index, "rule": s.rule, "visits": s.visits, "mean_reward": s.mean_reward,
                       "nodes": s.nodes, "cost": s.cost, "search_iterations": s.iterations,
                       "seconds": round(s.seconds, 6)} for s in steps]}


def _lines(steps: list[SearchStep]) -> tuple[str, ...]:
    if not steps:
        return ()
    return (f"mcts: {len(steps)} step(s) applied: " + ", ".join(f"{s.rule} ({s.cost:.6g})" for s in steps),)


def build_mcts(cfg: MctsConfig, context: ScheduleContext) -> MctsScheduler:
    # one thread: rollouts price many small e-graphs (helper threads cost more than they give
    # there) and a seeded search must replay the same rewards
    budget = replace(context.extract.budget(), threads=1, deterministic=True)
    extractor = make_extractor(cfg.main_extract, context.extract, "schedule.main_extract", budget)
    return MctsScheduler(cfg.limits(cfg.max_steps), cfg, extractor)
