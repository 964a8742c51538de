"""Control flow: ops that run another block of the program, and the tensor-array and
rank-table ops that loops over variable-length sequences are built from.

Block-running ops (`kind = "ctx"`, Paddle's names, slots and attributes):

* ``while`` runs `sub_block` in a fresh kid scope per iteration while `Condition` holds,
  keeping the step scopes (in `StepScopes`) for ``while_grad``. Variables declared in the
  sub-block live in the step scope; everything else is found up the scope chain, so writes
  to outer variables carry state from one iteration to the next.
* ``conditional_block`` runs `sub_block` once in a kid scope (kept in `Scope`) when its scalar
  `Cond` is true (or, with is_scalar_condition=False, when every `Input` is non-empty).
* ``recurrent`` (StaticRNN) runs `sub_block` once per time step of its time-major `inputs`,
  linking each step's `ex_states` to the previous step's `states`.

Their grad ops run the gradient block (built by `backward` from the forward sub-block) in the
same scopes, last step first, and move gradients across the scope boundary.

Values the backward pass must see as they were during a step (a loop variable that the step
overwrites, an input a branch read) are *snapshotted* into the step scope after the step runs:
the step scope gets a variable of the same name holding the value the step read (or, for a
variable the step wrote before reading, the value it wrote). Values are never mutated in place,
so a snapshot is a reference, not a copy. Counters updated in place (``increment(i) -> i``)
are not snapshotted; backward restores them by decrementing in reverse (as Paddle).
"""
import numpy as np

from ..core import dtypes
from ..core.dtypes import VarType
from ..core.names import EMPTY_VAR_NAME, GRAD_SUFFIX, grad_var_name
from ..core.tensor import LoDTensor, LoDTensorArray, SelectedRows, lengths_to_offsets
from ..errors import ExecutionError
from . import registry
from .registry import In, OpDef, Out, block, ints, strings

ARRAY = VarType.LOD_TENSOR_ARRAY
INT64 = VarType.INT64


# ---------------------------------------------------------------------------------------
# runtime helpers
# ---------------------------------------------------------------------------------------
class LoDRankTable:
    """Sequences of one LoD level, longest first (stable sort): `items` are (original index,
    length); `coarse_lod` keeps the LoD levels above that level."""
    __slots__ = ("items", "coarse_lod")

    def __init__(self, items=(), coarse_lod=()):
        self.items = list(items)
        self.coarse_lod = [list(level) for level in coarse_lod]

    def count_longer_than(self, t):
        """How many sequences have more than `t` steps (the batch size at step t)."""
        return sum(1 for _, n in self.items if n > t)

    def __repr__(self):
        return f"LoDRankTable({self.items})"


def _empty(v):
    return v is None or (isinstance(v, LoDTensor) and v._array is None)


def _scalar(t, what):
    if _empty(t):
        raise ExecutionError(f"{what} has no value")
    a = np.asarray(t._array)
    if a.size != 1:
        raise ExecutionError(f"{what} must hold one element, got shape {list(a.shape)}")
    return a.reshape(-1)[0]


def _index(t):
    i = int(_scalar(t, "array index I"))
    if i < 0:
        raise ExecutionError(f"array index I is negative ({i})")
    return i


def _zeros_like(v):
    """Zeros shaped like a value; an empty array for an array (missing elements are zero)."""
    if isinstance(v, LoDTensorArray):
        return LoDTensorArray()
    if isinstance(v, SelectedRows):
        return LoDTensor(np.zeros((v.height,) + v.value.shape[1:], v.value.dtype))
    if _empty(v):
        return None
    return LoDTensor(np.zeros_like(v._array), v._lod)


def _dense(v):
    return LoDTensor(v.to_dense()) if isinstance(v, SelectedRows) else v


def _add(a, b):
    """a + b for gradients: None (or an empty tensor) is zero; arrays add element-wise."""
    if _empty(a):
        return None if _empty(b) else b
    if _empty(b):
        return a
    if isinstance(a, LoDTensorArray) or isinstance(b, LoDTensorArray):
        a = a if isinstance(a, LoDTensorArray) else LoDTensorArray()
        b = b if isinstance(b, LoDTensorArray) else LoDTensorArray()
        out = LoDTensorArray()
        for j in range(max(len(a), len(b))):
            x = a[j] if j < len(a) else None
            y = b[j] if j < len(b) else None
            v = _add(x, y)
            list.append(out, v if v is not None else LoDTensor())
        return out
    a, b = _dense(a), _dense(b)
    return LoDTensor(a._array + b._array.reshape(a._array.shape), a._lod or b._lod)


def _link(v):
    """A value to hand to a gradient block: arrays are copied shallowly (grad ops write their
    elements in place), tensors are shared (never mutated)."""
    return LoDTensorArray(v) if isinstance(v, LoDTensorArray) else v


def _fwd_name(grad_name):
    return grad_name.split(GRAD_SUFFIX)[0]


def _aligned_out(p, slot):
    """Frame slots of a duplicable output, None where the name is @EMPTY@."""
    return [p.idx(n) if n != EMPTY_VAR_NAME else None for n in p.op.output(slot)]


def _drop_scopes(scope, scopes):
    for s in scopes or ():
        if scope.has_kid(s):
            scope.delete_scope(s)


