"""The nightly benchmark matrix, run with `pytest benchmarks/ --benchmark-only`."""
