"""Q-gym (PACT 2022) in eqdsl: quantized convolution layers as multi-root scalar expressions."""