def _snapshot_plan(program, sub_idx, outer_names):
    """Which outer variables a step scope snapshots: (before, after) name lists. Variables
    the block reads before writing are kept as they were before the step; those it writes
    first, as they were after it. Parameters and in-place outputs are left alone."""
    sub = program.block(sub_idx)
    first, inplace = {}, set()
    for op in sub.ops:
        ins, outs = op.input_arg_names, op.output_arg_names
        if not op.has_attr("sub_block"):   # a nested loop reads and writes its loop vars
            inplace.update(set(ins) & set(outs))
        for n in ins:
            first.setdefault(n, "r")
        for n in outs:
            first.setdefault(n, "w")
    gb = program.global_block()
    keep = []
    for n in dict.fromkeys(outer_names):
        v = gb.vars.get(n)
        if n in inplace or n not in first or (v is not None and v.desc.is_parameter):
            continue
        keep.append(n)
    return [n for n in keep if first[n] == "r"], [n for n in keep if first[n] == "w"]


def _tensor_values(scope, names):
    out = {}
    for n in names:
        v = scope.find_var(n)
        if v is not None and isinstance(v.value, LoDTensor) and v.value._array is not None:
            out[n] = v.value
    return out


def _put_snapshots(step_scope, values):
    for n, val in values.items():
        if step_scope.find_local_var(n) is None:
            step_scope.var(n).value = val


def _outside_grads(outer, og_outer, og_inner):
    """{inner name: value} of the output gradients a gradient block reads from outside
    (zeros shaped like the forward value where nobody computed one)."""
    grads = {}
    for o, i in zip(og_outer, og_inner):
        v = outer.find_var(o)
        val = v.value if v is not None else None
        if _empty(val):
            fwd = outer.find_var(_fwd_name(o))
            val = _zeros_like(fwd.value) if fwd is not None else None
        grads[i] = val
    return grads


def _set_locals(scope, values):
    for name, val in values.items():
        scope.var(name).value = _link(val) if val is not None else None




# ---------------------------------------------------------------------------------------
# while
# ---------------------------------------------------------------------------------------
def _cond_true(var, name):
    return bool(_scalar(var.value, f"while: Condition '{name}'"))


class While(OpDef):
    type = "while"
    inputs = (In("X", duplicable=True, dispensable=True),
              In("Condition", duplicable=True, no_grad=True))
    outputs = (Out("Out", duplicable=True, dispensable=True), Out("StepScopes"))
    attrs = {"sub_block": block(), "is_test": False, "skip_eager_deletion_vars": strings()}
    kind = "ctx"
    infer_shape = None
    loop = True   # backward: in-place counters in the body are decremented in reverse
    doc = "Run sub_block in a new step scope while Condition[0]; keep the scopes for backward."

    @staticmethod
    def grad_targets(op):
        """Sub-block names whose gradients come from outside, and need-grad links."""
        return op.output("Out"), []

    @staticmethod
    def make_step(p):
        sub, is_test = p.attrs["sub_block"], p.attrs["is_test"]
        cond_i, cond_name = p.in_idx("Condition")[0], p.op.input("Condition")[0]
        scopes_i = p.out_one("StepScopes")
        before, after = _snapshot_plan(p.program, sub, p.op.input("X") + p.op.output("Out"))

        def step(frame, env):
            scope, run = env.scope, env.run_block
            holder = frame[scopes_i]
            _drop_scopes(scope, holder.value)
            scopes = holder.value = []
            cond = frame[cond_i]
            while _cond_true(cond, cond_name):
                s = scope.new_scope()
                if is_test:
                    run(sub, s)
                    scope.delete_scope(s)
                    continue
                scopes.append(s)
                pre = _tensor_values(scope, before)
                run(sub, s)
                _put_snapshots(s, pre)
                _put_snapshots(s, _tensor_values(scope, after))
        return step


class WhileGrad(OpDef):
    type = "while_grad"
    inputs = (In("X", duplicable=True, dispensable=True),
              In("Out", duplicable=True, dispensable=True), In("StepScopes"),
              In("Out@GRAD", duplicable=True, dispensable=True))
    outputs = (Out("X@GRAD", duplicable=True, dispensable=True),)
    attrs = {"sub_block": block(), "is_test": False, "original_output_grad": strings(),
             "skip_eager_deletion_vars": strings()}
    kind = "ctx"
    infer_shape = None
    doc = ("Run the gradient block in each step scope, last first. Gradients of variables "
           "the loop overwrites pass from step to step; those of variables it only reads "
           "(parameters) are summed over the steps.")

    @staticmethod
    def make_step(p):
        sub = p.attrs["sub_block"]
        og_outer = p.op.input("Out@GRAD")
        og_inner = p.attrs["original_output_grad"] or og_outer
        carried = set(p.op.input("Out"))
        wanted = [(x, grad_var_name(x), i) for x, g, i in
                  zip(p.op.input("X"), p.op.output("X@GRAD"), _aligned_out(p, "X@GRAD"))
                  if g != EMPTY_VAR_NAME]
        scopes_i = p.in_one("StepScopes")

        def step(frame, env):
            scope = env.scope
            scopes = frame[scopes_i].value or []
            grads = _outside_grads(scope, og_outer, og_inner)  # flowing into the next step
            acc = {}
            for s in reversed(scopes):
                for _, inner, _ in wanted:
                    s.var(inner).value = None
                _set_locals(s, grads)
                env.run_block(sub, s)
                for x, inner, _ in wanted:
                    got = s.find_local_var(inner).value
                    if x in carried:
                        grads[inner] = got if not _empty(got) else _zeros_like(grads.get(inner))
                    else:
                        acc[x] = _add(acc.get(x), got)
            _drop_scopes(scope, scopes)
            frame[scopes_i].value = []
            for x, inner, slot in wanted:
                val = grads.get(inner) if x in carried else acc.get(x)
                if _empty(val):
                    xv = scope.find_var(x)
                    val = _zeros_like(xv.value) if xv is not None else None
                frame[slot].value = val
        return step


