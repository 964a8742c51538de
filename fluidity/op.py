"""`fluid.op`: ops made and run one at a time from their protos, outside any program.

    from fluidity.op import Operator
    op = Operator("scale", X="x", Out="y", scale=2.0)   # names of scope variables, attributes
    op.run(scope, fluid.CPUPlace())                      # reads x from scope, writes y there

Paddle's C++ registry describes every op type by an `OpProto` (framework.proto): its input
and output slots (with `duplicable`, `dispensable`, `intermediate`) and its attributes (with
their AttrType). Here the OpProto is made from the op's `OpDef` schema in our registry, so
it says exactly what the op takes (`op_proto(type)`, `OpProtoHolder`, `get_all_op_protos`).

`Operator(type, **slots_and_attrs)` builds the op's OpDesc from that proto (Paddle's
OpDescCreationMethod: keyword arguments only; one variable per non-duplicable slot;
attributes stored as the proto types them) and returns a `CoreOperator` (Paddle's
`core.Operator`), whose `run(scope, place)` runs the op's kernel on the variables of `scope`
through the executor, as a one-op block. The questions Paddle's `core` answers about ops
(`has_grad_op_maker`, `get_grad_op_desc`, `op_support_gpu`, ...) are answered here from the
same registry; `fluidity/__init__.py` puts them on `fluidity.core`.
"""
import numpy as np

from .core import dtypes
from .core.dtypes import VarType
from .core.names import EMPTY_VAR_NAME, GRAD_SUFFIX
from .core.place import is_compiled_with_cuda
from .core.scope import Scope
from .core.tensor import LoDTensor, LoDTensorArray, SelectedRows
from .errors import ProgramError
from .ir import rewrite
from .ir.op_desc import OpDesc
from .ir.op_proto import (GENERATED_ATTRS, OpProtoHolder, get_all_op_protos,  # noqa: F401
                          op_proto)
from .ir.views import OpView, ProgramView, fill_var_type
from .ops import registry
from .proto import framework_pb2 as pb


# --- making an op's desc from its proto ------------------------------------------------------
def _py(value):
    """numpy values as the Python values an attribute stores."""
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, (list, tuple)):
        return [_py(v) for v in value]
    return value


class OpDescCreationMethod:
    """Paddle's `fluid.op.OpDescCreationMethod(op_proto)`: called with keyword arguments
    only, it makes the OpDesc of that proto: each slot from the name or names given (one
    for a non-duplicable slot: ValueError otherwise), each attribute given stored as the
    proto types it, slots and attributes in the proto's order."""

    def __init__(self, op_proto):
        if not isinstance(op_proto, pb.OpProto):
            raise TypeError(f"OpDescCreationMethod takes an OpProto, got "
                            f"{type(op_proto).__name__}")
        self.__op_proto__ = op_proto

    def __call__(self, *args, **kwargs):
        if args:
            raise ValueError("Only keyword arguments are supported.")
        proto = self.__op_proto__
        od = pb.OpDesc(type=proto.type)
        for protos, repeated, what in ((proto.inputs, od.inputs, "Input"),
                                       (proto.outputs, od.outputs, "Output")):
            for vp in protos:
                names = kwargs.get(vp.name, [])
                names = [names] if isinstance(names, str) else list(names)
                if not vp.duplicable and len(names) > 1:
                    raise ValueError(f"{what} {vp.name} expects only one {what.lower()}, "
                                     f"but {len(names)} are given.")
                if names:
                    v = repeated.add()
                    v.parameter = vp.name
                    v.arguments.extend(str(n) for n in names)
        for ap in proto.attrs:
            value = kwargs.get(ap.name)
            if value is not None:
                registry.write_attr(od.attrs.add(), ap.name, _py(value), ap.type)
        return od


def make_op_desc(op_type, kwargs):
    """The OpDesc of `Operator(op_type, **kwargs)`: slots from the names given (a name or a
    list of names), attributes from the values given, each stored as the schema types it."""
    return OpDescCreationMethod(OpProtoHolder.instance().get_op_proto(op_type))(**kwargs)


class OpInfo:
    """What the factory knows of one op type (Paddle's fluid.op.OpInfo)."""

    def __init__(self, name, method, inputs, outputs, attrs):
        self.name, self.method = name, method
        self.inputs, self.outputs, self.attrs = inputs, outputs, attrs


