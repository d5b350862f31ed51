"""Lowering of the checked IR to egglog."""
