"""Everything derived from stored results. Never imports TensorFlow."""