While.grad = staticmethod(lambda g: g.op(
    "while_grad",
    {"X": g.input("X"), "Out": g.output("Out"), "StepScopes": g.output("StepScopes"),
     "Out@GRAD": g.og_names},
    {"X@GRAD": g.block_input_grad("X")},
    {**g.attrs(), "sub_block": g.grad_block.idx, "original_output_grad": g.og_names}))


# ---------------------------------------------------------------------------------------
# conditional_block
# ---------------------------------------------------------------------------------------
def _need_run(scalar, conds, inputs, what):
    if scalar:
        return bool(_scalar(conds[0].value, f"{what}: Cond"))
    # every tensor input non-empty (IfElse: a branch that got no rows is skipped)
    return all(not _empty(v.value) and v.value._array.size > 0 for v in inputs
               if not isinstance(v.value, (LoDTensorArray, SelectedRows)))


class ConditionalBlock(OpDef):
    type = "conditional_block"
    inputs = (In("Cond", duplicable=True, no_grad=True),
              In("Input", duplicable=True, dispensable=True))
    outputs = (Out("Out", duplicable=True, dispensable=True), Out("Scope"))
    attrs = {"sub_block": block(), "is_scalar_condition": False}
    kind = "ctx"
    infer_shape = None
    doc = ("Run sub_block once in a new scope (kept in Scope for backward) if the scalar Cond "
           "is true, or (is_scalar_condition=False) if every Input is non-empty.")

    @staticmethod
    def grad_targets(op):
        return op.output("Out"), []

    @staticmethod
    def make_step(p):
        sub, scalar = p.attrs["sub_block"], p.attrs["is_scalar_condition"]
        cond_ids, in_ids = p.in_idx("Cond"), p.in_idx("Input")
        scope_i = p.out_one("Scope")
        before, after = _snapshot_plan(p.program, sub, p.op.input("Input") + p.op.output("Out"))

        def step(frame, env):
            scope = env.scope
            holder = frame[scope_i]
            _drop_scopes(scope, holder.value)
            holder.value = []
            if not _need_run(scalar, [frame[i] for i in cond_ids], [frame[i] for i in in_ids],
                             "conditional_block"):
                return
            s = scope.new_scope()
            holder.value = [s]
            pre = _tensor_values(scope, before)
            env.run_block(sub, s)
            _put_snapshots(s, pre)
            _put_snapshots(s, _tensor_values(scope, after))
        return step


class ConditionalBlockGrad(OpDef):
    type = "conditional_block_grad"
    inputs = (In("Cond", duplicable=True), In("Input", duplicable=True, dispensable=True),
              In("Out", duplicable=True, dispensable=True),
              In("Out@GRAD", duplicable=True, dispensable=True), In("Scope"))
    outputs = (Out("Input@GRAD", duplicable=True, dispensable=True),)
    attrs = {"sub_block": block(), "is_scalar_condition": False}
    kind = "ctx"
    infer_shape = None
    doc = ("Run the gradient block in the forward scope and hand Input@GRAD out; zeros when "
           "the forward block did not run.")

    @staticmethod
    def make_step(p):
        sub, scalar = p.attrs["sub_block"], p.attrs["is_scalar_condition"]
        cond_ids, in_ids = p.in_idx("Cond"), p.in_idx("Input")
        scope_i = p.in_one("Scope")
        ogs = p.op.input("Out@GRAD")
        wanted = [(x, grad_var_name(x), i) for x, g, i in
                  zip(p.op.input("Input"), p.op.output("Input@GRAD"),
                      _aligned_out(p, "Input@GRAD")) if g != EMPTY_VAR_NAME]

        def step(frame, env):
            scope = env.scope
            scopes = frame[scope_i].value
            ran = bool(scopes) and _need_run(scalar, [frame[i] for i in cond_ids],
                                             [frame[i] for i in in_ids], "conditional_block")
            got = {}
            if ran:
                s = scopes[0]
                for _, inner, _ in wanted:
                    s.var(inner).value = None
                _set_locals(s, _outside_grads(scope, ogs, ogs))
                env.run_block(sub, s)
                got = {x: s.find_local_var(inner).value for x, inner, _ in wanted}
            for x, _, slot in wanted:
                val = got.get(x)
                if _empty(val):
                    xv = scope.find_var(x)
                    val = _zeros_like(xv.value) if xv is not None else None
                frame[slot].value = val
        return step


ConditionalBlock.grad = staticmethod(lambda g: g.op(
    "conditional_block_grad",
    {"Cond": g.input("Cond"), "Input": g.input("Input"), "Out": g.output("Out"),
     "Out@GRAD": g.og_names, "Scope": g.output("Scope")},
    {"Input@GRAD": g.block_input_grad("Input")},
    {**g.attrs(), "sub_block": g.grad_block.idx}))


# ---------------------------------------------------------------------------------------
# select_input / select_output (cond's merge of the two branches)
# ---------------------------------------------------------------------------------------
def _mask(t):
    return int(_scalar(t, "Mask"))


