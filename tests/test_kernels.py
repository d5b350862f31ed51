"""Kernels against the reference semantics on random shapes: Numba CPU here, Numba CUDA on the
simulator (a subprocess with NUMBA_ENABLE_CUDASIM=1) and, with `pytest -m gpu`, on a real GPU."""
from __future__ import annotations

import importlib
import os
import subprocess
import sys

import numpy as np
import pytest

from eqdsl.languages.tensor.ops import OPS as TABLE
from eqdsl.languages.tensor.semantics import SEMANTICS

from conftest import ROOT

OPS = [spec.name for spec in TABLE if spec.cpu is not None]  # every kernel the table names (CUDA: the same)


def cases(op: str, rng: np.random.Generator, small: bool) -> list[tuple]:
    """Argument tuples in the reference's order; `small` keeps the simulator quick."""
    r = lambda *shape: rng.standard_normal(shape).astype(np.float32)  # noqa: E731
    s = 5 if small else 9
    match op:
        case "matmul":
            return [(act, r(2, 17, 33), r(2, 33, 18)) for act in (0, 2)] + [(3, r(20, 7), r(7, 5))]
        case "conv2d":
            direct = [(sh, sh, pad, act, r(2, 4, s, s + 1), r(8, 4 // g, kh, kh))
                      for sh, pad, act, g, kh in [(1, 0, 2, 1, 3), (2, 1, 0, 2, 3), (2, 0, 1, 4, 1), (1, 0, 3, 1, 2)]]
            gemm = [(sh, sh, pad, act, r(2, 16, s, s + 1), r(12, 16 // g, kh, kh))  # ≥ 16 multiply-adds deep
                    for sh, pad, act, g, kh in [(1, 0, 2, 1, 3), (2, 1, 0, 2, 3), (1, 0, 0, 1, 1), (2, 0, 1, 1, 2)]]
            return direct + gemm
        case "poolmax" | "poolavg":
            return [(r(2, 3, s, s + 2), k, k, st, st, pad, act) for k, st, pad, act in [(3, 1, 0, 0), (2, 2, 1, 2), (3, 2, 0, 0)]]
        case "ewadd" | "ewmul":
            return [(r(2, 3, s, s), r(2, 3, s, s)), (r(2, 3, s, s), r(1, 3, 1, 1)), (r(3, 1, s), r(s))]
        case "transpose":
            return [(r(2, 3, s), (2, 0, 1)), (r(2, 3, 4, s), (0, 2, 1, 3)), (r(s, 3), (1, 0))]
        case "concat" | "concat3" | "concat4" | "concat5":
            parts = 2 if op == "concat" else int(op[-1])
            return [(axis, *[r(2, 3 + i, s) if axis == 1 else r(2, 3, s + i) for i in range(parts)]) for axis in (1, 2)]
        case "split":
            return [(1, 2, r(2, 5, s)), (2, 1, r(2, 3, s))]
        case "enlarge":
            return [(r(4, 2, 1, 1), r(4, 2, 3, 3)), (r(4, 2, 3, 1), r(1, 1, 5, 3))]
        case "merge":
            return [(r(8, 2, 3, 3), 2), (r(6, 1, 1, 1), 3)]
        case "pad2d":
            return [(r(2, 3, s, s), 1, 0, 2, 1, fill) for fill in (0, 1)]
        case "batchnorm":
            return [(r(2, 3, s, s + 1), r(3), r(3), r(3), r(3))]
        case "hardswish":  # both bends (-3, 3) well inside the drawn range
            return [(4 * r(3, 4, s),)]
        case _:
            return [(r(3, 4, s),)]


def check_all(backend: str, small: bool) -> list[str]:
    """Every op's cases on `backend` (cpu | cuda); the list of disagreements (empty: all agree)."""
    kernels = importlib.import_module(f"eqdsl.kernels.{backend}")
    rng = np.random.default_rng(0)
    failures = []
    for op in OPS:
        for args in cases(op, rng, small):
            expected, got = SEMANTICS[op](*args), kernels.run(op, *args)
            pairs = zip(expected, got) if isinstance(expected, tuple) else [(expected, got)]
            for want, have in pairs:
                want = np.asarray(want, np.float64)
                if have.shape != want.shape or not np.allclose(have, want, rtol=1e-4, atol=1e-4):
                    failures.append(f"{op} {[getattr(a, 'shape', a) for a in args]}: shape {have.shape} vs {want.shape}")
    return failures


def test_cpu_kernels_agree_with_the_reference():
    assert check_all("cpu", small=False) == []


def test_a_wrong_kernel_is_caught(monkeypatch):
    from eqdsl.kernels import cpu

    monkeypatch.setitem(cpu.RUNNERS, "relu", lambda a: np.abs(a))
    assert any(f.startswith("relu") for f in check_all("cpu", small=True))


def _in_subprocess(env: dict[str, str]) -> subprocess.CompletedProcess:
    script = ("import sys; sys.path.insert(0, 'tests'); from test_kernels import check_all; "
              "bad = check_all('cuda', small=True); print('\\n'.join(bad) or 'ok')")
    return subprocess.run([sys.executable, "-c", script], env=env, cwd=ROOT, capture_output=True, text=True,
                          timeout=600)


def test_cuda_kernels_agree_on_the_simulator():
    done = _in_subprocess(dict(os.environ, NUMBA_ENABLE_CUDASIM="1"))
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stdout[-2000:] + done.stderr[-2000:]


@pytest.mark.gpu
def test_cuda_kernels_agree_on_the_gpu():
    env = {k: v for k, v in os.environ.items() if k != "NUMBA_ENABLE_CUDASIM"}
    done = _in_subprocess(env)
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stdout[-2000:] + done.stderr[-2000:]
