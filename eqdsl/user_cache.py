"""Where eqdsl keeps what it can always make again: `$XDG_CACHE_HOME/eqdsl`, else `~/.cache/eqdsl`
(the timing cache, `eqdsl.cost.cache`; the `.eqr` grammar's parse tables, `eqdsl.frontend.parse`;
parsed `.eqr` files, `eqdsl.frontend.ast_cache`).
Nothing there is a user's: a file in it may be replaced or ignored, never trusted for results."""
from __future__ import annotations

import os
from pathlib import Path


def user_cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "eqdsl"
