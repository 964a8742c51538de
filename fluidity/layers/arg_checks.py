"""Fluid 1.8's argument checks of its layers, as one table: which arguments must be Variables
of which dtypes (Fluid's `check_variable_and_dtype`) and which must be of which Python types
(`check_type`), each a TypeError naming the layer, the argument and what it got, as Fluid
raises them. The table holds facts of Fluid 1.8's API (argument names, dtype names); the
checks run before the layer builds anything, so a refused call leaves the program as it was.

`checked(name, fn)` wraps layer `name` (the package applies it to every layer listed). A
check of an argument whose value is None is skipped (Fluid checks optional arguments only
when given). DTYPE: the argument must be a Variable of one of the dtypes; DTYPE_IF_VARIABLE:
if it is a Variable, of one of them (Fluid checks it so where the argument may also be a
number or a list); DTYPE_EACH: a Variable or a list of them, each of the dtypes;
DTYPE_NAME: the argument is a dtype (a name, numpy dtype or VarType code) that must be one
of them; TYPE: it must be one of the Python types.
"""
import functools
import inspect

import numpy as np

from ..core import dtypes
from ..errors import DTypeError
from ..framework import Program, Variable, check_dtype, check_type

DTYPE, DTYPE_IF_VARIABLE, DTYPE_NAME, TYPE = "dtype", "dtype if variable", "dtype name", "type"
DTYPE_EACH = "dtype of each"
_TYPES = {"Variable": Variable, "str": str, "int": int, "float": float, "list": list,
          "tuple": tuple, "bool": bool, "None": type(None), "dict": dict,
          "ndarray": np.ndarray, "Program": Program, "set": set}

