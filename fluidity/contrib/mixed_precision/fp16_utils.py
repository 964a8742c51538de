"""The program rewrite behind automatic mixed precision (Fluid 1.8's): casts around the ops
that run in float16, and the dynamic loss-scaling update.

`rewrite_program` classifies the forward ops of the global block by fp16_lists (a gray op
takes black when an op feeding it is black, else white when one is white, else stays as it
is) and inserts `cast` ops: a white op reads float16 copies (`<var>.cast_fp16`) of its
float32 inputs and writes float16; a black op reads float32 copies (`<var>.cast_fp32`) of
float16 inputs. Parameters stay float32 (the copies are made each step), so the optimizer
updates float32 master weights."""
from ... import layers
from ...core.dtypes import VarType

__all__ = ["rewrite_program", "update_loss_scaling"]

_CASTABLE = (VarType.LOD_TENSOR, VarType.SELECTED_ROWS, VarType.LOD_TENSOR_ARRAY)
_SUFFIX = {VarType.FP16: "fp16", VarType.FP32: "fp32"}


def _producer(ops, upto, name):
    """The last op before index `upto` that writes `name`, or None."""
    for op in reversed(ops[:upto]):
        if name in op.output_arg_names:
            return op
    return None


def _touches_black_varnames(op, amp_lists):
    names = set(amp_lists.black_varnames or ())
    return bool(names & (set(op.input_arg_names) | set(op.output_arg_names)))


def _classify(ops, amp_lists):
    white, black = set(), set()
    for i, op in enumerate(ops):
        if amp_lists.black_varnames and _touches_black_varnames(op, amp_lists):
            black.add(i)
        elif op.type in amp_lists.black_list:
            black.add(i)
        elif op.type in amp_lists.white_list:
            white.add(i)
        elif op.type in amp_lists.gray_list:
            feeders = [_producer(ops, i, n) for n in op.input_arg_names]
            kinds = set()
            for f in feeders:
                if f is None:
                    continue
                j = ops.index(f)
                if j in black or f.type in amp_lists.black_list:
                    kinds.add("black")
                elif j in white or f.type in amp_lists.white_list:
                    kinds.add("white")
            if "black" in kinds:
                black.add(i)
            elif "white" in kinds:
                white.add(i)
        else:
            black.add(i)
    return white, black


def _insert_casts(block, op, idx, src, dest):
    """Cast `op`'s `src` inputs to `dest` before it (index `idx`); a float16 op's float32
    outputs become float16. Returns how many cast ops were inserted."""
    n = 0
    for slot in op.input_names:
        if src == VarType.FP32 and op.type == "batch_norm" and slot != "X":
            continue                  # its scale, bias and statistics stay float32
        for name in op.input(slot):
            var = block.var(name)
            if var.type not in _CASTABLE:
                continue
            if var.dtype == src:
                cast_name = f"{name}.cast_{_SUFFIX[dest]}"
                out = block.vars.get(cast_name)
                if out is None or out.dtype != dest:
                    out = block.create_var(name=cast_name, dtype=dest, persistable=False,
                                           stop_gradient=False, shape=var.shape,
                                           lod_level=var.lod_level)
                    block._insert_op(idx, type="cast", inputs={"X": [var]},
                                     outputs={"Out": [out]},
                                     attrs={"in_dtype": var.dtype, "out_dtype": dest})
                    n += 1
                op._rename_input(name, cast_name)
            elif op.has_attr("in_dtype"):
                op._set_attr("in_dtype", dest)
    if src == VarType.FP32:
        for slot in op.output_names:
            if op.type == "batch_norm" and slot != "Y":
                continue
            for name in op.output(slot):
                var = block.var(name)
                if var.type in _CASTABLE and var.dtype == VarType.FP32:
                    var._set_dtype(VarType.FP16)
                    if op.has_attr("out_dtype"):
                        op._set_attr("out_dtype", VarType.FP16)
    return n


def rewrite_program(main_prog, amp_lists):
    """In place: the casts that make white ops run in float16 and black ops in float32."""
    block = main_prog.global_block()
    ops = list(block.ops)
    white, black = _classify(ops, amp_lists)
    kinds = {id(op.desc): ("white" if i in white else "black" if i in black else None)
             for i, op in enumerate(ops)}
    idx = 0
    while idx < len(block.ops):
        op = block.ops[idx]
        kind = kinds.get(id(op.desc))
        n = 0
        if kind == "black":
            n = _insert_casts(block, op, idx, VarType.FP16, VarType.FP32)
        elif kind == "white":
            n = _insert_casts(block, op, idx, VarType.FP32, VarType.FP16)
        idx += n + 1


def update_loss_scaling(is_overall_finite, prev_loss_scaling, num_good_steps, num_bad_steps,
                        incr_every_n_steps, decr_every_n_nan_or_inf, incr_ratio, decr_ratio):
    """Append the dynamic loss-scaling update: after `incr_every_n_steps` finite steps in a
    row the scaling grows by `incr_ratio` (if it stays finite); after
    `decr_every_n_nan_or_inf` steps with a non-finite gradient it shrinks by `decr_ratio`
    (never below 1). The step counters restart at each change."""
    zero = layers.fill_constant(shape=[1], dtype="int32", value=0)
    with layers.Switch() as switch:
        with switch.case(is_overall_finite):
            grow = layers.less_than(incr_every_n_steps, num_good_steps + 1)
            with layers.Switch() as s1:
                with s1.case(grow):
                    bigger = prev_loss_scaling * incr_ratio
                    with layers.Switch() as s2:
                        with s2.case(layers.isfinite(bigger)):
                            layers.assign(bigger, prev_loss_scaling)
                        with s2.default():
                            pass
                    layers.assign(zero, num_good_steps)
                    layers.assign(zero, num_bad_steps)
                with s1.default():
                    layers.increment(num_good_steps)
                    layers.assign(zero, num_bad_steps)
        with switch.default():
            shrink = layers.less_than(decr_every_n_nan_or_inf, num_bad_steps + 1)
            with layers.Switch() as s3:
                with s3.case(shrink):
                    smaller = prev_loss_scaling * decr_ratio
                    one = layers.fill_constant(shape=[1], dtype="float32", value=1.0)
                    with layers.Switch() as s4:
                        with s4.case(layers.less_than(smaller, one)):
                            layers.assign(one, prev_loss_scaling)
                        with s4.default():
                            layers.assign(smaller, prev_loss_scaling)
                    layers.assign(zero, num_good_steps)
                    layers.assign(zero, num_bad_steps)
                with s3.default():
                    layers.assign(zero, num_good_steps)
                    layers.increment(num_bad_steps)
