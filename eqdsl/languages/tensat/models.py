"""The benchmark models of TENSAT (and the PACT 2024 study), batch 1, at the published sizes.

Each builder follows the architecture's layer structure (channel widths, block counts, concats,
residual adds) as TASO/TENSAT build them. Contract: `build_model(lang, name, **params)` returns an
`ir.Program`; unknown models/parameters and inconsistent sizes raise `EqdslError`.
"""
from __future__ import annotations

import inspect
from typing import Callable

from eqdsl import ir
from eqdsl.diagnostics import EqdslError
from eqdsl.languages.tensat.cells import inceptionv3, nasneta
from eqdsl.languages.tensat.nets import NONE, VALID, Net
from eqdsl.languages.tensat.transformers import transformer_transducer, vit_base, vit_huge, vit_large


def bert(lang: ir.Language, seq: int = 64, hidden: int = 1024, layers: int = 8, heads: int = 16) -> ir.Program:
    """TASO's `bert.py`: a ReLU on the input, then `layers` attention blocks of six matmuls
    (Q, K, V, two batched head matmuls, the output projection), four reshapes and four transposes
    each; no residuals or normalisation. (TASO's script feeds the block's input, not the attention
    output, to the last matmul, which leaves the attention dead; we follow the evident intent.)"""
    if hidden % heads:
        raise EqdslError.one(f"bert: hidden ({hidden}) must be a multiple of heads ({heads})",
                             path="program.hidden")
    n = Net(lang)
    g = n.g
    x = n.relu(n.input("x", [seq, hidden]))
    d = hidden // heads
    for _ in range(layers):
        q, k, v = (g.reshape(n.matmul(x, hidden), [seq, heads, d]) for _ in range(3))
        q, k, v = g.transpose(q, [1, 0, 2]), g.transpose(k, [1, 2, 0]), g.transpose(v, [1, 0, 2])
        att = g.matmul(NONE, g.matmul(NONE, q, k), v)
        att = g.reshape(g.transpose(att, [1, 0, 2]), [seq, hidden])
        x = n.matmul(att, hidden)
    return n.program("bert", [x])


def nasrnn(lang: ir.Language, steps: int = 5, hidden: int = 512) -> ir.Program:
    n = Net(lang)
    g = n.g
    xs = [n.input(f"x{i}", [1, hidden]) for i in range(steps)]
    state = n.input("h0", [1, hidden])
    for x in xs:
        t = [n.add(n.matmul(x, hidden), n.matmul(state, hidden)) for _ in range(8)]
        m0 = n.add(g.relu(t[0]), g.sigmoid(t[3]))
        m1 = n.add(g.sigmoid(t[1]), g.tanh(t[2]))
        m2 = g.ewmul(g.sigmoid(t[4]), g.tanh(t[5]))
        m3 = g.ewmul(g.sigmoid(t[6]), g.relu(t[7]))
        m4 = g.ewmul(g.sigmoid(m1), g.tanh(m2))
        m5 = g.ewmul(g.tanh(m0), g.tanh(m3))
        state = g.tanh(g.ewmul(g.tanh(m4), g.tanh(m5)))
    return n.program("nasrnn", [state])


def vgg19(lang: ir.Language, size: int = 224, classes: int = 1000) -> ir.Program:
    """16 convolutions and 18 ReLUs, 5 max pools, and the three fully connected layers."""
    n = Net(lang)
    x = n.input("x", [1, 3, size, size])
    for width, count in [(64, 2), (128, 2), (256, 4), (512, 4), (512, 4)]:
        for _ in range(count):
            x = n.conv(x, width, (3, 3))
        x = n.maxpool(x, 2, 2, VALID)
    x = n.g.reshape(x, [1, x.dims[1] * x.dims[2] * x.dims[3]])
    x = n.matmul(n.matmul(x, 4096, relu=True), 4096, relu=True)
    return n.program("vgg19", [n.matmul(x, classes)])


def _fire(n: Net, x, squeeze: int, expand: int):
    s = n.conv(x, squeeze, (1, 1))
    return n.concat(1, [n.conv(s, expand, (1, 1)), n.conv(s, expand, (3, 3))])


def squeezenet(lang: ir.Language, size: int = 224) -> ir.Program:
    """SqueezeNet 1.0: 26 convolutions each followed by a ReLU, 8 fire concats, a global pool."""
    n = Net(lang)
    x = n.conv(n.input("x", [1, 3, size, size]), 96, (7, 7), (2, 2))
    x = n.maxpool(x, 3, 2)
    for i, (s, e) in enumerate([(16, 64), (16, 64), (32, 128), (32, 128), (48, 192), (48, 192),
                                (64, 256), (64, 256)]):
        x = _fire(n, x, s, e)
        if i in (2, 6):
            x = n.maxpool(x, 3, 2)
    x = n.conv(x, 1000, (1, 1))
    return n.program("squeezenet", [n.avgpool(x, x.dims[2], 1, VALID)])


