"""Tensor manipulation, reduction, comparison and logic layers (Fluid 1.x signatures):
concat, split, reshape, transpose, squeeze, unsqueeze, slice, gather, stack, expand,
cast, shape, one_hot, reduce_*, less_than, ..., logical_*, increment, argmax, argmin, clip,
where."""
from ..core import dtypes
from ..errors import FluidityError
from ..framework import Variable
from ..layer_helper import LayerHelper
from ..ops.logic import COMPARISONS, LOGICAL
from ..ops.reduce import REDUCERS

# `flatten` (op flatten2) is in layers/nn.py.
__all__ = (["concat", "split", "reshape", "transpose", "squeeze", "unsqueeze", "slice",
            "gather", "stack", "expand", "cast", "shape", "one_hot"] +
           list(REDUCERS) + list(COMPARISONS) + list(LOGICAL) +
           ["logical_not", "increment", "argmax", "argmin", "clip", "where", "argsort",
            "cumsum", "flip", "unstack", "clip_by_norm"])


def _op(op_type, inputs, attrs=None, dtype=None, out=None, name=None, out_slot="Out",
        helper=None):
    """Append `op_type` writing one new (or the given) output; returns it."""
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


def _int_tensor(helper, v):
    """An int32 [1] tensor holding `v` (an int), or `v` itself if it is a Variable."""
    if isinstance(v, Variable):
        return v
    t = helper.create_variable_for_type_inference("int32", stop_gradient=True)
    helper.append_op("fill_constant", outputs={"Out": t},
                     attrs={"shape": [1], "dtype": dtypes.VarType.INT32, "value": float(v)})
    return t


def _ints_or_tensors(helper, values):
    """A list attribute a caller may give as ints, a Variable, or ints mixed with Variables.
    Returns (attribute ints, 1-D tensor or None, tensor list or None); entries a tensor
    decides are -1 in the attribute."""
    if isinstance(values, Variable):
        return [], values, None
    values = list(values)
    if not any(isinstance(v, Variable) for v in values):
        return [int(v) for v in values], None, None
    attr = [-1 if isinstance(v, Variable) else int(v) for v in values]
    return attr, None, [_int_tensor(helper, v) for v in values]


