"""The op registry. Each op type is one `OpDef` subclass that holds everything about it:
slot and attribute schema (Paddle's names and defaults), build-time shape/dtype inference,
the CPU kernel, how LoD flows, and the gradient maker used by `backward`.

Ops come in three kinds:

* ``kind = "array"`` (most ops): the kernel takes numpy arrays (a list for a duplicable slot,
  None for an absent dispensable one) in declared input order, and returns one array, or a
  tuple in declared output order. The executor wraps results in LoDTensors whose LoD comes
  from the input slot named by `share_lod`.
* ``kind = "value"``: the same, but inputs and outputs are the holders' values themselves
  (LoDTensor, SelectedRows, LoDTensorArray) for ops that read or make LoD or sparse rows.
* ``kind = "ctx"``: ``make_step(op)`` builds the op's step over the run's frame, with access to
  its variables, scope and sub-blocks (feed/fetch, control flow, I/O).

A kernel is written one way, `kernel(*inputs, **attrs)`, or, to precompute from attributes,
`prepare(cls, attrs, outputs)` returning it. Attributes are bound once, when a plan is
prepared (`OpDef.kernel_for`), so attribute parsing never happens on the hot path.
"""
import difflib
import inspect
import numbers

import numpy as np

from ..errors import ProgramError, ProgramFormatError, UnknownOpError
from ..proto import framework_pb2 as pb

AttrType = pb.AttrType


class Slot:
    """An input or output slot of an op (Paddle's OpProto.Var)."""
    __slots__ = ("name", "duplicable", "dispensable", "intermediate", "no_grad")

    def __init__(self, name, duplicable=False, dispensable=False, intermediate=False,
                 no_grad=False):
        self.name = name
        self.duplicable = duplicable
        self.dispensable = dispensable
        self.intermediate = intermediate
        self.no_grad = no_grad  # input that never gets a gradient (ids, labels, shapes)

    def __repr__(self):
        flags = [f for f in ("duplicable", "dispensable", "intermediate") if getattr(self, f)]
        return self.name + (f"[{','.join(flags)}]" if flags else "")


def In(name, **kw):
    return Slot(name, **kw)


Out = In


class Typed:
    """An attribute default with an explicit AttrType (lists, longs, blocks)."""
    __slots__ = ("type", "default")

    def __init__(self, type_, default):
        self.type = type_
        self.default = default


def ints(default=()):
    return Typed(AttrType.INTS, list(default))


def floats(default=()):
    return Typed(AttrType.FLOATS, list(default))


def strings(default=()):
    return Typed(AttrType.STRINGS, list(default))


def bools(default=()):
    return Typed(AttrType.BOOLEANS, list(default))


def longs(default=()):
    return Typed(AttrType.LONGS, list(default))


def long(default=0):
    return Typed(AttrType.LONG, default)


def float64(default=0.0):
    return Typed(AttrType.FLOAT64, default)


def block(default=None):
    return Typed(AttrType.BLOCK, default)


def blocks(default=()):
    return Typed(AttrType.BLOCKS, list(default))


def attr_type_of(value):
    """AttrType for a Python value when no schema says (Paddle's own rule of thumb)."""
    if isinstance(value, Typed):
        return value.type
    if isinstance(value, bool):
        return AttrType.BOOLEAN
    if isinstance(value, int):
        return AttrType.INT if -2**31 <= value < 2**31 else AttrType.LONG
    if isinstance(value, float):
        return AttrType.FLOAT
    if isinstance(value, str):
        return AttrType.STRING
    if isinstance(value, (list, tuple)):
        if not value:
            return AttrType.INTS
        head = value[0]
        if isinstance(head, bool):
            return AttrType.BOOLEANS
        if isinstance(head, int):
            return AttrType.INTS if all(-2**31 <= v < 2**31 for v in value) else AttrType.LONGS
        if isinstance(head, float):
            return AttrType.FLOATS
        if isinstance(head, str):
            return AttrType.STRINGS
    if hasattr(value, "idx") and hasattr(value, "ops"):  # a Block
        return AttrType.BLOCK
    raise ProgramError(f"cannot store attribute value {value!r} ({type(value).__name__})")


