"""The `.eqr` front end: Lark grammar → frozen AST dataclasses with spans."""
