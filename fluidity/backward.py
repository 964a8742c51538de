"""Backward as a pass over the IR: append the gradient ops of a loss to its block.

Each op type's `grad` (next to its forward definition) is called with a `GradOpMaker` and
declares the grad ops it needs. This pass then

* walks the ops that lead to the loss, last to first, asking each for its grad ops;
* gives each gradient the name `X@GRAD`; where several grad ops contribute to one gradient,
  renames each contribution (`X@GRAD@RENAME@<n>`) and sums them with a `sum` op before the
  gradient is first read;
* seeds `loss@GRAD` with `fill_constant(1.0)`;
* skips what needs no gradient (`stop_gradient` variables, `no_grad_set`, ops not on a path
  from a trainable variable to the loss) and fills gradients of unused outputs with zeros;
* creates the gradient variables with their forward variable's shape and dtype;
* for an op that runs a sub-block (while, conditional_block, recurrent), first builds its
  gradient block (a new block whose `forward_block_idx` is the sub-block, parent = the block
  the grad op goes to) by running this same machinery over the sub-block's ops, seeded by the
  gradients of the sub-block's outputs, then asks the op for its grad op (which runs that
  block). Inside a `while` body, an in-place `increment` of a counter gets a decrement in
  reverse order, so index-reading grad ops see each step's counter (as Paddle).

Repeated and higher-order passes (`gradients` of a program that already has grad ops, as
Fluid's `calc_gradient`): each pass names its gradients `X@GRAD` unless the program already
has a variable of that name, from an earlier pass; then it is `grad/.../X@GRAD` (Fluid's
rename, one `grad/` per pass), so no pass overwrites an earlier gradient (`_GradNames`). An
earlier pass's grad ops are differentiated like any op: a gradient of a gradient takes the
path through them (their `grad`: ops/common.py's double-grad makers). A grad op on such a
path without one is an error naming it (as Fluid's "GradOpMaker has not been registered"),
never a gradient that silently leaves that path out.
"""
from . import recompute, unique_name
from .core.dtypes import VarType
from .errors import ArgumentTypeError, FluidityError, NoGradientError
from .ir import rewrite
from .framework import (EMPTY_VAR_NAME, GRAD_SUFFIX, OpRole, Parameter, Variable,
                        grad_var_name, op_role_guard)
from .ops import registry


class _GradNames:
    """The gradient names of one backward pass: `X@GRAD`, unless a variable of that name is
    already in the program (a gradient an earlier pass made, which this pass may read as a
    forward value); then `grad/` once per pass so far + `X@GRAD`, or a unique name made
    from it (Fluid's `_rename_grad_name_` / `_rename_grad_`). Knows which names are this
    pass's gradients and of which variable."""

    def __init__(self, program, passes):
        self.existing = {n for b in program.blocks for n in b.vars} if program else set()
        self.passes = max(int(passes), 1)
        self._grad = {}      # forward name -> gradient name
        self._fwd = {}       # gradient name (and its @RENAME partials) -> forward name
        self._temps = {}     # helper variable of a grad op -> the variable it is shaped as

    def grad(self, name):
        g = self._grad.get(name)
        if g is None:
            g = grad_var_name(name)
            if g in self.existing:
                g = "grad/" * self.passes + g
                while g in self.existing:
                    g = unique_name.generate(g)
            self._grad[name] = g
            self._fwd[g] = name
        return g

    def is_grad(self, name):
        return name in self._fwd

    def fwd(self, name):
        return self._fwd.get(name, name)

    def alias(self, new, grad):
        """`new` holds a partial of gradient `grad`."""
        self._fwd[new] = self._fwd.get(grad, grad)

    def temp(self, like):
        name = unique_name.generate(like + "@TEMP")
        self._temps[name] = like
        return name

    def shaped_as(self, name):
        """The variable a gradient or helper named `name` is shaped as."""
        return self._temps.get(name) or self._fwd.get(name, name)


def plain_grad_names():
    """Gradient names as Paddle's `core.get_grad_op_desc` gives them, for one op outside
    any backward pass: always `X@GRAD`."""
    return _GradNames(None, 1)


