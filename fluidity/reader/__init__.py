"""Readers: `paddle.reader`'s decorators (fluidity.reader.shuffle, ...)."""
from . import decorator  # noqa: F401
from .decorator import *  # noqa: F401,F403
