"""Exception types shared across the harness."""


class BenchError(Exception):
    """Base class for errors the CLI reports as a one-line message."""


class SpecError(BenchError, ValueError):
    """A run specification is invalid. The message names the field and the value."""


class UnknownNameError(SpecError):
    """A name was not found in a registry. The message lists the valid names."""


class Unsupported(BenchError):
    """A configuration cannot run on this machine (recorded as status `unsupported`)."""


class SchemaError(BenchError):
    """A stored result has an unknown or incompatible schema version, or is corrupt."""