class SelectInput(OpDef):
    type = "select_input"
    inputs = (In("X", duplicable=True), In("Mask", no_grad=True))
    outputs = (Out("Out"),)
    kind = "ctx"
    doc = "Out = X[Mask] (Mask: an int32 [1] tensor)."

    @staticmethod
    def infer_shape(ctx):
        vs = ctx.input_vars("X")
        shapes = [list(v.shape) for v in vs]
        same_rank = len({len(s) for s in shapes}) == 1
        shape = [d if all(s[k] == d for s in shapes) else -1 for k, d in
                 enumerate(shapes[-1])] if same_rank else shapes[-1]
        ctx.set_output("Out", shape, vs[-1].dtype, vs[-1].lod_level, type=vs[-1].type)

    @staticmethod
    def make_step(p):
        xs, m, o = p.in_idx("X"), p.in_one("Mask"), p.out_one("Out")

        def step(frame, env):
            k = _mask(frame[m].value)
            if not 0 <= k < len(xs):
                raise ExecutionError(f"select_input: Mask {k} is out of range [0, {len(xs)})")
            frame[o].value = frame[xs[k]].value
        return step


class SelectOutput(OpDef):
    type = "select_output"
    inputs = (In("X"), In("Mask", no_grad=True))
    outputs = (Out("Out", duplicable=True),)
    kind = "ctx"
    doc = "Out[Mask] = X; the other outputs are left as they are."

    @staticmethod
    def infer_shape(ctx):
        x = ctx.input_var("X")
        for i, v in enumerate(ctx.output_vars("Out")):
            if v.type == x.type and not any(d >= 0 for d in v.shape):
                ctx.set_output("Out", x.shape, x.dtype, x.lod_level, i=i)

    @staticmethod
    def make_step(p):
        x, m, outs = p.in_one("X"), p.in_one("Mask"), _aligned_out(p, "Out")

        def step(frame, env):
            k = _mask(frame[m].value)
            if not 0 <= k < len(outs):
                raise ExecutionError(f"select_output: Mask {k} is out of range [0, {len(outs)})")
            if outs[k] is not None:
                frame[outs[k]].value = frame[x].value
        return step


SelectInput.grad = staticmethod(lambda g: g.op(
    "select_output", {"X": g.output_grad("Out"), "Mask": g.input("Mask")},
    {"Out": g.input_grad("X")}))
SelectOutput.grad = staticmethod(lambda g: g.op(
    "select_input", {"X": g.output_grad("Out"), "Mask": g.input("Mask")},
    {"Out": g.input_grad("X")}))


# ---------------------------------------------------------------------------------------
# tensor arrays
# ---------------------------------------------------------------------------------------
class WriteToArray(OpDef):
    type = "write_to_array"
    inputs = (In("X"), In("I", no_grad=True))
    outputs = (Out("Out"),)
    kind = "ctx"
    doc = "Out[I] = a copy of X; Out (a tensor array, changed in place) grows to I+1 entries."

    @staticmethod
    def infer_shape(ctx):
        x = ctx.input_var("X")
        ctx.set_output("Out", x.shape, x.dtype, x.lod_level, type=ARRAY)

    @staticmethod
    def make_step(p):
        x, i, o = p.in_one("X"), p.in_one("I"), p.out_one("Out")

        def step(frame, env):
            k = _index(frame[i].value)
            arr = frame[o].value
            if not isinstance(arr, LoDTensorArray):
                arr = frame[o].value = LoDTensorArray()
            while len(arr) <= k:
                list.append(arr, LoDTensor())
            v = _dense(frame[x].value)
            arr[k] = LoDTensor() if _empty(v) else LoDTensor(v._array.copy(), v._lod)
        return step


class ReadFromArray(OpDef):
    type = "read_from_array"
    inputs = (In("X"), In("I", no_grad=True), In("X_W", dispensable=True, no_grad=True))
    outputs = (Out("Out"),)
    kind = "value"
    doc = ("Out = a copy of X[I]. As the gradient of write_to_array (X_W: the tensor written), "
           "a missing entry reads as zeros shaped like X_W.")

    @staticmethod
    def infer_shape(ctx):
        a = ctx.input_var("X")
        ctx.set_output("Out", a.shape, a.dtype, a.lod_level, type=VarType.LOD_TENSOR)

    @staticmethod
    def kernel(arr, i, x_w):
        k = _index(i)
        if isinstance(arr, LoDTensorArray) and k < len(arr) and not _empty(arr[k]):
            t = arr[k]
            return LoDTensor(t._array.copy(), t._lod)
        if x_w is not None:
            return _zeros_like(x_w)
        n = len(arr) if isinstance(arr, LoDTensorArray) else 0
        raise ExecutionError(f"read_from_array: index {k} is out of range; the array has {n} "
                             f"entries")


WriteToArray.grad = staticmethod(lambda g: g.op(
    "read_from_array", {"X": g.output_grad("Out"), "I": g.input("I"), "X_W": g.input("X")},
    {"Out": g.input_grad("X")}))
ReadFromArray.grad = staticmethod(lambda g: g.op(
    "write_to_array", {"X": g.output_grad("Out"), "I": g.input("I")},
    {"Out": g.input_grad("X")}))


class LoDArrayLength(OpDef):
    type = "lod_array_length"
    inputs = (In("X"),)
    outputs = (Out("Out"),)
    kind = "value"
    doc = "Out = the number of entries of tensor array X (int64 [1])."

    @staticmethod
    def infer_shape(ctx):
        ctx.set_output("Out", [1], INT64)

    @staticmethod
    def kernel(arr):
        return LoDTensor(np.array([len(arr) if arr is not None else 0], np.int64))


# ---------------------------------------------------------------------------------------
# rank tables: sequences sorted by length, and moving between LoD tensors and time-major arrays
# ---------------------------------------------------------------------------------------
def _sub_lod(lod, level, start, end):
    """Rows and nested LoD (lengths per deeper level) of items [start, end) of LoD `level`
    (level == len(lod): items are rows)."""
    sub = []
    for lv in lod[level:]:
        sub.append([lv[k + 1] - lv[k] for k in range(start, end)])
        start, end = lv[start], lv[end]
    return start, end, sub