class OperatorFactory:
    """`Operator(type, **kwargs)` -> CoreOperator; and the slots and attributes of a type."""

    def __call__(self, *args, **kwargs):
        if "type" in kwargs:
            if args:
                raise ValueError('Except the argument "type", all of the other arguments '
                                 'should be keyword arguments.')
            t = kwargs.pop("type")
        else:
            if len(args) != 1:
                raise ValueError('Except the argument "type", all of the other arguments '
                                 'should be keyword arguments.')
            t = args[0]
        return self.get_op_info(t).method(**kwargs)

    def types(self):
        return list(registry.all_ops())

    def get_op_info(self, t):
        if not registry.has(t):
            raise ValueError(f"The operator: {t} is not registered.")
        proto = OpProtoHolder.instance().get_op_proto(t)
        return OpInfo(t, lambda **kw: CoreOperator(make_op_desc(t, kw)),
                      [(v.name, v.duplicable) for v in proto.inputs],
                      [(v.name, v.duplicable) for v in proto.outputs],
                      [a.name for a in proto.attrs])

    def get_op_input_names(self, type):
        return [n for n, _ in self.get_op_inputs(type)]

    def get_op_inputs(self, type):
        return self.get_op_info(type).inputs

    def get_op_output_names(self, type):
        return [n for n, _ in self.get_op_outputs(type)]

    def get_op_outputs(self, type):
        return self.get_op_info(type).outputs

    def get_op_attr_names(self, type):
        return self.get_op_info(type).attrs


# --- running one op --------------------------------------------------------------------------
def _holder_type(value):
    if isinstance(value, SelectedRows):
        return VarType.SELECTED_ROWS
    if isinstance(value, LoDTensorArray):
        return VarType.LOD_TENSOR_ARRAY
    if value is None or isinstance(value, LoDTensor):
        return VarType.LOD_TENSOR
    if isinstance(value, list) and all(isinstance(s, Scope) for s in value):
        return VarType.STEP_SCOPES
    return VarType.RAW


_EXECUTORS = {}


def _executor(place):
    exe = _EXECUTORS.get(place)
    if exe is None:
        from .executor import Executor   # the executor sits above ops and ir
        exe = _EXECUTORS[place] = Executor(place)
    return exe


class CoreOperator:
    """Paddle's core.Operator: one op over variables named in a scope, run alone."""

    def __init__(self, op_desc):
        self.desc = OpDesc(op_desc)
        self._opdef = registry.get(op_desc.type)
        self._programs = {}   # kinds of the scope's holders -> the one-op program
        self._names = list(dict.fromkeys(n for n in op_desc.input_arg_names() +
                                         op_desc.output_arg_names() if n != EMPTY_VAR_NAME))
        self._out_names = [n for n in dict.fromkeys(op_desc.output_arg_names())
                           if n != EMPTY_VAR_NAME]

    def type(self):
        return self.desc.proto.type

    def attr(self, name):
        return OpView(None, self.desc.proto).attr(name)

    def input(self, slot):
        names = self.desc.proto.input(slot)
        if len(names) != 1:
            raise ValueError(f"op '{self.type()}' input {slot} holds {len(names)} variables; "
                             f"input() returns one (use inputs())")
        return names[0]

    def output(self, slot):
        names = self.desc.proto.output(slot)
        if len(names) != 1:
            raise ValueError(f"op '{self.type()}' output {slot} holds {len(names)} "
                             f"variables; output() returns one (use outputs())")
        return names[0]

    def inputs(self):
        return {v.parameter: list(v.arguments) for v in self.desc.proto.inputs}

    def outputs(self):
        return {v.parameter: list(v.arguments) for v in self.desc.proto.outputs}

    def input_vars(self):
        return self.desc.proto.input_arg_names()

    def output_vars(self):
        return self.desc.proto.output_arg_names()

    def no_intermediate_outputs(self):
        return [n for v in self.desc.proto.outputs
                if not (self._opdef.slot(v.parameter, inputs=False) or
                        registry.Slot("")).intermediate for n in v.arguments]

    def support_gpu(self):
        return op_support_gpu(self.type())

    def __str__(self):
        # Paddle's OperatorBase::DebugString: "Op(sum), inputs:{X[a, b]}, outputs:{Out[z]}."
        ins = ", ".join(f"{k}[{', '.join(v)}]" for k, v in self.inputs().items())
        outs = ", ".join(f"{k}[{', '.join(v)}]" for k, v in self.outputs().items())
        return f"Op({self.type()}), inputs:{{{ins}}}, outputs:{{{outs}}}."

    __repr__ = __str__

    def _program(self, scope):
        """The one-op program for the kinds of variable `scope` holds under the op's names
        (a SelectedRows input picks the op's sparse kernel, as in Paddle), cached."""
        names = self._names
        held = []
        for n in names:
            v = scope.find_var(n)
            held.append(v.value if v is not None else None)
        key = tuple(_holder_type(h) for h in held)
        view = self._programs.get(key)
        if view is None:
            desc = pb.ProgramDesc()
            bd = desc.blocks.add()
            bd.idx, bd.parent_idx = 0, -1
            for n, h, t in zip(names, held, key):
                vd = bd.vars.add()
                vd.name = n
                vd.persistable = True   # found up the scope chain, as Paddle's FindVar
                arr = getattr(h, "_array", None)
                if isinstance(h, SelectedRows):
                    arr = h.value
                fill_var_type(vd.type, t, list(arr.shape) if arr is not None else None,
                              dtypes.to_code(arr.dtype) if arr is not None else None, 0)
            bd.ops.add().CopyFrom(self.desc.proto)
            view = self._programs[key] = ProgramView(desc)
        return view

    def run(self, scope, place):
        """Run the op on `scope`'s variables (inputs read, outputs written there). As in
        Paddle, an output variable keeps its holder: a LoDTensor or SelectedRows taken
        from it before the run (`scope.var("Out").get_selected_rows()`) holds the result."""
        before = {}
        for n in self._out_names:
            v = scope.find_var(n)
            if v is not None and isinstance(v.value, (LoDTensor, SelectedRows)):
                before[n] = (v, v.value)
        _executor(place).run_block(self._program(scope), 0, scope)
        for v, old in before.values():
            new = v.value
            if new is old or type(new) is not type(old):
                continue
            if isinstance(old, SelectedRows):
                old.rows, old.height, old.value = new.rows, new.height, new.value
            else:
                old._array, old._lod = new._array, new._lod
            v.value = old


