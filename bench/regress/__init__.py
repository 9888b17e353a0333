"""Regression tracking: history of results, comparisons with their statistics,
the nightly job, the trend plot and the pytest-benchmark plugin. No TensorFlow."""
