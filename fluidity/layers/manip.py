"""Tensor manipulation, reduction, comparison and logic layers (Fluid 1.x signatures):
concat, split, reshape, transpose, squeeze, unsqueeze, slice, gather, stack, unstack, unbind,
expand, cast, shape, one_hot, reduce_*, less_than, ..., logical_*, increment, argmax, argmin,
clip, where."""
import numbers

from ..core import dtypes
from ..errors import FluidityError, ShapeError
from ..framework import Variable
from ..layer_helper import LayerHelper
from ..ops.logic import COMPARISONS, LOGICAL
from ..ops.reduce import REDUCERS
from .checks import check_dtype_of, check_type, check_variable_and_dtype, check_variables
from .tensor import fill_constant, ints_or_tensors as _ints_or_tensors, zeros

# `flatten` (op flatten2) is in layers/nn.py.
__all__ = (["concat", "split", "reshape", "transpose", "squeeze", "unsqueeze", "slice",
            "gather", "stack", "expand", "cast", "shape", "one_hot"] +
           list(REDUCERS) + list(COMPARISONS) + list(LOGICAL) +
           ["logical_not", "increment", "argmax", "argmin", "clip", "where", "argsort",
            "cumsum", "flip", "unstack", "unbind", "clip_by_norm"])


_CONCAT_DTYPES = ("float16", "float32", "float64", "int32", "int64")


def one_op_layer(op_type, inputs, attrs=None, dtype=None, out=None, name=None, out_slot="Out",
                 helper=None):
    """A layer that is one op: append `op_type` over `inputs` (slot -> Variable or list;
    None slots left out) writing one new (or the given) output to `out_slot`; returns it.
    The output's dtype is `dtype`, else the first input's. The layers of every module that
    are a single op build through this."""
    helper = helper or LayerHelper(op_type, name=name)
    if out is None:
        first = next(v for v in inputs.values() if v is not None)
        first = first[0] if isinstance(first, (list, tuple)) else first
        out = helper.create_variable_for_type_inference(dtype if dtype is not None
                                                        else first.dtype)
    helper.append_op(op_type, inputs={k: v for k, v in inputs.items() if v is not None},
                     outputs={out_slot: out}, attrs=attrs or {})
    return out


def _with_xshape(op_type, x, attrs, inputs=None, name=None, act=None):
    """Shape-only ops write Out and XShape (what their gradient reads)."""
    helper = LayerHelper(op_type, name=name, act=act)
    out = helper.create_variable_for_type_inference(x.dtype)
    xshape = helper.create_variable_for_type_inference(x.dtype, stop_gradient=True)
    helper.append_op(op_type, inputs={"X": x, **(inputs or {})},
                     outputs={"Out": out, "XShape": xshape}, attrs=attrs)
    return helper.append_activation(out, act)


# --- joining and cutting ---------------------------------------------------------------------
_CONCAT_DTYPES = ("float16", "float32", "float64", "int32", "int64")


def concat(input, axis=0, name=None):
    """Join `input` (a list of Variables; one Variable is taken as a list of it, as Fluid
    does) along `axis` (an int or an int Variable)."""
    check_type(input, "input", (list, tuple, Variable), "concat")
    if isinstance(input, Variable):
        import warnings
        warnings.warn(f"The type of input in concat should be list, but received "
                      f"{type(input)}.")
        input = [input]
    for i, x in enumerate(input):
        check_variable_and_dtype(x, f"input[{i}]", _CONCAT_DTYPES, "concat")
    check_type(axis, "axis", (int, Variable), "concat")
    if input[0].type == dtypes.VarType.LOD_TENSOR_ARRAY:
        if len(input) != 1 or isinstance(axis, Variable):
            raise TypeError("concat: a LoDTensorArray is joined alone, along an int axis")
        return tensor_array_to_tensor(input[0], axis=int(axis), name=name)[0]
    axis_t = axis if isinstance(axis, Variable) else None
    return one_op_layer("concat", {"X": list(input), "AxisTensor": axis_t},
                        {"axis": 0 if axis_t is not None else int(axis)}, name=name)


def split(input, num_or_sections, dim=-1, name=None):
    """Cut `input` along `dim` into `num_or_sections` equal parts (an int) or parts of the
    listed sizes (one may be -1). Returns the list of parts."""
    helper = LayerHelper("split", name=name)
    if isinstance(num_or_sections, int):
        n, attrs, sections_t = num_or_sections, {"num": num_or_sections}, None
    else:
        secs, _, sections_t = _ints_or_tensors(helper, num_or_sections)
        n, attrs = len(secs), {"sections": secs}
    axis_t = dim if isinstance(dim, Variable) else None
    attrs["axis"] = 0 if axis_t is not None else int(dim)
    outs = [helper.create_variable_for_type_inference(input.dtype) for _ in range(n)]
    helper.append_op("split", inputs={k: v for k, v in {
        "X": input, "AxisTensor": axis_t, "SectionsTensorList": sections_t}.items()
        if v is not None}, outputs={"Out": outs}, attrs=attrs)
    return outs


