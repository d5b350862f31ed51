"""Every `eqdsl.x.y` a docstring names exists: a module, or a name in one (a renamed or moved
module leaves no stale reference behind)."""
from __future__ import annotations

import ast
import importlib
import re

import pytest

from conftest import ROOT

DOTTED = re.compile(r"\beqdsl(?:\.[A-Za-z_][A-Za-z0-9_]*)+")
GROUP = re.compile(r'Registry\("[^"]*", "(eqdsl\.[a-z_]+)"')  # entry-point groups: names, not modules


def _groups() -> set[str]:
    return {g for path in (ROOT / "eqdsl").rglob("*.py") for g in GROUP.findall(path.read_text())}


def _docstrings(tree: ast.Module) -> list[str]:
    nodes = [tree, *(n for n in ast.walk(tree) if isinstance(n, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)))]
    return [doc for n in nodes if (doc := ast.get_docstring(n)) is not None]


def _references() -> list[tuple[str, str]]:
    found = []
    for path in sorted((ROOT / "eqdsl").rglob("*.py")):
        for doc in _docstrings(ast.parse(path.read_text())):
            found += [(str(path.relative_to(ROOT)), name.rstrip(".")) for name in DOTTED.findall(doc)]
    groups = _groups()
    return sorted({(file, name) for file, name in found if name not in groups})


def _resolves(dotted: str) -> bool:
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:cut]))
        except ModuleNotFoundError:
            continue
        for name in parts[cut:]:
            fields = getattr(obj, "__dataclass_fields__", {})
            if name in fields and not hasattr(obj, name):  # a dataclass field without a default
                return True
            if not hasattr(obj, name):
                return False
            obj = getattr(obj, name)
        return True
    return False


def test_docstrings_name_references():
    assert len(_references()) > 50


@pytest.mark.parametrize("file,dotted", _references())
def test_a_name_in_a_docstring_exists(file, dotted):
    assert _resolves(dotted), f"{file}: {dotted} names nothing"
