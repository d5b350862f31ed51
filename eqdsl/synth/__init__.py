"""Rules from semantics: `derive` (which rules of one set another proves by equality saturation)
and, built on it, rule synthesis."""