# layer -> ((DTYPE, argument, allowed dtypes) | (TYPE, argument, allowed types), ...)
CHECKS = {
    'Print': ((DTYPE, 'input', ('float32', 'float64', 'int32', 'int64', 'bool')),),
    'abs': ((DTYPE, 'x', ('int32', 'int64', 'float16', 'float32', 'float64')),),
    'accuracy': ((DTYPE, 'input', ('float16', 'float32', 'float64')),),
    'acos': ((DTYPE, 'x', ('float16', 'float32', 'float64')),),
    'adaptive_pool2d': (
        (DTYPE, 'input', ('float16', 'float32', 'float64', 'int32', 'int64')),
        (TYPE, 'pool_type', ('str',)),
        (TYPE, 'pool_size', ('int', 'list', 'tuple')),
        (TYPE, 'require_index', ('bool',)),
    ),
    'adaptive_pool3d': (
        (DTYPE, 'input', ('float16', 'float32', 'float64', 'int32', 'int64')),
        (TYPE, 'pool_type', ('str',)),
        (TYPE, 'pool_size', ('int', 'list', 'tuple')),
        (TYPE, 'require_index', ('bool',)),
    ),
    'add_position_encoding': ((DTYPE, 'input', ('float32', 'float64')),),
    'affine_channel': (
        (DTYPE, 'x', ('float32', 'float64')),
        (TYPE, 'scale', ('Variable', 'None')),
        (TYPE, 'bias', ('Variable', 'None')),
    ),
    'argmax': ((DTYPE, 'x', ('float32', 'float64', 'uint8', 'int16', 'int32', 'int64')),),
    'argmin': ((DTYPE, 'x', ('float32', 'float64', 'uint8', 'int16', 'int32', 'int64')),),
    'argsort': ((DTYPE, 'input', ('float32', 'float64', 'int16', 'int32', 'int64', 'uint8')),),
    'array_read': ((DTYPE, 'i', ('int64',)),),
    'array_to_lod_tensor': (
        (TYPE, 'x', ('Variable', 'list')),
        (TYPE, 'table', ('Variable', 'list')),
    ),
    'array_write': ((DTYPE, 'i', ('int64',)), (TYPE, 'x', ('Variable',)),),
    'asin': ((DTYPE, 'x', ('float16', 'float32', 'float64')),),
    'assign': (
        (TYPE, 'input', ('Variable', 'ndarray')),
        (DTYPE_IF_VARIABLE, 'input', ('float32', 'float64', 'int32', 'int64', 'bool')),
    ),
    'atan': ((DTYPE, 'x', ('float16', 'float32', 'float64')),),
    'batch_norm': ((DTYPE, 'input', ('float16', 'float32', 'float64')),),
    'brelu': ((DTYPE, 'x', ('float16', 'float32', 'float64')),),
    'cast': (
        (DTYPE, 'x', ('bool', 'float16', 'float32', 'float64', 'int32', 'int64', 'uint8')),
        (DTYPE_NAME, 'dtype',
         ('bool', 'float16', 'float32', 'float64', 'int8', 'int32', 'int64', 'uint8')),
    ),
    'ceil': ((DTYPE, 'x', ('float16', 'float32', 'float64')),),
    'center_loss': (
        (DTYPE, 'input', ('float32', 'float64')),
        (DTYPE, 'label', ('int32', 'int64')),
        (DTYPE_IF_VARIABLE, 'alpha', ('float32', 'float64')),
    ),
    'clip': ((DTYPE, 'x', ('float16', 'float32', 'float64')),),
    'clip_by_norm': ((DTYPE, 'x', ('float32',)), (TYPE, 'max_norm', ('float',)),),
    'concat': ((TYPE, 'axis', ('int', 'Variable')),),
    'cond': ((DTYPE, 'pred', ('bool',)), (TYPE, 'name', ('str', 'None')),),
    'conv2d': ((DTYPE, 'input', ('float16', 'float32', 'float64')),),
    'cos': ((DTYPE, 'x', ('float16', 'float32', 'float64')),),
    'cos_sim': ((DTYPE, 'X', ('float32',)), (DTYPE, 'Y', ('float32',)),),
    'create_global_var': (
        (TYPE, 'shape', ('list', 'tuple', 'ndarray')),
        (DTYPE_NAME, 'dtype',
         ('bool', 'float16', 'float32', 'float64', 'int8', 'int16', 'int32', 'int64', 'uint8')),
    ),
    'create_parameter': (
        (TYPE, 'shape', ('list', 'tuple', 'ndarray')),
        (DTYPE_NAME, 'dtype',
         ('bool', 'float16', 'float32', 'float64', 'int8', 'int16', 'int32', 'int64', 'uint8')),
    ),
    'create_tensor': (
        (DTYPE_NAME, 'dtype', ('bool', 'float16', 'float32', 'float64', 'int8', 'int32', 'int64')),
    ),
    'crop_tensor': (
        (DTYPE, 'x', ('float32', 'float64', 'int32', 'int64')),
        (TYPE, 'shape', ('list', 'tuple', 'Variable')),
        (TYPE, 'offsets', ('list', 'tuple', 'Variable', 'None')),
    ),
    'cross_entropy': ((DTYPE, 'input', ('float16', 'float32', 'float64')),),
    'ctc_greedy_decoder': ((DTYPE, 'input', ('float32', 'float64')),),
    'cumsum': ((TYPE, 'x', ('Variable',)),),
    'data': ((TYPE, 'shape', ('list', 'tuple')),),
    'deformable_conv': (
        (DTYPE, 'input', ('float32', 'float64')),
        (DTYPE, 'offset', ('float32', 'float64')),
        (TYPE, 'mask', ('Variable', 'None')),
    ),
    'deformable_roi_pooling': (
        (DTYPE, 'input', ('float32', 'float64')),
        (DTYPE, 'rois', ('float32', 'float64')),
        (DTYPE, 'trans', ('float32', 'float64')),
        (TYPE, 'group_size', ('list', 'tuple')),
        (TYPE, 'part_size', ('list', 'tuple')),
    ),
    'diag': ((TYPE, 'diagonal', ('Variable', 'ndarray')),),
    'dropout': ((DTYPE, 'x', ('float16', 'float32', 'float64')),),
    'elu': ((DTYPE, 'x', ('float16', 'float32', 'float64')),),
    'embedding': (
        (DTYPE, 'input', ('int64',)),
        (DTYPE_NAME, 'dtype', ('float16', 'float32', 'float64')),
    ),
    'equal': (
        (DTYPE, 'x', ('float32', 'float64', 'int32', 'int64')),
        (DTYPE, 'y', ('float32', 'float64', 'int32', 'int64')),
        (TYPE, 'cond', ('Variable',)),
    ),
    'exp': ((DTYPE, 'x', ('int32', 'int64', 'float16', 'float32', 'float64')),),
    'expand': (
        (DTYPE, 'x', ('bool', 'float32', 'float64', 'int32', 'int64')),
        (TYPE, 'expand_times', ('list', 'tuple', 'Variable')),
    ),
    'fc': ((TYPE, 'input', ('list', 'tuple', 'Variable')),),
    'fill_constant': (
        (DTYPE_NAME, 'dtype', ('bool', 'float16', 'float32', 'float64', 'int32', 'int64')),
        (TYPE, 'shape', ('Variable', 'list', 'tuple')),
        (DTYPE_IF_VARIABLE, 'shape', ('int32', 'int64')),
    ),
    'floor': ((DTYPE, 'x', ('float16', 'float32', 'float64')),),
    'fsp_matrix': ((DTYPE, 'x', ('float32', 'float64')), (DTYPE, 'y', ('float32', 'float64')),),
    'gaussian_random': (
        (TYPE, 'shape', ('list', 'tuple')),
        (DTYPE_NAME, 'dtype', ('float32', 'float64')),
    ),
    'gaussian_random_batch_size_like': (
        (TYPE, 'input', ('Variable',)),
        (TYPE, 'shape', ('list', 'tuple')),
        (DTYPE_NAME, 'dtype', ('float16', 'float32', 'int')),
    ),
    'get_tensor_from_selected_rows': ((TYPE, 'x', ('Variable',)),),
    'greater_equal': (
        (DTYPE, 'x', ('float32', 'float64', 'int32', 'int64')),
        (DTYPE, 'y', ('float32', 'float64', 'int32', 'int64')),
        (TYPE, 'cond', ('Variable',)),
    ),
    'greater_than': (
        (DTYPE, 'x', ('float32', 'float64', 'int32', 'int64')),
        (DTYPE, 'y', ('float32', 'float64', 'int32', 'int64')),
        (TYPE, 'cond', ('Variable',)),
    ),
    'grid_sampler': (
        (DTYPE, 'x', ('float32', 'float64')),
        (DTYPE, 'grid', ('float32', 'float64')),
    ),
    'group_norm': ((DTYPE, 'input', ('float32', 'float64')),),
    'hard_shrink': ((DTYPE, 'x', ('float16', 'float32', 'float64')),),
    'hard_sigmoid': ((DTYPE, 'x', ('float16', 'float32', 'float64')),),
    'hard_swish': ((DTYPE, 'x', ('float16', 'float32', 'float64')),),
    'has_inf': ((TYPE, 'x', ('Variable',)),),
    'has_nan': ((TYPE, 'x', ('Variable',)),),
    'hsigmoid': ((DTYPE, 'input', ('float32', 'float64')), (DTYPE, 'label', ('int64',)),),
    'huber_loss': (
        (DTYPE, 'input', ('float32', 'float64')),
        (DTYPE, 'label', ('float32', 'float64')),
    ),
    'increment': ((DTYPE, 'x', ('float32', 'float64', 'int32', 'int64')),),
    'instance_norm': ((DTYPE, 'input', ('float32', 'float64')),),
    'isfinite': ((DTYPE, 'x', ('float32', 'float64', 'int32', 'int64')),),
    'kldiv_loss': (
        (DTYPE, 'x', ('float32', 'float64')),
        (DTYPE, 'target', ('float32', 'float64')),
        (TYPE, 'reduction', ('str',)),
    ),
    'l2_normalize': ((DTYPE, 'x', ('float32', 'float64')),),
    'layer_norm': ((DTYPE, 'input', ('float32', 'float64')),),
    'leaky_relu': ((DTYPE, 'x', ('float16', 'float32', 'float64')),),
    'less_equal': (
        (DTYPE, 'x', ('float32', 'float64', 'int32', 'int64')),
        (DTYPE, 'y', ('float32', 'float64', 'int32', 'int64')),
        (TYPE, 'cond', ('Variable',)),
    ),
    'less_than': (
        (DTYPE, 'x', ('float32', 'float64', 'int32', 'int64')),
        (DTYPE, 'y', ('float32', 'float64', 'int32', 'int64')),
        (TYPE, 'cond', ('Variable',)),
    ),
    'linspace': (
        (TYPE, 'start', ('Variable', 'float', 'int')),
        (TYPE, 'stop', ('Variable', 'float', 'int')),
        (TYPE, 'num', ('Variable', 'float', 'int')),
        (DTYPE_IF_VARIABLE, 'start', ('float32', 'float64')),
        (DTYPE_IF_VARIABLE, 'stop', ('float32', 'float64')),
        (DTYPE_IF_VARIABLE, 'num', ('int32',)),
    ),
    'lod_append': ((DTYPE, 'x', ('float32', 'float64', 'int32', 'int64')),),
    'lod_rank_table': ((TYPE, 'x', ('Variable', 'list')),),
    'lod_reset': (
        (DTYPE, 'x', ('float32', 'float64', 'int32', 'int64')),
        (TYPE, 'y', ('Variable',)),
    ),
    'lod_tensor_to_array': (
        (TYPE, 'x', ('Variable', 'list')),
        (TYPE, 'table', ('Variable', 'list')),
    ),
    'log': ((DTYPE, 'x', ('float32', 'float64')),),
    'log_loss': ((DTYPE, 'input', ('float32',)), (DTYPE, 'label', ('float32',)),),
    'logical_and': (
        (DTYPE, 'x', ('bool',)),
        (DTYPE, 'y', ('bool',)),
        (TYPE, 'out', ('Variable',)),
    ),
    'logical_not': ((DTYPE, 'x', ('bool',)), (TYPE, 'out', ('Variable',)),),
    'logical_or': (
        (DTYPE, 'x', ('bool',)),
        (DTYPE, 'y', ('bool',)),
        (TYPE, 'out', ('Variable',)),
    ),
    'logical_xor': (
        (DTYPE, 'x', ('bool',)),
        (DTYPE, 'y', ('bool',)),
        (TYPE, 'out', ('Variable',)),
    ),
    'logsigmoid': ((DTYPE, 'x', ('float16', 'float32', 'float64')),),
    'lrn': ((DTYPE, 'input', ('float32',)),),
    'maxout': ((DTYPE, 'x', ('float32', 'float64')),),
    'mean': ((DTYPE, 'x', ('float16', 'float32', 'float64')),),
    'mean_iou': ((DTYPE, 'input', ('int32', 'int64')), (DTYPE, 'label', ('int32', 'int64')),),
    'mse_loss': (
        (DTYPE, 'input', ('float32', 'float64')),
        (DTYPE, 'label', ('float32', 'float64')),
    ),
    'mul': (
        (DTYPE, 'x', ('float16', 'float32', 'float64')),
        (DTYPE, 'y', ('float16', 'float32', 'float64')),
    ),
    'nce': ((DTYPE, 'input', ('float32', 'float64')), (DTYPE, 'label', ('int64',)),),
    'not_equal': (
        (DTYPE, 'x', ('float32', 'float64', 'int32', 'int64')),
        (DTYPE, 'y', ('float32', 'float64', 'int32', 'int64')),
        (TYPE, 'cond', ('Variable',)),
    ),
    'npair_loss': (
        (DTYPE, 'anchor', ('float32', 'float64')),
        (DTYPE, 'positive', ('float32', 'float64')),
        (DTYPE, 'labels', ('float32', 'float64', 'int64')),
    ),
    'one_hot': ((DTYPE, 'input', ('int32', 'int64')), (TYPE, 'depth', ('int', 'Variable')),),
    'ones': (
        (TYPE, 'shape', ('list', 'tuple')),
        (DTYPE_NAME, 'dtype', ('bool', 'float16', 'float32', 'float64', 'int32', 'int64')),
    ),
    'ones_like': (
        (DTYPE, 'x', ('bool', 'float32', 'float64', 'int32', 'int64')),
        (DTYPE_IF_VARIABLE, 'out', ('bool', 'float32', 'float64', 'int32', 'int64')),
    ),
    'pad': ((DTYPE, 'x', ('float16', 'float32', 'float64', 'int32', 'int64')),),
    'pad2d': ((DTYPE, 'input', ('float16', 'float32', 'float64', 'int32', 'int64')),),
    'pad_constant_like': (
        (TYPE, 'x', ('Variable',)),
        (DTYPE, 'y', ('float32', 'float64', 'int32', 'int64')),
    ),
    'pow': (
        (DTYPE, 'x', ('int32', 'int64', 'float32', 'float64')),
        (DTYPE_IF_VARIABLE, 'factor', ('float32',)),
    ),
    'prelu': ((DTYPE, 'x', ('float32', 'float64')),),
    'prroi_pool': ((DTYPE, 'input', ('float32',)), (DTYPE, 'rois', ('float32',)),),
    'py_func': (
        (TYPE, 'x', ('list', 'tuple', 'Variable', 'None')),
        (TYPE, 'out', ('list', 'tuple', 'Variable', 'None')),
    ),
    'random_crop': (
        (DTYPE, 'x', ('float32', 'float64', 'uint8', 'int16', 'int32')),
        (TYPE, 'shape', ('list', 'Variable')),
    ),
    'range': ((DTYPE_NAME, 'dtype', ('float32', 'float64', 'int32', 'int64')),),
    'rank': ((TYPE, 'input', ('Variable',)),),
    'reciprocal': ((DTYPE, 'x', ('float16', 'float32', 'float64')),),
    'reduce_all': ((DTYPE, 'input', ('bool',)),),
    'reduce_any': ((DTYPE, 'input', ('bool',)),),
    'reduce_mean': ((DTYPE, 'input', ('float32', 'float64', 'int32', 'int64')),),
    'reduce_sum': ((DTYPE, 'input', ('float32', 'float64', 'int32', 'int64')),),
    'relu': ((DTYPE, 'x', ('float16', 'float32', 'float64')),),
    'relu6': ((DTYPE, 'x', ('float16', 'float32', 'float64')),),
    'reorder_lod_tensor_by_rank': (
        (TYPE, 'x', ('Variable',)),
        (TYPE, 'rank_table', ('Variable',)),
    ),
    'reshape': (
        (DTYPE, 'x', ('float16', 'float32', 'float64', 'int32', 'int64')),
        (TYPE, 'shape', ('list', 'tuple', 'Variable')),
        (TYPE, 'actual_shape', ('Variable', 'None')),
    ),
    'roi_align': (
        (DTYPE, 'input', ('float32', 'float64')),
        (DTYPE, 'rois', ('float32', 'float64')),
    ),
    'roi_pool': ((DTYPE, 'input', ('float32',)), (DTYPE, 'rois', ('float32',)),),
    'round': ((DTYPE, 'x', ('float16', 'float32', 'float64')),),
    'rsqrt': ((DTYPE, 'x', ('float16', 'float32', 'float64')),),
    'scale': (
        (DTYPE, 'x',
         ('float16', 'float32', 'float64', 'int8', 'int16', 'int32', 'int64', 'uint8')),
    ),
    'select_input': ((TYPE, 'inputs', ('list', 'tuple')), (DTYPE, 'mask', ('int32',)),),
    'select_output': (
        (TYPE, 'input', ('Variable',)),
        (DTYPE, 'mask', ('int32',)),
        (TYPE, 'outputs', ('list', 'tuple')),
    ),
    'selu': ((DTYPE, 'x', ('float32', 'float64')),),
    'sequence_concat': ((TYPE, 'input', ('list',)),),
    'sequence_pad': (
        (DTYPE, 'x', ('float32', 'float64', 'int32', 'int64')),
        (DTYPE, 'pad_value', ('float32', 'float64', 'int32', 'int64')),
    ),
    'sequence_reshape': ((DTYPE, 'input', ('float32', 'float64', 'int32', 'int64')),),
    'sequence_reverse': ((DTYPE, 'x', ('float32', 'float64', 'int8', 'int32', 'int64')),),
    'sequence_unpad': (
        (DTYPE, 'x', ('float32', 'float64', 'int32', 'int64')),
        (DTYPE, 'length', ('int64',)),
    ),
    'shrink_memory': (
        (TYPE, 'x', ('Variable',)),
        (TYPE, 'i', ('Variable',)),
        (TYPE, 'table', ('Variable',)),
    ),
    'sigmoid': ((DTYPE, 'x', ('float16', 'float32', 'float64')),),
    'sign': (
        (TYPE, 'x', ('Variable', 'ndarray')),
        (DTYPE_IF_VARIABLE, 'x', ('float16', 'float32', 'float64')),
    ),
    'sin': ((DTYPE, 'x', ('float16', 'float32', 'float64')),),
    'smooth_l1': ((DTYPE, 'x', ('float32', 'float64')), (DTYPE, 'y', ('float32', 'float64')),),
    'soft_relu': ((DTYPE, 'x', ('float16', 'float32', 'float64')),),
    'softmax': ((DTYPE, 'input', ('float16', 'float32', 'float64')),),
    'softplus': ((DTYPE, 'x', ('float16', 'float32', 'float64')),),
    'softshrink': ((DTYPE, 'x', ('float16', 'float32', 'float64')),),
    'softsign': ((DTYPE, 'x', ('float16', 'float32', 'float64')),),
    'spectral_norm': (
        (DTYPE, 'weight', ('float32', 'float64')),
        (TYPE, 'dim', ('int',)),
        (TYPE, 'power_iters', ('int',)),
        (TYPE, 'eps', ('float',)),
    ),
    'sqrt': ((DTYPE, 'x', ('float16', 'float32', 'float64')),),
    'square': ((DTYPE, 'x', ('int32', 'int64', 'float16', 'float32', 'float64')),),
    'square_error_cost': (
        (DTYPE, 'input', ('float32', 'float64')),
        (DTYPE, 'label', ('float32', 'float64')),
    ),
    'squeeze': (
        (DTYPE, 'input', ('float32', 'float64', 'int8', 'int32', 'int64')),
        (TYPE, 'axes', ('list',)),
    ),
    'stanh': ((DTYPE, 'x', ('float16', 'float32', 'float64')),),
    'sums': (
        (TYPE, 'input', ('Variable', 'tuple', 'list')),
        (DTYPE_IF_VARIABLE, 'input', ('float32', 'float64', 'int32', 'int64')),
        (DTYPE_IF_VARIABLE, 'out', ('float32', 'float64', 'int32', 'int64')),
    ),
    'swish': ((DTYPE, 'x', ('float16', 'float32', 'float64')),),
    'tanh': ((DTYPE, 'x', ('float16', 'float32', 'float64')),),
    'tanh_shrink': ((DTYPE, 'x', ('float16', 'float32', 'float64')),),
    'teacher_student_sigmoid_loss': (
        (DTYPE, 'input', ('float32', 'float64')),
        (DTYPE, 'label', ('float32', 'float64')),
    ),
    'temporal_shift': (
        (DTYPE, 'x', ('float32', 'float64')),
        (TYPE, 'seg_num', ('int',)),
        (TYPE, 'shift_ratio', ('float',)),
    ),
    'tensor_array_to_tensor': ((TYPE, 'input', ('list', 'Variable')),),
    'thresholded_relu': ((DTYPE, 'x', ('float16', 'float32', 'float64')),),
    'transpose': (
        (DTYPE, 'x', ('float16', 'float32', 'float64', 'int32', 'int64')),
        (TYPE, 'perm', ('list',)),
    ),
    'uniform_random': (
        (TYPE, 'shape', ('list', 'tuple', 'Variable')),
        (DTYPE_NAME, 'dtype', ('float32', 'float64')),
    ),
    'uniform_random_batch_size_like': (
        (DTYPE, 'input', ('float32', 'float64')),
        (TYPE, 'shape', ('list', 'tuple')),
        (DTYPE_NAME, 'dtype', ('float32', 'float64')),
    ),
    'unique': ((DTYPE, 'x', ('float32', 'float64', 'int32', 'int64')),),
    'unique_with_counts': ((DTYPE, 'x', ('float32', 'float64', 'int32', 'int64')),),
    'warpctc': (
        (DTYPE, 'input', ('float32',)),
        (DTYPE, 'label', ('int32',)),
        (DTYPE_IF_VARIABLE, 'input_length', ('int64',)),
        (DTYPE_IF_VARIABLE, 'label_length', ('int64',)),
    ),
    'while_loop': ((TYPE, 'loop_vars', ('list', 'tuple')),),
    'zeros': (
        (TYPE, 'shape', ('list', 'tuple')),
        (DTYPE_NAME, 'dtype', ('bool', 'float16', 'float32', 'float64', 'int32', 'int64')),
    ),
    'zeros_like': (
        (DTYPE, 'x', ('bool', 'float32', 'float64', 'int32', 'int64')),
        (DTYPE_IF_VARIABLE, 'out', ('bool', 'float32', 'float64', 'int32', 'int64')),
    ),
}