# --- joining and cutting ---------------------------------------------------------------------
def concat(input, axis=0, name=None):
    """Join `input` (a list of Variables) along `axis` (an int or an int Variable)."""
    axis_t = axis if isinstance(axis, Variable) else None
    return _op("concat", {"X": list(input), "AxisTensor": axis_t},
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
    return _op("stack", {"X": x}, {"axis": int(axis)}, name=name, out_slot="Y")


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
    return _op("slice", {"Input": input, "StartsTensor": s_t, "EndsTensor": e_t,
                         "StartsTensorList": s_list, "EndsTensorList": e_list}, attrs,
               helper=helper)


def gather(input, index, overwrite=True):
    """Rows of `input` at `index` (1-D or [N, 1] int)."""
    return _op("gather", {"X": input, "Index": index}, {"overwrite": overwrite})


def expand(x, expand_times, name=None):
    """Tile `x` expand_times[i] times along dim i."""
    helper = LayerHelper("expand", name=name)
    attr, times_t, times_list = _ints_or_tensors(helper, expand_times)
    return _op("expand", {"X": x, "ExpandTimes": times_t, "expand_times_tensor": times_list},
               {"expand_times": attr}, helper=helper)


def cast(x, dtype):
    """`x` converted to `dtype`."""
    code = dtypes.to_code(dtype)
    return _op("cast", {"X": x}, {"in_dtype": x.dtype, "out_dtype": code}, dtype=code)


def shape(input):
    """The shape of `input` at run time, an int32 1-D tensor."""
    out = _op("shape", {"Input": input}, dtype="int32")
    out.stop_gradient = True
    return out


def one_hot(input, depth, allow_out_of_range=False):
    """One-hot float32 rows of int64 ids `input` [..., 1] -> [..., depth] (op one_hot)."""
    depth_t = depth if isinstance(depth, Variable) else None
    attrs = {"depth": -1 if depth_t is not None else int(depth),
             "allow_out_of_range": allow_out_of_range, "dtype": dtypes.VarType.FP32}
    out = _op("one_hot", {"X": input, "depth_tensor": depth_t}, attrs, dtype="float32")
    out.stop_gradient = True
    return out


# --- reductions --------------------------------------------------------------------------------
def _reduce_layer(op_type):
    def layer(input, dim=None, keep_dim=False, name=None):
        dims = [] if dim is None else [dim] if isinstance(dim, int) else list(dim)
        everything = not dims or len(dims) == len(input.shape)
        return _op(op_type, {"X": input}, {"dim": dims or [0], "keep_dim": keep_dim,
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
        out = _op(op_type, {"X": x, "Y": y},
                  {"axis": -1, "force_cpu": bool(force_cpu)}, dtype="bool", out=cond,
                  name=name)
        out.stop_gradient = True
        return out
    layer.__name__ = op_type
    layer.__doc__ = f"Elementwise {op_type}(x, y) as bool; written to `cond` if given."
    return layer


for _t in COMPARISONS:
    globals()[_t] = _compare_layer(_t)


def _logical_layer(op_type):
    def layer(x, y, out=None, name=None):
        return _op(op_type, {"X": x, "Y": y}, dtype="bool", out=out, name=name)
    layer.__name__ = op_type
    layer.__doc__ = f"Elementwise {op_type}(x, y) of bool tensors."
    return layer


for _t in LOGICAL:
    globals()[_t] = _logical_layer(_t)


def logical_not(x, out=None, name=None):
    return _op("logical_not", {"X": x}, dtype="bool", out=out, name=name)


def increment(x, value=1.0, in_place=True):
    """x + value for a one-element `x`; written back to `x` when in_place (loop counters)."""
    out = _op("increment", {"X": x}, {"step": float(value)}, out=x if in_place else None)
    out.stop_gradient = True
    return out


def _arg_layer(op_type):
    def layer(x, axis=0):
        out = _op(op_type, {"X": x}, {"axis": int(axis)}, dtype="int64")
        out.stop_gradient = True
        return out
    layer.__doc__ = f"Indices (int64) of the {op_type[4:]}imum of `x` along `axis`."
    return layer


argmax = _arg_layer("arg_max")
argmin = _arg_layer("arg_min")


def clip(x, min, max, name=None):
    """`x` clipped to [min, max]."""
    return _op("clip", {"X": x}, {"min": float(min), "max": float(max)}, name=name)


def where(condition, x=None, y=None, name=None):
    """With x and y: x where `condition` else y (op where). With `condition` alone (Fluid
    1.x): the [N, rank] int64 coordinates of its true elements (op where_index)."""
    if x is None and y is None:
        out = _op("where_index", {"Condition": condition}, dtype="int64", name=name)
        out.stop_gradient = True
        return out
    if x is None or y is None:
        raise FluidityError("where: give both x and y, or neither")
    return _op("where", {"Condition": condition, "X": x, "Y": y}, dtype=x.dtype, name=name)


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
    return _op("cumsum", {"X": x}, attrs)


def flip(input, dims, name=None):
    """`input` reversed along each axis in `dims`."""
    dims = [dims] if isinstance(dims, int) else list(dims)
    if not dims:
        raise FluidityError("flip: dims must name at least one axis")
    return _op("flip", {"X": input}, {"axis": [int(d) for d in dims]}, name=name)


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


def clip_by_norm(x, max_norm, name=None):
    """x * max_norm / max(||x||_2, max_norm)."""
    return _op("clip_by_norm", {"X": x}, {"max_norm": float(max_norm)}, name=name)

