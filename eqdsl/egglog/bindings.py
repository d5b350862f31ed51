"""egglog's Rust bindings (`egglog.bindings`), the one way eqdsl reaches egglog.

Contract: `bindings()` returns the extension module, loaded on first use (importing eqdsl, as
`eqdsl --help` does, loads no egglog). eqdsl uses only the bindings (`EGraph`,
`parse_and_run_program`, `EggSmolError`, the serialized e-graph), never egglog's Python layer; so
the extension is loaded from the installed `egglog` package without running that package's
`__init__`, which imports the whole Python layer (black, the visualizer, ...): 0.15 s of every
run's start. Where that cannot be done (another packaging of egglog), the plain import is used.
"""
from __future__ import annotations

import functools
import importlib.machinery
import importlib.util
import sys
from pathlib import Path
from types import ModuleType

NAME = "egglog.bindings"


@functools.cache
def bindings() -> ModuleType:
    if NAME in sys.modules:
        return sys.modules[NAME]
    module = _extension_alone()
    if module is None:
        from egglog import bindings as imported

        return imported
    return module


def _extension_alone() -> ModuleType | None:
    package = importlib.util.find_spec("egglog")  # finding a top-level package runs none of it
    folders = list(package.submodule_search_locations or []) if package is not None else []
    for folder in folders:
        for suffix in importlib.machinery.EXTENSION_SUFFIXES:
            path = Path(folder) / f"bindings{suffix}"
            if path.is_file():
                spec = importlib.util.spec_from_file_location(NAME, path)
                if spec is None or spec.loader is None:
                    return None
                module = importlib.util.module_from_spec(spec)
                spec.loader.exec_module(module)
                sys.modules[NAME] = module  # a later `import egglog` reuses it
                return module
    return None
