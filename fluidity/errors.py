"""Fluidity's exceptions. Every error a user can cause names what is at fault (variable, op,
shape, file) instead of surfacing as a bare KeyError from deep inside."""


class FluidityError(Exception):
    """Base class of every error Fluidity raises on purpose."""


class ProgramError(FluidityError):
    """A program (or a file claiming to hold one) is malformed."""


class UnknownOpError(ProgramError):
    """An op type that the registry does not know."""


class FormatError(FluidityError):
    """Bytes that are not a valid file of the kind expected (tensor record, program,
    parameter file): bad version, truncated, corrupt."""


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


def declined(name, why):
    """A stand-in for a Fluid name Fluidity does not build: calling it (or constructing it)
    raises NotImplementedError saying `fluid.<name>` is not built and why, so a program
    stops at the line that needs it rather than somewhere later. It carries
    `__fluidity_declined__` (the reason), which `scripts/api_coverage.py` counts as
    declined; docs/api.md lists each one."""
    message = f"fluid.{name} is not built in Fluidity: {why}"

    def not_built(*args, **kwargs):
        raise NotImplementedError(message)

    not_built.__name__ = name.rsplit(".", 1)[-1]
    not_built.__qualname__ = not_built.__name__
    not_built.__doc__ = message
    not_built.__fluidity_declined__ = why
    return not_built
