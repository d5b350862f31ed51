"""The `arith` language's Python."""
