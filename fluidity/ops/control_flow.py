"""Control flow: the ops that run another block of the program (while, conditional_block)
and cond's select_input / select_output. StaticRNN's recurrent is in recurrent.py; the
tensor-array and rank-table ops that loops over variable-length sequences are built from, in
tensor_array.py.

Block-running ops (`kind = "ctx"`, Paddle's names, slots and attributes):

* ``while`` runs `sub_block` in a fresh kid scope per iteration while `Condition` holds,
  keeping the step scopes (in `StepScopes`) for ``while_grad``. Variables declared in the
  sub-block live in the step scope; everything else is found up the scope chain, so writes
  to outer variables carry state from one iteration to the next.
* ``conditional_block`` runs `sub_block` once in a kid scope (kept in `Scope`) when its scalar
  `Cond` is true (or, with is_scalar_condition=False, when every `Input` is non-empty).

Their grad ops run the gradient block (built by `backward` from the forward sub-block) in the
same scopes, last step first, and move gradients across the scope boundary.

Values the backward pass must see as they were during a step (a loop variable that the step
overwrites, an input a branch read) are *snapshotted* into the step scope after the step runs:
the step scope gets a variable of the same name holding the value the step read (or, for a
variable the step wrote before reading, the value it wrote). Values are never mutated in place,
so a snapshot is a reference, not a copy. Counters updated in place (``increment(i) -> i``)
are not snapshotted; backward restores them by decrementing in reverse (as Paddle).
"""
from ..core.names import EMPTY_VAR_NAME, GRAD_SUFFIX, grad_var_name
from ..core.tensor import LoDTensor, LoDTensorArray, SelectedRows
from ..errors import ExecutionError
from .common import (add_grads, aligned_outputs, drop_scopes, is_empty, scalar_value,
                     zeros_like_value)
from .registry import In, OpDef, Out, block, strings


# ---------------------------------------------------------------------------------------
# runtime helpers
# ---------------------------------------------------------------------------------------
def _link(v):
    """A value to hand to a gradient block: arrays are copied shallowly (grad ops write their
    elements in place), tensors are shared (never mutated)."""
    return LoDTensorArray(v) if isinstance(v, LoDTensorArray) else v


def _fwd_name(grad_name):
    return grad_name.split(GRAD_SUFFIX)[0]


def _updated_in_place(program, block):
    """Names an op of `block` updates in place (reads and writes: a counter's increment),
    counting a nested block's (a nested loop's counter is restored by its own grad's
    decrements, so the outer step must not snapshot it either). A nested block-running op
    itself reads and writes all its loop vars, which does not make them in place."""
    names = set()
    for op in block.ops:
        ins, outs = set(op.input_arg_names), set(op.output_arg_names)
        if op.has_attr("sub_block"):
            inner = _updated_in_place(program, program.block(op.attr("sub_block")))
            names.update(inner & ins & outs)
        else:
            names.update(ins & outs)
    return names


def _snapshot_plan(program, sub_idx, outer_names):
    """Which outer variables a step scope snapshots: (before, after) name lists. Variables
    the block reads before writing are kept as they were before the step; those it writes
    first, as they were after it. Parameters and in-place outputs are left alone."""
    sub = program.block(sub_idx)
    first = {}
    inplace = _updated_in_place(program, sub)
    for op in sub.ops:
        ins, outs = op.input_arg_names, op.output_arg_names
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
        if is_empty(val):
            fwd = outer.find_var(_fwd_name(o))
            val = zeros_like_value(fwd.value) if fwd is not None else None
        grads[i] = val
    return grads


def _set_locals(scope, values):
    for name, val in values.items():
        scope.var(name).value = _link(val) if val is not None else None


# ---------------------------------------------------------------------------------------
# while
# ---------------------------------------------------------------------------------------
def _cond_true(var, name):
    return bool(scalar_value(var.value, f"while: Condition '{name}'"))


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
            drop_scopes(scope, holder.value)
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

    grad = staticmethod(lambda g: g.op(
        "while_grad",
        {"X": g.input("X"), "Out": g.output("Out"), "StepScopes": g.output("StepScopes"),
         "Out@GRAD": g.og_names},
        {"X@GRAD": g.block_input_grad("X")},
        {**g.attrs(), "sub_block": g.grad_block.idx, "original_output_grad": g.og_names}))


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
                  zip(p.op.input("X"), p.op.output("X@GRAD"), aligned_outputs(p, "X@GRAD"))
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
                        grads[inner] = (got if not is_empty(got)
                                        else zeros_like_value(grads.get(inner)))
                    else:
                        acc[x] = add_grads(acc.get(x), got)
            drop_scopes(scope, scopes)
            frame[scopes_i].value = []
            for x, inner, slot in wanted:
                val = grads.get(inner) if x in carried else acc.get(x)
                if is_empty(val):
                    xv = scope.find_var(x)
                    val = zeros_like_value(xv.value) if xv is not None else None
                frame[slot].value = val
        return step


# ---------------------------------------------------------------------------------------
# conditional_block
# ---------------------------------------------------------------------------------------
def _need_run(scalar, conds, inputs, what):
    if scalar:
        return bool(scalar_value(conds[0].value, f"{what}: Cond"))
    # every tensor input non-empty (IfElse: a branch that got no rows is skipped)
    return all(not is_empty(v.value) and v.value._array.size > 0 for v in inputs
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
            drop_scopes(scope, holder.value)
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

    grad = staticmethod(lambda g: g.op(
        "conditional_block_grad",
        {"Cond": g.input("Cond"), "Input": g.input("Input"), "Out": g.output("Out"),
         "Out@GRAD": g.og_names, "Scope": g.output("Scope")},
        {"Input@GRAD": g.block_input_grad("Input")},
        {**g.attrs(), "sub_block": g.grad_block.idx}))


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
                      aligned_outputs(p, "Input@GRAD")) if g != EMPTY_VAR_NAME]

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
                if is_empty(val):
                    xv = scope.find_var(x)
                    val = zeros_like_value(xv.value) if xv is not None else None
                frame[slot].value = val
        return step


# ---------------------------------------------------------------------------------------
# select_input / select_output (cond's merge of the two branches)
# ---------------------------------------------------------------------------------------
def _mask(t):
    return int(scalar_value(t, "Mask"))


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


    grad = staticmethod(lambda g: g.op(
        "select_output", {"X": g.output_grad("Out"), "Mask": g.input("Mask")},
        {"Out": g.input_grad("X")}))


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
        x, m, outs = p.in_one("X"), p.in_one("Mask"), aligned_outputs(p, "Out")

        def step(frame, env):
            k = _mask(frame[m].value)
            if not 0 <= k < len(outs):
                raise ExecutionError(f"select_output: Mask {k} is out of range [0, {len(outs)})")
            if outs[k] is not None:
                frame[outs[k]].value = frame[x].value
        return step

    grad = staticmethod(lambda g: g.op(
        "select_input", {"X": g.output_grad("Out"), "Mask": g.input("Mask")},
        {"Out": g.input_grad("X")}))
