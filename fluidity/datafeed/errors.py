"""Errors of the data side: bad DataFeedDesc configs and malformed data lines."""
from ..errors import FluidityError, FormatError


class DataError(FluidityError):
    """A data file or a data-feed config is malformed, or names something that does not
    exist. When the fault is in a file, `path` and `line` (1-based) say where."""

    def __init__(self, message, path=None, line=None):
        where = f"{path}:{line}: " if path is not None and line is not None else ""
        super().__init__(where + message)
        self.path = path
        self.line = line
        self.reason = message


class DataFeedDescError(DataError, FormatError):
    """A DataFeedDesc config that is not valid text-format protobuf, or whose fields do not
    make a MultiSlot layout (a FormatError, so a ValueError): names the file, and the line or
    the field."""


class DataWarning(UserWarning):
    """Something in the data was skipped (see MultiSlotReader's skip_bad_lines)."""
