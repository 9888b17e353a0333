"""Measurement scripts of the harness's own figures, each run as a module from the
repository root (``python -m scripts.<name>``, or its ``make`` target); they import the
installed ``bench`` and ``reports`` packages like any other user of them."""
