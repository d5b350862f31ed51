"""Per-language Python: importers, model builders (and, with the soundness issue, semantics)."""
