from . import dtypes
from .dtypes import VarDesc, VarType
from .place import (CPUPlace, CUDAPinnedPlace, CUDAPlace, Place, get_cuda_device_count,
                    is_compiled_with_cuda, is_compiled_with_mkldnn)
from .scope import Scope, Variable, global_scope, scope_guard
from .tensor import (LoDTensor, LoDTensorArray, SelectedRows, Tensor, as_lod_tensor,
                     create_lod_tensor, create_random_int_lodtensor)
from ..errors import EOFException  # noqa: E402 -- Paddle's fluid.core.EOFException
