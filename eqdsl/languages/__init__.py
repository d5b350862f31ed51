"""Per-language Python, one package per `.eqr` language (`eqdsl/languages/<name>/`): its reference
semantics (`semantics.py`, a `SEMANTICS` table found by `eqdsl.verify.semantics` from the
language's name) and, where a language has them, program builders (`tensat/models.py`).
"""
