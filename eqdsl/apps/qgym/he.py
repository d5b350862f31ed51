"""Homomorphic-encryption cost of layer expressions (CryptoNets-style SIMD batching).

Every input activation is one ciphertext (a batch of inputs in its slots); weights and biases
are plaintext integers. A node is a ciphertext when it depends on an activation. Priced ops:
plaintext×ciphertext multiplies, ciphertext+ciphertext adds, plaintext+ciphertext adds (the
bias of every output); plaintext-only nodes (sums of weight levels a rule made) are folded when
the circuit is built and cost nothing.

Contract: `he_counts(program, positions)` counts the program once per output position group;
`dense_he_counts(spec, positions)` is the dense layer's count; `run_bfv(program, spec, weights,
batch)` evaluates the program under TenSEAL's BFV on random small integers and returns whether
every decrypted output equals NumPy's integer result (TenSEAL imported lazily).
"""
from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass

import numpy as np

from eqdsl import ir
from eqdsl.apps.qgym.baselines import reachable_nodes
from eqdsl.apps.qgym.layer import LayerSpec


@dataclass(frozen=True)
class HeCounts:
    pt_ct_mul: int
    ct_ct_add: int
    pt_ct_add: int
    ct_ct_mul: int = 0  # never produced by the qgym rules (weights stay the plaintext factor)

    def scaled(self, n: int) -> "HeCounts":
        return HeCounts(self.pt_ct_mul * n, self.ct_ct_add * n, self.pt_ct_add * n, self.ct_ct_mul * n)


def _is_cipher(program: ir.Program) -> list[bool]:
    cipher: list[bool] = []
    for node in program.nodes:
        kids = [cipher[a.index] for a in node.args if isinstance(a, ir.Child)]
        cipher.append(node.op in ("x", "leaf") or any(kids))
    return cipher


def he_counts(program: ir.Program, positions: int = 1, biases: bool = True) -> HeCounts:
    cipher = _is_cipher(program)
    kinds = Counter()
    for i in reachable_nodes(program):
        node = program.nodes[i]
        if node.op in ("add", "mul") and cipher[i]:  # plaintext-only nodes are folded
            both = all(cipher[a.index] for a in node.args)
            kinds[(node.op, both)] += 1
    return HeCounts(kinds[("mul", False)], kinds[("add", True)],
                    kinds[("add", False)] + (len(program.roots) if biases else 0),
                    kinds[("mul", True)]).scaled(positions)


def dense_he_counts(spec: LayerSpec, positions: int = 1, biases: bool = True) -> HeCounts:
    return HeCounts(spec.outputs * spec.window, spec.outputs * (spec.window - 1),
                    spec.outputs if biases else 0).scaled(positions)


def run_bfv(program: ir.Program, weights: np.ndarray, batch: int = 8, seed: int = 0,
            x_max: int = 15) -> tuple[bool, float]:
    """Encrypt a batch of random inputs in [0, x_max] (one ciphertext per activation), evaluate
    the program's roots (one output position, tpr 0) under BFV, decrypt, compare with the integer
    layer. Returns (all equal, seconds)."""
    import tenseal as ts

    k, c, r, s = weights.shape
    rng = np.random.default_rng(seed)
    x = rng.integers(0, x_max + 1, size=(batch, c, r, s))
    expected = np.einsum("kcrs,bcrs->bk", weights, x)
    bound = int(np.abs(weights).sum(axis=(1, 2, 3)).max()) * x_max
    ctx = ts.context(ts.SCHEME_TYPE.BFV, poly_modulus_degree=4096, plain_modulus=1032193)
    if 2 * bound >= 1032193:
        raise ValueError(f"outputs up to {bound} do not fit BFV's plain modulus 1032193")
    t0 = time.perf_counter()
    values: list = []
    for node in program.nodes:
        args = [values[a.index] if isinstance(a, ir.Child) else a for a in node.args]
        match node.op:
            case "x":
                rr, ss, cc = args
                values.append(ts.bfv_vector(ctx, [int(v) for v in x[:, cc, rr, ss]]))
            case "w":
                values.append(int(args[0]))
            case "add":
                a, b = args
                values.append(b + a if isinstance(a, int) else a + b)  # ciphertext on the left
            case "mul":
                a, b = args
                values.append(b * a if isinstance(a, int) else a * b)
            case op:
                raise ValueError(f"BFV run: unsupported operator {op!r}")
    got = np.array([values[root].decrypt() for root in program.roots]).T  # [batch, K]
    return bool(np.array_equal(got, expected)), time.perf_counter() - t0
