"""The boundary with egglog — the only package that imports it: lowering a checked language to
egglog commands (`lower`, `terms`, `sexp`), the e-graph session (`session`), and the live view of
a serialized e-graph as an extraction problem with shapes and costs (`live`).
"""
