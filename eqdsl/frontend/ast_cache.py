"""Parsed `.eqr` files kept in the user's cache folder (`eqdsl.user_cache`), so that a run does not
parse the same shipped rule set again (`fusions` with its includes: ~0.2 s of every `eqdsl
optimize`, the largest part of its start after the imports).

Contract: `cached_parse(text, file, parse)` returns what `parse(text, file)` returns. An entry is
keyed by a hash of the text, the file's name (spans name it) and the parser itself (the grammar,
`ast.py` and `parse.py` as installed, and the Python version): a change to any of them misses. An
entry is written whole (temporary file, then rename) or not at all; one that cannot be read, or
reads as something else than a `Module`, is parsed again and replaced. Syntax errors are not
cached. Like lark's grammar cache, entries are pickles: the folder is the user's own.
"""
from __future__ import annotations

import functools
import hashlib
import os
import pickle
import re
import sys
import tempfile
from collections.abc import Callable
from importlib import resources
from pathlib import Path

from eqdsl.frontend import ast
from eqdsl.frontend import parse as parse_module
from eqdsl.user_cache import user_cache_dir

KEPT = 64  # entries at most: the oldest go when more are written
_ENTRY = re.compile(r"[0-9a-f]{32}\.pickle")  # an entry's name: `_key`'s digest


def cached_parse(text: str, file: str, parse: Callable[[str, str], ast.Module]) -> ast.Module:
    folder = user_cache_dir() / "eqr-ast"
    entry = folder / f"{_key(text, file)}.pickle"
    try:
        with entry.open("rb") as f:
            module = pickle.load(f)
        if isinstance(module, ast.Module) and module.file == file:
            os.utime(entry)  # the oldest unused go first (`_trim`)
            return module
    except Exception:  # noqa: BLE001 - missing, damaged or from elsewhere: parse it again
        pass
    module = parse(text, file)
    _store(folder, entry, module)
    return module


def _key(text: str, file: str) -> str:
    digest = hashlib.sha256(_parser_version().encode())
    for part in (file, text):
        digest.update(b"\0" + part.encode())
    return digest.hexdigest()[:32]


@functools.cache
def _parser_version() -> str:
    sources = [resources.files("eqdsl.grammars").joinpath("eqr.lark").read_bytes()]
    sources += [Path(m.__file__).read_bytes() for m in (ast, parse_module) if m.__file__]
    digest = hashlib.sha256(sys.version.encode())
    for source in sources:
        digest.update(source)
    return digest.hexdigest()


def _store(folder: Path, entry: Path, module: ast.Module) -> None:
    try:
        folder.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=folder, prefix=".entry-", suffix=".tmp")
        try:
            with os.fdopen(fd, "wb") as f:
                pickle.dump(module, f, protocol=pickle.HIGHEST_PROTOCOL)
            os.replace(tmp, entry)
        finally:
            if os.path.exists(tmp):
                os.unlink(tmp)
        _trim(folder)
    except (OSError, pickle.PicklingError, RecursionError):  # a read-only home, a full disk: parse next time too
        pass


def _trim(folder: Path) -> None:
    """Remove the least recently used entries past `KEPT`: only files named as `_key` names them."""
    entries = sorted((p for p in folder.glob("*.pickle") if _ENTRY.fullmatch(p.name)), key=lambda p: p.stat().st_mtime)
    for old in entries[:-KEPT]:
        old.unlink(missing_ok=True)
