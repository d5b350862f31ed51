"""The `tensor` language's Python."""