Operator = OperatorFactory()   # Paddle's default global factory


class _TypedOpFactory:
    """Fluid 1.8's `RecurrentOp`, `DynamicRecurrentOp` and `CondOp`: an Operator of one fixed
    type. Fluid 1.8 registers no `dynamic_recurrent` or `cond` op any more, so calling those
    two fails there as here (the names remain for old imports)."""

    def __init__(self, op_type):
        self.type = op_type

    def __call__(self, *args, **kwargs):
        kwargs.setdefault("type", self.type)
        return Operator(*args, **kwargs)


RecurrentOp = _TypedOpFactory("recurrent")
DynamicRecurrentOp = _TypedOpFactory("dynamic_recurrent")
CondOp = _TypedOpFactory("cond")


# --- what Paddle's core answers about ops ----------------------------------------------------
def op_support_gpu(op_type):
    """Whether `op_type` has a CUDA kernel in this installation, as Paddle's core answers
    from its kernel registry: the code generator's CUDA target compiles the op and CUDA
    programs can run here (`is_compiled_with_cuda`); a machine without a GPU is Paddle's
    CPU-only build, which registers no CUDA kernel."""
    from .codegen import emit          # codegen sits above ops
    return (registry.find(op_type) is not None and emit.lookup(op_type, "cuda") is not None
            and is_compiled_with_cuda())


def infer_no_need_buffer_slots(op_type, inputs, outputs, attrs):
    """The input slots of an op of `op_type` (given these inputs) whose data its kernel does
    not read, only their shapes: what the op declares (`OpDef.no_need_buffer`), as Paddle's
    no-need-buffer inferers; an empty set for an op that declares none."""
    return {s for s in registry.get(op_type).no_need_buffer if inputs.get(s)}


def has_grad_op_maker(op_type):
    opdef = registry.find(op_type)
    return opdef is not None and opdef.grad is not None


def has_infer_inplace(op_type):
    """False for every op: no op here asks to run in place. Paddle's ops with an inplace
    inferer run in place when `BuildStrategy.enable_inplace` says so; Fluidity's executors
    decide buffer reuse themselves (the linear plan's memory planner, over `OpDef.inplace`),
    whatever the build strategy, so there is no in-place variant of an op to compare."""
    registry.get(op_type)   # an unknown type is still an error
    return False


