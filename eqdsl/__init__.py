"""eqdsl: optimize programs by equality saturation from a declarative `.eqr` language.

`eqdsl.load`, `eqdsl.program` and `eqdsl.optimize` are the library's interface (`eqdsl.api`),
imported on first use: `import eqdsl` loads nothing else. `eqdsl.EqdslError` is what they raise for
a user's mistake (its `diagnostics` say where, what was expected and what was found).
"""
from typing import Any

__version__ = "0.1.0"
__all__ = ["load", "program", "optimize", "EqdslError"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        from eqdsl import api

        return getattr(api, name)
    raise AttributeError(f"module 'eqdsl' has no attribute {name!r}")
