"""A prepared plan: one block's ops bound to their kernels, attributes read once.

At prepare time every variable the block's ops touch gets a slot in a *frame* (a list of
scope Variables), and every op becomes a `step(frame, env)` closure that reads its inputs
from frame slots and writes its outputs back. Running the block is then

    frame = plan.frame(scope)         # one scope lookup per variable
    for step in plan.steps: step(frame, env)

so per-op dispatch costs one Python call and a few list reads, not a protobuf walk.
"""
import numpy as np

from ..core import philox
from ..core.dtypes import VarType
from ..core.names import EMPTY_VAR_NAME
from ..core.reader import passes_through
from ..core.tensor import LoDTensor
from ..errors import ExecutionError, ProgramError
from ..ir.views import TENSORLIKE
from ..ops import random_stream, registry
from . import separate_outputs


_TENSORS = (VarType.LOD_TENSOR, VarType.SELECTED_ROWS)


class RunEnv:
    """What steps of `ctx` ops may need beyond the frame: the scope the block runs in, the
    program (a ProgramView) and the executor that runs its sub-blocks. `collective` is the
    rendezvous of the replicas of a data-parallel run (executor/data_parallel.py), which
    the collective ops (`c_allreduce_sum`, ...) exchange through; None in a plain run."""
    __slots__ = ("scope", "executor", "program")
    collective = None

    def service(self, name):
        """The executor's run-time service `name` (`executor.services`): how RPC ops reach
        the network without importing it."""
        return self.executor.services.get(name)

    def __init__(self, scope, executor, program):
        self.scope = scope
        self.executor = executor
        self.program = program

    def run_block(self, block_idx, scope):
        """Run block `block_idx` of this run's program in `scope` (control-flow ops)."""
        self.executor.run_block(self.program, block_idx, scope)


class OpPrep:
    """What an op's `make_step` sees while the plan is prepared: the op (an OpView), its
    attributes with defaults, and the frame slots of its variables."""

    def __init__(self, plan, op, opdef, attrs):
        self.plan = plan
        self.op = op
        self.opdef = opdef
        self.attrs = attrs
        self.program = plan.program
        self.block = plan.block

    def idx(self, name):
        return self.plan.slot_of(name)

    def find_var(self, name):
        """The view of variable `name` as the op's block sees it (None if undeclared)."""
        return self.block.find_var_recursive(name)

    def in_idx(self, slot):
        """Frame slots of input `slot` ([] when absent)."""
        return [self.plan.slot_of(n) for n in self.op.input(slot) if n != EMPTY_VAR_NAME]

    def out_idx(self, slot):
        return [self.plan.slot_of(n) for n in self.op.output(slot) if n != EMPTY_VAR_NAME]

    def in_one(self, slot):
        ids = self.in_idx(slot)
        return ids[0] if ids else None

    def out_one(self, slot):
        ids = self.out_idx(slot)
        return ids[0] if ids else None

    def present_outputs(self):
        """The output slots the op writes: a kernel may skip computing the others (e.g.
        X@GRAD of a data input)."""
        return frozenset(s.name for s in self.opdef.outputs if self.out_idx(s.name))


def _reader(prep, slot):
    """How a step fetches input `slot`: ('one', i) | ('many', [i..]) | None (absent)."""
    ids = prep.in_idx(slot.name)
    if slot.duplicable:
        return ("many", ids)
    return ("one", ids[0]) if ids else None


def _writer(prep, slot):
    """Where a step puts output `slot`: a frame slot, None (absent), or for a duplicable slot
    a list aligned with the kernel's results (None where the name is @EMPTY@)."""
    names = prep.op.output(slot.name)
    if not any(n != EMPTY_VAR_NAME for n in names):
        return None
    if slot.duplicable:
        return [prep.idx(n) if n != EMPTY_VAR_NAME else None for n in names]
    return prep.idx(names[0])


