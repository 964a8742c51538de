"""Control-flow layers (Fluid 1.x / paddle.static API): While, while_loop, cond, IfElse,
Switch, StaticRNN, DynamicRNN, and tensor arrays / rank tables.

Each builder opens a sub-block of the current program (`Program._create_block`), lets the
user's code fill it, returns to the parent block (`_rollback`) and appends to the parent the
op that runs the sub-block, listing as its inputs the outer variables the block reads and as
its outputs the outer variables it writes (as Paddle does, so the op can be differentiated and
programs interchange). Comparison, logic and `increment` layers live in layers/manip.py.
"""
import contextlib

from .. import unique_name
from ..core import dtypes
from ..core.dtypes import VarType
from ..backward import backward_block_of
from ..framework import OpRole, Variable, check_type, default_main_program, op_role_guard
from ..layer_helper import LayerHelper
from ..proto import framework_pb2 as pb
from .manip import cast, increment, less_than, logical_and, logical_not
from .tensor import assign, fill_constant

__all__ = ["While", "while_loop", "cond", "ConditionalBlock", "IfElse", "Switch",
           "StaticRNN", "DynamicRNN", "select_input", "select_output", "create_array",
           "array_write", "array_read", "array_length", "lod_rank_table", "max_sequence_len",
           "lod_tensor_to_array", "array_to_lod_tensor", "shrink_memory",
           "reorder_lod_tensor_by_rank", "fill_constant_batch_size_like"]

ARRAY = VarType.LOD_TENSOR_ARRAY


# ---------------------------------------------------------------------------------------
# sub-blocks
# ---------------------------------------------------------------------------------------
@contextlib.contextmanager
def _sub_block():
    """Build into a new child block of the current one; yields it."""
    program = default_main_program()
    block = program._create_block()
    try:
        yield block
    finally:
        program._rollback()


def _outer_io(block, written_first=()):
    """(reads, writes): outer variables (declared in an ancestor, not in `block`) that the
    block's ops read before writing them, and that they write. Ops with sub-blocks list what
    their own blocks use in their slots, so nesting needs no recursion."""
    parent = block.parent
    seen_w, reads, writes = set(written_first), [], []
    for op in block.ops:
        for n in op.input_arg_names:
            if n not in seen_w:
                reads.append(n)
        for n in op.output_arg_names:
            seen_w.add(n)
            writes.append(n)

    def outer(names):
        return [n for n in dict.fromkeys(names)
                if n not in block.vars and parent.find_var_recursive(n) is not None]
    return outer(reads), outer(writes)


def _step_scopes_var(block):
    return block.create_var(name=unique_name.generate("_generated_var"),
                            type=VarType.STEP_SCOPES)


def _check_bool_scalar(var, what):
    if not isinstance(var, Variable):
        raise TypeError(f"{what}: expected a bool Variable, got {type(var).__name__}")
    if var.dtype != VarType.BOOL:
        raise TypeError(f"{what}: the condition must be bool, got {dtypes.name(var.dtype)}")
    n = 1
    for d in var.shape:
        n *= max(d, 1)
    if n != 1:
        raise TypeError(f"{what}: the condition must hold one element, got shape "
                        f"{list(var.shape)}")


# ---------------------------------------------------------------------------------------
# While / while_loop
# ---------------------------------------------------------------------------------------
class While:
    """A while loop: the body (built under `with w.block():`) runs while `cond` (a bool
    [1] Variable) is true; the body must update `cond` itself.

        i = fill_constant([1], "int64", 0); n = fill_constant([1], "int64", 10)
        cond = less_than(i, n)
        w = While(cond)
        with w.block():
            ...
            increment(i, in_place=True)
            less_than(i, n, cond=cond)

    Variables created in the body are local to one iteration; to carry a value out of the
    loop or into the next iteration, write an outer variable (`assign(x, output=outer)`).
    """

    def __init__(self, cond, is_test=False, name=None):
        _check_bool_scalar(cond, "While")
        self.cond_var = cond
        self.is_test = is_test
        self.helper = LayerHelper("while", name=name)

    @contextlib.contextmanager
    def block(self):
        with _sub_block() as body:
            yield body
        self._complete(body)

    def _complete(self, body):
        parent = body.parent
        cond = self.cond_var.name
        reads, writes = _outer_io(body, written_first=[cond])
        out = list(dict.fromkeys([cond] + writes))
        x = [n for n in dict.fromkeys(reads + writes) if n != cond]
        parent.append_op("while", inputs={"X": x, "Condition": [cond]},
                         outputs={"Out": out, "StepScopes": [_step_scopes_var(parent)]},
                         attrs={"sub_block": body, "is_test": self.is_test})