# --- attribute values against the schema ---------------------------------------------------
# What a value of each AttrType may be, as Python: Paddle's own readers convert int <-> int64,
# int/int64 -> float and int -> bool (framework/attribute.h ExtractAttribute), and its files
# carry int64 where this schema says int (padding_idx, height_sections...), double where it
# says float, an empty list of any element type; so these are accepted and converted. A
# string where a number belongs, a float where an int belongs, a number where a string
# belongs is written by no Paddle and is refused.
_INT32 = (-(1 << 31), (1 << 31) - 1)
_INT64 = (-(1 << 63), (1 << 63) - 1)
_INTEGRAL = (AttrType.INT, AttrType.LONG)
_REAL = (AttrType.FLOAT, AttrType.FLOAT64)
_INT_LISTS = {AttrType.INTS: AttrType.INT, AttrType.LONGS: AttrType.LONG}
_REAL_LISTS = (AttrType.FLOATS, AttrType.FLOAT64S)
_DESCRIBE = {AttrType.INT: "an integer in int32", AttrType.LONG: "an integer in int64",
             AttrType.FLOAT: "a number", AttrType.FLOAT64: "a number",
             AttrType.BOOLEAN: "a bool", AttrType.STRING: "a string",
             AttrType.INTS: "a list of integers in int32",
             AttrType.LONGS: "a list of integers in int64",
             AttrType.FLOATS: "a list of numbers", AttrType.FLOAT64S: "a list of numbers",
             AttrType.BOOLEANS: "a list of bools", AttrType.STRINGS: "a list of strings"}
_MAX_SHOWN = 60


def _is_int(v):
    return isinstance(v, numbers.Integral) and not isinstance(v, (bool, np.bool_))


def _is_real(v):
    return isinstance(v, numbers.Real) and not isinstance(v, (bool, np.bool_))


def _is_bool(v):
    return isinstance(v, (bool, np.bool_)) or _is_int(v)


def _int_in(v, want, stored):
    lo, hi = _INT64 if AttrType.LONG in (want, stored) else _INT32
    return _is_int(v) and lo <= int(v) <= hi


def _found(value, stored):
    what = AttrType.Name(stored) if stored is not None else type(value).__name__
    shown = repr(value)
    if len(shown) > _MAX_SHOWN:
        shown = shown[:_MAX_SHOWN] + "..."
    return f"{what} {shown}"


def _convert(want, value, stored):
    """`value` as the Python type of AttrType `want`, or None when it cannot be one."""
    if want in _INTEGRAL:
        return int(value) if _int_in(value, want, stored) else None
    if want in _REAL:
        return float(value) if _is_real(value) else None
    if want == AttrType.BOOLEAN:
        return bool(value) if _is_bool(value) else None
    if want == AttrType.STRING:
        return str(value) if isinstance(value, str) else None
    if not isinstance(value, (list, tuple, np.ndarray)):
        return None
    items = list(value)
    if want in _INT_LISTS:
        ok = all(_int_in(v, _INT_LISTS[want], AttrType.LONG if stored == AttrType.LONGS
                         else None) for v in items)
        return [int(v) for v in items] if ok else None
    if want in _REAL_LISTS:
        return [float(v) for v in items] if all(map(_is_real, items)) else None
    if want == AttrType.BOOLEANS:
        return [bool(v) for v in items] if all(map(_is_bool, items)) else None
    if want == AttrType.STRINGS:
        return [str(v) for v in items] if all(isinstance(v, str) for v in items) else None
    return value


def coerce_attr(opdef, name, value, stored=None):
    """`value` of op `opdef`'s attribute `name` in the Python type of the schema's AttrType
    (int, float, bool, str or a list of them; block, var and scalar attributes as they come);
    ProgramFormatError (a FormatError, so a ValueError) naming op, attribute, expected and
    found type when it cannot be one (see the table above). `stored` is the AttrType the
    desc holds it as, when it comes from one. An attribute the schema does not declare is
    returned as is (Paddle writes extras: use_mkldnn, ...)."""
    want = opdef.attr_type(name)
    if want is None or want not in _DESCRIBE or value is None:
        return value
    got = _convert(want, value, stored)
    if got is None:
        raise _type_error(opdef.type, name, want, value, stored)
    return got


