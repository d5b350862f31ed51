"""Program sources: where the program a run optimizes comes from (`program:` in a run config).

Every source implements `ProgramSource` (`base`) and is found by name in `registry`: `.eqr`
programs (`eqr`), the TENSAT model builders (`models`), and sources applications register
through the `eqdsl.program_sources` entry-point group (Q-gym's `conv_layer`).
"""
