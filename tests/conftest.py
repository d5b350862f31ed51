from __future__ import annotations

import sys
from pathlib import Path

import pytest
from numba import config as numba_config

# The suite runs Numba's parallel kernels in its own process and then forks eqdsl's worker from it
# (`run_cli`); GNU OpenMP, Numba's default layer here, aborts such a child. The `eqdsl` command runs
# no Q-gym kernel before it forks (its operator kernels take workqueue in eqdsl/kernels/cpu.py), and
# Q-gym's kernels keep OpenMP for speed (workqueue measured 2-6x slower on them), so only the suite
# takes the fork-safe layer.
numba_config.THREADING_LAYER = "workqueue"  # type: ignore[attr-defined]

ROOT = Path(__file__).resolve().parent.parent
CORPUS = ROOT / "tests" / "corpus"
EXAMPLES = ROOT / "examples"
sys.path.insert(0, str(ROOT / "benchmarks"))  # benchmark data generators (synthetic.py)


@pytest.fixture
def run_cli(capfd):
    """Run `eqdsl ...` in-process; return (exit code, stdout, stderr)."""
    from eqdsl.cli import main

    def run(*argv: str):
        code = main([str(a) for a in argv])
        out = capfd.readouterr()
        return code, out.out, out.err

    return run


def run_let_chain(tmp_path, run_cli, step: str, length: int, settings: str) -> tuple[int, str, str]:
    """`eqdsl run --quiet` (ruleset arith) on a program of `length` lets over var("a"), each
    `step` of the one before (`{prev}`), the last the root; `settings`: the config's other keys."""
    lines = ['program chain:', '  let t0 = var("a")'] + [f"  let t{i} = {step.format(prev=f't{i - 1}')}"
                                                          for i in range(1, length + 1)]
    (tmp_path / "chain.eqr").write_text("\n".join(lines + [f"  root t{length}"]) + "\n")
    (tmp_path / "c.yaml").write_text(f"ruleset: arith\nprogram: chain.eqr\n{settings}")
    return run_cli("run", tmp_path / "c.yaml", "--quiet")
