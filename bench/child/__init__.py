"""Inside a run's process: the only side of stratbench that imports TensorFlow.

``python -m bench.child`` is the entry point the launcher starts (``main.py``);
device setup, strategy construction, the measured loop, memory and the probes
live here. Nothing outside this package (and ``workloads.models``) may import
TensorFlow or Keras; ``make lint`` checks it.
"""
