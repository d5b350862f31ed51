"""Running programs for real: the timing cache (`cache`), operator timing backends and measured
costs (`measure`)."""
