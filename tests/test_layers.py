"""The package's layering, read from its imports (every `import`, also inside functions).

A package may import itself, any package of a lower layer, and nothing else: not a package of
its own layer (frontend and extract sit side by side, neither knows the other), not one above.
egglog is imported only in `eqdsl/egglog/`; the core never imports an application (`eqdsl.apps`).
"""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

from conftest import ROOT

PACKAGE = ROOT / "eqdsl"

# bottom → top; a unit is a subpackage or a top-level module of eqdsl
LAYERS: list[set[str]] = [
    {"diagnostics", "user_cache"},
    {"graphs", "worker", "fields", "status", "registry"},
    {"output"},
    {"ir"},
    {"frontend", "extract", "languages"},
    {"cost"},
    {"egglog", "verify", "importers", "onnx", "kernels"},
    {"schedule", "execute"},
    {"sources", "exports", "synth"},
    {"config"},
    {"stages"},
    {"pipeline"},
    {"report_graph"},
    {"report_page"},
    {"report"},
    {"sweep"},
    {"api", "cli"},
    {"__main__"},
    {"apps"},
]
RANK = {unit: i for i, layer in enumerate(LAYERS) for unit in layer}
EXTERNAL_HOMES = {"egglog": {"egglog"}}  # external package → the only units that may import it


def _unit(module: str) -> str | None:
    parts = module.split(".")
    return parts[1] if parts[0] == "eqdsl" and len(parts) > 1 else None


def _module_name(path: Path) -> str:
    rel = path.relative_to(ROOT).with_suffix("")
    parts = rel.parts[:-1] if rel.name == "__init__" else rel.parts
    return ".".join(parts)


def _imports(path: Path, module: str) -> list[tuple[str, int]]:
    """(imported module, line) for every import in the file, relative ones resolved."""
    tree = ast.parse(path.read_text())
    here = module.split(".")
    package = here if path.name == "__init__.py" else here[:-1]
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(alias.name, node.lineno) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(package[:len(package) - node.level + 1] + ([base] if base else []))
            found.append((base, node.lineno))
            found += [(f"{base}.{alias.name}", node.lineno) for alias in node.names]
    return found


def _sources() -> list[Path]:
    return sorted(PACKAGE.rglob("*.py"))


def test_every_unit_has_a_layer():
    units = {p.relative_to(PACKAGE).parts[0].removesuffix(".py") for p in _sources()} - {"__init__"}
    assert units <= set(RANK), f"place {sorted(units - set(RANK))} in LAYERS"


def _violations(files: list[tuple[Path, str]]) -> list[str]:
    """Every import of the (file, module name) pairs that breaks the layering."""
    bad = []
    for path, name in files:
        unit = _unit(name)
        if unit is None:
            continue
        for module, line in _imports(path, name):
            where = f"{path.name}:{line}"
            top = module.split(".")[0]
            if top in EXTERNAL_HOMES and unit not in EXTERNAL_HOMES[top]:
                bad.append(f"{where}: {unit} imports {top} (only {sorted(EXTERNAL_HOMES[top])} may)")
            other = _unit(module)
            if other is None or other == unit or other not in RANK:
                continue
            if RANK[other] >= RANK[unit]:
                bad.append(f"{where}: {unit} (layer {RANK[unit]}) imports {module} (layer {RANK[other]})")
    return bad


def test_imports_only_go_down():
    assert _violations([(p, _module_name(p)) for p in _sources()]) == []


def test_the_checker_sees_a_violation(tmp_path):
    """The test itself can fail: a module of `ir` importing `pipeline` and egglog is reported."""
    fake = tmp_path / "_layer_probe.py"
    fake.write_text("def f():\n    from eqdsl.pipeline import run_pipeline\n    import egglog\n")
    bad = _violations([(fake, "eqdsl.ir._layer_probe")])
    assert any("_layer_probe.py:2: ir" in b and "pipeline" in b for b in bad)
    assert any("_layer_probe.py:3: ir imports egglog" in b for b in bad)


@pytest.mark.parametrize("app_free", ["eqdsl.pipeline", "eqdsl.report", "eqdsl.cli", "eqdsl.config"])
def test_core_never_names_an_application(app_free):
    name = app_free.split(".", 1)[1]
    paths = sorted((PACKAGE / name).rglob("*.py")) if (PACKAGE / name).is_dir() else [PACKAGE / f"{name}.py"]
    assert paths and not [p for p in paths if "qgym" in p.read_text().lower()]


MODULE_LINES = 400  # a module holds one concept; past this it holds two (issue 62)


def test_every_module_is_under_the_line_limit():
    long = {str(p.relative_to(ROOT)): n for p in _sources() if (n := len(p.read_text().splitlines())) >= MODULE_LINES}
    assert long == {}, f"split these by concept: {long}"


FUNCTION_LINES = 40  # DESIGN §9: a function does one thing; its docstring is not counted


def _body_lines(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> int:
    body = fn.body
    if len(body) > 1 and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
        body = body[1:]  # the docstring
    return (fn.end_lineno or fn.lineno) - body[0].lineno + 1


def test_every_function_is_under_the_line_limit():
    long = {f"{p.relative_to(ROOT)}:{fn.name}": n for p in _sources() for fn in ast.walk(ast.parse(p.read_text()))
            if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)) and (n := _body_lines(fn)) > FUNCTION_LINES}
    assert long == {}, f"split these: {long}"