def get_all_register_op_kernels():
    """{op type: [kernel keys]} of every op with a kernel (one CPU kernel per op here, of
    any data type; a CUDA one where the op compiles for CUDA), as Paddle registers them:
    Fluidity's own additions (`in_paddle = False`, e.g. fc_grad) are left out, since Fluid's
    tools read a missing `<op>_grad` as "this op has no gradient"."""
    from .codegen import emit
    key = "data_type[ANY]:data_layout[ANY_LAYOUT]:place[{}]:library_type[PLAIN]"
    out = {}
    for t, opdef in registry.all_ops().items():
        if not getattr(opdef, "in_paddle", True):
            continue
        keys = [key.format("CPUPlace")]
        if emit.lookup(t, "cuda") is not None:
            keys.append(key.format("CUDAPlace(0)"))
        out[t] = keys
    return out


def get_grad_op_desc(op_desc, no_grad_set, grad_sub_block_list=()):
    """(grad op descs, {grad var: forward var}) of one op desc: the grad ops its gradient
    maker declares (the ones `append_backward` appends), every input wanting a gradient but
    those whose gradient `no_grad_set` names (`X@GRAD`, as Paddle's). An op that runs a
    sub-block needs its program's backward (`append_backward`), not this."""
    from .backward import GradOpMaker, plain_grad_names   # backward sits above ops
    proto = op_desc.proto if isinstance(op_desc, OpDesc) else op_desc
    opdef = registry.get(proto.type)
    if opdef.grad is None:
        return [], {}
    if getattr(opdef, "grad_targets", None) is not None:
        raise ProgramError(f"get_grad_op_desc: op '{proto.type}' runs a sub-block; its "
                           f"gradient comes from append_backward over its program")
    fwd = getattr(op_desc, "_op", None) or OpView(None, proto)
    no_grad = set(no_grad_set or ())
    wanted = {n for n in proto.input_arg_names() if n + GRAD_SUFFIX not in no_grad}
    maker = GradOpMaker(fwd, wanted, plain_grad_names())
    opdef.grad(maker)
    descs, grad_to_var = [], {}
    for type_, ins, outs, attrs in maker.specs:
        descs.append(OpDesc(rewrite.make_op_desc(type_, ins, outs, attrs)))
        for names in list(ins.values()) + list(outs.values()):
            for n in names:
                if GRAD_SUFFIX in n:
                    grad_to_var[n] = n.split(GRAD_SUFFIX)[0]
    return descs, grad_to_var


def is_float16_supported(place):
    """False: no kernel here computes in float16 (neither the numpy ones nor the compiled
    C++/CUDA forms, whose element types are core.dtypes.C_TYPES)."""
    return False


def get_op_attrs_default_value(op_type):
    """{attribute: default} of a registered op type (`op_type` a str or bytes), the
    framework's common attributes (op_role, op_namescope, ...) included: Paddle's
    `core.get_op_attrs_default_value`. Lists are fresh copies; an unknown type raises
    UnknownOpError naming close matches."""
    if isinstance(op_type, (bytes, bytearray)):
        op_type = bytes(op_type).decode()
    return {name: _py(d) for name, d in registry.get(op_type).defaults().items()}


class _CoreOperatorClass:
    """`core.Operator.create(serialized OpDesc)`, Paddle's C++ side of `Operator(...)`."""

    @staticmethod
    def create(serialized_op_desc):
        od = pb.OpDesc.FromString(bytes(serialized_op_desc))
        return CoreOperator(od)


def install_core_names(core):
    """Put the op questions of Paddle's `fluid.core` on our `core` package (which sits below
    the op registry, so cannot define them itself)."""
    core.op_support_gpu = op_support_gpu
    core.infer_no_need_buffer_slots = infer_no_need_buffer_slots
    core.get_op_attrs_default_value = get_op_attrs_default_value
    core.has_grad_op_maker = has_grad_op_maker
    core.has_infer_inplace = has_infer_inplace
    core._get_all_register_op_kernels = get_all_register_op_kernels
    core.get_grad_op_desc = get_grad_op_desc
    core.get_all_op_protos = lambda: [p.SerializeToString() for p in get_all_op_protos()]
    core.is_float16_supported = is_float16_supported
    core.OpDesc = OpDesc
    core.Operator = _CoreOperatorClass
