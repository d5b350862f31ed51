"""ONNX in and out: `read` (an ONNX model → a `tensat` program and its weights), `write` (a
program and weights → an ONNX model), `weights` (where weight values come from), `runtime`
(ONNX Runtime runs and times two models on the same inputs)."""
