"""The `.eqr` front end: grammar and parse (`parse`, `ast`), checking into the IR (`check/`), and
loading files with their includes (`load`). Stages above use the loaders re-exported here.
"""
from eqdsl.frontend.load import (
                                 check_modules,
                                 load_language,
                                 load_modules,
                                 load_program_file,
                                 load_program_text,
                                 resolve_ruleset,
                                 shipped_rulesets,
)

__all__ = ["check_modules", "load_language", "load_modules", "load_program_file", "load_program_text",
           "resolve_ruleset", "shipped_rulesets"]
