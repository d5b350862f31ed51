"""Build input programs from Python, shape-checked by the language's own shape rules.

Contract: `GraphBuilder(lang).op(name, *args)` appends a node (hash-consed) and returns a `Tensor`
handle carrying the node's shape, computed by evaluating the operator's `shape` rule from the
`.eqr` file; a violated `require` raises `EqdslError` naming the operator, the arguments' shapes
and the requirement's source line. `program(name, roots)` returns the `ir.Program`.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, cast

from eqdsl import ir
from eqdsl.diagnostics import EqdslError, Span
from eqdsl.ir.evaluate import EvalError, ShapeViolation, Value, applied_shape


@dataclass(frozen=True)
class Tensor:
    index: int
    shape: Value | None

    @property
    def dims(self) -> tuple[int, ...]:
        """The shape of a node whose sort's analysis value is a list of ints ([Int])."""
        if not isinstance(self.shape, tuple):
            raise TypeError(f"node {self.index} has no [Int] shape (got {self.shape!r})")
        return cast(tuple[int, ...], self.shape)


class GraphBuilder:
    def __init__(self, lang: ir.Language) -> None:
        self.lang = lang
        self.nodes: list[ir.TermNode] = []
        self.shapes: list[Value | None] = []
        self._index: dict[ir.TermNode, int] = {}

    def op(self, name: str, *args: Tensor | int | str | tuple[int, ...] | list[int]) -> Tensor:
        op = self.lang.ops.get(name)
        if op is None:
            raise EqdslError.one(f"model builder: unknown operator '{name}' in language {self.lang.name}")
        if len(args) != op.arity:
            raise EqdslError.one(f"model builder: '{name}' takes {op.arity} argument(s), got {len(args)}")
        values = tuple(_term_arg(a) for a in args)
        shape = self._shape(op, args)
        node = ir.TermNode(name, values)
        if node not in self._index:
            self._index[node] = len(self.nodes)
            self.nodes.append(node)
            self.shapes.append(shape)
        return Tensor(self._index[node], shape)

    def __getattr__(self, name: str):
        if name.startswith("_") or name not in self.lang.ops:
            raise AttributeError(name)
        return lambda *args: self.op(name, *args)

    def _shape(self, op: ir.Operator, args) -> Value | None:
        rule = self.lang.shapes.get(op.name)
        if rule is None:
            return None
        env: dict[str, Any] = {n: (a.shape if isinstance(a, Tensor) else _value(a)) for n, a in zip(rule.params, args)}
        try:
            return applied_shape(rule, env)
        except ShapeViolation:
            raise EqdslError.one(f"model builder: '{op.name}' with {_describe(env)} violates "
                                 f"a requirement of its shape rule", rule.span) from None
        except EvalError as err:
            raise EqdslError.one(f"model builder: '{op.name}' with {_describe(env)}: {err}", rule.span) from None

    def program(self, name: str, roots: list[Tensor]) -> ir.Program:
        if not roots:
            raise EqdslError.one(f"model '{name}' has no outputs")
        return ir.Program(name, tuple(self.nodes), tuple(r.index for r in roots),
                          Span(f"<builder {name}>", 0, 0))


def _value(a):
    return tuple(a) if isinstance(a, list) else a


def _term_arg(a):
    match a:
        case Tensor(index=i):
            return ir.Child(i)
        case list() | tuple():
            return tuple(int(v) for v in a)
        case _:
            return a


def _describe(env: dict) -> str:
    return ", ".join(f"{k}={list(v) if isinstance(v, tuple) else v}" for k, v in env.items())


def program_shapes(lang: ir.Language, program: ir.Program) -> list[Value | None]:
    """Every node's shape by the language's shape rules (a violated rule raises `EqdslError`)."""
    g = GraphBuilder(lang)
    handles: list[Tensor] = []
    for node in program.nodes:
        args = [handles[a.index] if isinstance(a, ir.Child) else a for a in node.args]
        handles.append(g.op(node.op, *args))
    return [h.shape for h in handles]


def without_dead_nodes(program: ir.Program) -> ir.Program:
    """`program` with only the nodes its roots reach, in the same order."""
    live = set(program.roots)
    for i in range(len(program.nodes) - 1, -1, -1):
        if i in live:
            live.update(a.index for a in program.nodes[i].args if isinstance(a, ir.Child))
    index: dict[int, int] = {}
    nodes: list[ir.TermNode] = []
    for i, node in enumerate(program.nodes):
        if i in live:
            index[i] = len(nodes)
            args = tuple(ir.Child(index[a.index]) if isinstance(a, ir.Child) else a for a in node.args)
            nodes.append(ir.TermNode(node.op, args))
    return ir.Program(program.name, tuple(nodes), tuple(index[r] for r in program.roots), program.span)


def same_terms(a: ir.Program, b: ir.Program) -> bool:
    """Whether the two programs' roots are the same terms, in order, however their nodes are
    numbered: both hash-consed into one table (a node's key is its op, literals and children's
    keys), so equal terms get equal ids."""
    keys: dict[tuple, int] = {}
    ids_a, ids_b = term_ids(a, keys), term_ids(b, keys)
    return tuple(ids_a[r] for r in a.roots) == tuple(ids_b[r] for r in b.roots)


def new_nodes(before: ir.Program, after: ir.Program) -> list[int]:
    """The nodes of `after` whose terms `before` does not have."""
    keys: dict[tuple, int] = {}
    old = set(term_ids(before, keys))
    return [i for i, t in enumerate(term_ids(after, keys)) if t not in old]


def term_ids(program: ir.Program, keys: dict[tuple, int]) -> list[int]:
    """Each node's term as an id from `keys` (hash-consing): equal terms, equal ids."""
    ids: list[int] = []
    for node in program.nodes:
        key = (node.op, tuple(("c", ids[x.index]) if isinstance(x, ir.Child) else ("v", x) for x in node.args))
        ids.append(keys.setdefault(key, len(keys)))
    return ids