def _type_error(op_type, name, want, value, stored):
    op = f"op '{op_type}': " if op_type else ""
    return ProgramFormatError(f"{op}attribute '{name}' must be {AttrType.Name(want)} "
                              f"({_DESCRIBE[want]}), found {_found(value, stored)}")


# --- attribute <-> OpDesc.Attr -----------------------------------------------------------
_SCALAR_FIELD = {AttrType.INT: "i", AttrType.FLOAT: "f", AttrType.STRING: "s",
                 AttrType.BOOLEAN: "b", AttrType.LONG: "l", AttrType.FLOAT64: "float64",
                 AttrType.BLOCK: "block_idx", AttrType.VAR: "var_name"}
_LIST_FIELD = {AttrType.INTS: "ints", AttrType.FLOATS: "floats", AttrType.STRINGS: "strings",
               AttrType.BOOLEANS: "bools", AttrType.LONGS: "longs",
               AttrType.FLOAT64S: "float64s", AttrType.BLOCKS: "blocks_idx",
               AttrType.VARS: "vars_name"}
_CAST = {AttrType.INT: int, AttrType.FLOAT: float, AttrType.STRING: str, AttrType.BOOLEAN: bool,
         AttrType.LONG: int, AttrType.FLOAT64: float, AttrType.INTS: int, AttrType.FLOATS: float,
         AttrType.STRINGS: str, AttrType.BOOLEANS: bool, AttrType.LONGS: int,
         AttrType.FLOAT64S: float, AttrType.BLOCK: int, AttrType.BLOCKS: int,
         AttrType.VAR: str, AttrType.VARS: str}


def _scalar_to_py(s):
    if s.type == pb.Scalar.BOOLEAN:
        return s.b
    if s.type == pb.Scalar.LONG:
        return s.i
    if s.type == pb.Scalar.FLOAT64:
        return s.r
    return complex(s.c.r, s.c.i)


def _py_to_scalar(v, s):
    if isinstance(v, bool):
        s.type, s.b = pb.Scalar.BOOLEAN, v
    elif isinstance(v, int):
        s.type, s.i = pb.Scalar.LONG, v
    elif isinstance(v, float):
        s.type, s.r = pb.Scalar.FLOAT64, v
    else:
        s.type = pb.Scalar.COMPLEX128
        s.c.r, s.c.i = v.real, v.imag


def check_value(type_, name, value, op_type=None):
    """Raise ProgramFormatError naming op (`op_type`, when given), attribute, expected and found
    type when `value` cannot be stored as AttrType `type_` (coerce_attr's rules: a str is
    never converted into a number, nor a number into a str)."""
    if type_ in _DESCRIBE and _convert(type_, value, None) is None:
        raise _type_error(op_type, name, type_, value, None)


def write_attr(attr_desc, name, value, type_):
    """Fill an OpDesc.Attr message with `value` stored as AttrType `type_` (check_value's
    error when it is not of that type)."""
    check_value(type_, name, value)
    attr_desc.Clear()
    attr_desc.name = name
    attr_desc.type = type_
    if hasattr(value, "idx") and hasattr(value, "ops"):  # Block objects store their index
        value = value.idx
    elif isinstance(value, (list, tuple)) and value and hasattr(value[0], "idx"):
        value = [b.idx for b in value]
    try:
        if type_ in _SCALAR_FIELD:
            setattr(attr_desc, _SCALAR_FIELD[type_], _CAST[type_](value))
        elif type_ in _LIST_FIELD:
            getattr(attr_desc, _LIST_FIELD[type_]).extend(_CAST[type_](v) for v in value)
        elif type_ == AttrType.SCALAR:
            _py_to_scalar(value, attr_desc.scalar)
        elif type_ == AttrType.SCALARS:
            for v in value:
                _py_to_scalar(v, attr_desc.scalars.add())
        else:
            raise ProgramError(f"attribute '{name}': unknown AttrType {type_}")
    except (TypeError, ValueError) as e:
        raise ProgramError(f"attribute '{name}' = {value!r} cannot be stored as "
                           f"{AttrType.Name(type_)}: {e}") from None


