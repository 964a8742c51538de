"""Every op family registers its ops on import; `registry` finds them (`fluidity ops`)."""
from . import registry
from . import (activation, control_flow, creation, feed_fetch, io_ops,  # noqa: F401
               logic, lookup, loss, math, memory_ops, metric, nn, optimizer_ops, reduce, rnn,
               sequence, tensor)
from .registry import OpDef, all_ops, find, get, has