def _flatten(x):
    """The leaves of a nest of lists, tuples and dicts (a dict's values by sorted key, as
    Fluid's layers.utils.flatten)."""
    if isinstance(x, dict):
        return [v for k in sorted(x) for v in _flatten(x[k])]
    if isinstance(x, (list, tuple)):
        return [v for item in x for v in _flatten(item)]
    return [x]


def _pack(structure, flat):
    """A nest shaped as `structure` (new lists, tuples, dicts) holding `flat`'s leaves."""
    it = iter(flat)

    def build(s):
        if isinstance(s, dict):
            built = {k: build(s[k]) for k in sorted(s)}
            return type(s)((k, built[k]) for k in s) if type(s) is not dict else \
                {k: built[k] for k in s}
        if isinstance(s, (list, tuple)):
            return type(s)(build(v) for v in s)
        return next(it)
    return build(structure)


def _structure(x):
    """A nest's shape with its leaves erased, to compare two nests."""
    if isinstance(x, dict):
        return ("dict", tuple((k, _structure(x[k])) for k in sorted(x)))
    if isinstance(x, (list, tuple)):
        return ("seq", tuple(_structure(v) for v in x))
    return None


def while_loop(cond, body, loop_vars, is_test=False, name=None):
    """Repeat `loop_vars = body(*loop_vars)` while `cond(*loop_vars)` is true (a bool [1]
    Variable). loop_vars may nest lists, tuples and dicts of Variables; the body gets its
    own copy of the nests, so changing them in place leaves loop_vars as they were.
    Returns the final loop_vars (the same Variables, updated in place)."""
    if not callable(cond) or not callable(body):
        raise TypeError("while_loop: cond and body must be callables")
    if not isinstance(loop_vars, (list, tuple)) or not loop_vars:
        raise ValueError("while_loop: loop_vars must be a non-empty list or tuple")
    pre_cond = cond(*loop_vars)
    _check_bool_scalar(pre_cond, "while_loop: the value of cond")
    loop = While(pre_cond, is_test, name)
    with loop.block():
        outs = body(*_pack(list(loop_vars), _flatten(list(loop_vars))))
        outs = list(outs) if isinstance(outs, (list, tuple)) else [outs]
        if _structure(outs) != _structure(list(loop_vars)):
            raise ValueError(f"body in while_loop should return the same arity (length and "
                             f"structure) as loop_vars: body returned {len(outs)} values "
                             f"({len(_flatten(outs))} Variables) for {len(loop_vars)} "
                             f"loop_vars ({len(_flatten(list(loop_vars)))} Variables)")
        now = cond(*outs)
        for new, old in zip(_flatten(outs), _flatten(list(loop_vars))):
            if isinstance(new, Variable) and new.name != old.name:
                assign(new, old)
        assign(now, pre_cond)
    return loop_vars


# ---------------------------------------------------------------------------------------
# conditional blocks: ConditionalBlock, cond, IfElse, Switch
# ---------------------------------------------------------------------------------------
class ConditionalBlock:
    """A block run once when `inputs[0]` (a bool scalar) is true (is_scalar_condition), or
    when every tensor the block reads is non-empty (IfElse's row-routed branches)."""

    def __init__(self, inputs, is_scalar_condition=False, name=None):
        self.inputs = list(inputs)
        self.is_scalar_condition = is_scalar_condition
        self.helper = LayerHelper("conditional_block", name=name)

    @contextlib.contextmanager
    def block(self):
        with _sub_block() as body:
            yield body
        self.complete(body)

    def complete(self, body):
        parent = body.parent
        reads, writes = _outer_io(body)
        scope = _step_scopes_var(parent)
        parent.append_op("conditional_block", inputs={"Cond": self.inputs, "Input": reads},
                         outputs={"Out": writes, "Scope": [scope]},
                         attrs={"sub_block": body,
                                "is_scalar_condition": self.is_scalar_condition})
        grad_block = backward_block_of(body)
        if grad_block is not None:   # an optimizer's minimize inside the branch (Fluid 1.8)
            self._append_grad_run(parent, grad_block, reads, scope)

    def _append_grad_run(self, parent, grad_block, reads, scope):
        """A conditional_block_grad after the branch, running `grad_block` (the gradient
        and update ops of a loss built in the branch) in the branch's scope under the same
        condition, as Fluid's ConditionalBlock.append_conditional_block_grad. Nothing
        outside the branch takes a gradient from it (no Input@GRAD)."""
        with op_role_guard(OpRole.Backward):
            parent.append_op("conditional_block_grad",
                             inputs={"Cond": self.inputs, "Input": reads, "Out": [],
                                     "Out@GRAD": [], "Scope": [scope]},
                             outputs={"Input@GRAD": []},
                             attrs={"sub_block": grad_block,
                                    "is_scalar_condition": self.is_scalar_condition})


