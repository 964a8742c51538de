from . import dtypes
from .dtypes import VarType
from .place import CPUPlace, CUDAPlace, Place
from .scope import Scope, Variable, global_scope, scope_guard
from .tensor import (LoDTensor, LoDTensorArray, SelectedRows, Tensor, as_lod_tensor,
                     create_lod_tensor)

# Fluid's fluid.core names (h4-api): VarDesc.VarType, the CUDA questions, the pinned place,
# Fluid's test helper tensor and the reader-exhausted exception.
from .dtypes import VarDesc  # noqa: E402
from .place import (CUDAPinnedPlace, get_cuda_device_count, is_compiled_with_cuda,  # noqa: E402
                    is_compiled_with_mkldnn)
from .tensor import create_random_int_lodtensor  # noqa: E402
from ..errors import EOFException  # noqa: E402,F401 -- Paddle's fluid.core.EOFException
from ..errors import EnforceNotMet  # noqa: E402,F401 -- what Fluid's op checks raise