class GradOpMaker:
    """What an op's `grad` sees: its forward op, and ways to name gradients and add ops."""

    def __init__(self, op, needs_grad, names=None):
        self.fwd = op
        self._needs_grad = needs_grad  # set of forward var names that want a gradient
        self._names = names if names is not None else _GradNames(op.block.program, 1)
        self.specs = []                # (type, inputs, outputs, attrs)
        # for ops with a sub-block, set by backward before `grad` is called:
        self.grad_block = None         # the gradient block built for the sub-block
        self.og_names = []             # output gradients the grad block reads from outside
        self.grad_block_writes = set() # names the grad block's ops write

    # -- names ------------------------------------------------------------------------
    def input(self, slot):
        return self.fwd.input(slot)

    def output(self, slot):
        return self.fwd.output(slot)

    def input_grad(self, slot):
        """Grad names for input `slot` (`@EMPTY@` for inputs that want none)."""
        return [self._names.grad(n) if n in self._needs_grad else EMPTY_VAR_NAME
                for n in self.fwd.input(slot)]

    def output_grad(self, slot):
        return [self._names.grad(n) for n in self.fwd.output(slot)]

    def has_output(self, slot):
        return any(n != EMPTY_VAR_NAME for n in self.fwd.output(slot))

    def temp(self, names):
        """A new helper variable shaped as `names`' one variable, for a grad op's
        intermediate result."""
        return [self._names.temp(names[0])]

    def zeros_like(self, names):
        """A helper variable of zeros shaped as `names`' one variable (a `fill_zeros_like`
        op), for a grad op needing an operand nothing else gives it."""
        out = self.temp(names)
        self.op("fill_zeros_like", {"X": list(names)}, {"Out": out})
        return out

    def block_input_grad(self, slot, inner_names=None):
        """Like input_grad for an op with a sub-block, but `@EMPTY@` also where its grad block
        computes no gradient. `inner_names`: the names the sub-block knows the inputs by,
        where those differ (recurrent's ex_states for initial_states)."""
        names = self.fwd.input(slot)
        inner = inner_names or names
        return [self._names.grad(n) if n in self._needs_grad and
                grad_var_name(i) in self.grad_block_writes else EMPTY_VAR_NAME
                for n, i in zip(names, inner)]

    def attrs(self):
        return {k: v for k, v in self.fwd.all_attrs().items()
                if k not in ("op_role", "op_role_var", "op_callstack")}

    def attr(self, name):
        return self.fwd.attr(name)

    # -- ops --------------------------------------------------------------------------
    def op(self, type, inputs, outputs, attrs=None):
        """Declare one grad op. Slots whose names are all @EMPTY@ are dropped; an op with no
        real output at all is not added."""
        outs = {k: v for k, v in outputs.items() if any(n != EMPTY_VAR_NAME for n in v)}
        if not outs:
            return
        self.specs.append((type, dict(inputs), outs, dict(attrs or {})))

    def default(self, grad_type=None, attrs=None):
        """Paddle's DefaultGradOpDescMaker: `<type>_grad` reading every forward input,
        output and output gradient, writing every input gradient."""
        opdef = registry.get(self.fwd.type)
        ins = {s.name: self.input(s.name) for s in opdef.inputs if self.input(s.name)}
        ins.update({s.name: self.output(s.name) for s in opdef.outputs if self.output(s.name)})
        ins.update({s.name + GRAD_SUFFIX: self.output_grad(s.name)
                    for s in opdef.outputs if self.output(s.name) and not s.intermediate})
        outs = {s.name + GRAD_SUFFIX: self.input_grad(s.name)
                for s in opdef.inputs if self.input(s.name) and not s.no_grad}
        self.op(grad_type or self.fwd.type + "_grad", ins, outs,
                self.attrs() if attrs is None else attrs)


def _differentiable_inputs(op):
    opdef = registry.get(op.type)
    out = []
    for s in opdef.inputs:
        if not s.no_grad:
            out.extend(op.input(s.name))
    return out


def _needs_grad_forward(block, ops, no_grad):
    """Variables whose gradient is wanted: every variable not marked stop_gradient (Fluid's
    no-grad set is the stop_gradient variables: a computed value marked
    stop_gradient=False gets its gradient even if nothing it is computed from does) and
    everything computed from them."""
    produced = {n for op in ops for n in op.output_arg_names}
    needs = set()
    for v in _all_vars(block):
        if v.name in no_grad or v.stop_gradient:
            continue
        if isinstance(v, Parameter) and not v.trainable:
            continue
        needs.add(v.name)
    for op in ops:
        opdef = registry.get(op.type)
        if opdef.grad is None:
            continue
        if any(n in needs for n in _differentiable_inputs(op)):
            for n in op.output_arg_names:
                v = block.find_var_recursive(n)
                if n not in no_grad and not (v is not None and v.stop_gradient and
                                             n not in produced):
                    needs.add(n)
    return needs