def _copy_to_parent(var):
    """A new variable of the parent block holding `var` (assigned in the current block)."""
    if not isinstance(var, Variable):
        raise TypeError(f"cond: branches must return Variables, got {type(var).__name__}")
    program = default_main_program()
    parent = program.block(program.current_block().parent_idx)
    if var.type == ARRAY and parent.find_var_recursive(var.name) is not None:
        return var
    out = parent.create_var(name=unique_name.generate("_generated_var"), dtype=var.dtype,
                            shape=var.shape, type=var.type, lod_level=var.lod_level)
    assign(var, out)
    return out


def split_lod_tensor(input, mask, level=0):
    """(out_true, out_false): the items of `input` (rows, or its level-`level` sequences)
    where the bool column `mask` is true, and where it is false (IfElse's routing)."""
    where = "fluid.layers.split_lod_tensor"
    check_type(input, "input", (Variable, list, tuple, type(None)), where)
    check_type(mask, "mask", (Variable, list), where)
    check_type(level, "level", int, where)
    helper = LayerHelper("split_lod_tensor")
    out_true = helper.create_variable_for_type_inference(input.dtype)
    out_false = helper.create_variable_for_type_inference(input.dtype)
    helper.append_op("split_lod_tensor", inputs={"X": input, "Mask": mask},
                     outputs={"OutTrue": out_true, "OutFalse": out_false},
                     attrs={"level": level})
    return out_true, out_false


def merge_lod_tensor(in_true, in_false, x, mask, level=0):
    """The inverse of split_lod_tensor: items of `in_true` where `mask` is true and of
    `in_false` elsewhere, in `x`'s order (`x` gives the items' LoD)."""
    where = "fluid.layers.merge_lod_tensor"
    check_type(x, "x", (Variable, list, tuple, type(None)), where)
    check_type(mask, "mask", (Variable, list), where)
    check_type(in_true, "in_true", (Variable, list, tuple, type(None)), where)
    check_type(in_false, "in_false", (Variable, list, tuple, type(None)), where)
    check_type(level, "level", int, where)
    helper = LayerHelper("merge_lod_tensor")
    out = helper.create_variable_for_type_inference(in_true.dtype)
    helper.append_op("merge_lod_tensor",
                     inputs={"X": x, "Mask": mask, "InTrue": in_true, "InFalse": in_false},
                     outputs={"Out": out}, attrs={"level": level})
    return out


def select_input(inputs, mask):
    """inputs[mask] (mask: an int32 [1] Variable)."""
    helper = LayerHelper("select_input")
    first, last = inputs[0], inputs[-1]
    out = helper.create_variable_for_type_inference(last.dtype, type=last.type,
                                                    lod_level=last.lod_level)
    helper.append_op("select_input", inputs={"X": list(inputs), "Mask": mask},
                     outputs={"Out": out})
    return out


def select_output(input, outputs, mask):
    """Copy `input` to outputs[mask] (the others are left as they are)."""
    LayerHelper("select_output").append_op(
        "select_output", inputs={"X": input, "Mask": mask}, outputs={"Out": list(outputs)})
    return outputs


def cond(pred, true_fn=None, false_fn=None, name=None):
    """true_fn() if `pred` (a bool scalar) is true, else false_fn(). Both branches are built;
    only one runs. Branches return Variables (or equal nestings of lists/tuples of them), or
    both None."""
    _check_bool_scalar(pred, "cond")
    outs = []
    for fn, flag in ((true_fn, pred), (false_fn, None)):
        if fn is None:
            outs.append(None)
            continue
        if not callable(fn):
            raise TypeError(f"cond: branches must be callables, got {type(fn).__name__}")
        block = ConditionalBlock([flag if flag is not None else logical_not(pred)],
                                 is_scalar_condition=True)
        with block.block():
            got = fn()
            outs.append(None if got is None else _pack(got, [_copy_to_parent(v)
                                                             for v in _flatten(got)]))
    true_out, false_out = outs
    if true_out is None and false_out is None:
        return None
    bad = "Incompatible return values of true_fn and false_fn in cond: "   # Fluid's words
    if true_out is None or false_out is None:
        raise ValueError(bad + ("true_fn returns None while false_fn returns non-None"
                                if true_out is None else
                                "true_fn returns non-None while false_fn returns None"))
    t, f = _flatten(true_out), _flatten(false_out)
    if len(t) != len(f):
        raise ValueError(bad + f"true_fn returns {len(t)} values, false_fn {len(f)}")
    mask = cast(pred, "int32")
    return _pack(true_out, [select_input([fv, tv], mask) for fv, tv in zip(f, t)])


