"""Layers shared by the benchmark models: convolutions with fresh weights, pools, residual adds.

Contract: `Net(lang)` wraps a `GraphBuilder` over the tensor language; every weight gets a unique
id so that equal-shaped weights stay distinct tensors. As in TASO's model scripts (the graphs TENSAT
and the PACT study loaded), activations and batch norms are operators of their own: `conv` and
`matmul` never fuse one (act code NONE) and append a separate `relu` when asked. Padding and
activation codes: `eqdsl.languages.tensor.codes` (TENSAT's).
"""
from __future__ import annotations

from eqdsl import ir
from eqdsl.ir.builder import GraphBuilder, Tensor
from eqdsl.languages.tensor.codes import Act, Pad

SAME, VALID = int(Pad.SAME), int(Pad.VALID)  # plain ints: the values programs hold
NONE, SIGMOID, RELU, TANH = map(int, Act)


class Net:
    def __init__(self, lang: ir.Language) -> None:
        self.g = GraphBuilder(lang)
        self._weights = 0

    def input(self, name: str, dims: list[int]) -> Tensor:
        return self.g.input(name, dims)

    def weight(self, dims: list[int]) -> Tensor:
        self._weights += 1
        return self.g.weight(f"w{self._weights}", dims)

    def conv(self, x: Tensor, out_c: int, kernel: tuple[int, int], stride: tuple[int, int] = (1, 1),
             pad: int = SAME, relu: bool = True, groups: int = 1) -> Tensor:
        w = self.weight([out_c, x.dims[1] // groups, kernel[0], kernel[1]])
        y = self.g.conv2d(stride[0], stride[1], pad, NONE, x, w)
        return self.g.relu(y) if relu else y

    def batchnorm(self, x: Tensor) -> Tensor:
        c = [x.dims[1]]
        return self.g.batchnorm(x, self.weight(c), self.weight(c), self.weight(c), self.weight(c))

    def maxpool(self, x: Tensor, k: int, s: int, pad: int = SAME) -> Tensor:
        return self.g.poolmax(x, k, k, s, s, pad, NONE)

    def avgpool(self, x: Tensor, k: int, s: int, pad: int = SAME) -> Tensor:
        return self.g.poolavg(x, k, k, s, s, pad, NONE)

    def matmul(self, x: Tensor, out_features: int, relu: bool = False) -> Tensor:
        y = self.g.matmul(NONE, x, self.weight([x.dims[-1], out_features]))
        return self.g.relu(y) if relu else y

    def linear(self, x: Tensor, out_features: int) -> Tensor:
        """x @ W + b (b broadcast over the rows)."""
        return self.add(self.matmul(x, out_features), self.weight([out_features]))

    def opaque(self, key: str, inputs: list[Tensor], dims: list[int] | None = None) -> Tensor:
        """An operator the language has no rules for (`eqdsl.languages.tensor.opaque`)."""
        out = list(dims if dims is not None else inputs[0].dims)
        return self.g.op(f"opaque{len(inputs)}", key, out, *inputs)

    def add(self, a: Tensor, b: Tensor) -> Tensor:
        return self.g.ewadd(a, b)

    def relu(self, x: Tensor) -> Tensor:
        return self.g.relu(x)

    def concat(self, axis: int, parts: list[Tensor]) -> Tensor:
        """Concatenates 2–5 tensors with one operator, more with a chain of them."""
        while len(parts) > 5:
            parts = [self.g.concat5(axis, *parts[:5])] + parts[5:]
        name = {2: "concat", 3: "concat3", 4: "concat4", 5: "concat5"}[len(parts)]
        return self.g.op(name, axis, *parts)

    def program(self, name: str, outputs: list[Tensor]) -> ir.Program:
        return self.g.program(name, outputs)
