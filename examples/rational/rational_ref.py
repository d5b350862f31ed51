"""Reference semantics of examples/rational/rational.eqr over float64 reals (exact on the small
integers `verify` draws). Division by zero raises: the term is undefined there."""

from eqdsl.languages.base import Leaf

SEMANTICS = {
    "num": float,
    "var": Leaf(lambda name: ()),
    "add": lambda a, b: a + b,
    "sub": lambda a, b: a - b,
    "neg": lambda a: -a,
    "mul": lambda a, b: a * b,
    "div": lambda a, b: a / b,
}