class BlockIndex(int):
    """A BLOCK / BLOCKS attribute's value as read from a desc: the block's index (an int, what
    Fluidity itself uses), also answering `.idx` and `.id` as the Block object Fluid's
    `op.all_attrs()` gives does (`op.all_attrs()["optimize_blocks"][0].idx`)."""
    __slots__ = ()

    @property
    def idx(self):
        return int(self)

    id = idx


def read_attr(attr_desc):
    """OpDesc.Attr message -> Python value."""
    t = attr_desc.type
    if t == AttrType.BLOCK:
        return BlockIndex(attr_desc.block_idx)
    if t == AttrType.BLOCKS:
        return [BlockIndex(i) for i in attr_desc.blocks_idx]
    if t in _SCALAR_FIELD:
        return getattr(attr_desc, _SCALAR_FIELD[t])
    if t in _LIST_FIELD:
        return list(getattr(attr_desc, _LIST_FIELD[t]))
    if t == AttrType.SCALAR:
        return _scalar_to_py(attr_desc.scalar)
    if t == AttrType.SCALARS:
        return [_scalar_to_py(s) for s in attr_desc.scalars]
    raise ProgramError(f"attribute '{attr_desc.name}': unknown AttrType {t}")


# --- op definitions --------------------------------------------------------------------
_REGISTRY = {}

# Attributes every op may carry (Paddle's OpProtoAndCheckerMaker adds them); kernels never see them.
COMMON_ATTRS = {"op_role": 0, "op_role_var": strings(), "op_namescope": "/",
                "op_callstack": strings(), "op_device": "", "with_quant_attr": False}


class Allocating:
    """A kernel that can also write its one output into memory the caller planned.

    `prepare` returns one when the op can: `kernel(*inputs)` allocates as usual (the
    interpreter calls it), `into(*inputs, alloc)` computes exactly the same thing, in the
    same numpy calls, into `alloc(shape, dtype)` (the linear executor's arena bytes)."""
    __slots__ = ("kernel", "into")

    def __init__(self, kernel, into):
        self.kernel, self.into = kernel, into

    def __call__(self, *inputs):
        return self.kernel(*inputs)