class IfElse:
    """Row-wise branching (Fluid 1.x): rows (or level-0 sequences) of the inputs where
    `cond` ([N, 1] bool) is true go through the true block, the others through the false
    block; the outputs are merged back in the original order.

        ie = IfElse(cond)
        with ie.true_block():
            ie.output(f(ie.input(x)))
        with ie.false_block():
            ie.output(g(ie.input(x)))
        out, = ie()
    """
    OUTSIDE, IN_TRUE, IN_FALSE = range(3)

    def __init__(self, cond, name=None):
        if not isinstance(cond, Variable) or cond.dtype != VarType.BOOL:
            raise TypeError("IfElse: cond must be a bool Variable")
        self.cond = cond
        self.helper = LayerHelper("ifelse", name=name)
        self.status = IfElse.OUTSIDE
        self.input_table = {}
        self.output_table = ([], [])   # (false outputs, true outputs)

    def _parent_block(self):
        program = default_main_program()
        return program.block(program.current_block().parent_idx)

    def input(self, x):
        if self.status == IfElse.OUTSIDE:
            raise ValueError("IfElse.input must be called inside true_block/false_block")
        if x.name not in self.input_table:
            parent = self._parent_block()
            parts = [parent.create_var(name=unique_name.generate(f"{self.helper.name}_input"),
                                       dtype=x.dtype, shape=x.shape, lod_level=x.lod_level)
                     for _ in range(2)]
            parent.append_op("split_lod_tensor", inputs={"X": x, "Mask": self.cond},
                             outputs={"OutTrue": parts[0], "OutFalse": parts[1]},
                             attrs={"level": 0})
            self.input_table[x.name] = parts
        true_part, false_part = self.input_table[x.name]
        return true_part if self.status == IfElse.IN_TRUE else false_part

    @contextlib.contextmanager
    def _branch(self, status):
        if self.status != IfElse.OUTSIDE:
            raise ValueError("IfElse blocks cannot be nested in each other")
        self.status = status
        try:
            with ConditionalBlock([self.cond]).block():
                yield
        finally:
            self.status = IfElse.OUTSIDE

    def true_block(self):
        return self._branch(IfElse.IN_TRUE)

    def false_block(self):
        return self._branch(IfElse.IN_FALSE)

    def output(self, *outs):
        if self.status == IfElse.OUTSIDE:
            raise ValueError("IfElse.output must be called inside true_block/false_block")
        table = self.output_table[1 if self.status == IfElse.IN_TRUE else 0]
        parent = self._parent_block()
        for o in outs:
            outside = parent.create_var(name=unique_name.generate(f"{self.helper.name}_output"),
                                        dtype=o.dtype, shape=o.shape, lod_level=o.lod_level)
            assign(o, outside)
            table.append(outside)

    def __call__(self):
        if self.status != IfElse.OUTSIDE:
            raise ValueError("IfElse() must be called outside its blocks")
        false_outs, true_outs = self.output_table
        if len(false_outs) != len(true_outs):
            raise ValueError(f"IfElse: the true block has {len(true_outs)} outputs, the false "
                             f"block {len(false_outs)}")
        merged = []
        for t, f in zip(true_outs, false_outs):
            out = self.helper.create_variable_for_type_inference(t.dtype)
            self.helper.append_op("merge_lod_tensor",
                                  inputs={"X": self.cond, "Mask": self.cond, "InTrue": t,
                                          "InFalse": f},
                                  outputs={"Out": out}, attrs={"level": 0})
            merged.append(out)
        return merged


class Switch:
    """The first case whose condition holds runs (else `default`):

        with Switch() as switch:
            with switch.case(step < 100):
                assign(lr_warm, output=lr)
            with switch.default():
                assign(lr_base, output=lr)
    """

    def __init__(self, name=None):
        self.helper = LayerHelper("switch", name=name)
        self.inside = False
        self.pre_not_conditions = []

    def case(self, condition):
        if not self.inside:
            raise ValueError("Switch.case must be used inside `with Switch() as switch:`")
        _check_bool_scalar(condition, "Switch.case")
        if not self.pre_not_conditions:
            run_if = condition
            self.pre_not_conditions.append(logical_not(condition))
        else:
            before = self.pre_not_conditions[-1]
            self.pre_not_conditions.append(logical_and(before, logical_not(condition)))
            run_if = logical_and(before, condition)
        return ConditionalBlock([run_if], is_scalar_condition=True).block()

    def default(self):
        if not self.pre_not_conditions:
            raise ValueError("Switch.default needs at least one case before it")
        return ConditionalBlock([self.pre_not_conditions[-1]], is_scalar_condition=True).block()

    def __enter__(self):
        self.inside = True
        return self

    def __exit__(self, exc_type, exc_val, exc_tb):
        self.inside = False
        return False


# ---------------------------------------------------------------------------------------
# tensor arrays and rank tables
# ---------------------------------------------------------------------------------------
def create_array(dtype, initialized_list=None):
    """An empty tensor array (LOD_TENSOR_ARRAY variable) of `dtype`."""
    helper = LayerHelper("array")
    arr = helper.block().create_var(name=unique_name.generate("array"), type=ARRAY,
                                    dtype=dtype)
    for i, v in enumerate(initialized_list or []):
        array_write(v, fill_constant([1], "int64", i), arr)
    return arr


