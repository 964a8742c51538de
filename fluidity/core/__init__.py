from . import dtypes
from .dtypes import VarType
from .place import CPUPlace, CUDAPlace, Place
from .scope import Scope, Variable, global_scope, scope_guard
from .tensor import (LoDTensor, LoDTensorArray, SelectedRows, Tensor, as_lod_tensor,
                     create_lod_tensor)
from .reader import EOFException
