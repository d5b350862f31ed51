"""Multi-branch CNNs of TENSAT's benchmark: Inception-v3 and NasNet-A, batch 1.

Inception-v3 follows Szegedy et al. 2016 as torchvision and TASO build it (299×299: stem, 3×A,
B, 4×C, D, 2×E, 8×8 average pool, 1000-way classifier). NasNet-A follows TASO's `nasnet_a.py`:
a 7×7/2 stem and 3×3/2 max pool, then 3 stages of 5 normal cells and 1 reduction cell, C = 128
channels doubling per stage; separable convolutions are a depthwise convolution (groups = input
channels) followed by a 1×1 convolution.
"""
from __future__ import annotations

from eqdsl import ir
from eqdsl.diagnostics import EqdslError
from eqdsl.ir.builder import Tensor
from eqdsl.languages.tensat.nets import SAME, VALID, Net


# ---- Inception-v3 ----
def _inception_a(n: Net, x: Tensor, pool_features: int) -> Tensor:
    b1 = n.conv(x, 64, (1, 1))
    b5 = n.conv(n.conv(x, 48, (1, 1)), 64, (5, 5))
    b3 = n.conv(n.conv(n.conv(x, 64, (1, 1)), 96, (3, 3)), 96, (3, 3))
    bp = n.conv(n.avgpool(x, 3, 1), pool_features, (1, 1))
    return n.concat(1, [b1, b5, b3, bp])


def _inception_b(n: Net, x: Tensor) -> Tensor:
    b3 = n.conv(x, 384, (3, 3), (2, 2), VALID)
    bd = n.conv(n.conv(n.conv(x, 64, (1, 1)), 96, (3, 3)), 96, (3, 3), (2, 2), VALID)
    return n.concat(1, [b3, bd, n.maxpool(x, 3, 2, VALID)])


def _inception_c(n: Net, x: Tensor, c7: int) -> Tensor:
    b1 = n.conv(x, 192, (1, 1))
    b7 = n.conv(n.conv(n.conv(x, c7, (1, 1)), c7, (1, 7)), 192, (7, 1))
    bd = n.conv(x, c7, (1, 1))
    for out, k in [(c7, (7, 1)), (c7, (1, 7)), (c7, (7, 1)), (192, (1, 7))]:
        bd = n.conv(bd, out, k)
    bp = n.conv(n.avgpool(x, 3, 1), 192, (1, 1))
    return n.concat(1, [b1, b7, bd, bp])


def _inception_d(n: Net, x: Tensor) -> Tensor:
    b3 = n.conv(n.conv(x, 192, (1, 1)), 320, (3, 3), (2, 2), VALID)
    b7 = n.conv(n.conv(n.conv(x, 192, (1, 1)), 192, (1, 7)), 192, (7, 1))
    b7 = n.conv(b7, 192, (3, 3), (2, 2), VALID)
    return n.concat(1, [b3, b7, n.maxpool(x, 3, 2, VALID)])


def _inception_e(n: Net, x: Tensor) -> Tensor:
    b1 = n.conv(x, 320, (1, 1))
    b3 = n.conv(x, 384, (1, 1))
    b3 = n.concat(1, [n.conv(b3, 384, (1, 3)), n.conv(b3, 384, (3, 1))])
    bd = n.conv(n.conv(x, 448, (1, 1)), 384, (3, 3))
    bd = n.concat(1, [n.conv(bd, 384, (1, 3)), n.conv(bd, 384, (3, 1))])
    bp = n.conv(n.avgpool(x, 3, 1), 192, (1, 1))
    return n.concat(1, [b1, b3, bd, bp])


