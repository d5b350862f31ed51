"""Costs: evaluate `cost` rules on shapes and parameters (targets come with the TENSAT issue)."""