def array_write(x, i, array=None):
    """array[i] = x (i: an int64 [1] Variable); creates the array if not given."""
    helper = LayerHelper("array_write")
    if array is None:
        array = create_array(x.dtype)
    helper.append_op("write_to_array", inputs={"X": x, "I": i}, outputs={"Out": array})
    return array


def array_read(array, i):
    """array[i] (i: an int64 [1] Variable)."""
    helper = LayerHelper("array_read")
    out = helper.create_variable_for_type_inference(array.dtype)
    helper.append_op("read_from_array", inputs={"X": array, "I": i}, outputs={"Out": out})
    return out


def _int64_out(op_type, inputs):
    helper = LayerHelper(op_type)
    out = helper.create_variable_for_type_inference("int64", stop_gradient=True)
    helper.append_op(op_type, inputs=inputs, outputs={"Out": out})
    return out


def array_length(array):
    """The number of entries of `array` (int64 [1])."""
    return _int64_out("lod_array_length", {"X": array})


def lod_rank_table(x, level=0):
    """The sequences at LoD `level` of x, sorted by length (longest first)."""
    helper = LayerHelper("lod_rank_table")
    table = helper.block().create_var(name=unique_name.generate("lod_rank_table"),
                                      type=VarType.LOD_RANK_TABLE, stop_gradient=True)
    helper.append_op("lod_rank_table", inputs={"X": x}, outputs={"Out": table},
                     attrs={"level": level})
    return table


def max_sequence_len(rank_table):
    """The longest sequence's length (int64 [1])."""
    return _int64_out("max_sequence_len", {"RankTable": rank_table})


def _array_op(op_type, x, table, array_out):
    for arg, value in (("x", x), ("table", table)):     # Fluid 1.8 takes a list of one too
        if isinstance(value, (list, tuple)):
            for i, v in enumerate(value):
                check_type(v, f"{'input' if arg == 'x' else arg}[{i}]", Variable, op_type)
            if len(value) != 1:
                raise ValueError(f"{op_type}: '{arg}' must be one Variable, got a list of "
                                 f"{len(value)}")
    x = x[0] if isinstance(x, (list, tuple)) else x
    table = table[0] if isinstance(table, (list, tuple)) else table
    helper = LayerHelper(op_type)
    if array_out:
        out = helper.block().create_var(name=unique_name.generate(f"{op_type}.tmp"),
                                        type=ARRAY, dtype=x.dtype)
    else:
        out = helper.create_variable_for_type_inference(x.dtype)
    helper.append_op(op_type, inputs={"X": x, "RankTable": table}, outputs={"Out": out})
    return out


def lod_tensor_to_array(x, table):
    """Split LoD tensor x time-major by the rank table: entry t holds step t of every
    sequence longer than t, longest first."""
    return _array_op("lod_tensor_to_array", x, table, True)


def array_to_lod_tensor(x, table):
    """Inverse of lod_tensor_to_array."""
    return _array_op("array_to_lod_tensor", x, table, False)


def reorder_lod_tensor_by_rank(x, rank_table):
    """x's items (level-0 sequences, or rows) in the rank table's order."""
    where = "fluid.layers.reorder_lod_tensor_by_rank"
    check_type(x, "x", Variable, where)
    check_type(rank_table, "rank_table", Variable, where)
    if rank_table.type != VarType.LOD_RANK_TABLE:
        raise TypeError(f"{where}: the type of rank_table should be LOD_RANK_TABLE (a "
                        f"lod_rank_table's output), got '{rank_table.name}' of type "
                        f"{pb.VarType.Type.Name(rank_table.type)}")
    return _array_op("reorder_lod_tensor_by_rank", x, rank_table, False)


def fill_constant_batch_size_like(input, shape, dtype, value, input_dim_idx=0,
                                  output_dim_idx=0, force_cpu=False):
    """A tensor of `shape` filled with `value` whose dim output_dim_idx is input's dim
    input_dim_idx (the batch size at run time; the number of sequences for LoD input)."""
    helper = LayerHelper("fill_constant_batch_size_like")
    out = helper.create_variable_for_type_inference(dtype, stop_gradient=True)
    helper.append_op("fill_constant_batch_size_like", inputs={"Input": input},
                     outputs={"Out": out},
                     attrs={"shape": [int(d) for d in shape], "dtype": dtypes.to_code(dtype),
                            "value": float(value), "input_dim_idx": input_dim_idx,
                            "output_dim_idx": output_dim_idx, "force_cpu": force_cpu})
    return out


