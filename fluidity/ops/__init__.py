"""Every op family registers its ops on import; `registry` finds them (`fluidity ops`)."""
from . import registry
from . import (activation, control_flow, conv, creation, feed_fetch, indexing, io_ops,  # noqa: F401
               logic, lookup, loss, math, memory_ops, metric, nn, norm, optimizer_ops, recurrent,
               reduce, rnn, sequence, shape_ops, tensor, tensor_array)
from .registry import OpDef, all_ops, find, get, has
from . import reader_ops  # noqa: F401
from . import print_op  # noqa: F401
