from __future__ import annotations

import sys
from pathlib import Path

import pytest

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
