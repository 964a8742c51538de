from . import dtypes
from .dtypes import VarType
from .place import CPUPlace, CUDAPlace, Place
from .scope import (Scope, Variable, get_fetch_variable, global_scope, scope_guard,
                    set_feed_variable)
from .tensor import (LoDTensor, LoDTensorArray, SelectedRows, Tensor, as_lod_tensor,
                     create_lod_tensor)

# Fluid's fluid.core names (h4-api): VarDesc.VarType, the CUDA questions, the pinned place,
# Fluid's test helper tensor and the reader-exhausted exception.
from .dtypes import VarDesc  # noqa: E402
from .place import (CUDAPinnedPlace, get_cuda_device_count, is_compiled_with_cuda,  # noqa: E402
                    is_compiled_with_mkldnn)
from .tensor import create_random_int_lodtensor  # noqa: E402
from ..errors import EOFException  # noqa: E402,F401 -- Paddle's fluid.core.EOFException

# what Paddle's OpTest harness asks of fluid.core (the op questions are installed by
# fluidity/op.py, which sits above the op registry)
from .flags import globals  # noqa: E402,F401,A004
from . import flags as _flags  # noqa: E402
from .names import op_proto_and_checker_maker  # noqa: E402,F401
from ..errors import EnforceNotMet  # noqa: E402,F401 -- what Fluid's op checks raise

# Fluid 1.8's fluid.core names that programs and tests reach for beyond the above: the graph
# view of a program, a bare ProgramDesc, the reserved names and op-role attribute names, and
# switches of Paddle's C++ runtime that have nothing to switch here.
from .graph import Graph, Node  # noqa: E402,F401
from .names import EMPTY_VAR_NAME as _EMPTY, GRAD_SUFFIX as _GRAD  # noqa: E402
from .names import TEMP_VAR_NAME as _TEMP  # noqa: E402
from . import names  # noqa: E402
from ..proto import framework_pb2 as _pb  # noqa: E402

AttrType = _pb.AttrType


class _DescClass(type):
    """Metaclass of Paddle's `core.ProgramDesc` / `core.BlockDesc`: `isinstance(d,
    core.ProgramDesc)` holds for our desc messages, which is what Fluid code asks when it
    walks a program's objects (the message classes themselves cannot be subclassed)."""

    def __instancecheck__(cls, obj):
        return isinstance(obj, cls._message)


class ProgramDesc(metaclass=_DescClass):
    """`core.ProgramDesc()`: a new ProgramDesc message with its global block, or a copy of
    `other`; serialized bytes are read, checked, by `fluid.Program.parse_from_string`."""
    _message = _pb.ProgramDesc

    def __new__(cls, other=None):
        desc = _pb.ProgramDesc()
        if isinstance(other, (bytes, bytearray)):
            raise TypeError("core.ProgramDesc(bytes): read serialized bytes with "
                            "fluid.Program.parse_from_string(data), which checks them")
        if other is not None:
            desc.CopyFrom(other)
            return desc
        b = desc.blocks.add()
        b.idx, b.parent_idx = 0, -1
        return desc


class BlockDesc(metaclass=_DescClass):
    """`core.BlockDesc`, for isinstance checks: a block's desc is made by its program
    (`ProgramDesc.append_block`), never alone."""
    _message = _pb.BlockDesc

    def __new__(cls, *args, **kwargs):
        raise TypeError("core.BlockDesc cannot be made alone: use "
                        "program_desc.append_block(parent)")


def grad_var_suffix():
    return _GRAD


def empty_var_name():
    return _EMPTY


def kEmptyVarName():  # noqa: N802 -- Paddle's name
    return _EMPTY


def kTempVarName():  # noqa: N802
    return _TEMP


def kGradVarSuffix():  # noqa: N802
    return _GRAD


def kZeroVarSuffix():  # noqa: N802
    return names.ZERO_SUFFIX


def kControlDepVarName():  # noqa: N802
    return names.CONTROL_DEP_VAR_PREFIX


def kNewGradSuffix():  # noqa: N802 -- the dense gradient of a sparse one plus its decay
    return "@NEWGRAD@"


def _set_eager_deletion_mode(threshold, fraction, fast_mode):
    """Fluid's garbage-collection switch: sets FLAGS_eager_delete_tensor_gb (a negative
    threshold turns collection off), FLAGS_memory_fraction_of_eager_deletion and
    FLAGS_fast_eager_deletion_mode. `core.Executor` runs that keep their variables in the
    caller's scope free the temporaries while it is on (executor/core_executor.py)."""
    _flags.set_flags({"FLAGS_eager_delete_tensor_gb": float(threshold),
                     "FLAGS_memory_fraction_of_eager_deletion": float(fraction),
                     "FLAGS_fast_eager_deletion_mode": bool(fast_mode)})


def _set_process_signal_handler():
    """Paddle installs C++ signal handlers for its reader processes; nothing to install."""


def __unittest_throw_exception__():  # noqa: N807 -- Paddle's name
    """Raise the EnforceNotMet Fluid's C++ checks raise (Paddle's binding of the same name,
    which tests call to check that such an error reaches Python with its message)."""
    raise EnforceNotMet("test exception")
