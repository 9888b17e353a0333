"""The parent side of the process boundary: plan, start, supervise, sweep.

Never imports TensorFlow (checked by ``make lint``): a TF process cannot change
its devices once started, so every run lives in fresh child processes
(``bench.child``) that this package starts under hard deadlines.
"""