def _all_vars(block):
    b = block
    while b is not None:
        yield from b.vars.values()
        b = b.parent


def _ops_leading_to(ops, targets):
    """Ops (in program order) whose outputs lead to `targets`."""
    wanted = set(targets)
    keep = []
    for op in reversed(ops):
        if any(n in wanted for n in op.output_arg_names):
            keep.append(op)
            wanted.update(op.input_arg_names)
    keep.reverse()
    return keep


def _find_var(block, name):
    return block.find_var_recursive(name)


def _create_grad_var(block, name, fwd_name):
    """The variable of gradient (or grad-op helper) `name`, shaped as `fwd_name`'s."""
    v = block.find_var_recursive(name)
    if v is not None:
        return v
    fwd = _find_var(block, fwd_name)
    if fwd is None or fwd.type not in (VarType.LOD_TENSOR, VarType.SELECTED_ROWS,
                                      VarType.LOD_TENSOR_ARRAY):
        return block.create_var(name=name)
    return block.create_var(name=name, shape=fwd.shape, dtype=fwd.dtype,
                            lod_level=fwd.lod_level, type=fwd.type)


def _is_array(block, name):
    v = _find_var(block, name)
    return v is not None and v.type == VarType.LOD_TENSOR_ARRAY


def _no_gradient(op, needs):
    """The error for an op on the gradient path that has no gradient: a grad op of an
    earlier pass (a higher-order gradient through it), or an op Fluid registers no gradient
    maker for (`OpDef.grad_undefined`)."""
    wrt = [n for n in _differentiable_inputs(op) if n in needs]
    if not op.type.endswith("_grad"):
        return NoGradientError(
            f"op '{op.type}' (inputs {op.inputs_map()}) has no gradient (Fluid registers no "
            f"gradient maker for it: it is an inference op), but the gradient asked for "
            f"depends on it through {wrt}: train with the unfused ops it stands for")
    return NoGradientError(
        f"op '{op.type}' (inputs {op.inputs_map()}) has no gradient of its own "
        f"(GradOpMaker of '{op.type}' not built), but the gradient asked for depends on it "
        f"through {wrt}: a higher-order gradient through '{op.type}' cannot be computed. "
        f"Second-order gradients are built for elementwise add/sub/mul/div, mul, matmul, "
        f"conv2d/3d, depthwise_conv2d, mean, "
        f"reduce_sum/mean, scale, sum, relu, leaky_relu, square, sqrt, elu, slice and the "
        f"rearranging ops (reshape2, transpose2, squeeze2, unsqueeze2, flatten2)")


def _grad_specs(ops, needs, no_grad, grad_block, loop=False, names=None):
    """Grad op specs of `ops` (forward order), last op first. Ops with a sub-block get their
    gradient block built first (a child of `grad_block`, where their grad op will go)."""
    specs = []
    for op in reversed(ops):
        if loop and op.type == "increment" and op.input("X") == op.output("Out"):
            # restore the loop counter for the steps before (grad ops index arrays by it)
            specs.append(("increment", {"X": op.output("Out")}, {"Out": op.input("X")},
                          {"step": -op.attr("step")}))
            continue
        opdef = registry.get(op.type)
        if opdef.grad is None:
            if (op.type.endswith("_grad") or opdef.grad_undefined) and \
                    any(n in needs for n in _differentiable_inputs(op)):
                raise _no_gradient(op, needs)
            continue
        if not any(n in needs for n in _differentiable_inputs(op)):
            continue
        maker = GradOpMaker(op, needs, names)
        if op.has_attr("sub_block"):
            _backward_sub_block(op, opdef, grad_block, needs, no_grad, maker, names)
        opdef.grad(maker)
        specs.extend(maker.specs)
    return specs


def _propagate_needs(ops, needs, no_grad, links):
    """Names needing a gradient inside a sub-block: what the parent needs, plus everything
    computed from it, to a fixed point (a loop feeds later steps from earlier ones);
    `links` are (src, dst) pairs where dst needs a gradient if src does."""
    needs = set(needs)
    changed = True
    while changed:
        changed = False
        for src, dst in links:
            if src in needs and dst not in needs and dst not in no_grad:
                needs.add(dst)
                changed = True
        for op in ops:
            if registry.get(op.type).grad is None:
                continue
            if any(n in needs for n in _differentiable_inputs(op)):
                for n in op.output_arg_names:
                    if n not in needs and n not in no_grad:
                        needs.add(n)
                        changed = True
    return needs


def _read_before_written(ops):
    written, reads = set(), []
    for op in ops:
        for n in op.input_arg_names:
            if n not in written and n not in reads:
                reads.append(n)
        written.update(op.output_arg_names)
    return reads


