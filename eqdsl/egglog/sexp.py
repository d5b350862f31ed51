"""egglog expressions as a small tree, printed once: lowering reasons about facts (which
variables they bind and read, which are equalities) on the tree, never on its text.

Contract: `show(s)` prints `s` in egglog syntax: `Var` and `Atom` as their text, `Call` as
`(head arg ...)` (`(head)` without arguments). `variables(s)` yields every variable in `s`;
`rename(s, f)` replaces each variable `v` by `Var(f(v.name))`.
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import reduce
from typing import Callable, Iterator, Sequence, assert_never


@dataclass(frozen=True)
class Var:
    """A query variable: `?x` (a pattern variable) or `_name` (one lowering introduced)."""

    name: str


@dataclass(frozen=True)
class Atom:
    """A literal or a name: `3`, `"text"`, `true`, a global."""

    text: str


@dataclass(frozen=True)
class Call:
    head: str
    args: tuple[Sexp, ...] = ()


Sexp = Var | Atom | Call


def call(head: str, *args: Sexp) -> Call:
    return Call(head, args)


def chain(head: str, items: Sequence[Sexp]) -> Sexp:
    """`(head (head a b) c)`: a left-nested binary operator over `items` (at least one)."""
    return reduce(lambda a, b: call(head, a, b), items)


def show(s: Sexp) -> str:
    match s:
        case Var(name=text) | Atom(text=text):
            return text
        case Call(head=head, args=()):
            return f"({head})"
        case Call(head=head, args=args):
            return f"({head} {' '.join(show(a) for a in args)})"
        case _:
            assert_never(s)


def variables(s: Sexp) -> Iterator[str]:
    match s:
        case Var(name=name):
            yield name
        case Atom():
            return
        case Call(args=args):
            for a in args:
                yield from variables(a)
        case _:
            assert_never(s)


def rename(s: Sexp, f: Callable[[str], str]) -> Sexp:
    match s:
        case Var(name=name):
            return Var(f(name))
        case Atom():
            return s
        case Call(head=head, args=args):
            return Call(head, tuple(rename(a, f) for a in args))
        case _:
            assert_never(s)


def equality(fact: Sexp) -> tuple[str, str] | None:
    """`(= a b)` between two variables → (a, b)."""
    match fact:
        case Call(head="=", args=(Var(name=a), Var(name=b))):
            return a, b
        case _:
            return None


def binding(fact: Sexp) -> str | None:
    """`(= v (f ...))`: the variable a fact binds to a computed value, if it is one."""
    match fact:
        case Call(head="=", args=(Var(name=v), Call())):
            return v
        case _:
            return None
