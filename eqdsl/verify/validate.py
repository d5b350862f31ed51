"""Translation validation: the extracted program computes what the input program computes.

Contract: `validate(lang, original, optimized, samples, seed)` evaluates both programs with the
reference semantics on `samples` sets of random inputs (leaf values keyed by the leaf, so both
programs read the same numbers; a model's own weights where given) and returns a `Validation`:
`ok` when every root agrees within rtol 1e-6 (atol scaled to the output's magnitude), else the
largest difference and where; not `ok` with the samples done when `limit_s` seconds pass first
(a reference function that never returns).
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from typing import Mapping, cast

import numpy as np

from eqdsl import ir, status
from eqdsl.verify.semantics import (
    SemanticsError,
    SharedTerms,
    evaluate_program,
    largest_difference,
    load_semantics,
    magnitude,
)
from eqdsl.worker import TimeUp, alarm

RTOL = 1e-6


@dataclass(frozen=True)
class Validation:
    samples: int
    max_error: float
    ok: bool
    message: str


def _model_weight(weights: Mapping[str, np.ndarray], leaf: ir.TermNode) -> np.ndarray | None:
    if leaf.op != "weight" or str(leaf.args[0]) not in weights:
        return None
    value = np.asarray(weights[str(leaf.args[0])])
    value = value.astype(np.float64) if value.dtype.kind == "f" else value  # an opaque operator's int8 weights
    return value.reshape(tuple(cast(tuple, leaf.args[1])))


def _progress(sample: int, samples: int, which: str):
    def say(done: int, total: int) -> None:
        status.update(note=f"sample {sample + 1}/{samples}, {which} program: node {done}/{total}")
    return say


def validate(lang: ir.Language, original: ir.Program, optimized: ir.Program,
             samples: int, seed: int, run_ref: bool = True,
             weights: Mapping[str, np.ndarray] | None = None, limit_s: float | None = None) -> Validation:
    """`weights`: the model's own values for its `weight` leaves (a Resize's scales, a Reshape's
    target); every other leaf is drawn at random."""
    sem = load_semantics(lang, run_ref)
    done: list[int] = []
    try:
        with alarm(limit_s, TimeUp):
            return _compared(original, optimized, sem, samples, seed, weights, done)
    except TimeUp:
        return Validation(len(done), float("nan"), False,
                          f"not validated: stopped after {limit_s:g} s (validate.time_limit_s) with {len(done)} of "
                          f"{samples} sample(s) compared (a reference function that does not return, or a program too "
                          "large for the limit)")


def _compared(original: ir.Program, optimized: ir.Program, sem: dict, samples: int, seed: int,
              weights: Mapping[str, np.ndarray] | None, done: list[int]) -> Validation:
    """`done` gets one entry per sample compared."""
    known = None if not weights else partial(_model_weight, weights)
    worst, where = 0.0, ""
    for k in range(samples):
        shared = SharedTerms()  # what both programs compute alike is computed once
        try:
            want = evaluate_program(original, sem, seed + k, known, shared, _progress(k, samples, "input"))
            got = evaluate_program(optimized, sem, seed + k, known, shared, _progress(k, samples, "extracted"))
        except SemanticsError as err:
            return Validation(k, float("nan"), False, f"sample {k}: {err}")
        if len(want) != len(got):
            return Validation(k, float("inf"), False, f"{len(want)} roots in, {len(got)} out")
        for i, (w, g) in enumerate(zip(want, got)):
            difference = largest_difference(w, g)
            scale = max(1.0, magnitude(w))
            if difference / scale > worst:
                worst, where = difference / scale, f"root {i}, sample {k} (|difference| {difference:.3g})"
        done.append(k)
    ok = worst <= RTOL
    verdict = "agree" if ok else "DISAGREE"
    return Validation(samples, worst, ok, f"input and extracted programs {verdict} on {samples} "
                                          f"random input(s); largest relative difference {worst:.3g}"
                                          + (f" at {where}" if where else ""))