def _isolate_reads_after_writes(block):
    """In a sub-block, give ops that read an outer variable after the block overwrote it a
    step-local copy to read (an `assign` right after the write). The block's op sees the same
    value; backward, which finds the variable as it was when the step began (the step scope's
    snapshot), then finds the value those ops read under the copy's name."""
    parent = block.parent

    def outer(n):
        return n not in block.vars and parent.find_var_recursive(n) is not None

    def plain(o):
        return not o.has_attr("sub_block")

    def reads_later(n, o):   # (a copy made by an earlier backward pass does not count)
        return plain(o) and n in o.input_arg_names and n not in o.output_arg_names and not (
            o.type == "assign" and o.output("Out")[0].startswith(n + "@STEP"))

    copies, k = {}, 0
    while k < len(block.ops):
        op = block.ops[k]
        inplace = set(op.input_arg_names) & set(op.output_arg_names)
        if plain(op):
            for n in (set(op.input_arg_names) & copies.keys()) - inplace:
                rewrite.rename_arg(op, n, copies[n])
        for n in dict.fromkeys(op.output_arg_names):
            copies.pop(n, None)
            if n in inplace or not outer(n) or not any(reads_later(n, o)
                                                        for o in block.ops[k + 1:]):
                continue
            v = parent.find_var_recursive(n)
            copy = block.create_var(name=unique_name.generate(n + "@STEP"), shape=v.shape,
                                    dtype=v.dtype, lod_level=v.lod_level, type=v.type)
            # the copy belongs to the forward block: it takes the writing op's role (so
            # clone(for_test) keeps it), not the Backward role this pass runs under
            rewrite.insert_op(block, k + 1, "assign", {"X": [n]}, {"Out": [copy.name]},
                              {"op_role": op.role})
            copies[n] = copy.name
            k += 1
        k += 1


def _backward_sub_block(op, opdef, parent, needs, no_grad, maker, names):
    """Build the gradient block of `op`'s sub-block as a child of `parent`; record it (and
    what it reads from outside and writes) on `maker`."""
    program = op.block.program
    sub = program.block(op.attr("sub_block"))
    _isolate_reads_after_writes(sub)
    targets, links = opdef.grad_targets(op)
    fwd_ops = _ops_leading_to(list(sub.ops), targets)
    sub_needs = _propagate_needs(fwd_ops, needs, no_grad, links)
    current = program.current_block_idx
    grad_block = program._create_block(parent_idx=parent.idx)
    grad_block._set_forward_block_idx(sub.idx)
    program.current_block_idx = current
    specs = _grad_specs(fwd_ops, sub_needs, no_grad, grad_block,
                        loop=getattr(opdef, "loop", False), names=names)
    seeds = [names.grad(n) for n in targets]
    _append_grad_ops(grad_block, specs, set(seeds), names)
    read = set(_read_before_written(grad_block.ops))
    maker.grad_block = grad_block
    maker.og_names = [g for g in dict.fromkeys(seeds) if g in read]
    maker.grad_block_writes = {n for o in grad_block.ops for n in o.output_arg_names}
    for g in read:   # gradients linked in from outside are the grad block's locals
        if names.is_grad(g) and _find_var(grad_block, g) is None:
            _create_grad_var(grad_block, g, names.shaped_as(g))


def _emit_backward(block, targets, target_grads, no_grad_set, names, grad_block=None):
    """Append grad ops for `targets` (seeded by `target_grads`, a list of var names holding
    their gradients, named by `names`) of `block`'s ops to `grad_block` (`block` itself by
    default). Returns the set of grad names produced."""
    grad_block = block if grad_block is None else grad_block
    fwd_ops = _ops_leading_to(list(block.ops), [t.name for t in targets])
    no_grad = set(no_grad_set or ())
    needs = _needs_grad_forward(block, fwd_ops, no_grad)
    specs = _grad_specs(fwd_ops, needs, no_grad, grad_block, names=names)
    return _append_grad_ops(grad_block, specs, set(target_grads), names)


