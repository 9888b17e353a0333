"""The adaptive sweep: what to measure next, when to stop, and the provisional answers.

Below the command line and above both the launcher (``bench.launch``: it runs the
sessions) and the answers (``bench.answers.places``: what is open, and
``bench.answers.sequential``: the looks), so that ``bench.cli.run`` only reads its
arguments and calls ``budgeted_sweep`` (``bench.adaptive.sweep``); the policy itself is
in ``bench.adaptive.budget``. It imports nothing from the reports: the provisional
answers are shown by a function the command line hands it (``ShowAnswers``).
pyproject.toml's import contracts hold both sides to it.
"""
