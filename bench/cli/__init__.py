"""The command line: argument parsing only, one module per subcommand (``main.py``
lists them). Never imports TensorFlow; ``make lint`` checks it."""