def _emit_recompute_backward(block, targets, target_grads, no_grad, names, checkpoints):
    """_emit_backward with forward recomputation between `checkpoints` (names; see
    fluidity/recompute.py): the gradient ops of each segment follow copies of its ops that
    write what is not kept, reading and writing the copies' renamed variables."""
    fwd_ops = recompute.add_dropout_seeds(block, _ops_leading_to(
        list(block.ops), [t.name for t in targets]))
    needs = _needs_grad_forward(block, fwd_ops, no_grad)

    def persistable(n):
        v = _find_var(block, n)
        return v is not None and v.persistable

    specs = []
    for kind, ops, copies, renames in recompute.plan(fwd_ops, checkpoints, persistable):
        for old, new in renames.items():
            if _find_var(block, new) is None:
                src = _find_var(block, old)
                block.create_var(name=new, shape=src.shape, dtype=src.dtype,
                                 lod_level=src.lod_level, type=src.type)
        for op in copies:
            attrs = {k: v for k, v in op.all_attrs().items() if k not in ("op_role", "op_role_var")}
            specs.append(_renamed((op.type, op.inputs_map(), op.outputs_map(), attrs), renames))
        specs.extend(_renamed(spec, renames)
                     for spec in _grad_specs(ops, needs, no_grad, block, names=names))
    return _append_grad_ops(block, specs, set(target_grads), names)


def _renamed(spec, renames):
    """A (type, inputs, outputs, attrs) spec with its arguments renamed by `renames`."""
    if not renames:
        return spec
    type_, ins, outs, attrs = spec
    return (type_, {k: [renames.get(n, n) for n in v] for k, v in ins.items()},
            {k: [renames.get(n, n) for n in v] for k, v in outs.items()}, attrs)


def new_backward_block(block):
    """A new block differentiating sub-block `block` (Fluid 1.8's: parent = `block`'s
    parent, forward_block_idx = `block`), leaving the program's current block as it was."""
    program = block.program
    current = program.current_block_idx
    grad_block = program._create_block(parent_idx=block.parent_idx)
    grad_block._set_forward_block_idx(block.idx)
    program.current_block_idx = current
    return grad_block


def backward_block_of(block):
    """The block that differentiates `block` (its forward_block_idx is `block`), or None."""
    for b in block.program.blocks:
        if b.idx != block.idx and b.desc.forward_block_idx == block.idx:
            return b
    return None


def _append_grad_ops(block, specs, available, names):
    """Append grad op specs to `block`: rename repeated writes of a gradient and sum them
    (tensor arrays too, entry by entry, as Fluid does: two reads of one entry add their
    gradients, reads of different entries fill one array each), zero-fill gradients read
    before anything wrote them, create the gradient variables. Array gradients are not
    zero-filled (a missing entry reads as zero), and a grad op that would only write zero
    entries into them is left out. Returns the set of grad names produced."""
    pending = {}   # grad name -> list of (spec index, slot, position) writing it
    out_specs = []
    declare = []
    rename_count = [0]
    sub = block.idx != 0
    # the seeds hold gradients from outside (a target's seed, or in a grad block a loop
    # variable's from the next step); a grad op writing one before anything read it adds to
    # it (None marks the seed as the first writer): gradients([y, f(y)], ...) sums both
    seeds = set(available)
    zero_filled = set()   # gradients nothing wrote yet, which a fill_zeros_like made

    def flush(name):
        writers = pending.pop(name, None)
        if not writers or len(writers) == 1:
            return
        partials = [name] if writers[0] is None else []
        for w in writers:
            if w is None:
                continue
            spec, slot, pos = w
            rename_count[0] += 1
            new = f"{name}@RENAME@block{block.idx}@{rename_count[0]}"
            while _find_var(block, new) is not None:      # an earlier pass's partial
                rename_count[0] += 1
                new = f"{name}@RENAME@block{block.idx}@{rename_count[0]}"
            names.alias(new, name)
            spec[2][slot][pos] = new
            partials.append(new)
        out_specs.append(["sum", {"X": partials}, {"Out": [name]}, {}])

    def zero_into_arrays(ins, outs):
        """Whether a grad op would only write entries of array gradients, all from gradients
        nothing produced: its entries would be zeros that replace another writer's entries
        (a DynamicRNN's memory reads the input array's step 0 before the loop does), where
        a missing entry already reads as zero. Fluid leaves it out in effect (its input
        gradient variable never exists, so write_to_array writes nothing)."""
        grads_in = [n for args in ins.values() for n in args if names.is_grad(n)]
        grads_out = [n for args in outs.values() for n in args if n != EMPTY_VAR_NAME]
        return (grads_in and grads_out
                and all(n not in available or n in zero_filled for n in grads_in)
                and all(names.is_grad(n) and _is_array(block, names.fwd(n))
                        for n in grads_out))

    for spec in specs:
        type_, ins, outs, attrs = spec
        if zero_into_arrays(ins, outs):
            continue
        spec = [type_, {k: list(v) for k, v in ins.items()}, {k: list(v) for k, v in outs.items()},
                attrs]
        for slot, args in spec[1].items():
            for pos, n in enumerate(args):
                if not names.is_grad(n):
                    continue
                seeds.discard(n)   # read: later writers make the gradient of an older value
                if n in pending:
                    flush(n)
                elif n not in available:
                    fwd = names.fwd(n)
                    if _is_array(block, fwd):
                        declare.append(n)
                        available.add(n)
                    elif _find_var(block, fwd) is not None:
                        out_specs.append(["fill_zeros_like", {"X": [fwd]}, {"Out": [n]}, {}])
                        available.add(n)
                        zero_filled.add(n)
        for slot, args in spec[2].items():
            for pos, n in enumerate(args):
                if n == EMPTY_VAR_NAME:
                    continue
                if names.is_grad(n):
                    if n in seeds:
                        seeds.discard(n)
                        pending[n] = [None]
                    pending.setdefault(n, []).append((spec, slot, pos))
                available.add(n)
                zero_filled.discard(n)
        out_specs.append(spec)
    for n in list(pending):
        flush(n)

    produced = set()
    with op_role_guard(OpRole.Backward):
        for n in declare:
            _create_grad_var(block, n, names.shaped_as(n))
        for type_, ins, outs, attrs in out_specs:
            for args in outs.values():
                for n in args:
                    if n == EMPTY_VAR_NAME or not names.is_grad(n) and _find_var(block, n):
                        continue   # (a loop counter restored by a decrement)
                    _create_grad_var(block, n, names.shaped_as(n))
                    produced.add(n)
            # a grad block's ops read forward variables of the block it differentiates,
            # which build-time shape inference cannot see: shapes come from those vars
            block.append_op(type_, ins, outs, attrs, infer_shape=not sub)
    return produced