def stack(x, axis=0, name=None):
    """Stack Variables of one shape along a new dim `axis`."""
    x = list(x) if isinstance(x, (list, tuple)) else [x]
    return one_op_layer("stack", {"X": x}, {"axis": int(axis)}, name=name, out_slot="Y")


# --- reshaping ---------------------------------------------------------------------------------
def reshape(x, shape, actual_shape=None, act=None, inplace=False, name=None):
    """Reshape `x` (op reshape2): 0 copies the input dim, one -1 is inferred. `shape` may be
    a Variable or hold Variables; `actual_shape` (a 1-D int Variable) overrides it at run
    time."""
    helper = LayerHelper("reshape2", name=name)
    attr, shape_t, shape_list = _ints_or_tensors(helper, shape)
    inputs = {}
    if shape_list is not None:
        inputs["ShapeTensor"] = shape_list
    shape_t = actual_shape if actual_shape is not None else shape_t
    if shape_t is not None:
        inputs["Shape"] = shape_t
    return _with_xshape("reshape2", x, {"shape": attr}, inputs, name=name, act=act)


def transpose(x, perm, name=None):
    """Permute the dims of `x`: out.dim[i] = x.dim[perm[i]]."""
    return _with_xshape("transpose2", x, {"axis": [int(a) for a in perm]}, name=name)


def squeeze(input, axes, name=None):
    """Remove the size-1 dims `axes` (every size-1 dim if empty)."""
    return _with_xshape("squeeze2", input, {"axes": [int(a) for a in axes]}, name=name)


def unsqueeze(input, axes, name=None):
    """Insert size-1 dims at `axes` (an int, ints, a Variable or ints mixed with Variables)."""
    helper = LayerHelper("unsqueeze2", name=name)
    axes = [axes] if isinstance(axes, int) else axes
    attr, axes_t, axes_list = _ints_or_tensors(helper, axes)
    inputs = {k: v for k, v in {"AxesTensor": axes_t, "AxesTensorList": axes_list}.items()
              if v is not None}
    return _with_xshape("unsqueeze2", input, {"axes": attr}, inputs, name=name)


def slice(input, axes, starts, ends):
    """input[starts[i]:ends[i]] on each of `axes` (negative indices count from the end;
    out-of-range ones clamp). starts/ends may be Variables or hold Variables."""
    helper = LayerHelper("slice")
    s_attr, s_t, s_list = _ints_or_tensors(helper, starts)
    e_attr, e_t, e_list = _ints_or_tensors(helper, ends)
    n = len(axes)

    def by_tensor(values):  # per axis: does a tensor decide this bound?
        return [True] * n if isinstance(values, Variable) else \
            [isinstance(v, Variable) for v in values]
    flags = [-1 if a or b else 1 for a, b in zip(by_tensor(starts), by_tensor(ends))]
    attrs = {"axes": [int(a) for a in axes], "starts": s_attr or [-1] * n,
             "ends": e_attr or [-1] * n, "infer_flags": flags, "decrease_axis": []}
    return one_op_layer("slice", {"Input": input, "StartsTensor": s_t, "EndsTensor": e_t,
                                  "StartsTensorList": s_list, "EndsTensorList": e_list}, attrs,
                        helper=helper)


def gather(input, index, overwrite=True):
    """Rows of `input` at `index` (1-D or [N, 1] int)."""
    return one_op_layer("gather", {"X": input, "Index": index}, {"overwrite": overwrite})


def expand(x, expand_times, name=None):
    """Tile `x` expand_times[i] times along dim i."""
    if dtypes.name(x.dtype) == "bool" and x.stop_gradient:
        raise ValueError("expand op bool date type must set the stop_gradient to be False")
    helper = LayerHelper("expand", name=name)
    attr, times_t, times_list = _ints_or_tensors(helper, expand_times)
    return one_op_layer("expand", {"X": x, "ExpandTimes": times_t,
                                   "expand_times_tensor": times_list},
                        {"expand_times": attr}, helper=helper)


def cast(x, dtype):
    """`x` converted to `dtype`."""
    code = dtypes.to_code(dtype)
    return one_op_layer("cast", {"X": x}, {"in_dtype": x.dtype, "out_dtype": code}, dtype=code)


