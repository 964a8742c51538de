"""Data types: Paddle's VarType codes <-> numpy dtypes <-> the names users write."""
import numpy as np

from ..errors import DTypeError
from ..proto import framework_pb2 as pb

VarType = pb.VarType  # VarType.FP32, VarType.LOD_TENSOR, ... (Paddle's numbers)

_NP_OF_CODE = {
    VarType.BOOL: np.dtype(np.bool_),
    VarType.INT16: np.dtype(np.int16),
    VarType.INT32: np.dtype(np.int32),
    VarType.INT64: np.dtype(np.int64),
    VarType.FP16: np.dtype(np.float16),
    VarType.FP32: np.dtype(np.float32),
    VarType.FP64: np.dtype(np.float64),
    VarType.SIZE_T: np.dtype(np.uint64),
    VarType.UINT8: np.dtype(np.uint8),
    VarType.INT8: np.dtype(np.int8),
    VarType.COMPLEX64: np.dtype(np.complex64),
    VarType.COMPLEX128: np.dtype(np.complex128),
    VarType.UINT32: np.dtype(np.uint32),
    VarType.UINT64: np.dtype(np.uint64),
}
_CODE_OF_NP = {v: k for k, v in _NP_OF_CODE.items()}
_CODE_OF_NP[np.dtype(np.uint64)] = VarType.UINT64

_CODE_OF_NAME = {
    "bool": VarType.BOOL, "int16": VarType.INT16, "int32": VarType.INT32, "int64": VarType.INT64,
    "float16": VarType.FP16, "float32": VarType.FP32, "float64": VarType.FP64,
    "uint8": VarType.UINT8, "int8": VarType.INT8, "bfloat16": VarType.BF16,
    "complex64": VarType.COMPLEX64, "complex128": VarType.COMPLEX128,
    "uint32": VarType.UINT32, "uint64": VarType.UINT64,
    "float": VarType.FP32, "double": VarType.FP64, "int": VarType.INT32, "long": VarType.INT64,
}
_NAME_OF_CODE = {VarType.BOOL: "bool", VarType.INT16: "int16", VarType.INT32: "int32",
                 VarType.INT64: "int64", VarType.FP16: "float16", VarType.FP32: "float32",
                 VarType.FP64: "float64", VarType.UINT8: "uint8", VarType.INT8: "int8",
                 VarType.BF16: "bfloat16", VarType.COMPLEX64: "complex64",
                 VarType.COMPLEX128: "complex128", VarType.UINT32: "uint32",
                 VarType.UINT64: "uint64", VarType.SIZE_T: "size_t"}

FLOAT_TYPES = frozenset({VarType.FP16, VarType.FP32, VarType.FP64, VarType.BF16})

# the C type generated code (fluidity/codegen, compiled op forms) gives each dtype it handles
C_TYPES = {VarType.FP32: "float", VarType.FP64: "double", VarType.INT64: "int64_t",
           VarType.INT32: "int32_t", VarType.BOOL: "bool", VarType.UINT8: "uint8_t",
           VarType.INT8: "int8_t"}
CODE_OF_C_TYPE = {c: t for t, c in C_TYPES.items()}


def numpy_of_ctype(ctype):
    """The numpy dtype of a C type in C_TYPES ('float' -> float32)."""
    return _NP_OF_CODE[CODE_OF_C_TYPE[ctype]]


def to_code(dtype):
    """Any dtype spelling (VarType code, numpy dtype/type, 'float32') -> VarType code."""
    if isinstance(dtype, (int, np.integer)) and not isinstance(dtype, bool):
        if int(dtype) in _NAME_OF_CODE:
            return int(dtype)
        raise DTypeError(f"unknown VarType dtype code {dtype}")
    if isinstance(dtype, str) and dtype in _CODE_OF_NAME:
        return _CODE_OF_NAME[dtype]
    try:
        return _CODE_OF_NP[np.dtype(dtype).newbyteorder("=")]
    except (TypeError, KeyError):
        raise DTypeError(f"unsupported dtype {dtype!r}; use one of {sorted(_CODE_OF_NAME)}") from None


def to_numpy(dtype):
    """Any dtype spelling -> numpy dtype."""
    code = to_code(dtype)
    try:
        return _NP_OF_CODE[code]
    except KeyError:
        raise DTypeError(f"dtype {name(code)} has no numpy equivalent on CPU") from None


def name(dtype):
    """Readable name of a dtype: 'float32'."""
    return _NAME_OF_CODE.get(to_code(dtype), str(dtype))


def is_float(dtype):
    return to_code(dtype) in FLOAT_TYPES


class _VarDescClass(type):
    """`isinstance(var.desc, core.VarDesc)` holds for a variable's desc message."""

    def __instancecheck__(cls, obj):
        from ..proto.framework_pb2 import VarDesc as message   # proto sits beside core
        return isinstance(obj, message)


class VarDesc(metaclass=_VarDescClass):
    """`fluid.core.VarDesc`, as Fluid programs use it: the home of the VarType enum
    (`core.VarDesc.VarType.FP32`, `core.VarDesc.VarType.LOD_TENSOR`). A variable's own desc
    is the protobuf VarDesc message (`var.desc`), read with Paddle's `shape()`, `dtype()`,
    `lod_level()` (fluidity/ir/desc_api.py)."""
    VarType = VarType


# -- what a file may name (loaders check TensorDescs against these) ------------------------
# every VarType code that is a tensor element type (FP8 has no numpy dtype, as BF16)
CODES = frozenset(_NAME_OF_CODE) | {VarType.FP8_E4M3FN, VarType.FP8_E5M2}
# the element types a tensor can hold on CPU here (numpy has them)
NUMPY_CODES = frozenset(_NP_OF_CODE)


def numpy_of_code(code):
    """The numpy dtype of a VarType element code, or None when numpy has none (bfloat16,
    fp8) or the code is not an element type: for readers of files, which must not raise."""
    return _NP_OF_CODE.get(code)
