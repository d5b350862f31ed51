"""Importers: other systems' files → `.eqr` (TASO rules in TENSAT's format today; ONNX next)."""