# An op whose input may be declared of another type than a LoDTensor runs, over the holders'
# values, the kernel its OpDef makes with this hook from the attributes: SelectedRows (scale
# of a sparse gradient), LoDTensorArray (slice of an array's entries).
_VALUE_KERNELS = (("selected_rows_kernel", VarType.SELECTED_ROWS),
                  ("tensor_array_kernel", VarType.LOD_TENSOR_ARRAY))


def make_array_step(prep, fn, as_values=False, state=None):
    """Step for `array`/`value` kernels: fn(*inputs) -> output or tuple of outputs; a
    random op's (`state`: the frame slot of its [key, run] state) takes that state's array
    after its inputs.

    The step is generated as Python source specialized to this op — frame slots as
    constants, one line per input and output, no per-call lists or loops — and compiled once
    per distinct shape of code (cached), so dispatch is one call plus a few list reads."""
    opdef = prep.opdef
    readers = [_reader(prep, s) for s in opdef.inputs]
    if state is not None:
        readers.append(("state", state))
    writers = [_writer(prep, s) for s in opdef.outputs]
    lod_i = None
    source = opdef.lod_source(prep.attrs)
    if source is not None and not as_values:
        s = opdef.slot(source)
        if s is not None:           # a duplicable slot: its first input's (Fluid's ShareLoD)
            lod_i = prep.in_one(s.name)
    make = _step_factory(tuple(r if r is None or r[0] != "many" else ("many", tuple(r[1]))
                               for r in readers),
                         tuple(tuple(w) if isinstance(w, list) else w for w in writers),
                         lod_i, as_values)
    return make(fn, LoDTensor)


def _one_element_ranks(prep):
    """{kernel result position: 0 or 1} for the op's (non-duplicable) output slots whose
    variable the desc declares one element of rank 0 (`[]`, a program saved by Paddle 2.5+)
    or rank 1 (`[1]`, Fluid 1.x's full reductions); None when it has no such output."""
    ranks = {}
    for k, slot in enumerate(prep.opdef.outputs):
        names = prep.op.output(slot.name)
        if slot.duplicable or len(names) != 1 or names[0] == EMPTY_VAR_NAME:
            continue
        v = prep.find_var(names[0])
        if v is None or v.type not in TENSORLIKE or tuple(v.shape) not in ((), (1,)):
            continue
        if _follows_its_input(prep, slot.name, tuple(v.shape)):
            continue
        ranks[k] = len(v.shape)
    return ranks or None


def _follows_its_input(prep, out_slot, shape):
    """Whether the output is an element-wise image of an input declared with the same shape
    (the op's `inplace` pairs: the output has the input's shape), so the kernel already
    returns the declared rank and need not be wrapped (a chain of scale or activation ops
    over a [1] value pays nothing per op)."""
    src = prep.opdef.inplace.get(out_slot)
    if src is None:
        return False
    names = prep.op.input(src)
    if len(names) != 1:
        return False
    u = prep.find_var(names[0])
    return u is not None and u.type in TENSORLIKE and tuple(u.shape) == shape


def _shaped_as_declared(value, rank):
    """`value` (a kernel's result) as its variable is declared when it is one element: 0-D
    for `[]`, `[1]` for `[1]`; a numpy scalar becomes an ndarray either way."""
    if isinstance(value, np.generic):
        value = np.asarray(value)
    if type(value) is np.ndarray and value.size == 1 and value.ndim != rank and value.ndim < 2:
        return value.reshape((1,) * rank)
    return value


def _as_declared(fn, ranks, n_outputs):
    """A kernel whose one-element results have the rank their variables are declared with
    (`_one_element_ranks`), so one op kernel serves a Fluid 1.x program, which declares a
    full reduction [1], and a program saved by Paddle 2.5+, which declares it []: the desc
    decides, as it does for every other shape. Only ops with such outputs pay for it."""
    if n_outputs == 1:
        rank = ranks[0]

        def kernel(*args):
            return _shaped_as_declared(fn(*args), rank)
        return kernel

    def kernel_many(*args):
        r = fn(*args)
        if not isinstance(r, tuple):
            return r
        return tuple(_shaped_as_declared(v, ranks[k]) if k in ranks else
                     (np.asarray(v) if isinstance(v, np.generic) else v)
                     for k, v in enumerate(r))
    return kernel_many


