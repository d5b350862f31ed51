"""ONNX in and out: `read` (an ONNX model → a `tensat` program and its weights), `write` (a
program and weights → an ONNX model), `weights` (where weight values come from), `runtime`
(ONNX Runtime runs and times two models on the same inputs)."""

from eqdsl.diagnostics import EqdslError


def require_onnx() -> None:
    """Raise a user-facing error when the optional `onnx` extra is not installed."""
    try:
        import onnx  # noqa: F401
        import onnxruntime  # noqa: F401
    except ImportError as err:
        raise EqdslError.one(f"ONNX support needs the `onnx` extra ({err.name} is not installed): "
                             "pip install 'eqdsl[onnx]'") from None
