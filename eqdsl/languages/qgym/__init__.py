"""The `qgym` language's Python."""