def _names_of(vars_, what, where):
    """Names of a set/list/tuple of Variables or names (Fluid's `_get_no_grad_set_name`);
    TypeError otherwise."""
    if vars_ is None:
        return set()
    if not isinstance(vars_, (set, list, tuple)):
        raise ArgumentTypeError(f"{where}: {what} must be a set, list or tuple of Variables "
                                f"or names, got {type(vars_).__name__}")
    out = set()
    for v in vars_:
        if not isinstance(v, (Variable, str)):
            raise ArgumentTypeError(f"{where}: {what} holds a {type(v).__name__}; its "
                                    f"members must be Variables or names")
        out.add(v.name if isinstance(v, Variable) else v)
    return out


def _check_type(value, name, types, where):
    if not isinstance(value, types):
        want = " or ".join(t.__name__ for t in (types if isinstance(types, tuple) else (types,)))
        raise ArgumentTypeError(f"The type of '{name}' in {where} must be {want}, but "
                                f"received {type(value).__name__}")


def _pass_names(program):
    """The gradient names of a new backward pass over `program` (counted, as Fluid's
    `_appending_grad_times`)."""
    program._appending_grad_times = getattr(program, "_appending_grad_times", 0) + 1
    return _GradNames(program, program._appending_grad_times)


def append_backward(loss, parameter_list=None, no_grad_set=None, callbacks=None,
                    checkpoints=None):
    """Append the backward pass of scalar `loss` to its program. Returns [(param, grad)]
    for the trainable parameters (or `parameter_list`) that the loss depends on.

    `checkpoints` (Fluid 1.8's recompute checkpoints: Variables or names): the forward ops
    between consecutive checkpoints are run again in the backward pass, as Fluid 1.8 builds
    it (fluidity/recompute.py), so only the checkpoints and what crosses segments need to
    outlive the forward pass; the gradients are the same."""
    where = "fluid.backward.append_backward"
    _check_type(loss, "loss", Variable, where)
    if callbacks is not None:
        _check_type(callbacks, "callbacks", list, where)
    if parameter_list is not None:
        _check_type(parameter_list, "parameter_list", (list, tuple, set), where)
        for i, p in enumerate(parameter_list):
            _check_type(p, f"parameter_list[{i}]", (Variable, str), where)
    no_grad = _names_of(no_grad_set, "no_grad_set", where)
    if checkpoints is not None:
        if not isinstance(checkpoints, (list, tuple)) or not all(
                isinstance(c, (Variable, str)) for c in checkpoints):
            raise TypeError(f"append_backward: checkpoints must be a list of Variables, got "
                            f"{checkpoints!r}")
        for c in checkpoints:
            if loss.block.program.global_block().find_var_recursive(
                    c if isinstance(c, str) else c.name) is None:
                raise ValueError(f"append_backward: checkpoint {c!r} is not a variable of "
                                 f"the loss's program")
    block = loss.block
    program = block.program
    for op in block.ops:
        if loss.name in op.output_arg_names:
            op._set_attr("op_role", OpRole.Forward | OpRole.Loss)
    names = _pass_names(program)
    # a loss built inside a sub-block (minimize in a case/switch_case branch): the
    # gradient and update ops go to a new block differentiating it, which the branch's
    # conditional_block runs after the branch (layers.control_flow.ConditionalBlock)
    target = block if block.idx == 0 else new_backward_block(block)

    loss_grad = names.grad(loss.name)
    with op_role_guard(OpRole.Backward | OpRole.Loss):
        target.create_var(name=loss_grad, shape=loss.shape, dtype=loss.dtype)
        target.append_op("fill_constant", outputs={"Out": loss_grad},
                         attrs={"shape": [d if d > 0 else 1 for d in loss.shape],
                                "dtype": loss.dtype, "value": 1.0})
    if checkpoints and target is block:
        produced = _emit_recompute_backward(
            block, [loss], [loss_grad], no_grad, names,
            [c if isinstance(c, str) else c.name for c in checkpoints])
    else:
        produced = _emit_backward(block, [loss], [loss_grad], no_grad, names,
                                  grad_block=target)

    if parameter_list is not None:
        params = [block.var(p) if isinstance(p, str) else p for p in parameter_list]
    else:
        params = [p for p in program.global_block().all_parameters() if p.trainable]
    pairs = []
    for p in params:
        g = names.grad(p.name)
        if g in produced:
            pairs.append((p, target.var(g)))
    # tag the ops that write parameter gradients (used by optimizers/transpilers)
    grad_of = {g.name: p.name for p, g in pairs}
    for op in target.ops:
        for n in op.output_arg_names:
            if n in grad_of:
                op._set_attr("op_role_var", [grad_of[n], n])
    return pairs