def _join_lods(subs):
    """Concatenate nested-LoD pieces (lists of per-level lengths) into offsets."""
    if not subs or not subs[0]:
        return []
    return [lengths_to_offsets([n for s in subs for n in s[k]]) for k in range(len(subs[0]))]


class LoDRankTableOp(OpDef):
    type = "lod_rank_table"
    inputs = (In("X"),)
    outputs = (Out("Out"),)
    attrs = {"level": 0}
    kind = "value"
    doc = ("Out = the sequences at LoD `level` of X, as (index, length) sorted by length, "
           "longest first (stable).")

    @staticmethod
    def infer_shape(ctx):
        ctx.set_output("Out", type=VarType.LOD_RANK_TABLE)

    @staticmethod
    def kernel(x, *, level):
        lod = x._lod
        if not lod or level >= len(lod):
            raise ExecutionError(f"lod_rank_table: X needs LoD level {level}, it has "
                                 f"{len(lod)} levels; feed a LoDTensor with sequence lengths")
        lens = np.diff(lod[level])
        order = np.argsort(-lens, kind="stable")
        return LoDRankTable([(int(i), int(lens[i])) for i in order], lod[:level])


class MaxSequenceLen(OpDef):
    type = "max_sequence_len"
    inputs = (In("RankTable"),)
    outputs = (Out("Out"),)
    kind = "value"
    doc = "Out = the longest sequence's length in the rank table (int64 [1])."

    @staticmethod
    def infer_shape(ctx):
        ctx.set_output("Out", [1], INT64)

    @staticmethod
    def kernel(table):
        return LoDTensor(np.array([table.items[0][1] if table.items else 0], np.int64))


def _table_lod(x, table, op):
    """The LoD to split X by: its own, or (a gradient that lost it) the table's lengths."""
    level = len(table.coarse_lod)
    if len(x._lod) > level:
        return x._lod, level
    lens = [0] * len(table.items)
    for i, n in table.items:
        lens[i] = n
    if level == 0 and sum(lens) == len(x._array):
        return [lengths_to_offsets(lens)], 0
    raise ExecutionError(f"{op}: X has {len(x._lod)} LoD levels; the rank table was made at "
                         f"level {level}")


class LoDTensorToArray(OpDef):
    type = "lod_tensor_to_array"
    inputs = (In("X"), In("RankTable", no_grad=True))
    outputs = (Out("Out"),)
    kind = "value"
    doc = ("Split X time-major: Out[t] holds step t of every sequence longer than t, in rank "
           "order (longest first), so the batch shrinks as sequences end.")

    @staticmethod
    def infer_shape(ctx):
        x = ctx.input_var("X")
        ctx.set_output("Out", x.shape, x.dtype, max(x.lod_level - 1, 0), type=ARRAY)

    @staticmethod
    def kernel(x, table):
        lod, level = _table_lod(x, table, "lod_tensor_to_array")
        data = x._array
        starts = np.asarray(lod[level][:-1], np.int64)
        idx = np.array([i for i, _ in table.items], np.int64)
        out = LoDTensorArray()
        for t in range(table.items[0][1] if table.items else 0):
            k = table.count_longer_than(t)
            if level + 1 == len(lod):   # items are rows: one gather per step
                list.append(out, LoDTensor(data[starts[idx[:k]] + t]))
                continue
            pieces = [_sub_lod(lod, level + 1, s, s + 1) for s in starts[idx[:k]] + t]
            rows = np.concatenate([np.arange(a, b) for a, b, _ in pieces])
            list.append(out, LoDTensor(data[rows], _join_lods([s for _, _, s in pieces])))
        return out


class ArrayToLoDTensor(OpDef):
    type = "array_to_lod_tensor"
    inputs = (In("X"), In("RankTable", no_grad=True))
    outputs = (Out("Out"),)
    kind = "value"
    doc = "Inverse of lod_tensor_to_array: sequences back in their original order, with LoD."

    @staticmethod
    def infer_shape(ctx):
        a = ctx.input_var("X")
        ctx.set_output("Out", a.shape, a.dtype, a.lod_level + 1)

    @staticmethod
    def kernel(arr, table):
        items = table.items
        n = len(items)
        lens = [0] * n
        for i, length in items:
            lens[i] = length
        elems = [arr[t] if t < len(arr) and not _empty(arr[t]) else None
                 for t in range(items[0][1] if items else 0)]
        proto = next((e for e in elems if e is not None), None)
        if proto is None:
            raise ExecutionError("array_to_lod_tensor: the array has no entries")
        offsets = lengths_to_offsets(lens)
        if not any(e is not None and e._lod for e in elems):    # one row per step
            out = np.zeros((offsets[-1],) + proto._array.shape[1:], proto._array.dtype)
            order = np.array([i for i, _ in items], np.int64)
            base = np.asarray(offsets[:-1], np.int64)
            for t, e in enumerate(elems):
                if e is not None:
                    k = table.count_longer_than(t)
                    out[base[order[:k]] + t] = e._array[:k]
            return LoDTensor(out, table.coarse_lod + [offsets])
        per_seq = [[] for _ in range(n)]
        for t, e in enumerate(elems):
            if e is None:
                raise ExecutionError(f"array_to_lod_tensor: entry {t} of the array is empty")
            for r in range(table.count_longer_than(t)):
                a, b, sub = _sub_lod(e._lod, 0, r, r + 1)
                per_seq[items[r][0]].append((e._array[a:b], sub))
        pieces = [pc for seq in per_seq for pc in seq]
        level = lengths_to_offsets([len(seq) for seq in per_seq])
        return LoDTensor(np.concatenate([a for a, _ in pieces]),
                         table.coarse_lod + [level] + _join_lods([s for _, s in pieces]))


