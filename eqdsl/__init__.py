"""eqdsl: optimize programs by equality saturation from a declarative `.eqr` language."""
__version__ = "0.1.0"