def inceptionv3(lang: ir.Language, size: int = 299, classes: int = 1000) -> ir.Program:
    if size < 75:
        raise EqdslError.one(f"inceptionv3: the input must be at least 75×75 for its valid "
                             f"convolutions and pools, got {size}", path="program.size")
    n = Net(lang)
    x = n.conv(n.input("x", [1, 3, size, size]), 32, (3, 3), (2, 2), VALID)
    x = n.conv(n.conv(x, 32, (3, 3), pad=VALID), 64, (3, 3))
    x = n.maxpool(x, 3, 2, VALID)
    x = n.conv(n.conv(x, 80, (1, 1), pad=VALID), 192, (3, 3), pad=VALID)
    x = n.maxpool(x, 3, 2, VALID)
    for pool_features in (32, 64, 64):
        x = _inception_a(n, x, pool_features)
    x = _inception_b(n, x)
    for c7 in (128, 160, 160, 192):
        x = _inception_c(n, x, c7)
    x = _inception_d(n, x)
    x = _inception_e(n, _inception_e(n, x))
    x = n.avgpool(x, x.dims[2], 1, VALID)
    x = n.matmul(n.g.reshape(x, [1, x.dims[1]]), classes)
    return n.program("inceptionv3", [x])


# ---- NasNet-A ----
def _squeeze(n: Net, x: Tensor, out_c: int) -> Tensor:
    return n.conv(x, out_c, (1, 1))


def _fit(n: Net, cur: Tensor, prev: Tensor) -> Tensor:
    """Bring the previous cell's output to the current one's channels and size."""
    if prev.dims[2] == cur.dims[2]:
        return _squeeze(n, prev, cur.dims[1])
    return n.conv(prev, cur.dims[1], (3, 3), (2, 2))


def _separable(n: Net, x: Tensor, out_c: int, k: int, stride: int = 1) -> Tensor:
    depthwise = n.conv(x, x.dims[1], (k, k), (stride, stride), SAME, relu=False, groups=x.dims[1])
    return n.conv(depthwise, out_c, (1, 1))


def _normal_cell(n: Net, prev: Tensor, cur: Tensor, c: int) -> Tensor:
    cur = _squeeze(n, cur, c)
    prev = _fit(n, cur, prev)
    pairs = [(_separable(n, cur, c, 3), cur),
             (_separable(n, prev, c, 3), _separable(n, cur, c, 3)),
             (n.avgpool(cur, 3, 1), prev),
             (n.avgpool(prev, 3, 1), n.avgpool(prev, 3, 1)),
             (_separable(n, prev, c, 3), _separable(n, prev, c, 3))]
    return n.concat(1, [n.add(a, b) for a, b in pairs])


def _reduction_cell(n: Net, prev: Tensor, cur: Tensor, c: int) -> Tensor:
    cur = _squeeze(n, cur, c)
    prev = _fit(n, cur, prev)
    o0 = n.add(_separable(n, prev, c, 7, 2), _separable(n, cur, c, 5, 2))
    o1 = n.add(n.maxpool(cur, 3, 2), _separable(n, prev, c, 7, 2))
    o2 = n.add(n.avgpool(cur, 3, 2), _separable(n, prev, c, 5, 2))
    o3 = n.add(n.maxpool(cur, 3, 2), _separable(n, o0, c, 3))
    o4 = n.add(n.avgpool(o0, 3, 1), o1)
    return n.concat(1, [o0, o1, o2, o3, o4])


def nasneta(lang: ir.Language, size: int = 224, channels: int = 128, stages: int = 3,
            normal_cells: int = 5) -> ir.Program:
    if size % (4 * 2 ** stages):
        raise EqdslError.one(f"nasneta: the input size must be a multiple of {4 * 2 ** stages} "
                             f"(stem /4, then /2 per stage), got {size}", path="program.size")
    n = Net(lang)
    x = n.conv(n.input("x", [1, 3, size, size]), 64, (7, 7), (2, 2))
    x = n.maxpool(x, 3, 2)
    c = channels
    for _ in range(stages):
        prev = cur = x
        for _ in range(normal_cells):
            prev, cur = cur, _normal_cell(n, prev, cur, c)
        c *= 2
        x = _reduction_cell(n, prev, cur, c)
    return n.program("nasneta", [x])