LoDTensorToArray.grad = staticmethod(lambda g: g.op(
    "array_to_lod_tensor", {"X": g.output_grad("Out"), "RankTable": g.input("RankTable")},
    {"Out": g.input_grad("X")}))
ArrayToLoDTensor.grad = staticmethod(lambda g: g.op(
    "lod_tensor_to_array", {"X": g.output_grad("Out"), "RankTable": g.input("RankTable")},
    {"Out": g.input_grad("X")}))


def _first_items(x, k):
    """The first k items of X: sequences at LoD level 0, or rows without LoD."""
    if not x._lod:
        return LoDTensor(x._array[:k])
    a, b, sub = _sub_lod(x._lod, 0, 0, k)
    return LoDTensor(x._array[a:b], [lengths_to_offsets(s) for s in sub])


class ShrinkRNNMemory(OpDef):
    type = "shrink_rnn_memory"
    inputs = (In("X"), In("RankTable", no_grad=True), In("I", no_grad=True))
    outputs = (Out("Out"),)
    kind = "value"
    doc = "Out = the first k items of X, k = number of sequences longer than I (DynamicRNN)."

    @staticmethod
    def infer_shape(ctx):
        x = ctx.input_var("X")
        ctx.set_output("Out", [-1] + list(x.shape[1:]), x.dtype, x.lod_level)

    @staticmethod
    def kernel(x, table, i):
        return _first_items(x, table.count_longer_than(_index(i)))


class ShrinkRNNMemoryGrad(OpDef):
    type = "shrink_rnn_memory_grad"
    inputs = (In("X"), In("Out@GRAD", dispensable=True))
    outputs = (Out("X@GRAD"),)
    kind = "value"
    infer_shape = None

    @staticmethod
    def kernel(x, dout):
        dx = np.zeros_like(x._array)
        if not _empty(dout):
            d = _dense(dout)._array
            dx[:len(d)] = d
        return LoDTensor(dx, x._lod)


ShrinkRNNMemory.grad = staticmethod(lambda g: g.op(
    "shrink_rnn_memory_grad", {"X": g.input("X"), "Out@GRAD": g.output_grad("Out")},
    {"X@GRAD": g.input_grad("X")}))


def _item_ranges(x):
    """(start, end) rows of each item of X: sequences at LoD level 0, or single rows."""
    if not x._lod:
        return [(r, r + 1) for r in range(len(x._array))], None
    top = x._lod[0]
    return [_sub_lod(x._lod, 0, k, k + 1) for k in range(len(top) - 1)], True


def _pick_items(x, order):
    """The items of X (see _item_ranges) at positions `order`, with their LoD."""
    ranges, nested = _item_ranges(x)
    if not nested:
        return LoDTensor(x._array[np.asarray(order, np.int64)])
    picked = [ranges[k] for k in order]
    rows = np.concatenate([np.arange(a, b) for a, b, _ in picked]) if picked else []
    return LoDTensor(x._array[np.asarray(rows, np.int64)], _join_lods([s for _, _, s in picked]))


class ReorderLoDTensorByRank(OpDef):
    type = "reorder_lod_tensor_by_rank"
    inputs = (In("X"), In("RankTable", no_grad=True))
    outputs = (Out("Out"),)
    kind = "value"
    doc = "Out = the items of X (level-0 sequences, or rows) in the rank table's order."

    @staticmethod
    def infer_shape(ctx):
        ctx.share("X", "Out")

    @staticmethod
    def kernel(x, table):
        return _pick_items(x, [i for i, _ in table.items])


class ReorderLoDTensorByRankGrad(OpDef):
    type = "reorder_lod_tensor_by_rank_grad"
    inputs = (In("X"), In("RankTable"))
    outputs = (Out("Out"),)
    kind = "value"
    infer_shape = None

    @staticmethod
    def kernel(dout, table):
        inverse = np.argsort([i for i, _ in table.items], kind="stable")
        return _pick_items(_dense(dout), inverse)


ReorderLoDTensorByRank.grad = staticmethod(lambda g: g.op(
    "reorder_lod_tensor_by_rank_grad",
    {"X": g.output_grad("Out"), "RankTable": g.input("RankTable")}, {"Out": g.input_grad("X")}))


# ---------------------------------------------------------------------------------------
# split_lod_tensor / merge_lod_tensor (IfElse: rows or sequences routed by a mask)
# ---------------------------------------------------------------------------------------
def _bool_mask(mask, n, op):
    m = np.asarray(mask._array).reshape(-1).astype(bool)
    if len(m) != n:
        raise ExecutionError(f"{op}: Mask has {len(m)} entries for {n} items (rows, or "
                             f"sequences of a LoD input)")
    return m


class SplitLoDTensor(OpDef):
    type = "split_lod_tensor"
    inputs = (In("X"), In("Mask", no_grad=True))
    outputs = (Out("OutTrue"), Out("OutFalse"))
    attrs = {"level": 0}
    kind = "value"
    doc = "OutTrue/OutFalse = the items of X (rows, or level-0 sequences) where Mask is/isn't set."

    @staticmethod
    def infer_shape(ctx):
        x = ctx.input_var("X")
        for slot in ("OutTrue", "OutFalse"):
            ctx.set_output(slot, [-1] + list(x.shape[1:]), x.dtype, x.lod_level)

    @staticmethod
    def kernel(x, mask):
        x = _dense(x)
        m = _bool_mask(mask, len(_item_ranges(x)[0]), "split_lod_tensor")
        return _pick_items(x, np.flatnonzero(m)), _pick_items(x, np.flatnonzero(~m))


