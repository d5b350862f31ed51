"""The PACT 2024 study's transformer models: ViT-Base/Large/Huge and the audio encoder of the
Transformer-Transducer, batch 1, FP32.

Operators the tensor language has no rules for (layer norm, softmax, GELU) are opaque nodes with
their ONNX definitions (`eqdsl.languages.tensor.opaque`): they run under ONNX Runtime and are
never rewritten. Attention follows TASO's `bert.py` layout (Q/K/V matmuls, reshape to heads,
transposes, two batched matmuls); the 1/√d scale is folded into the query weights.

ViT (Dosovitskiy et al. 2021): a p×p/p patch convolution, a class token concatenated in front,
learned position embeddings, pre-norm encoder layers (LN → attention → +, LN → MLP 4× with GELU
→ +), a final LN and a linear head on the class token.

Transformer-Transducer audio encoder (Zhang et al. 2020): 18 pre-norm encoder layers, model width
512, 8 heads, feed-forward 2048 with ReLU, over an input of 128-dim log-mel frames stacked 4 at a
time (512 features per step). Sizes we picked, as the paper gives no single inference shape: 256
steps (≈ 10 s of audio at 40 ms per stacked step); relative positional encodings and the label
encoder / joint network are left out (the study optimizes the audio encoder).
"""
from __future__ import annotations

from eqdsl import ir
from eqdsl.diagnostics import EqdslError
from eqdsl.ir.builder import Tensor
from eqdsl.languages.tensat.nets import NONE, VALID, Net

LAYER_NORM = "LayerNormalization(axis=-1, epsilon=1e-06)"
SOFTMAX = "Softmax(axis=-1)"
GELU = "Gelu()"


def _layer_norm(n: Net, x: Tensor) -> Tensor:
    width = [x.dims[-1]]
    return n.opaque(LAYER_NORM, [x, n.weight(width), n.weight(width)])


def _attention(n: Net, x: Tensor, heads: int) -> Tensor:
    g = n.g
    seq, width = x.dims
    d = width // heads
    q, k, v = (g.reshape(n.linear(x, width), [seq, heads, d]) for _ in range(3))
    q, k, v = g.transpose(q, [1, 0, 2]), g.transpose(k, [1, 2, 0]), g.transpose(v, [1, 0, 2])
    scores = n.opaque(SOFTMAX, [g.matmul(NONE, q, k)])
    att = g.reshape(g.transpose(g.matmul(NONE, scores, v), [1, 0, 2]), [seq, width])
    return n.linear(att, width)


def _encoder_layer(n: Net, x: Tensor, heads: int, mlp: int, gelu: bool) -> Tensor:
    x = n.add(x, _attention(n, _layer_norm(n, x), heads))
    h = n.linear(_layer_norm(n, x), mlp)
    h = n.opaque(GELU, [h]) if gelu else n.relu(h)
    return n.add(x, n.linear(h, x.dims[-1]))


def _check_heads(name: str, hidden: int, heads: int) -> None:
    if hidden % heads:
        raise EqdslError.one(f"{name}: hidden ({hidden}) must be a multiple of heads ({heads})",
                             path="program.hidden")


def _vit(lang: ir.Language, name: str, size: int, patch: int, layers: int, hidden: int, heads: int,
         classes: int) -> ir.Program:
    _check_heads(name, hidden, heads)
    if size % patch:
        raise EqdslError.one(f"{name}: the image size ({size}) must be a multiple of the patch ({patch})",
                             path="program.size")
    n = Net(lang)
    g = n.g
    x = n.conv(n.input("x", [1, 3, size, size]), hidden, (patch, patch), (patch, patch), VALID, relu=False)
    patches = (size // patch) ** 2
    x = g.transpose(g.reshape(x, [hidden, patches]), [1, 0])
    x = n.add(n.concat(0, [n.weight([1, hidden]), x]), n.weight([patches + 1, hidden]))
    for _ in range(layers):
        x = _encoder_layer(n, x, heads, 4 * hidden, gelu=True)
    cls = g.split0(g.split(0, 1, _layer_norm(n, x)))
    return n.program(name, [n.linear(cls, classes)])


def vit_base(lang: ir.Language, size: int = 224, patch: int = 16, layers: int = 12, hidden: int = 768,
             heads: int = 12, classes: int = 1000) -> ir.Program:
    return _vit(lang, "vit_base", size, patch, layers, hidden, heads, classes)


def vit_large(lang: ir.Language, size: int = 224, patch: int = 16, layers: int = 24, hidden: int = 1024,
              heads: int = 16, classes: int = 1000) -> ir.Program:
    return _vit(lang, "vit_large", size, patch, layers, hidden, heads, classes)


def vit_huge(lang: ir.Language, size: int = 224, patch: int = 14, layers: int = 32, hidden: int = 1280,
             heads: int = 16, classes: int = 1000) -> ir.Program:
    return _vit(lang, "vit_huge", size, patch, layers, hidden, heads, classes)


def transformer_transducer(lang: ir.Language, steps: int = 256, features: int = 512, layers: int = 18,
                           hidden: int = 512, heads: int = 8, ffn: int = 2048) -> ir.Program:
    _check_heads("transformer_transducer", hidden, heads)
    n = Net(lang)
    x = n.linear(n.input("x", [steps, features]), hidden)
    for _ in range(layers):
        x = _encoder_layer(n, x, heads, ffn, gelu=False)
    return n.program("transformer_transducer", [_layer_norm(n, x)])
