"""Conditions under which TASO's rules hold in eqdsl's semantics, found by `eqdsl verify`.

TASO proved its rules against operator axioms that assume more than eqdsl's operators promise:
element-wise ops on equal shapes (ours broadcast), ungrouped or evenly grouped convolutions (ours
are grouped: groups = x.dim1 / w.dim1), odd kernels for `enlarge` under SAME padding, and `merge`
of all of a convolution's groups at once. The importer states them as `if` conditions, so a rule
only fires where it is sound. Each family: the left/right shape it looks for, and the condition.

Contract: `assumptions(lhs, rhs, convert)` takes TENSAT terms (`SExpr | str`) and a term → eqdsl
text converter, and returns the condition texts (deduplicated, in a stable order).
"""
from __future__ import annotations

from typing import Callable

ELEMENTWISE = ("ewadd", "ewmul")


def assumptions(lhs: list, rhs: list, convert: Callable) -> list[str]:
    found: list[str] = []
    for term in lhs:
        _equal_elementwise_operands(term, found, convert)
    for term in rhs:
        for node in _nodes(term):
            _conv_of_concatenated_weights(node, found, convert)
            _enlarged_kernels_odd(node, found, convert)
            _merge_covers_all_groups(node, found, convert)
    return list(dict.fromkeys(found))


def _nodes(t):
    if isinstance(t, str):
        return
    yield t
    for a in t.args:
        yield from _nodes(a)


def _head(t) -> str | None:
    return None if isinstance(t, str) else t.head


def _equal_elementwise_operands(term, found: list[str], convert) -> None:
    """An element-wise op right under a concat or conv2d on the left: TASO's axioms distribute
    these over equal shapes only (a broadcast operand is not a concatenable or convolvable one)."""
    for node in _nodes(term):
        if node.head in ("concat", "conv2d"):
            for arg in node.args:
                if _head(arg) in ELEMENTWISE and all(isinstance(x, str) for x in arg.args):
                    a, b = arg.args
                    found.append(f"shape({convert(a)}) == shape({convert(b)})")


def _conv_of_concatenated_weights(node, found: list[str], convert) -> None:
    """conv2d(x, concat(0, w1, w2)) on the right computes each output channel with its group
    only if the groups line up: for a shared input x, x must be ungrouped for w1 (TASO's
    convolutions are); for x = concat(1, x1, x2), both halves must have equal outputs per group.
    conv2d(concat(1, x1, x2), concat(1, w1, w2)) sums two convolutions only if both are ungrouped."""
    if node.head != "conv2d" or _head(node.args[5]) != "concat":
        return
    x, weights = node.args[4], node.args[5]
    w1, w2 = weights.args[2], weights.args[3]
    if weights.args[0] == "1" and _head(x) == "concat":  # in-channels concatenated: sum of convs
        x1, x2 = x.args[2], x.args[3]
        found += [f"shape({convert(x1)})[1] == shape({convert(w1)})[1]",
                  f"shape({convert(x2)})[1] == shape({convert(w2)})[1]"]
    elif weights.args[0] != "0":
        return
    elif _head(x) == "concat" and x.args[0] == "1":
        x1, x2 = x.args[2], x.args[3]
        found.append(f"shape({convert(w1)})[0] * shape({convert(x2)})[1] == "
                     f"shape({convert(w2)})[0] * shape({convert(x1)})[1]")
    else:
        w = w1.args[0] if _head(w1) == "enlarge" else w1
        found.append(f"shape({convert(x)})[1] == shape({convert(w)})[1]")


def _enlarged_kernels_odd(node, found: list[str], convert) -> None:
    """A centred zero-padded kernel keeps a SAME convolution's alignment only for odd kernels."""
    if node.head != "enlarge":
        return
    for t in node.args:
        found += [f"shape({convert(t)})[2] % 2 == 1", f"shape({convert(t)})[3] % 2 == 1"]


def _merge_covers_all_groups(node, found: list[str], convert) -> None:
    """merge(w, count) places output channel o's weights in block o // (out / count): the
    convolution it feeds must have exactly `count` groups."""
    if node.head != "conv2d" or _head(node.args[5]) != "merge":
        return
    x, (w, count) = node.args[4], node.args[5].args
    found.append(f"shape({convert(x)})[1] / shape({convert(w)})[1] == {count}")
