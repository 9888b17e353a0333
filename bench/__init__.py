"""stratbench: measure TensorFlow distribution strategies on your own hardware.

The package is importable without TensorFlow; only the child process that runs
a configuration (``bench.child``) imports it.
"""

__version__ = "0.1.0"
