"""Probes beyond throughput: all-reduce in isolation, profiles, peak FLOP/s.

Modules import TensorFlow only inside the functions that need it, so the sweep
parent can import the package (for definitions and pure helpers) without it.
"""
