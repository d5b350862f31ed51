"""What every kernel backend shares: the error a kernel raises for arguments it cannot run (output
sizes and padding are the language's, `eqdsl.languages.tensor.codes`)."""
from __future__ import annotations


class Unsupported(ValueError):
    """A kernel cannot run these arguments (callers fall back to another implementation)."""
