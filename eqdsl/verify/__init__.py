"""Soundness: reference semantics, rule verification (`eqdsl verify`), translation validation."""
