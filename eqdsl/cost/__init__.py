"""Pricing, in one home: the `CostModel` protocol and the cost-rule model (`model`), measured costs
over a measuring backend (`measured`) with their SQLite timing cache (`cache`), target files
(`targets`), and the target kinds a run config names (`registry`)."""