def shape(input):
    """The shape of `input` at run time, an int32 1-D tensor."""
    out = one_op_layer("shape", {"Input": input}, dtype="int32")
    out.stop_gradient = True
    return out


def one_hot(input, depth, allow_out_of_range=False):
    """One-hot float32 rows of int64 ids `input` [..., 1] -> [..., depth] (op one_hot)."""
    depth_t = depth if isinstance(depth, Variable) else None
    attrs = {"depth": -1 if depth_t is not None else int(depth),
             "allow_out_of_range": allow_out_of_range, "dtype": dtypes.VarType.FP32}
    out = one_op_layer("one_hot", {"X": input, "depth_tensor": depth_t}, attrs, dtype="float32")
    out.stop_gradient = True
    return out


# --- reductions --------------------------------------------------------------------------------
def _reduce_layer(op_type):
    def layer(input, dim=None, keep_dim=False, name=None):
        dims = [] if dim is None else [dim] if isinstance(dim, int) else list(dim)
        everything = not dims or len(dims) == len(input.shape)
        return one_op_layer(op_type, {"X": input}, {"dim": dims or [0], "keep_dim": keep_dim,
                                                    "reduce_all": everything}, name=name)
    layer.__name__ = op_type
    layer.__doc__ = (f"{op_type} of `input` over `dim` (an int or ints; None: every dim, "
                     f"giving a 0-D result, shape [], unless keep_dim).")
    return layer


for _t in REDUCERS:
    globals()[_t] = _reduce_layer(_t)


# --- comparison and logic ----------------------------------------------------------------------
def _compare_layer(op_type):
    def layer(x, y, cond=None, force_cpu=None, name=None):
        attrs = {"axis": -1}
        if force_cpu is not None:          # written only when given, as Fluid 1.8 does
            attrs["force_cpu"] = bool(force_cpu)
        out = one_op_layer(op_type, {"X": x, "Y": y}, attrs, dtype="bool", out=cond,
                           name=name)
        out.stop_gradient = True
        return out
    layer.__name__ = op_type
    layer.__doc__ = f"Elementwise {op_type}(x, y) as bool; written to `cond` if given."
    return layer


for _t in COMPARISONS:
    globals()[_t] = _compare_layer(_t)


def less_than(x, y, force_cpu=None, cond=None, name=None):
    """Elementwise x < y as bool; written to `cond` if given (Fluid's argument order)."""
    return _compare_layer("less_than")(x, y, cond=cond, force_cpu=force_cpu, name=name)


def _logical_layer(op_type):
    def layer(x, y, out=None, name=None):
        return one_op_layer(op_type, {"X": x, "Y": y}, dtype="bool", out=out, name=name)
    layer.__name__ = op_type
    layer.__doc__ = f"Elementwise {op_type}(x, y) of bool tensors."
    return layer


for _t in LOGICAL:
    globals()[_t] = _logical_layer(_t)


def logical_not(x, out=None, name=None):
    return one_op_layer("logical_not", {"X": x}, dtype="bool", out=out, name=name)


def increment(x, value=1.0, in_place=True):
    """x + value for a one-element `x`; written back to `x` when in_place (loop counters)."""
    out = one_op_layer("increment", {"X": x}, {"step": float(value)}, out=x if in_place else None)
    out.stop_gradient = True
    return out


def _arg_layer(op_type):
    def layer(x, axis=0):
        out = one_op_layer(op_type, {"X": x}, {"axis": int(axis)}, dtype="int64")
        out.stop_gradient = True
        return out
    layer.__doc__ = f"Indices (int64) of the {op_type[4:]}imum of `x` along `axis`."
    return layer


argmax = _arg_layer("arg_max")
argmin = _arg_layer("arg_min")


def clip(x, min, max, name=None):
    """`x` clipped to [min, max]."""
    return one_op_layer("clip", {"X": x}, {"min": float(min), "max": float(max)}, name=name)


def where(condition, x=None, y=None, name=None):
    """With x and y: x where `condition` else y (op where). With `condition` alone (Fluid
    1.x): the [N, rank] int64 coordinates of its true elements (op where_index)."""
    if x is None and y is None:
        out = one_op_layer("where_index", {"Condition": condition}, dtype="int64", name=name)
        out.stop_gradient = True
        return out
    if x is None or y is None:
        raise FluidityError("where: give both x and y, or neither")
    return one_op_layer("where", {"Condition": condition, "X": x, "Y": y}, dtype=x.dtype, name=name)