def gradients(targets, inputs, target_gradients=None, no_grad_set=None):
    """Gradients of sum(targets) w.r.t. `inputs`, a list with None where an input does not
    affect the targets (Fluid's `fluid.gradients`). May be called again on the program,
    on targets that depend on earlier gradients (higher orders): see the module's note."""
    where = "fluid.backward.gradients"
    _check_type(targets, "targets", (Variable, list, tuple), where)
    _check_type(inputs, "inputs", (Variable, list, tuple), where)
    _check_type(target_gradients, "target_gradients", (Variable, list, tuple, type(None)),
                where)
    return _calc_gradient(targets, inputs, target_gradients, no_grad_set)


def calc_gradient(targets, inputs, target_gradients=None, no_grad_set=None):
    """`gradients`, but one input gives its gradient alone, not in a list (Fluid's)."""
    grads = _calc_gradient(targets, inputs, target_gradients, no_grad_set)
    return grads[0] if len(grads) == 1 else grads


def _calc_gradient(targets, inputs, target_gradients, no_grad_set):
    targets = list(targets) if isinstance(targets, (list, tuple)) else [targets]
    inputs = list(inputs) if isinstance(inputs, (list, tuple)) else [inputs]
    if target_gradients is None:
        target_gradients = [None] * len(targets)
    elif not isinstance(target_gradients, (list, tuple)):
        target_gradients = [target_gradients]
    if len(target_gradients) != len(targets):
        raise ValueError(f"gradients: {len(targets)} targets but {len(target_gradients)} "
                         f"target_gradients; they must match")
    where = "fluid.backward.gradients"
    for i, v in enumerate(targets):
        _check_type(v, f"targets[{i}]", Variable, where)
    for i, v in enumerate(inputs):
        _check_type(v, f"inputs[{i}]", Variable, where)
    block = targets[0].block
    program = block.program
    for v in targets + inputs:
        if v.block.program is not program:
            raise ValueError(f"gradients: '{v.name}' is not in the targets' program")
    no_grad = _names_of(no_grad_set, "no_grad_set", where)
    names = _pass_names(program)
    seeds = []
    with op_role_guard(OpRole.Backward):
        for t, tg in zip(targets, target_gradients):
            if t.block is not block:
                raise ValueError("gradients: all targets must be in the same block")
            g = names.grad(t.name)
            if tg is not None:
                if tuple(tg.shape) != tuple(t.shape):
                    raise ValueError(f"The shapes of target and grad are different: "
                                     f"{t.name} {list(t.shape)}, {tg.name} {list(tg.shape)}")
                block.create_var(name=g, shape=t.shape, dtype=t.dtype)
                block.append_op("assign", {"X": tg}, {"Out": g})
            else:
                _ones_like(block, t, g)
            seeds.append(g)
    # inputs must get gradients even if marked stop_gradient (e.g. data layers)
    saved = {}
    for v in inputs:
        saved[v.name] = v.stop_gradient
        v.stop_gradient = False
    try:
        produced = _emit_backward(block, targets, seeds, no_grad, names)
    finally:
        for v in inputs:
            v.stop_gradient = saved[v.name]
    return [block.var(names.grad(v.name)) if names.grad(v.name) in produced else None
            for v in inputs]


