"""How an e-graph's nodes are priced: the `CostModel` protocol (egg's `CostFunction` is the
anchor) and the cost-rule model every language has.

Contract: `CostModel.price(requests)` takes one `Request` per operator node that runs (folded
constants are priced 0 by the caller, never asked), `(op, args, out, facts)`: `args` in the
operator's declared order, operand shapes for sort-typed parameters (None where a shape is
unknown), the literal values for the rest; `out` the node's own shape (None when its sort has
none); `facts` the analysis values the op's cost rule reads (`cost_reads`), in that order, None
where unset (empty for a rule that reads none, and for every measured language). It
returns one cost ≥ 0 per request, in order, in the language's unit (nanoseconds for the tensor
languages). A model is built once per run and may keep what it learns across calls (a search
prices the same configurations in every state).

`RuleCosts(language, params)` evaluates the `.eqr` `cost` rules with the target's `params` (a param
they leave out has its declared default); a rule that fails on a node raises `EqdslError` naming
the rule.
"""
from __future__ import annotations

from typing import Any, NamedTuple, Protocol, Sequence

from eqdsl import ir
from eqdsl.diagnostics import EqdslError
from eqdsl.ir.evaluate import EvalError, evaluate
from eqdsl.ir.exprs import analysis_reads, env_key


class Request(NamedTuple):
    op: str
    args: tuple[Any, ...]
    out: Any
    facts: tuple[Any, ...] = ()


def cost_reads(rule: ir.CostRule) -> tuple[ir.AnalysisOf, ...]:
    """The analysis values `rule` reads, in the order a `Request` carries them."""
    return tuple(analysis_reads(rule.body))


class CostModel(Protocol):
    def price(self, requests: Sequence[Request]) -> list[float]: ...


class RuleCosts:
    """The language's cost rules on a target's params, memoised per configuration."""

    MEMO_SIZE = 500_000  # configurations kept; cleared past it (a bound on memory, not a cache policy)

    def __init__(self, language: ir.Language, params: dict[str, int] | None = None) -> None:
        defaults = {p: d.default for p, d in language.params.items() if d.default is not None}
        self.language, self.params = language, defaults | dict(params or {})
        self._reads = {op: cost_reads(rule) for op, rule in language.costs.items()}
        self._memo: dict[Request, float] = {}

    def price(self, requests: Sequence[Request]) -> list[float]:
        return [self.cost(r) for r in requests]

    def cost(self, request: Request) -> float:
        cached = self._memo.get(request)
        if cached is not None:
            return cached
        cost = self._evaluate(*request)
        if len(self._memo) > self.MEMO_SIZE:
            self._memo.clear()
        self._memo[request] = cost
        return cost

    def _evaluate(self, op_name: str, args: tuple[Any, ...], out: Any, facts: tuple[Any, ...] = ()) -> float:
        rule = self.language.costs[op_name]
        if rule.constant is not None:
            return rule.constant
        env: dict[str, Any] = dict(self.params)  # an operand without a shape is None: the rule's error names it
        env.update(zip(rule.params, args))
        if out is not None:
            env["out"] = out
        for read, fact in zip(self._reads[op_name], facts, strict=True):
            env[env_key(read)] = fact if fact is not None or read.unset is None else evaluate(read.unset, env)
        try:
            cost = evaluate(rule.body, env)
        except (EvalError, KeyError, TypeError) as err:
            raise EqdslError.one(f"cost rule of '{op_name}' failed on a node with {env}: {err}",
                                 rule.span) from None
        if not isinstance(cost, (int, float)) or cost < 0:
            raise EqdslError.one(f"cost rule of '{op_name}' gave {cost!r} for {env}; expected a number ≥ 0",
                                 rule.span)
        return float(cost)
