"""Schedules: how the e-graph is grown under limits (saturate, pulsed, mcts)."""
