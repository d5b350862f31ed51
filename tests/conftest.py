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
