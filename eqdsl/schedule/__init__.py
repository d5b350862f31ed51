"""Schedules: how the e-graph is grown under limits (saturate now; pulsed and MCTS next)."""
