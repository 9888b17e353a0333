"""Exception types shared across the harness."""


class BenchError(Exception):
    """Base class for errors the CLI reports as a one-line message."""


class SpecError(BenchError, ValueError):
    """A run specification is invalid. The message names the field and the value."""


class UnknownNameError(SpecError):
    """A name was not found in a registry. The message lists the valid names."""


class UsageError(BenchError):
    """A command-line or cluster description the user can fix (the CLI exits 2).

    Raised by the CLI's parsing and by the multi-host worker when its cluster does not
    fit the configuration; one class, so the CLI has one thing to catch.
    """


class Unsupported(BenchError):
    """A configuration cannot run on this machine (recorded as status `unsupported`)."""


class SchemaError(BenchError):
    """A stored result has an unknown or incompatible schema version, or is corrupt."""
