"""eqdsl: optimize programs by equality saturation from a declarative `.eqr` language.

`eqdsl.load`, `eqdsl.program` and `eqdsl.optimize` are the library's interface (`eqdsl.api`),
imported on first use: `import eqdsl` loads nothing else.
"""
from typing import Any

__version__ = "0.1.0"
__all__ = ["load", "program", "optimize"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        from eqdsl import api

        return getattr(api, name)
    raise AttributeError(f"module 'eqdsl' has no attribute {name!r}")