class OpDef:
    """Base of every op definition. Subclasses set `type` and are registered on creation.

    Running an op (see docs/ops.md) takes one of two forms, by `kind`:

    * `kind = "array"` or `"value"`: a kernel over the op's inputs in declared order (numpy
      arrays, or the holders' values for "value"). Write it as `kernel(*inputs, **attrs)`, a
      staticmethod whose keyword-only parameters name the attributes it takes; or, to
      precompute from the attributes once per prepared plan, as
      `prepare(cls, attrs, outputs)`, a classmethod returning the kernel (`attrs`: every
      attribute, defaults filled in; `outputs`: the output slots the op really has).
    * `kind = "ctx"`: ops that act on the run itself (feed/fetch, control flow, I/O) have no
      kernel but `make_step(op)`, which returns the `step(frame, env)` of the prepared op.
    """
    type = None
    inputs = ()
    outputs = ()
    attrs = {}
    kind = "array"
    share_lod = "X"          # outputs inherit this input's LoD (None: outputs have no LoD)
    # Output slots whose build-time lod_level `infer` declares from `lod_source`: the
    # source input's level, or 0 when the op shares none (Fluid's compile-time ShareLoD).
    # Empty: the op's own `infer_shape` declares it.
    lod_outputs = ()
    version = 0              # Paddle's op version this definition implements
    doc = ""
    # False for an op Fluidity adds that Paddle 1.8 does not register (fc_grad): Fluid's
    # registry questions (`core._get_all_register_op_kernels`) then answer as Fluid's
    in_paddle = True
    # Memory planning (fluidity/executor/linear.py): `inplace = {"Out": "X"}`: the output may
    # take over the input's buffer when this op is the input's last reader (element-wise ops).
    inplace = {}
    # Input slots whose first dim is a batch the op cannot compute on when it is empty (a
    # conv, a pool, an fc, batch statistics): the executor refuses a fed batch of no
    # example that goes straight into one, naming the op (executor/executor.py).
    nonempty_inputs = ()
    kernel = None            # staticmethod kernel(*inputs, **attrs)
    prepare = None           # classmethod prepare(cls, attrs, outputs) -> kernel
    make_step = None         # staticmethod make_step(op) -> step(frame, env), kind "ctx"
    # A kernel op that some attribute values turn into a run-time one (lookup_table with
    # remote_prefetch reads its rows from the parameter servers):
    # classmethod env_step(cls, op) -> step(frame, env) for those values, None to run the
    # kernel.
    env_step = None
    # A random op: the output slot whose first variable names its Philox stream; its
    # kernel is prepared with the stream id and takes the op's [key, run] state after its
    # inputs (ops/random_stream.py).
    random_stream = None
    random_off = None        # a bool attribute under which it draws nothing (is_test)
    # An op without `grad` ends the gradient path (ops Fluid gives an empty gradient maker:
    # comparisons, shapes, fills...). `grad_undefined = True` marks one Fluid registers no
    # gradient maker for (its fused inference ops): backward through it is an error, as in
    # Fluid, not a path silently cut.
    grad_undefined = False
    # Input slots whose data the kernel never reads, only their shapes (Paddle's
    # DECLARE_NO_NEED_BUFFER_VARS_INFERER; `core.infer_no_need_buffer_slots` answers from it).
    no_need_buffer = ()

    def __init_subclass__(cls, **kw):
        super().__init_subclass__(**kw)
        cls._specs = {}
        for name, default in {**COMMON_ATTRS, **cls.attrs}.items():
            t = attr_type_of(default)
            d = default.default if isinstance(default, Typed) else default
            cls._specs[name] = (t, d)
        if "type" in cls.__dict__ and cls.type:
            register(cls)

    # --- the schema ------------------------------------------------------------------------
    @classmethod
    def defaults(cls):
        """{attribute: default} of every attribute the op declares (common ones included)."""
        return {name: d for name, (_t, d) in cls._specs.items()}

    @classmethod
    def attr_type(cls, name):
        """The AttrType attribute `name` is stored as, or None when the op lacks it."""
        spec = cls._specs.get(name)
        return spec[0] if spec is not None else None

    @classmethod
    def declares(cls, name):
        """Whether the op's schema has attribute `name`."""
        return name in cls._specs

    @classmethod
    def attr_names(cls, common=True):
        return [n for n in cls._specs if common or n not in COMMON_ATTRS]

    @classmethod
    def slot(cls, name, inputs=True):
        for s in (cls.inputs if inputs else cls.outputs):
            if s.name == name:
                return s
        return None

    @classmethod
    def input_names(cls):
        return tuple(s.name for s in cls.inputs)

    @classmethod
    def output_names(cls):
        return tuple(s.name for s in cls.outputs)

    # --- build time ----------------------------------------------------------------------
    @staticmethod
    def infer_shape(ctx):
        """Set output shapes/dtypes from inputs' (ctx: framework.InferShapeContext).
        The default copies the first input's shape and dtype to every output."""
        ctx.same_as_first_input()

    @classmethod
    def infer(cls, ctx):
        """Build-time inference of one op: `infer_shape`, then the lod_level of the
        `lod_outputs` slots as the run-time LoD will have it (the same `lod_source`)."""
        cls.infer_shape(ctx)
        if not cls.lod_outputs:
            return
        attrs = cls.defaults()
        attrs.update({n: ctx.attr(n) for n in attrs if ctx.op.has_attr(n)})
        source = cls.lod_source(attrs)
        level = ctx.input_lod_level(source) if source and ctx.has_input(source) else 0
        for slot in cls.lod_outputs:
            if ctx.has_output(slot):
                ctx.set_output(slot, lod_level=level)

    # --- run time ------------------------------------------------------------------------
    @classmethod
    def lod_source(cls, attrs):
        """The input slot whose LoD the outputs take with these attributes: `share_lod`,
        unless the op shares it only under a condition on its attributes as Fluid's
        InferShape does (a reduction keeps X's LoD only when dim 0 is not reduced)."""
        return cls.share_lod

    @classmethod
    def kernel_for(cls, attrs, outputs, stream=None):
        """The kernel a prepared plan calls for one op: `prepare(attrs, outputs)`, or
        `kernel` with the attributes it names bound. `attrs` must hold every declared
        attribute (`defaults()` updated with the op's own). A random op's is
        `prepare(attrs, outputs, stream)` (its stream id: ops/random_stream.py)."""
        if cls.random_stream is not None:
            return cls.prepare(attrs, outputs, stream)
        if cls.prepare is not None:
            return cls.prepare(attrs, outputs)
        fn = cls.kernel
        if fn is None:
            raise ProgramError(f"op '{cls.type}' ({cls.kind}) has no kernel")
        names = kernel_attrs(fn)
        if not names:
            return fn
        kw = {k: attrs[k] for k in names}
        return lambda *args: fn(*args, **kw)

    # --- backward --------------------------------------------------------------------------
    grad = None   # staticmethod(g: backward.GradOpMaker) -> None; appends grad ops via g