def shrink_memory(x, i, table):
    """The first k rows of x, k = number of sequences longer than i."""
    helper = LayerHelper("shrink_memory")
    out = helper.create_variable_for_type_inference(x.dtype)
    helper.append_op("shrink_rnn_memory", inputs={"X": x, "RankTable": table, "I": i},
                     outputs={"Out": out})
    return out


# ---------------------------------------------------------------------------------------
# StaticRNN (op recurrent)
# ---------------------------------------------------------------------------------------
class StaticRNN:
    """An RNN over time-major, fixed-length input [seq_len, batch, ...]:

        rnn = StaticRNN()
        with rnn.step():
            x_t = rnn.step_input(x)             # [batch, ...] at each step
            h_prev = rnn.memory(init=h0)        # or memory(shape=[-1, H], batch_ref=x_t)
            h = fc([x_t, h_prev], H, act="tanh")
            rnn.update_memory(h_prev, h)
            rnn.step_output(h)
        out = rnn()                             # [seq_len, batch, H]
    """
    BEFORE, IN, AFTER = range(3)

    def __init__(self, name=None):
        self.helper = LayerHelper("static_rnn", name=name)
        self.memories = {}        # pre-state name -> [init, pre_mem, new value]
        self.inputs, self.outputs = [], []
        self.status = StaticRNN.BEFORE
        self.seq_len = None

    @contextlib.contextmanager
    def step(self):
        if self.status != StaticRNN.BEFORE:
            raise ValueError("StaticRNN.step() can be used once")
        self.status = StaticRNN.IN
        with _sub_block() as body:
            yield
            self._complete(body)
        self.status = StaticRNN.AFTER

    def _assert_in(self, what):
        if self.status != StaticRNN.IN:
            raise ValueError(f"StaticRNN.{what} must be called inside `with rnn.step():`")

    def _parent_block(self):
        program = default_main_program()
        return program.block(program.current_block().parent_idx)

    def memory(self, init=None, shape=None, batch_ref=None, init_value=0.0,
               init_batch_dim_idx=0, ref_batch_dim_idx=1):
        """The state before each step: `init` at the first step, or a tensor of `shape`
        filled with init_value whose batch dim is batch_ref's (a step input's) dim."""
        self._assert_in("memory")
        if init is None:
            if shape is None or batch_ref is None:
                raise ValueError("StaticRNN.memory: give init, or shape and batch_ref")
            parent = self._parent_block()
            boot = parent.create_var(name=unique_name.generate(f"{self.helper.name}@memory_boot"),
                                     shape=shape, dtype=batch_ref.dtype)
            parent.append_op("fill_constant_batch_size_like", inputs={"Input": batch_ref},
                             outputs={"Out": boot},
                             attrs={"value": float(init_value), "shape": list(shape),
                                    "dtype": boot.dtype, "input_dim_idx": ref_batch_dim_idx,
                                    "output_dim_idx": init_batch_dim_idx})
            return self.memory(init=boot)
        pre = self.helper.block().create_var(
            name=unique_name.generate(f"{self.helper.name}@mem"), dtype=init.dtype,
            shape=init.shape)
        self.memories[pre.name] = [init, pre, None]
        return pre

    def step_input(self, x):
        """x's slice at the current step (x: [seq_len, batch, ...])."""
        self._assert_in("step_input")
        if self.seq_len is None:
            self.seq_len = x.shape[0]
        elif x.shape[0] not in (-1, self.seq_len):
            raise ValueError(f"StaticRNN: inputs must share seq_len {self.seq_len}, got "
                             f"{x.shape[0]}")
        ipt = self.helper.block().create_var(name=x.name, dtype=x.dtype, shape=x.shape[1:],
                                             type=x.type)
        self.inputs.append(x)
        return ipt

    def step_output(self, o):
        """Collect o at each step into an output [seq_len, ...]."""
        self._assert_in("step_output")
        tmp = self.helper.create_variable_for_type_inference(o.dtype)
        self.helper.append_op("rnn_memory_helper", inputs={"X": o}, outputs={"Out": tmp},
                              attrs={"dtype": o.dtype})
        out = self._parent_block().create_var(name=tmp.name, dtype=o.dtype,
                                              shape=[self.seq_len or -1] + list(o.shape))
        self.outputs.append(out)

    def output(self, *outputs):
        for o in outputs:
            self.step_output(o)

    def update_memory(self, mem, var):
        """`var` becomes `mem`'s value at the next step."""
        self._assert_in("update_memory")
        if mem.name not in self.memories:
            raise ValueError(f"StaticRNN.update_memory: '{mem.name}' is not a memory")
        self.memories[mem.name][2] = var

    def __call__(self):
        if self.status != StaticRNN.AFTER:
            raise ValueError("StaticRNN() is only available after the step block")
        return self.outputs[0] if len(self.outputs) == 1 else self.outputs

    def _complete(self, body):
        parent = body.parent
        local = {n for op in body.ops for n in op.output_arg_names}
        local.update(x.name for x in self.inputs)
        local.update(self.memories)
        params = [n for op in body.ops for n in op.input_arg_names if n not in local]
        params = [n for n in dict.fromkeys(params) if parent.find_var_recursive(n) is not None]
        boots, pre, new = [], [], []
        for name, (init, pre_mem, value) in self.memories.items():
            if value is None:
                raise ValueError(f"StaticRNN: memory '{name}' is never updated "
                                 f"(call update_memory)")
            state = self.helper.create_variable_for_type_inference(value.dtype)
            body.append_op("rnn_memory_helper", inputs={"X": value}, outputs={"Out": state},
                           attrs={"dtype": value.dtype})
            boots.append(init)
            pre.append(pre_mem.name)
            new.append(state.name)
        parent.append_op("recurrent",
                         inputs={"inputs": self.inputs, "initial_states": boots,
                                 "parameters": params},
                         outputs={"outputs": self.outputs,
                                  "step_scopes": [_step_scopes_var(parent)]},
                         attrs={"has_states": bool(pre), "ex_states": pre, "states": new,
                                "sub_block": body})


