"""Fluidity's exceptions. Every error a user can cause names what is at fault (variable, op,
shape, file) instead of surfacing as a bare KeyError from deep inside."""


class FluidityError(Exception):
    """Base class of every error Fluidity raises on purpose."""


class ProgramError(FluidityError):
    """A program (or a file claiming to hold one) is malformed."""


class UnknownOpError(ProgramError):
    """An op type that the registry does not know."""


class FormatError(FluidityError, ValueError):
    """Bytes that are not a valid file of the kind expected (tensor record, program,
    parameter file, DataFeedDesc): bad version, truncated, corrupt. A ValueError, as the
    bad value is the input's. The message names the file (when there is one) and the field."""


class ShapeError(FluidityError):
    """Shapes that do not fit together, found at build or run time."""


class FeedError(FluidityError):
    """A fed value does not match the variable it feeds (name, shape, dtype)."""


class FetchError(FluidityError):
    """A fetch target the program cannot provide."""


class VariableNotFoundError(FluidityError, KeyError):
    """A variable an op or a user asked for is in neither the program nor the scope."""

    def __str__(self):  # KeyError would repr() the message
        return str(self.args[0]) if self.args else ""


class ExecutionError(FluidityError):
    """A kernel failed while running an op; the message names the op, its inputs and shapes."""

    def __init__(self, message, op_type=None, op_index=None, cause=None):
        super().__init__(message)
        self.op_type = op_type
        self.op_index = op_index
        self.cause = cause


# -- loaders (h2-loaders) -----------------------------------------------------------------
class ProgramFormatError(FormatError, ProgramError):
    """A serialized ProgramDesc that is corrupt: not protobuf, a required field missing,
    invalid UTF-8 in a string, an unknown enum value, an impossible shape, a block or
    sub-block index out of range. Both a FormatError and a ProgramError, so callers that
    catch either see it."""
