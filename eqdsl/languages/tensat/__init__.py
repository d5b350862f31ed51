"""The `tensat` language's Python."""
