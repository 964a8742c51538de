"""`var[i]`, `var[:, 0]`, `var[t]` (t a Variable), `var[::-1]`: Fluid 1.x's static-graph
indexing of a Variable. It builds the ops Fluid 1.8's `Variable.__getitem__` builds: one
`slice` (or `strided_slice` when a step is not 1) over the indexed axes, an integer index
dropping its axis (`decrease_axis`), then a `reverse` for each `::-1` axis. A Variable index
(a [1] int tensor, e.g. a loop counter) is passed to the op as a tensor bound.

Indexing builds ops; iterating over a Variable does not (its length is not known when the
program is built), so `iter(var)` raises TypeError instead of slicing forever."""
import numbers

from .. import unique_name
from ..framework import Variable

_END = 10000000        # Fluid's "to the end" bound


def _const_int32(block, value):
    out = block.create_var(name=unique_name.generate("slice_bound"), dtype="int32", shape=[1],
                           stop_gradient=True)
    block.append_op("fill_constant", outputs={"Out": [out]},
                    attrs={"shape": [1], "dtype": out.dtype, "value": float(value),
                           "force_cpu": True})
    return out


def _plus_one(block, index):
    one = _const_int32(block, 1)
    end = block.create_var(name=unique_name.generate("slice_end"), dtype=index.dtype,
                           shape=[1], stop_gradient=True)
    block.append_op("elementwise_add", inputs={"X": [index], "Y": [one]},
                    outputs={"Out": [end]}, attrs={"axis": -1})
    return end


def _check_int_index(var, dim, index):
    size = var.shape[dim] if dim < len(var.shape) else None
    if size is not None and size >= 0 and not -size <= index < size:
        raise IndexError(f"index {index} is out of range for dim {dim} of '{var.name}' "
                         f"(shape {list(var.shape)})")


def _parse(var, block, items):
    """(axes, starts, ends, steps, decrease, reverse) of an index tuple."""
    if len(items) > len(var.shape) and len(var.shape) > 0:
        raise IndexError(f"too many indices for '{var.name}': {len(items)} for shape "
                         f"{list(var.shape)}")
    axes, starts, ends, steps, decrease, reverse = [], [], [], [], [], []
    for dim, item in enumerate(items):
        if isinstance(item, slice):
            start, stop, step = item.start, item.stop, item.step
            if start is None and stop is None and step is None:
                continue
            step = 1 if step is None else step
            # a Variable step (a [1] int tensor, Fluid 1.8 takes it) goes to strided_slice's
            # StridesTensorList; its value is checked when the op runs
            if not isinstance(step, Variable) and (
                    not isinstance(step, numbers.Integral) or step == 0):
                raise ValueError(f"slicing '{var.name}': the step must be a nonzero int or a "
                                 f"Variable, got {step!r}")
            if start is None and stop is None and not isinstance(step, Variable):
                if step != -1:
                    raise ValueError(f"slicing '{var.name}' dim {dim}: a step without bounds "
                                     f"must be -1 (reverse), got {step}")
                reverse.append(dim)
                continue
            axes.append(dim)
            starts.append(0 if start is None else start)
            ends.append(_END if stop is None else stop)
            steps.append(step)
        elif isinstance(item, Variable) or isinstance(item, int) and not isinstance(item, bool):
            if isinstance(item, int):
                _check_int_index(var, dim, item)
            axes.append(dim)
            decrease.append(dim)
            starts.append(item)
            if isinstance(item, Variable):
                ends.append(_plus_one(block, item))
            else:
                ends.append(item + 1 if item != -1 else _END)
            steps.append(1)
        else:
            raise IndexError(f"indexing '{var.name}': an index must be an int, a slice or a "
                             f"Variable, got {type(item).__name__}")
    return axes, starts, ends, steps, decrease, reverse


def _bounds(block, values, key, inputs, attrs, flags):
    """Fluid's encoding of one bound list: ints as an attribute; with any Variable, every
    entry as a [1] int32 tensor in `<Key>TensorList` and -1 in the attribute for each
    Variable entry (whose axis' infer flag is -1)."""
    if not any(isinstance(v, Variable) for v in values):
        attrs[key] = [int(v) for v in values]
        return
    tensors, attr = [], []
    for i, v in enumerate(values):
        if isinstance(v, Variable):
            v.stop_gradient = True
            tensors.append(v)
            attr.append(-1)
            flags[i] = -1
        else:
            tensors.append(_const_int32(block, v))
            attr.append(int(v))
    inputs[key.title() + "TensorList"] = tensors
    attrs[key] = attr


def _block_for(var, items):
    """Where the ops go: with only int and slice indices, the variable's own block, as
    Fluid 1.8 builds them (so `init[i]` inside a StaticRNN step is a value of the enclosing
    block, fit to be a memory's init); with a Variable index, the block being built, so that
    `x[t]` in a loop body slices at every step with that step's t (Fluid 1.8 sliced once,
    before the loop)."""
    if any(isinstance(v, Variable) for it in items
           for v in ((it.start, it.stop, it.step) if isinstance(it, slice) else (it,))):
        return var.block.program.current_block()
    return var.block


def getitem(var, item):
    """Variable.__getitem__ (see the module's docstring)."""
    items = list(item) if isinstance(item, tuple) else [item]
    block, out = _block_for(var, items), var
    axes, starts, ends, steps, decrease, reverse = _parse(var, block, items)
    if axes:
        strided = any(isinstance(s, Variable) or s != 1 for s in steps)
        op_type = "strided_slice" if strided else "slice"
        inputs, attrs = {"Input": [var]}, {"axes": axes, "decrease_axis": decrease}
        flags = [1] * len(axes)
        _bounds(block, starts, "starts", inputs, attrs, flags)
        _bounds(block, ends, "ends", inputs, attrs, flags)
        if strided:
            _bounds(block, steps, "strides", inputs, attrs, flags)
        attrs["infer_flags"] = flags
        out = block.create_var(name=unique_name.generate(f"{var.name}_{op_type}"),
                               dtype=var.dtype)
        block.append_op(op_type, inputs=inputs, outputs={"Out": [out]}, attrs=attrs)
    if reverse:
        rev = block.create_var(name=unique_name.generate(f"{var.name}_slice_reverse"),
                               dtype=var.dtype)
        block.append_op("reverse", inputs={"X": [out]}, outputs={"Out": [rev]},
                        attrs={"axis": reverse})
        out = rev
    return out


def not_iterable(var):
    raise TypeError(f"Variable '{var.name}' is not iterable: index it (var[i]) instead")