class MergeLoDTensor(OpDef):
    type = "merge_lod_tensor"
    inputs = (In("X", no_grad=True), In("Mask", no_grad=True), In("InTrue"), In("InFalse"))
    outputs = (Out("Out"),)
    attrs = {"level": 0}
    kind = "value"
    doc = "Inverse of split_lod_tensor: items of InTrue where Mask is set, of InFalse elsewhere."

    @staticmethod
    def infer_shape(ctx):
        t = ctx.input_var("InTrue")
        ctx.set_output("Out", [-1] + list(t.shape[1:]), t.dtype, t.lod_level)

    @staticmethod
    def kernel(x, mask, in_true, in_false):
        in_true, in_false = _dense(in_true), _dense(in_false)
        m = np.asarray(mask._array).reshape(-1).astype(bool)
        proto = in_true if not _empty(in_true) else in_false
        parts = []
        for src, want in ((in_true, m), (in_false, ~m)):
            if _empty(src):
                src = LoDTensor(np.zeros((int(want.sum()),) + proto._array.shape[1:],
                                         proto._array.dtype))
            parts.append((src, iter(_item_ranges(src)[0])))
        nested = any(src._lod for src, _ in parts)
        rows, subs = [], []
        for flag in m:
            src, it = parts[0] if flag else parts[1]
            r = next(it, None)
            if r is None:
                raise ExecutionError("merge_lod_tensor: InTrue/InFalse have fewer items than "
                                     "Mask selects")
            rows.append(src._array[r[0]:r[1]])
            if nested:
                subs.append(r[2])
        data = np.concatenate(rows) if rows else proto._array[:0]
        return LoDTensor(data, _join_lods(subs) if nested else [])


SplitLoDTensor.grad = staticmethod(lambda g: g.op(
    "merge_lod_tensor", {"X": g.input("X"), "Mask": g.input("Mask"),
                         "InTrue": g.output_grad("OutTrue"), "InFalse": g.output_grad("OutFalse")},
    {"Out": g.input_grad("X")}, {"level": g.attr("level")}))
MergeLoDTensor.grad = staticmethod(lambda g: g.op(
    "split_lod_tensor", {"X": g.output_grad("Out"), "Mask": g.input("Mask")},
    {"OutTrue": g.input_grad("InTrue"), "OutFalse": g.input_grad("InFalse")},
    {"level": g.attr("level")}))


# ---------------------------------------------------------------------------------------
# recurrent (StaticRNN)
# ---------------------------------------------------------------------------------------
_RECURRENT_ATTRS = {"has_states": False, "ex_states": strings(), "states": strings(),
                    "sub_block": block(), "reverse": False, "is_train": True,
                    "skip_eager_deletion_vars": strings()}


class RNNMemoryHelper(OpDef):
    type = "rnn_memory_helper"
    inputs = (In("X"),)
    outputs = (Out("Out"),)
    attrs = {"dtype": VarType.FP32}
    kind = "value"
    doc = "Out = X (StaticRNN's hand-off of a step output or new state)."

    @staticmethod
    def kernel(x):
        return x


class RNNMemoryHelperGrad(OpDef):
    type = "rnn_memory_helper_grad"
    inputs = (In("Out@GRAD", dispensable=True), In("X"), In("Out", dispensable=True))
    outputs = (Out("X@GRAD"),)
    attrs = {"dtype": VarType.FP32}
    kind = "value"
    infer_shape = None
    doc = "X@GRAD = Out@GRAD, or zeros shaped like X where no gradient reached Out."

    @staticmethod
    def kernel(dout, x, out):
        return _dense(dout) if not _empty(dout) else _zeros_like(x)


RNNMemoryHelper.grad = staticmethod(lambda g: g.op(
    "rnn_memory_helper_grad",
    {"Out@GRAD": g.output_grad("Out"), "X": g.input("X"), "Out": g.output("Out")},
    {"X@GRAD": g.input_grad("X")}, g.attrs()))