def argsort(input, axis=-1, descending=False, name=None):
    """(sorted values, int64 indices) of `input` along `axis` (stable)."""
    helper = LayerHelper("argsort", name=name)
    out = helper.create_variable_for_type_inference(input.dtype, stop_gradient=True)
    ids = helper.create_variable_for_type_inference("int64", stop_gradient=True)
    helper.append_op("argsort", inputs={"X": input}, outputs={"Out": out, "Indices": ids},
                     attrs={"axis": int(axis), "descending": bool(descending)})
    return out, ids


def cumsum(x, axis=None, exclusive=None, reverse=None):
    """Running sums along `axis` (over the flattened input when axis is None)."""
    attrs = {"flatten": axis is None, "axis": -1 if axis is None else int(axis),
             "exclusive": bool(exclusive), "reverse": bool(reverse)}
    return one_op_layer("cumsum", {"X": x}, attrs)


def flip(input, dims, name=None):
    """`input` reversed along each axis in `dims`."""
    dims = [dims] if isinstance(dims, int) else list(dims)
    if not dims:
        raise FluidityError("flip: dims must name at least one axis")
    return one_op_layer("flip", {"X": input}, {"axis": [int(d) for d in dims]}, name=name)


def unstack(x, axis=0, num=None):
    """The slices of `x` along `axis`, as a list of Variables with that axis removed."""
    n = x.shape[axis] if num is None else int(num)
    if n is None or n < 0:
        raise FluidityError(f"unstack: the size of axis {axis} of '{x.name}' {list(x.shape)} "
                            f"is unknown; give num")
    helper = LayerHelper("unstack")
    outs = [helper.create_variable_for_type_inference(x.dtype) for _ in range(n)]
    helper.append_op("unstack", inputs={"X": x}, outputs={"Y": outs},
                     attrs={"axis": int(axis), "num": n})
    return outs


def unbind(input, axis=0):
    """The slices of `input` along `axis` (that dim removed), a list of Variables."""
    check_dtype_of("unbind", "input", input, ("float32", "float64", "int32", "int64"))
    if isinstance(axis, bool) or not isinstance(axis, numbers.Integral):
        raise TypeError(f"The type of 'axis'  must be int, but received {type(axis)}.")
    axis = int(axis)
    rank = len(input.shape)
    if not -rank <= axis < rank:
        raise ValueError(f"unbind: axis {axis} is out of range for input of rank {rank}")
    n = input.shape[axis % rank]
    if n < 0:
        raise ShapeError(f"unbind: the size of dim {axis} of input {list(input.shape)} must be "
                         f"known (it is the number of outputs)")
    helper = LayerHelper("unbind")
    outs = [helper.create_variable_for_type_inference(input.dtype) for _ in range(n)]
    helper.append_op("unbind", inputs={"X": input}, outputs={"Out": outs},
                     attrs={"axis": axis})
    return outs


def clip_by_norm(x, max_norm, name=None):
    """x * max_norm / max(||x||_2, max_norm)."""
    return one_op_layer("clip_by_norm", {"X": x}, {"max_norm": float(max_norm)}, name=name)


# --- Fluid 1.x indexing layers (ops in fluidity/ops/scatter.py, indexing.py, shape_ops.py) ----
__all__ += ["reduce_all", "reduce_any", "gather_nd", "scatter", "scatter_nd_add", "scatter_nd",
            "unique", "unique_with_counts", "shard_index", "expand_as", "strided_slice",
            "rank", "size"]

reduce_all = _reduce_layer("reduce_all")
reduce_any = _reduce_layer("reduce_any")


def gather_nd(input, index, name=None):
    """input[index[i..., :]] for every i: index's last dim addresses input's leading dims."""
    check_variables("gather_nd", input=input, index=index)
    return one_op_layer("gather_nd", {"X": input, "Index": index}, name=name)


def scatter(input, index, updates, name=None, overwrite=True):
    """`input` with rows `index` replaced by (overwrite) or set to the sum of (not) the
    rows of `updates`."""
    check_variables("scatter", input=input, index=index, updates=updates)
    return one_op_layer("scatter", {"X": input, "Ids": index, "Updates": updates},
                        {"overwrite": bool(overwrite)}, name=name)


def scatter_nd_add(ref, index, updates, name=None):
    """`ref` with updates[i...] added at ref[index[i..., :]] (duplicates add up)."""
    check_variables("scatter_nd_add", ref=ref, index=index, updates=updates)
    if ref.dtype != updates.dtype:          # Fluid 1.8's check, a ValueError as there
        raise ValueError(f"scatter_nd_add: ref ({ref.name}) and updates ({updates.name}) "
                         f"must have the same data type, got {dtypes.name(ref.dtype)} and "
                         f"{dtypes.name(updates.dtype)}")
    return one_op_layer("scatter_nd_add", {"X": ref, "Index": index, "Updates": updates}, name=name)