def _ones_like(block, target, name):
    """`name` := ones shaped as `target` at run time (Fluid's seed: a `shape` op feeding a
    `fill_constant`, so a -1 dim takes the fed batch's size)."""
    block.create_var(name=name, shape=target.shape, dtype=target.dtype)
    if all(d >= 0 for d in target.shape):
        block.append_op("fill_constant", outputs={"Out": name},
                        attrs={"shape": list(target.shape), "dtype": target.dtype,
                               "value": 1.0})
        return
    shape = block.create_var(name=unique_name.generate(target.name + "_shape"),
                             dtype="int32", shape=[len(target.shape)])
    block.append_op("shape", {"Input": target}, {"Out": shape})
    block.append_op("fill_constant", {"ShapeTensor": shape}, {"Out": name},
                    {"shape": list(target.shape), "dtype": target.dtype, "value": 1.0})


# --- Fluid 1.8's backward helpers that programs and tests call by their private names --------
def _append_grad_suffix_(name):
    """`x` -> `x@GRAD`."""
    return grad_var_name(name)


def _as_list(x):
    """None -> [], a list or tuple -> a list of it, anything else -> [x]."""
    if x is None:
        return []
    return list(x) if isinstance(x, (list, tuple)) else [x]


def _strip_grad_suffix_(name):
    """`x@GRAD` -> `x`, `y@GRAD@RENAME@1` -> `y` (the name up to its first @GRAD)."""
    pos = name.find(GRAD_SUFFIX)
    return name[:pos] if pos != -1 else name


def _get_stop_gradients_(program):
    """{block index: the gradient names of the block's stop_gradient variables}."""
    return {b.idx: {grad_var_name(n) for n, v in b.vars.items() if v.stop_gradient}
            for b in program.blocks}


def _has_grad(op):
    opdef = registry.find(op.type)
    return opdef is not None and opdef.grad is not None


def _find_op_path_(block, outputs, inputs, no_grad_set):
    """The ops of `block` (in order) on a path from `inputs` (every variable when empty) to
    `outputs` that have a gradient, not passing through `no_grad_set` (names). With
    `inputs`, the stop_gradient variables those ops read that no input leads to are added
    to `no_grad_set`."""
    names = lambda vs: {v.name if isinstance(v, Variable) else v for v in vs}  # noqa: E731
    reach, want = names(inputs), names(outputs)
    ops = list(block.ops)
    keep = [True] * len(ops)
    if inputs:
        for i, op in enumerate(ops):
            if _has_grad(op) and reach & set(op.input_arg_names):
                reach.update(n for n in op.output_arg_names if n not in no_grad_set)
            else:
                keep[i] = False
    for i in range(len(ops) - 1, -1, -1):
        op = ops[i]
        if keep[i] and _has_grad(op) and want & set(op.output_arg_names):
            want.update(n for n in op.input_arg_names if n not in no_grad_set)
        else:
            keep[i] = False
    path = [op for op, k in zip(ops, keep) if k]
    if inputs:
        for op in path:
            for n in op.input_arg_names:
                v = block.find_var_recursive(n)
                if n not in reach and v is not None and v.stop_gradient:
                    no_grad_set.add(n)
    return path


def _find_no_grad_vars(block, op_path, targets, no_grad_set):
    """Outputs of `op_path`'s ops that nothing on the path to `targets` reads (and that
    are not stop_gradient already): their gradients are never needed."""
    used = {t.name if isinstance(t, Variable) else t for t in targets}
    unused = set()
    for op in reversed(op_path):
        if not op.has_attr("sub_block"):
            for n in op.output_arg_names:
                v = block.find_var_recursive(n)
                if n not in used and n not in op.input_arg_names and \
                        not (v is not None and v.stop_gradient):
                    unused.add(n)
        used.update(n for n in op.input_arg_names if n not in no_grad_set)
    return unused