_FACTORIES = {}


def _step_factory(readers, writers, lod_i, as_values):
    key = (readers, writers, lod_i, as_values)
    make = _FACTORIES.get(key)
    if make is None:
        make = _FACTORIES[key] = _compile_step(readers, writers, lod_i, as_values)
    return make


def _compile_step(readers, writers, lod_i, as_values):
    get = "" if as_values else "._array"

    def arg(r):
        if r is None:
            return "None"
        if r[0] == "one":
            return f"F[{r[1]}].value{get}"
        if r[0] == "state":
            return f"F[{r[1]}].value._array"
        return "[" + ", ".join(f"F[{i}].value{get}" for i in r[1]) + "]"

    def put(target, v):
        if as_values:
            return f"{target}.value = {v}"
        if lod_i is None:
            return f"{target}.value = T({v})"
        # Fluid's ShareLoD, kept only where the output has the rows the LoD counts: an
        # output of other rows (a crop, a gather, an expand of the rows) gets no LoD
        # rather than one that refers to rows it does not have
        return f"{target}.value = T({v}, L if not L or shape({v})[:1] == tuple(L[-1][-1:]) else None)"

    lines = ["def make(fn, T):", "    def step(F, env):",
             f"        r = fn({', '.join(arg(r) for r in readers)})"]
    if lod_i is not None:
        lines.append(f"        L = F[{lod_i}].value._lod")
    many = len(writers) != 1
    for k, w in enumerate(writers):
        if w is None:
            continue
        v = f"r[{k}]" if many else "r"
        if many:
            lines.append(f"        v = {v}")
            v = "v"
        lines.append(f"        if {v} is not None:")
        if isinstance(w, tuple):  # duplicable: aligned with the kernel's list
            lines += [f"            {put(f'F[{i}]', f'{v}[{pos}]')}"
                      for pos, i in enumerate(w) if i is not None]
        else:
            lines.append(f"            {put(f'F[{w}]', v)}")
    lines += ["    return step"]
    ns = {"shape": np.shape}
    exec(compile("\n".join(lines), "<fluidity step>", "exec"), ns)
    return ns["make"]


def _dispensable_inputs(op):
    """Names `op` reads only through dispensable input slots (an op runs without them)."""
    slots = {sl.name: sl for sl in registry.get(op.type).inputs}
    required = {n for slot in op.input_names if not getattr(slots.get(slot), "dispensable",
                                                            False) for n in op.input(slot)}
    return {n for n in op.input_arg_names if n not in required}