# ---------------------------------------------------------------------------------------
# DynamicRNN (a while loop over the steps of LoD sequences)
# ---------------------------------------------------------------------------------------
class DynamicRNN:
    """An RNN over variable-length sequences (a LoD tensor, no padding). Sequences are
    sorted by length; at step t only those longer than t take part, so the batch shrinks as
    sequences end; the outputs come back as LoD tensors in the original order.

        drnn = DynamicRNN()
        with drnn.block():
            x_t = drnn.step_input(x)             # [batch at step t, D]
            h_prev = drnn.memory(shape=[H])      # or memory(init=h0, need_reorder=True)
            h = fc([x_t, h_prev], H, act="tanh")
            drnn.update_memory(h_prev, h)
            drnn.output(h)
        out = drnn()                             # LoD tensor like x, [total steps, H]
    """
    BEFORE, IN, AFTER = range(3)

    def __init__(self, name=None):
        self.helper = LayerHelper("dynamic_rnn", name=name)
        self.status = DynamicRNN.BEFORE
        self.lod_rank_table = None
        self.max_seq_len = None
        self.step_idx = None
        self.zero_idx = None
        self.mem_dict = {}
        self.output_array = []
        self.outputs = []
        self.input_array = []
        self.mem_link = []
        self.cond = self.helper.create_variable_for_type_inference("bool", stop_gradient=True)
        self.while_op = While(self.cond)

    def _parent_block(self):
        program = default_main_program()
        return program.block(program.current_block().parent_idx)

    def _assert_in(self, what):
        if self.status != DynamicRNN.IN:
            raise ValueError(f"DynamicRNN.{what} must be called inside `with drnn.block():`")

    @contextlib.contextmanager
    def block(self):
        if self.status != DynamicRNN.BEFORE:
            raise ValueError("DynamicRNN.block() can be used once")
        self.step_idx = fill_constant([1], "int64", 0, force_cpu=True)
        self.status = DynamicRNN.IN
        with self.while_op.block():
            yield
            if self.lod_rank_table is None:
                raise ValueError("DynamicRNN: call step_input in the block")
            increment(self.step_idx, 1.0, in_place=True)
            for new_mem, mem_array in self.mem_link:
                array_write(new_mem, self.step_idx, mem_array)
            less_than(self.step_idx, self.max_seq_len, force_cpu=True, cond=self.cond)
        self.status = DynamicRNN.AFTER
        for arr in self.output_array:
            self.outputs.append(array_to_lod_tensor(arr, self.lod_rank_table))

    def __call__(self):
        if self.status != DynamicRNN.AFTER:
            raise ValueError("DynamicRNN() is only available after the block")
        return self.outputs[0] if len(self.outputs) == 1 else self.outputs

    def step_input(self, x, level=0):
        """x's step t (rows of the sequences longer than t), for a LoD tensor x."""
        self._assert_in("step_input")
        parent = self._parent_block()
        if parent.find_var_recursive(x.name) is None:
            raise ValueError(f"DynamicRNN.step_input: '{x.name}' was made inside the RNN "
                             f"block; compute step inputs before `with drnn.block():`")
        if self.lod_rank_table is None:
            self.lod_rank_table = parent.create_var(
                name=unique_name.generate("lod_rank_table"), type=VarType.LOD_RANK_TABLE,
                stop_gradient=True)
            parent.append_op("lod_rank_table", inputs={"X": x},
                             outputs={"Out": self.lod_rank_table}, attrs={"level": level})
            self.max_seq_len = parent.create_var(
                name=unique_name.generate("dynamic_rnn_max_seq_len"), dtype="int64",
                shape=[1], stop_gradient=True)
            parent.append_op("max_sequence_len", inputs={"RankTable": self.lod_rank_table},
                             outputs={"Out": self.max_seq_len})
            parent.append_op("less_than", inputs={"X": self.step_idx, "Y": self.max_seq_len},
                             outputs={"Out": self.cond}, attrs={"force_cpu": True})
        arr = parent.create_var(name=unique_name.generate("dynamic_rnn_input_array"),
                                type=ARRAY, dtype=x.dtype)
        self.input_array.append((arr, x.dtype))
        parent.append_op("lod_tensor_to_array", inputs={"X": x, "RankTable": self.lod_rank_table},
                         outputs={"Out": arr})
        return array_read(arr, self.step_idx)

    def static_input(self, x):
        """x (one item per sequence) reordered by rank and shrunk with the batch."""
        self._assert_in("static_input")
        if self.lod_rank_table is None:
            raise RuntimeError("DynamicRNN.static_input must come after step_input")
        parent = self._parent_block()
        reordered = parent.create_var(
            name=unique_name.generate("dynamic_rnn_static_input_reordered"), dtype=x.dtype,
            shape=x.shape, lod_level=x.lod_level)
        parent.append_op("reorder_lod_tensor_by_rank",
                         inputs={"X": x, "RankTable": self.lod_rank_table},
                         outputs={"Out": reordered})
        return shrink_memory(reordered, self.step_idx, self.lod_rank_table)

    def _init_zero_idx(self):
        if self.zero_idx is None:
            parent = self._parent_block()
            self.zero_idx = parent.create_var(name=unique_name.generate("zero_idx"),
                                              dtype="int64", shape=[1], stop_gradient=True)
            parent.append_op("fill_constant", outputs={"Out": self.zero_idx},
                             attrs={"shape": [1], "dtype": VarType.INT64, "value": 0.0,
                                    "force_cpu": True})

    def memory(self, init=None, shape=None, value=0.0, need_reorder=False, dtype="float32"):
        """The state before each step (shrunk to the step's batch): `init` (one row per
        sequence; need_reorder=True if in the input's order), or `shape` filled with value."""
        self._assert_in("memory")
        if shape is not None:
            check_type(shape, "shape", (list, tuple), "memory")
        if init is not None:
            check_type(init, "init", Variable, "memory")
        self._init_zero_idx()
        parent = self._parent_block()
        if init is None:
            if shape is None or not self.input_array:
                raise ValueError("DynamicRNN.memory: give init, or shape after step_input")
            arr, in_dtype = self.input_array[0]
            first = parent.create_var(name=unique_name.generate("in0"), dtype=in_dtype)
            parent.append_op("read_from_array", inputs={"X": arr, "I": self.zero_idx},
                             outputs={"Out": first})
            init = parent.create_var(name=unique_name.generate("mem_init"), dtype=dtype,
                                     shape=[-1] + list(shape))
            parent.append_op("fill_constant_batch_size_like", inputs={"Input": first},
                             outputs={"Out": init},
                             attrs={"shape": [-1] + list(shape), "value": float(value),
                                    "dtype": init.dtype})
            return self.memory(init=init)
        if need_reorder:
            if self.lod_rank_table is None:
                raise ValueError("DynamicRNN.memory(need_reorder=True) must come after "
                                 "step_input")
            reordered = parent.create_var(
                name=unique_name.generate("dynamic_rnn_mem_init_reordered"), dtype=init.dtype,
                shape=init.shape)
            parent.append_op("reorder_lod_tensor_by_rank",
                             inputs={"X": init, "RankTable": self.lod_rank_table},
                             outputs={"Out": reordered})
            init = reordered
        mem_array = parent.create_var(name=unique_name.generate("dynamic_rnn_mem_array"),
                                      type=ARRAY, dtype=init.dtype)
        parent.append_op("write_to_array", inputs={"X": init, "I": self.zero_idx},
                         outputs={"Out": mem_array})
        mem = shrink_memory(array_read(mem_array, self.step_idx), self.step_idx,
                            self.lod_rank_table)
        self.mem_dict[mem.name] = mem_array
        return mem

    def update_memory(self, ex_mem, new_mem):
        """`new_mem` becomes `ex_mem`'s value at the next step."""
        self._assert_in("update_memory")
        if ex_mem.name not in self.mem_dict:
            raise ValueError("DynamicRNN.update_memory: call memory first")
        self.mem_link.append((new_mem, self.mem_dict[ex_mem.name]))

    def output(self, *outputs):
        """Collect each output's step values into a LoD tensor (in the input's order)."""
        self._assert_in("output")
        parent = self._parent_block()
        for o in outputs:
            arr = parent.create_var(
                name=unique_name.generate(f"{self.helper.name}_output_array_{o.name}"),
                type=ARRAY, dtype=o.dtype)
            array_write(o, self.step_idx, arr)
            self.output_array.append(arr)