# the elementwise layers share one helper in Fluid 1.8, which checks both operands
_NUMBERS = ("float16", "float32", "float64", "int32", "int64")
for _name in ("add", "sub", "mul", "div", "max", "min", "pow", "mod", "floordiv"):
    CHECKS[f"elementwise_{_name}"] = ((DTYPE, "x", _NUMBERS), (DTYPE, "y", _NUMBERS))
# fc checks each of its inputs (one Variable or a list of them)
CHECKS["fc"] = ((DTYPE_EACH, "input", ("float16", "float32", "float64")),)
# matmul checks its operands in a helper of its own
CHECKS["matmul"] = ((DTYPE, "x", ("float16", "float32", "float64")),
                    (DTYPE, "y", ("float16", "float32", "float64")))


def _code(dtype, arg, name):
    try:
        return dtypes.to_code(dtype)
    except DTypeError:                # Fluid's convert_dtype: a ValueError
        raise DTypeError(f"The data type of '{arg}' in fluid.layers.{name} must be a dtype, "
                         f"but received {dtype!r}") from None


def checked(name, fn):
    """`fn` (layer `name`) running CHECKS[name] on its arguments first."""
    checks = CHECKS[name]
    sig = inspect.signature(fn)
    others = {arg: tuple(_TYPES[t] for t in spec) for kind, arg, spec in checks
              if kind == TYPE}

    @functools.wraps(fn)
    def layer(*args, **kwargs):
        try:
            bound = sig.bind(*args, **kwargs)
        except TypeError:
            return fn(*args, **kwargs)         # the layer's own TypeError says what is wrong
        values = bound.arguments
        for kind, arg, spec in checks:
            value = values.get(arg)
            if value is None:
                continue
            if kind == TYPE:
                check_type(value, arg, others[arg], f"fluid.layers.{name}")
            elif kind == DTYPE_EACH:
                items = value if isinstance(value, (list, tuple)) else [value]
                for i, v in enumerate(items):
                    check_type(v, f"{arg}[{i}]" if v is not value else arg, Variable,
                               f"fluid.layers.{name}")
                    check_dtype(v.dtype, arg, spec, f"fluid.layers.{name}")
            elif kind == DTYPE_NAME:
                check_dtype(_code(value, arg, name), arg, spec, f"fluid.layers.{name}")
            elif isinstance(value, Variable):
                check_dtype(value.dtype, arg, spec, f"fluid.layers.{name}")
            elif kind == DTYPE and arg not in others:
                check_type(value, arg, Variable, f"fluid.layers.{name}")
        return fn(*args, **kwargs)
    layer.__fluidity_checked__ = fn
    return layer