class Recurrent(OpDef):
    type = "recurrent"
    inputs = (In("inputs", duplicable=True, dispensable=True),
              In("initial_states", duplicable=True, dispensable=True),
              In("parameters", duplicable=True, dispensable=True))
    outputs = (Out("outputs", duplicable=True, dispensable=True), Out("step_scopes"))
    attrs = _RECURRENT_ATTRS
    kind = "ctx"
    infer_shape = None
    doc = ("StaticRNN: run sub_block once per step t of the time-major `inputs` (each linked "
           "as its slice t under its own name), `ex_states` linked to the previous step's "
           "`states` (initial_states at the first step); `outputs` stack the steps' values.")

    @staticmethod
    def grad_targets(op):
        ex, st = op.attr("ex_states"), op.attr("states")
        links = list(zip(op.input("initial_states"), ex)) + list(zip(st, ex))
        return op.output("outputs") + st, links

    @staticmethod
    def make_step(p):
        a = p.attrs
        sub, reverse, keep = a["sub_block"], a["reverse"], a["is_train"]
        ex, st = a["ex_states"], a["states"]
        ins, in_ids = p.op.input("inputs"), p.in_idx("inputs")
        init_ids = p.in_idx("initial_states")
        outs, out_ids = p.op.output("outputs"), p.out_idx("outputs")
        scopes_i = p.out_one("step_scopes")

        def step(frame, env):
            scope = env.scope
            seqs = [frame[i].value._array for i in in_ids]
            if not seqs:
                raise ExecutionError("recurrent: needs at least one input sequence")
            n_steps = seqs[0].shape[0]
            holder = frame[scopes_i]
            _drop_scopes(scope, holder.value)
            scopes = holder.value = []
            steps = [[None] * n_steps for _ in outs]
            prev = None
            for k in range(n_steps):
                t = n_steps - 1 - k if reverse else k
                s = scope.new_scope()
                for name, seq in zip(ins, seqs):
                    s.var(name).value = LoDTensor(seq[t])
                for e, src in zip(ex, [frame[i].value for i in init_ids] if prev is None
                                  else [prev.find_local_var(n).value for n in st]):
                    s.var(e).value = src
                env.run_block(sub, s)
                for j, name in enumerate(outs):
                    steps[j][t] = s.find_local_var(name).value._array
                if keep:
                    scopes.append(s)
                elif prev is not None:
                    scope.delete_scope(prev)
                prev = s
            if not keep and prev is not None:
                scope.delete_scope(prev)
            for j, o in enumerate(out_ids):
                frame[o].value = LoDTensor(np.stack(steps[j]))
        return step


class RecurrentGrad(OpDef):
    type = "recurrent_grad"
    inputs = (In("inputs", duplicable=True, dispensable=True),
              In("initial_states", duplicable=True, dispensable=True),
              In("parameters", duplicable=True, dispensable=True),
              In("outputs", duplicable=True, dispensable=True),
              In("outputs@GRAD", duplicable=True, dispensable=True), In("step_scopes"))
    outputs = (Out("inputs@GRAD", duplicable=True, dispensable=True),
               Out("initial_states@GRAD", duplicable=True, dispensable=True),
               Out("parameters@GRAD", duplicable=True, dispensable=True))
    attrs = _RECURRENT_ATTRS
    kind = "ctx"
    infer_shape = None
    doc = ("Run the gradient block in the step scopes, last step first: output gradients "
           "linked as slices, each step's state gradients from the later step's ex_states "
           "gradients; parameter gradients summed over steps.")

    @staticmethod
    def make_step(p):
        a = p.attrs
        sub, reverse = a["sub_block"], a["reverse"]
        ex, st = a["ex_states"], a["states"]
        outs = p.op.input("outputs")
        og_ids = p.in_idx("outputs@GRAD")
        scopes_i = p.in_one("step_scopes")

        def wanted(slot, inner_names):
            names = p.op.input(slot)
            return [(x, grad_var_name(i), o) for x, i, g, o in
                    zip(names, inner_names or names, p.op.output(slot + GRAD_SUFFIX),
                        _aligned_out(p, slot + GRAD_SUFFIX)) if g != EMPTY_VAR_NAME]
        w_in, w_par = wanted("inputs", None), wanted("parameters", None)
        w_init = wanted("initial_states", ex)

        def step(frame, env):
            scope = env.scope
            scopes = frame[scopes_i].value or []
            n = len(scopes)
            ogs = []
            for name, i in zip(outs, og_ids):
                g = frame[i].value
                ogs.append(_dense(g)._array if not _empty(g) else
                           np.zeros_like(scope.find_var(name).value._array))
            in_grads = {x: np.zeros_like(scope.find_var(x).value._array) for x, _, _ in w_in}
            par_grads = {}
            later = None
            for k in range(n - 1, -1, -1):
                s, t = scopes[k], n - 1 - k if reverse else k
                for _, inner, _ in w_in + w_par + w_init:
                    s.var(inner).value = None
                for name, g in zip(outs, ogs):
                    s.var(grad_var_name(name)).value = LoDTensor(g[t])
                for e, name in zip(ex, st):
                    v = later.find_local_var(grad_var_name(e)) if later is not None else None
                    s.var(grad_var_name(name)).value = v.value if v is not None else None
                env.run_block(sub, s)
                for x, inner, _ in w_par:
                    par_grads[x] = _add(par_grads.get(x), s.find_local_var(inner).value)
                for x, inner, _ in w_in:
                    v = s.find_local_var(inner).value
                    if not _empty(v):
                        in_grads[x][t] = _dense(v)._array
                later = s
            for x, inner, slot in w_init:
                v = later.find_local_var(inner).value if later is not None else None
                frame[slot].value = v if not _empty(v) else _zeros_like(scope.find_var(x).value)
            for x, _, slot in w_in:
                frame[slot].value = LoDTensor(in_grads[x])
            for x, _, slot in w_par:
                v = par_grads.get(x)
                frame[slot].value = v if not _empty(v) else _zeros_like(scope.find_var(x).value)
            _drop_scopes(scope, scopes)
            frame[scopes_i].value = []
        return step


Recurrent.grad = staticmethod(lambda g: g.op(
    "recurrent_grad",
    {"inputs": g.input("inputs"), "initial_states": g.input("initial_states"),
     "parameters": g.input("parameters"), "outputs": g.output("outputs"),
     "outputs@GRAD": g.output_grad("outputs"), "step_scopes": g.output("step_scopes")},
    {"inputs@GRAD": g.block_input_grad("inputs"),
     "initial_states@GRAD": g.block_input_grad("initial_states", g.attr("ex_states")),
     "parameters@GRAD": g.block_input_grad("parameters")},
    {**g.attrs(), "sub_block": g.grad_block.idx}))


