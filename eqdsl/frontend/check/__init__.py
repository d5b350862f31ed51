"""Name resolution and type checking of parsed `.eqr` modules into the IR (`eqdsl.ir`)."""