_KERNEL_ATTRS = {}


def kernel_attrs(fn):
    """The attribute names a `kernel(*inputs, **attrs)` takes: its keyword-only parameters."""
    try:
        return _KERNEL_ATTRS[fn]
    except KeyError:
        pass
    params = inspect.signature(fn).parameters.values()
    res = _KERNEL_ATTRS[fn] = tuple(p.name for p in params if p.kind == p.KEYWORD_ONLY)
    return res


def check_opdef(cls):
    """Problems with how an OpDef is written (one kernel form, attributes it names declared);
    [] when none. Run over every registered op by the registry's tests."""
    problems = []
    forms = [f for f in ("kernel", "prepare", "make_step") if getattr(cls, f) is not None]
    want = ["make_step"] if cls.kind == "ctx" else ["kernel", "prepare"]
    if len(forms) != 1 or forms[0] not in want:
        problems.append(f"{cls.type}: kind '{cls.kind}' needs exactly one of {want}, has "
                        f"{forms or 'none'}")
    if cls.kernel is not None:
        undeclared = [n for n in kernel_attrs(cls.kernel) if n not in cls._specs]
        if undeclared:
            problems.append(f"{cls.type}: kernel takes undeclared attributes {undeclared}")
    if cls.kind not in ("array", "value", "ctx"):
        problems.append(f"{cls.type}: unknown kind '{cls.kind}'")
    return problems


def register(cls):
    if cls.type in _REGISTRY and _REGISTRY[cls.type] is not cls:
        raise ProgramError(f"op type '{cls.type}' is defined twice: "
                           f"{_REGISTRY[cls.type].__module__} and {cls.__module__}")
    _REGISTRY[cls.type] = cls
    return cls


def find(op_type):
    """The OpDef of `op_type`, or None when no op of that type is registered."""
    return _REGISTRY.get(op_type)


def get(op_type):
    """The OpDef of `op_type`; UnknownOpError naming close matches if none."""
    try:
        return _REGISTRY[op_type]
    except KeyError:
        close = difflib.get_close_matches(op_type, list(_REGISTRY), n=3)
        hint = f" (did you mean {', '.join(close)}?)" if close else ""
        raise UnknownOpError(f"unknown op type '{op_type}'{hint}; `fluidity ops` lists the "
                             f"{len(_REGISTRY)} registered ops") from None


def has(op_type):
    return op_type in _REGISTRY


def all_ops():
    return dict(sorted(_REGISTRY.items()))


def attrs_of(opdef, op_attrs):
    """Every attribute of an op for its kernel: the OpDef's defaults updated with the op's
    own (`op_attrs`, as read from its desc)."""
    attrs = opdef.defaults()
    attrs.update(op_attrs)
    return attrs
