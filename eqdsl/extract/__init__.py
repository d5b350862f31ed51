"""Extraction: choose one e-node per needed e-class so the program is cheapest (DAG cost)."""
