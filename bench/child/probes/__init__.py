"""Probes beyond throughput, whatever the lane: profiles and their trace parser, peak
FLOP/s (theoretical, the achievable peak's cache and MFU). Each lane measures its own
achievable peak and all-reduce (TensorFlow's: bench.child.backends.tf.peak, allreduce).

Modules import TensorFlow only inside the functions that need it, so the sweep
parent can import the package (for definitions and pure helpers) without it.
"""