class Plan:
    """One block of one program (a ProgramView), prepared. Immutable after construction;
    shareable by threads (each run binds its own frame)."""

    def __init__(self, program, block_idx=0):
        self.program = program
        self.block = block = program.block(block_idx)
        self.block_idx = block_idx
        self._slot = {}
        self.names = []
        self.local, self.persist, self.outer = [], [], []

        for op in block.ops:
            optional = _dispensable_inputs(op)
            for n in op.input_arg_names + op.output_arg_names:
                if n != EMPTY_VAR_NAME:
                    self._declare(n, op, n in optional)
        # variables declared in the block but touched by no op still exist at run time
        for n in block.vars:
            self._declare(n, None)

        # each random op's [key, run] state: a scope variable bound like a persistable
        self.rng = []
        for op in block.ops:
            name = random_stream.state_var(op)
            if name is not None and name not in self._slot:
                self._slot[name] = len(self.names)
                self.rng.append((len(self.names), name))
                self.names.append(name)

        self.ops = list(block.ops)
        self.steps = []
        for op in self.ops:
            self.steps.append(self._prepare_op(op))

    # -- frame layout -------------------------------------------------------------------
    def _declare(self, name, op, optional=False):
        if name in self._slot:
            return
        v = self.block.vars.get(name)
        if v is not None:
            bucket = self.persist if v.persistable else self.local
        elif self.block.find_var_recursive(name) is not None:
            bucket = self.outer
        elif optional:   # Fluid: an input no block declares is absent (null) at run time
            bucket = self.local
        else:
            raise ProgramError(f"op '{op.type}' in block {self.block_idx} uses variable "
                               f"'{name}', which no block declares")
        i = len(self.names)
        self._slot[name] = i
        self.names.append(name)
        bucket.append((i, name))

    def slot_of(self, name):
        return self._slot[name]

    def _prepare_op(self, op):
        opdef = registry.get(op.type)
        prep = OpPrep(self, op, opdef, registry.attrs_of(opdef, op.all_attrs()))
        if opdef.kind == "ctx":
            self._check_slots(op, opdef)
            return opdef.make_step(prep)
        remote = opdef.env_step(prep) if opdef.env_step is not None else None
        if remote is not None:      # attributes that send the op to the network
            return remote
        for hook, vtype in _VALUE_KERNELS:
            special = getattr(opdef, hook, None)
            if special is not None and self._reads_type(op, vtype):
                return make_array_step(prep, special(prep.attrs), as_values=True)
        state = random_stream.state_var(op)
        fn = opdef.kernel_for(prep.attrs, prep.present_outputs(),
                              random_stream.stream_of(op) if state is not None else None)
        if isinstance(fn, registry.Allocating):   # the interpreter lets kernels allocate
            fn = fn.kernel
        if opdef.kind == "array":
            ranks = _one_element_ranks(prep)
            if ranks is not None:
                fn = _as_declared(fn, ranks, len(opdef.outputs))
        step = make_array_step(prep, fn, as_values=opdef.kind == "value",
                               state=self._slot[state] if state is not None else None)
        pairs = separate_outputs.separate_pairs(op, opdef)
        return separate_outputs.wrap(prep, step, pairs) if pairs else step

    def _reads_type(self, op, vtype):
        """Whether an input of `op` is declared of type `vtype` (see _VALUE_KERNELS)."""
        for n in op.input_arg_names:
            v = self.block.find_var_recursive(n) if n != EMPTY_VAR_NAME else None
            if v is not None and v.type == vtype:
                return True
        return False

    def _check_slots(self, op, opdef):
        """A control-flow or I/O op's step reads its slots as it is prepared: one its schema
        requires (neither dispensable nor duplicable) must name a variable, or the program
        (a corrupt or hand-edited file) is refused here, naming the op and the slot."""
        for kind, slots, names in (("input", opdef.inputs, op.input),
                                   ("output", opdef.outputs, op.output)):
            for slot in slots:
                if slot.dispensable or slot.duplicable:
                    continue
                if not any(n != EMPTY_VAR_NAME for n in names(slot.name)):
                    raise ProgramError(f"{self.op_label(self.block.ops.index(op))} has no "
                                       f"{kind} {slot.name}, which it requires")

    # -- running ------------------------------------------------------------------------
    def frame(self, scope):
        """The frame for a run in `scope`: locals created there, persistables found up the
        chain or created in the root, outer-block variables found up the chain."""
        frame = [None] * len(self.names)
        lookup = scope.local_lookup()
        for i, n in self.local:
            v = lookup(n)
            frame[i] = v if v is not None else scope.var(n)
        if self.persist:
            root = scope.root()
            for i, n in self.persist:
                v = scope.find_var(n)
                frame[i] = v if v is not None else root.var(n)
        for i, n in self.outer:
            v = scope.find_var(n)
            frame[i] = v if v is not None else scope.var(n)
        for i, n in self.rng:
            frame[i] = philox.bound_state(scope, n)
        return frame

    def run(self, frame, env):
        i = 0
        try:
            for step in self.steps:
                step(frame, env)
                i += 1
        except Exception as e:
            err = self.failure(i, frame, e)
            if err is e:
                raise
            raise err from e

    def failure(self, i, frame, exc):
        """What to raise when op i failed with `exc`: `exc` itself when it already names the
        op it came from (a sub-block's), else an ExecutionError naming op i, its inputs and
        their shapes, and where the op was created."""
        if isinstance(exc, ExecutionError) and exc.op_index is not None:
            return exc
        if getattr(exc, "names_its_op", False):   # already says which op (nan_inf's check)
            return exc
        if passes_through(exc):    # a reader's end of data, an error of a user's generator
            return exc
        return self.describe_failure(self.ops[i], self.block_index_of(i), frame, exc)

    def block_index_of(self, i):
        """The block index of the op step i runs (kinds that reorder or group ops map it)."""
        return i

    def op_label(self, i):
        """"op #n 'type' in block b" for the op at block index i, numbered as in the user's
        program (feed ops the executor prepended do not count)."""
        n = i - sum(1 for o in self.block.ops[:i] if o.type == "feed")
        return f"op #{n} '{self.block.ops[i].type}' in block {self.block_idx}"

    def nonempty_readers(self, names):
        """{name: (op label, input slot)} of the first op of the block that reads each of
        `names` through one of its `nonempty_inputs` (absent when none does): the op an
        empty batch fed to it would fail or mislead."""
        out = {}
        for i, op in enumerate(self.block.ops):
            for slot in registry.get(op.type).nonempty_inputs:
                for n in op.input(slot):
                    if n in names and n not in out:
                        out[n] = (self.op_label(i), slot)
        return out

    def inputs_from_outside(self):
        """[(frame slot, name, op label, input slot)] of the tensors of this block that an
        op reads before any op of the block writes them, and that no op of another block
        writes: a run must find them with a value (fed, or left in the scope), or that op
        fails. Control-flow ops are left out (their sub-blocks say what they read)."""
        written_elsewhere = {n for b in self.program.blocks if b.idx != self.block_idx
                             for op in b.ops for n in op.output_arg_names}
        written, out = set(), []
        for i, op in enumerate(self.block.ops):
            if registry.get(op.type).kind != "ctx":
                for slot in op.input_names:
                    for n in op.input(slot):
                        if n in written or n in written_elsewhere or n == EMPTY_VAR_NAME:
                            continue
                        v = self.block.vars.get(n)
                        if v is None or v.persistable or v.type not in _TENSORS:
                            continue
                        written.add(n)  # reported once, for its first reader
                        out.append((self._slot[n], n, self.op_label(i), slot))
            written.update(op.output_arg_names)
        return out

    def describe_failure(self, op, i, frame, exc):
        """An ExecutionError for op `op` (block index i) failing with `exc`: the op, its
        inputs' dtypes, shapes and LoD, and where the op was created. Inputs without a
        value, or without elements (an empty batch), are named first."""
        where = op.attr("op_callstack") if op.has_attr("op_callstack") else []
        lines = [f"{self.op_label(i)} failed: {type(exc).__name__}: {exc}"]
        if where:
            lines.append(f"  the op was created at {where[-1]}")
        missing, empty = [], []
        for slot in op.input_names:
            for n in op.input(slot):
                if n == EMPTY_VAR_NAME:
                    continue
                v = frame[self._slot[n]]
                val = v.value if v is not None else None
                if val is None or (isinstance(val, LoDTensor) and val._array is None):
                    missing.append(n)
                    desc = "no value"
                elif isinstance(val, LoDTensor):
                    desc = f"{val._array.dtype}{list(val._array.shape)}"
                    if val._array.size == 0:
                        empty.append(f"{slot} '{n}' {list(val._array.shape)}")
                    if val._lod:
                        desc += f" lod={val._lod}"
                else:
                    desc = repr(val)
                lines.append(f"  input {slot}: '{n}' = {desc}")
        if missing:
            lines.insert(1, f"  input variable(s) {missing} have no value: feed them, or run the "
                            f"startup program to initialize parameters")
        if empty:  # the likelier cause than what the kernel said: lead with it
            lines[0] = (f"{self.op_label(i)} cannot run on an empty input: "
                        f"{', '.join(empty)} hold(s) no elements (an empty batch?); the kernel "
                        f"said {type(exc).__name__}: {exc}")
        return ExecutionError("\n".join(lines), op_type=op.type, op_index=i, cause=exc)