def _bottleneck(n: Net, x, width: int, out_c: int, stride: int, groups: int):
    y = n.conv(x, width, (1, 1))
    y = n.conv(y, width, (3, 3), (stride, stride), groups=groups)
    y = n.conv(y, out_c, (1, 1), relu=False)
    if stride != 1 or x.dims[1] != out_c:
        x = n.conv(x, out_c, (1, 1), (stride, stride), relu=False)
    return n.relu(n.add(x, y))


def _resnet(lang, name, widths, expansion, groups, size):
    n = Net(lang)
    x = n.conv(n.input("x", [1, 3, size, size]), 64, (7, 7), (2, 2))
    x = n.maxpool(x, 3, 2)
    for stage, (width, blocks) in enumerate(zip(widths, (3, 4, 6, 3))):
        for b in range(blocks):
            stride = 2 if stage > 0 and b == 0 else 1
            x = _bottleneck(n, x, width, width * expansion, stride, groups)
    return n.program(name, [x])


def resnet50(lang: ir.Language, size: int = 224) -> ir.Program:
    return _resnet(lang, "resnet50", (64, 128, 256, 512), 4, 1, size)


def resnext50(lang: ir.Language, size: int = 224, groups: int = 32) -> ir.Program:
    if any(w % groups for w in (128, 256, 512, 1024)):
        raise EqdslError.one(f"resnext50: groups ({groups}) must divide the widths 128/256/512/1024",
                             path="program.groups")
    return _resnet(lang, "resnext50", (128, 256, 512, 1024), 2, groups, size)


def _conv_bn(n: Net, x, out_c: int, kernel: int, stride: int = 1, groups: int = 1, relu: bool = True):
    y = n.batchnorm(n.conv(x, out_c, (kernel, kernel), (stride, stride), relu=False, groups=groups))
    return n.relu(y) if relu else y


def mobilenetv2(lang: ir.Language, size: int = 224, classes: int = 1000) -> ir.Program:
    """As TASO builds it: every convolution but the classifier is followed by a batch norm; 17
    inverted residual blocks (each with its 1×1 expansion, also at t = 1), 10 residual adds;
    54 convolutions, 53 batch norms, 36 ReLUs."""
    n = Net(lang)
    x = _conv_bn(n, n.input("x", [1, 3, size, size]), 32, 3, 2)
    for t, c, reps, s in [(1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2), (6, 96, 3, 1),
                          (6, 160, 3, 2), (6, 320, 1, 1)]:
        for r in range(reps):
            stride = s if r == 0 else 1
            hidden = x.dims[1] * t
            y = _conv_bn(n, x, hidden, 1)
            y = _conv_bn(n, y, hidden, 3, stride, groups=hidden)
            y = _conv_bn(n, y, c, 1, relu=False)
            x = n.add(x, y) if stride == 1 and x.dims[1] == c else y
    x = _conv_bn(n, x, 1280, 1)
    x = n.avgpool(x, x.dims[2], 1, VALID)
    return n.program("mobilenetv2", [n.conv(x, classes, (1, 1), relu=False)])


MODELS: dict[str, Callable[..., ir.Program]] = {
    "bert": bert, "nasrnn": nasrnn, "vgg19": vgg19, "squeezenet": squeezenet, "resnet50": resnet50,
    "resnext50": resnext50, "mobilenetv2": mobilenetv2, "inceptionv3": inceptionv3, "nasneta": nasneta,
    "vit_base": vit_base, "vit_large": vit_large, "vit_huge": vit_huge,
    "transformer_transducer": transformer_transducer}


def build_model(lang: ir.Language, name: str, **params) -> ir.Program:
    builder = MODELS.get(name)
    if builder is None:
        raise EqdslError.one(f"unknown model {name!r}; expected one of: {', '.join(sorted(MODELS))}",
                             path="program.builder")
    accepted = list(inspect.signature(builder).parameters)[1:]
    for key, value in params.items():
        if key not in accepted:
            raise EqdslError.one(f"unknown parameter for {name}; expected one of: {', '.join(accepted)}",
                                 path=f"program.{key}")
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise EqdslError.one(f"expected an int ≥ 1, got {value!r}", path=f"program.{key}")
    return builder(lang, **params)
