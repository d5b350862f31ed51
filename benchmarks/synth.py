"""Issue 61's goals that eqdsl can measure today: `eqdsl synthesize` and `eqdsl derive`.

- arith: synthesize (default settings), then derive arith's rules with the synthesized set, and the
  synthesized rules with arith's (which of ours are new); seconds for synthesis (goal ≤ 60 s).
- acsum (examples/acsum, a language with its own `_ref.py`) and rational (examples/rational: analyses,
  whose constant folds synthesis writes): the same; and rational again with a second run at size 3
  over add and mul whose `--prior` is the first set (its distributivity needs three operators); the
  README's first language (examples/first) at size 3: its own concat and column splits give its merge.
- derive as a yardstick: TASO's rules derive themselves; the empty set (`tensor`) derives none of
  them; no sound set derives an unsound rule (the unsound guarded rules, rational's unsound analyses,
  guards and folds, every mutant of TASO's).
- tensor (not in the default parts: about 30 min): synthesize over six of TASO's operators at a
  matrix and an NCHW shape (`TENSOR_RUN`), then how many of TASO's single- and multi-pattern rules
  the result derives, how many of ours TASO's derive (the rest are new), `verify` of every rule.

    .venv/bin/python benchmarks/synth.py [--parts synth,yardstick,tensor]
"""
from __future__ import annotations

import argparse
import json
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
EQDSL = [sys.executable, "-m", "eqdsl"]


def _eqdsl(*argv: str) -> tuple[str, float]:
    t0 = time.perf_counter()
    done = subprocess.run(EQDSL + list(argv), capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"eqdsl {' '.join(argv)} failed: {done.stderr[-400:]}")
    return done.stdout.strip().splitlines()[-1], time.perf_counter() - t0


def synth_part() -> list[dict]:
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        rational = str(ROOT / "examples/rational/rational.eqr")
        for name, ref, more in (("arith", "arith", []), ("acsum", str(ROOT / "examples/acsum/acsum.eqr"), []),
                                ("rational", rational, []),
                                ("rational, + size 3 over add, mul", rational,
                                 ["--size", "3", "--ops", "add,mul", "--prior", str(Path(tmp) / "rational-synth.eqr")]),
                                ("first (size 3)", str(ROOT / "examples/first/mats.eqr"), ["--size", "3"])):
            out = Path(tmp) / f"{name.split(',')[0]}{'-more' if more else ''}-synth.eqr"
            wrote, seconds = _eqdsl("synthesize", ref, "-o", str(out), *more)
            theirs, _ = _eqdsl("derive", str(out), ref)
            ours, _ = _eqdsl("derive", ref, str(out), "--all")
            new = [line.split()[2] for line in _eqdsl_lines("derive", ref, str(out)) if line.startswith("not derived")]
            verified, _ = _eqdsl("verify", str(out), "--examples", "500", "--seed", "1")
            rows.append({"language": name, "synthesize": wrote, "seconds": round(seconds, 1),
                         "synthesized derives shipped": theirs, "shipped derives synthesized": ours,
                         "new (not derived by the shipped rules)": len(new), "verify 500 examples, seed 1": verified})
    return rows


def _eqdsl_lines(*argv: str) -> list[str]:
    return subprocess.run(EQDSL + list(argv), capture_output=True, text=True).stdout.splitlines()


def yardstick_part() -> list[dict]:
    from dataclasses import replace

    from eqdsl.frontend import load_language
    from eqdsl.schedule.runner import Limits
    from eqdsl.synth.derive import Verdict, derive

    from mutants import mutants

    rows = []
    for a, b in (("tensat", "tensat"), ("tensor", "tensat"),
                 ("tensat", str(ROOT / "tests/data/unsound_guards_tensor.eqr")),
                 ("arith", str(ROOT / "tests/data/unsound_guards_arith.eqr")),
                 (str(ROOT / "examples/rational/rational.eqr"), str(ROOT / "tests/data/unsound_analyses.eqr"))):
        line, seconds = _eqdsl("derive", a, b)
        rows.append({"a": Path(a).stem, "b": Path(b).name, "result": line, "seconds": round(seconds, 1)})
    tensat = load_language("tensat")
    unsound = tuple(mutants(tensat.rules))
    t0 = time.perf_counter()
    found = derive(tensat, replace(tensat, rules=unsound), Limits(8, 20_000, 10))
    derived = sum(d.verdict is Verdict.DERIVED for d in found)
    rows.append({"a": "tensat", "b": f"every mutant of TASO's rules ({len(unsound)})",
                 "result": f"derived {derived} of {len(found)}", "seconds": round(time.perf_counter() - t0, 1)})
    return rows


TENSOR_RUN = ("synthesize", "tensor", "--ops", "ewadd,ewmul,relu,matmul,concat,conv2d", "--size", "3", "--vars", "4",
              "--shape", "3,3", "--shape", "2,2,3,3", "--values", "stride_h=1", "--values", "stride_w=1",
              "--values", "pad=0", "--values", "act=0,2", "--values", "axis=0,1", "--time-limit", "1800")


def tensor_part(keep: str | None = None) -> list[dict]:
    """`keep`: where to copy the synthesized file (for `benchmarks/tensat.py --ruleset`)."""
    with tempfile.TemporaryDirectory() as tmp:
        out = str(Path(tmp) / "tensor-synth.eqr")
        wrote, seconds = _eqdsl(*TENSOR_RUN, "-o", out)
        if keep:
            shutil.copyfile(out, keep)
        lines = _eqdsl_lines("derive", out, "tensat", "--time-limit", "3")
        missed = [line.split()[2] for line in lines if line.startswith("not ")]
        single = [name for name in missed if name.startswith("taso-s")]
        ours, _ = _eqdsl("derive", "tensat", out, "--time-limit", "3")
        verified, _ = _eqdsl("verify", out, "--examples", "100", "--seed", "1")
        return [{"run": " ".join(TENSOR_RUN), "synthesize": wrote, "seconds": round(seconds, 1),
                 "derives TASO's": lines[-1], "single-pattern derived": f"{124 - len(single)} of 124",
                 "not derived": " ".join(missed), "TASO's derive ours": ours, "verify seed 1": verified}]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--parts", default="synth,yardstick")
    ap.add_argument("--keep", help="copy the tensor part's synthesized rules to this (new) file")
    args = ap.parse_args()
    if args.keep and Path(args.keep).exists():
        ap.error(f"--keep {args.keep}: exists (give a new file)")
    print(f"# {platform.machine()}, {platform.python_version()}, {subprocess.getoutput('nproc')} cores", flush=True)
    for name in args.parts.split(","):
        print(f"## {name}", flush=True)
        for row in {"synth": synth_part, "yardstick": yardstick_part, "tensor": lambda: tensor_part(args.keep)}[name]():
            print(json.dumps(row), flush=True)


if __name__ == "__main__":
    main()
