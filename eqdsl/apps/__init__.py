"""Applications built on eqdsl's public API (`eqdsl.pipeline`, the registries). The core never
imports them; they plug in through entry points (`pyproject.toml`, `eqdsl.program_sources`).
"""
