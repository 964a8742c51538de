"""Fluidity's exceptions. Every error a user can cause names what is at fault (variable, op,
shape, file) instead of surfacing as a bare KeyError from deep inside.

Each also subclasses the builtin exception Fluid raises for the same fault, so a Fluid
program's `except ValueError:` / `pytest.raises(TypeError)` keeps working: bad shapes,
feeds, fetches and malformed programs are ValueErrors (Fluid's `check_feed_shape_type`,
`Block.var` and the shape checks raise ValueError), wrong argument types are TypeErrors
(Fluid's `check_type` / `check_variable_and_dtype`), a failing kernel is a RuntimeError.

What Fluid raises from its C++ checks, `fluid.core.EnforceNotMet`, is `EnforceNotMet` here:
the base of the errors an op's own checks raise (its shape inference when it is built, its
kernel when it runs, a fed value it cannot take, a gradient it has no rule for), so a Fluid
program's `except fluid.core.EnforceNotMet` catches what Fluid's would."""


class FluidityError(Exception):
    """Base class of every error Fluidity raises on purpose."""


class EnforceNotMet(FluidityError):
    """`fluid.core.EnforceNotMet`: an op's check failed (Fluid's PADDLE_ENFORCE). Raised as
    one of its subclasses, each also the builtin type Fluid's Python checks raise for the
    same fault (ShapeError and FeedError: ValueError; ExecutionError: RuntimeError)."""


class ProgramError(FluidityError, ValueError):
    """A program (or a file claiming to hold one) is malformed."""


class UnknownOpError(ProgramError):
    """An op type that the registry does not know."""


class FormatError(EnforceNotMet, ValueError):
    """Bytes that are not a valid file of the kind expected (tensor record, program,
    parameter file, DataFeedDesc): bad version, truncated, corrupt. A ValueError, as the
    bad value is the input's. The message names the file (when there is one) and the field."""


class ShapeError(EnforceNotMet, ValueError):
    """Shapes that do not fit together, found at build or run time."""


class ShapeAssertionError(ShapeError, AssertionError):
    """A shape argument Fluid refuses with an assert (reshape's shape with two -1s, a 0
    past X's rank, a negative dim): an AssertionError as well as a ShapeError."""


class FeedError(EnforceNotMet, ValueError):
    """A fed value does not match the variable it feeds (name, shape, dtype)."""


class FetchError(FluidityError, ValueError):
    """A fetch target the program cannot provide."""


class VariableNotFoundError(FluidityError, KeyError, ValueError):
    """A variable an op or a user asked for is in neither the program nor the scope."""

    def __str__(self):  # KeyError would repr() the message
        return str(self.args[0]) if self.args else ""


class ArgumentTypeError(FluidityError, TypeError):
    """A layer or API was given an argument of the wrong type (a numpy array where a
    Variable is needed, a str where a list is)."""


class MissingDtypeError(ArgumentTypeError, AssertionError):
    """A Python scalar to make a tensor of, without the dtype to make it in (Fluid asserts
    this, so it is an AssertionError as well as a TypeError)."""


class RunError(FluidityError, RuntimeError):
    """Something a run needs is missing or unusable (no dataset for train_from_dataset)."""


class DeviceError(FluidityError, RuntimeError):
    """A device this Fluidity cannot run on was asked for (a CUDA place without CUDA)."""


class FlagError(FluidityError, ValueError):
    """A global flag that does not exist, or a value it cannot take."""


class DTypeError(FluidityError, ValueError, TypeError):
    """A dtype Fluidity does not know or cannot use there (a TypeError too: Fluid's
    convert_np_dtype_to_dtype_ raises numpy's TypeError for an unknown dtype name)."""


class EOFException(FluidityError):
    """A reader ran out of data (Paddle's `fluid.core.EOFException`): raised by `exe.run`
    of a program fed by a started, non-iterable reader when the reader is exhausted;
    the training loop catches it, calls `reader.reset()` and starts the next pass."""


class ExecutionError(EnforceNotMet, RuntimeError):
    """A kernel failed while running an op; the message names the op, its inputs and shapes."""

    def __init__(self, message, op_type=None, op_index=None, cause=None):
        super().__init__(message)
        self.op_type = op_type
        self.op_index = op_index
        self.cause = cause


class ReaderError(EnforceNotMet, RuntimeError):
    """A data source failed in another process (multiprocess_reader's reader): Fluid's
    loaders surface that as core.EnforceNotMet to the loop reading batches."""


class NoGradientError(EnforceNotMet, NotImplementedError):
    """A gradient was asked for through an op that has no gradient rule (a second-order
    gradient through a grad op without one); the message names the op."""


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


def declined_class(name, why, methods=()):
    """A class standing for a Fluid class Fluidity does not build: constructing it, or
    calling any of `methods` (Fluid's method names, so a program gets this message rather
    than an AttributeError), raises NotImplementedError saying why."""
    ns = {"__doc__": f"fluid.{name} is not built in Fluidity: {why}",
          "__fluidity_declined__": why, "__init__": declined(name, why)}
    for m in methods:
        ns[m] = declined(f"{name}.{m}", why)
    return type(name.rsplit(".", 1)[-1], (), ns)


# -- loaders (h2-loaders) -----------------------------------------------------------------
class ProgramFormatError(FormatError, ProgramError):
    """A serialized ProgramDesc that is corrupt: not protobuf, a required field missing,
    invalid UTF-8 in a string, an unknown enum value, an impossible shape, a block or
    sub-block index out of range. Both a FormatError and a ProgramError, so callers that
    catch either see it."""