def scatter_nd(index, updates, shape, name=None):
    """A zero tensor of `shape` with `updates` added at `index` (scatter_nd_add on zeros)."""
    check_variables("scatter_nd", index=index, updates=updates)
    if not isinstance(shape, (list, tuple)):
        raise TypeError(f"scatter_nd: 'shape' must be a list or tuple of ints, got {shape!r}")
    return scatter_nd_add(zeros(list(shape), updates.dtype), index, updates, name=name)


def _unique(op_type, x, dtype, counts):
    check_variables(op_type, x=x)
    helper = LayerHelper(op_type)
    out = helper.create_variable_for_type_inference(x.dtype, stop_gradient=True)
    outs = {"Out": out, "Index": helper.create_variable_for_type_inference(
        dtype, stop_gradient=True)}
    if counts:
        outs["Count"] = helper.create_variable_for_type_inference(dtype, stop_gradient=True)
    helper.append_op(op_type, inputs={"X": x}, outputs=outs,
                     attrs={"dtype": dtypes.to_code(dtype)})
    return tuple(outs.values())


def unique(x, dtype="int32"):
    """(the distinct elements of 1-D `x` in order of first occurrence, the index of each
    element of x among them)."""
    return _unique("unique", x, dtype, False)


def unique_with_counts(x, dtype="int32"):
    """unique's (out, index) and how often each distinct element occurs."""
    return _unique("unique_with_counts", x, dtype, True)


def shard_index(input, index_num, nshards, shard_id, ignore_value=-1):
    """Ids of shard `shard_id` (of `nshards` shards of ceil(index_num / nshards) ids) made
    local to it; ids of other shards become ignore_value."""
    check_variables("shard_index", input=input)
    for arg, v in (("index_num", index_num), ("nshards", nshards), ("shard_id", shard_id)):
        if not isinstance(v, int):
            raise TypeError(f"shard_index: '{arg}' must be an int, got {v!r}")
    if not 0 <= shard_id < nshards:
        raise ValueError(f"shard_index: shard_id={shard_id} is not in [0, nshards={nshards})")
    out = one_op_layer("shard_index", {"X": input},
                       {"index_num": index_num, "nshards": nshards, "shard_id": shard_id,
                        "ignore_value": int(ignore_value)})
    out.stop_gradient = True
    return out


def expand_as(x, target_tensor, name=None):
    """`x` tiled to the shape of `target_tensor`."""
    check_variables("expand_as", x=x, target_tensor=target_tensor)
    return one_op_layer("expand_as", {"X": x, "target_tensor": target_tensor}, name=name)


def strided_slice(input, axes, starts, ends, strides):
    """input[starts:ends:strides] along `axes` (each list may hold ints or [1] Variables,
    or be one int Variable)."""
    helper = LayerHelper("strided_slice")
    ins = {"Input": input}
    attrs = {"axes": [int(a) for a in axes]}
    for key, vals in (("starts", starts), ("ends", ends), ("strides", strides)):
        attr, t, tl = _ints_or_tensors(helper, vals)
        attrs[key] = attr if t is None else [-1] * len(axes)
        slot = key.title()
        if t is not None:
            ins[slot + "Tensor"] = t
        if tl is not None:
            ins[slot + "TensorList"] = tl
    attrs["infer_flags"] = [1] * len(axes)
    return one_op_layer("strided_slice", ins, attrs, helper=helper)


def rank(input):
    """The rank of `input`, a [1] int32 constant."""
    check_variables("rank", input=input)
    return fill_constant([1], "int32", len(input.shape))


def size(input):
    """The number of elements of `input` at run time, a [1] int64 tensor."""
    check_variables("size", input=input)
    out = one_op_layer("size", {"Input": input}, dtype="int64")
    out.stop_gradient = True
    return out


def tensor_array_to_tensor(input, axis=1, name=None, use_stack=False):
    """(the array's tensors concatenated, or stacked, along axis; int32 sizes of each)."""
    check_variables("tensor_array_to_tensor", input=input)
    helper = LayerHelper("tensor_array_to_tensor", name=name)
    out = helper.create_variable_for_type_inference(input.dtype)
    index = helper.create_variable_for_type_inference("int32", stop_gradient=True)
    helper.append_op("tensor_array_to_tensor", inputs={"X": input},
                     outputs={"Out": out, "OutIndex": index},
                     attrs={"axis": int(axis), "use_stack": bool(use_stack)})
    return out, index
