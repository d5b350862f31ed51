"""Exports: the optimized program in another system's format, run there beside the input
(`export:` in a run config). `base` is the interface, `registry` finds one by name, `onnx` writes
ONNX models and checks them under ONNX Runtime."""
