"""Paddle's `core.OpDesc`: an op's desc as Fluid's Python sees it, over our OpDesc message.

In Fluid, `op.desc` is a C++ OpDesc whose every accessor is a method: `op.desc.type()`,
`op.desc.input("X")`, `op.desc.set_attr("scale", 2.0)`, `op.desc.infer_shape(block.desc)`.
Fluidity's op desc is the protobuf message itself, and the message's field `type` is the
op type *string*, so `op_desc.type()` cannot work on it (a field of a upb message cannot be
overridden, nor its class subclassed). This handle wraps the message in place (no copy:
every read and write goes to the one message in the ProgramDesc) and gives

* Paddle's methods: `type()`, `set_type`, `input/output(_names/_arg_names)`,
  `set_input/set_output`, `rename_input/rename_output`, `attr/has_attr/attr_names/
  attr_type/set_attr/_set_attr/remove_attr/set_block_attr`, `copy_from`, `infer_shape`,
  `infer_var_type`, `check_attrs`, `serialize_to_string`;
* everything else of the message, unchanged: its fields (`op_desc.inputs`, `.attrs`),
  `SerializeToString`, `HasField`, ... (`proto` is the message itself, for protobuf calls
  such as `other.CopyFrom(op_desc.proto)`).

`type` reads as the op type string that can also be called (`op_desc.type == "mean"` and
`op_desc.type() == "mean"` both hold), so code written against the message keeps working.
The builder's `Operator.desc` is one of these (framework.py); the IR's own views keep the
bare messages.
"""
from ..errors import ProgramError
from ..ops import registry
from ..proto import framework_pb2 as pb
from ..core.names import GRAD_SUFFIX
from .infer_shape import InferShapeContext
from .rewrite import write_attr
from .views import TENSORLIKE, BlockView, OpView, VarView


class OpTypeName(str):
    """An op type string that is also Paddle's `type()` accessor: calling it gives the plain
    string."""
    __slots__ = ()

    def __call__(self):
        return str(self)


def _set_slot(repeated, slot, names):
    names = [names] if isinstance(names, str) else [str(n) for n in names]
    for v in repeated:
        if v.parameter == slot:
            del v.arguments[:]
            v.arguments.extend(names)
            return
    v = repeated.add()
    v.parameter = slot
    v.arguments.extend(names)


def _rename(repeated, old, new):
    for v in repeated:
        for i, a in enumerate(v.arguments):
            if a == old:
                v.arguments[i] = new


def unwrap(desc):
    """The OpDesc message of a handle, or `desc` itself when it is one already."""
    return desc.proto if isinstance(desc, OpDesc) else desc


class OpDesc:
    """Paddle's OpDesc API over one OpDesc message (see the module doc). `OpDesc()` makes a
    new, empty desc, as `core.OpDesc()` does; `op` is the builder's op view it belongs to,
    when it belongs to one (shape inference then sees the op's block)."""
    __slots__ = ("proto", "_op")

    def __init__(self, proto=None, op=None):
        if proto is not None and not isinstance(proto, (pb.OpDesc, OpDesc)):
            raise TypeError(f"OpDesc wraps an OpDesc message, got {type(proto).__name__}")
        object.__setattr__(self, "proto", unwrap(proto) if proto is not None else pb.OpDesc())
        object.__setattr__(self, "_op", op)

    # -- the message, in place ------------------------------------------------------------
    def __getattr__(self, name):
        return getattr(object.__getattribute__(self, "proto"), name)

    def __setattr__(self, name, value):
        setattr(self.proto, name, value)

    def __eq__(self, other):
        return self.proto is unwrap(other) or (isinstance(other, (OpDesc, pb.OpDesc))
                                               and self.proto == unwrap(other))

    def __hash__(self):   # one op desc, one key (Paddle's OpDesc hashes by identity)
        return id(self.proto)

    def __repr__(self):
        return f"OpDesc({self.proto.type!r})"

    def __str__(self):
        return str(self.proto)

    def __reduce__(self):
        return (OpDesc, (self.proto,))

    # -- type ----------------------------------------------------------------------------
    @property
    def type(self):
        return OpTypeName(self.proto.type)

    @type.setter
    def type(self, value):
        self.proto.type = str(value)

    def set_type(self, op_type):
        self.proto.type = str(op_type)

    # -- slots ---------------------------------------------------------------------------
    def set_input(self, slot, names):
        _set_slot(self.proto.inputs, slot, names)

    def set_output(self, slot, names):
        _set_slot(self.proto.outputs, slot, names)

    def rename_input(self, old, new):
        _rename(self.proto.inputs, old, new)

    def rename_output(self, old, new):
        _rename(self.proto.outputs, old, new)

    def _rename_input(self, old, new):
        self.rename_input(old, new)

    def _rename_output(self, old, new):
        self.rename_output(old, new)

    # -- attributes ----------------------------------------------------------------------
    def attr_type(self, name):
        for a in self.proto.attrs:
            if a.name == name:
                return a.type
        raise ProgramError(f"op '{self.proto.type}' has no attribute '{name}'")

    def set_attr(self, name, value):
        """Store `value` as the op's schema types attribute `name` (else as the value
        suggests), as the builder does."""
        write_attr(self.proto, name, value)

    _set_attr = set_attr

    def set_block_attr(self, name, block):
        registry.write_attr(self._attr_slot(name), name, _block_idx(block),
                            registry.AttrType.BLOCK)

    def set_blocks_attr(self, name, blocks):
        registry.write_attr(self._attr_slot(name), name, [_block_idx(b) for b in blocks],
                            registry.AttrType.BLOCKS)

    def _attr_slot(self, name):
        for a in self.proto.attrs:
            if a.name == name:
                return a
        return self.proto.attrs.add()

    def remove_attr(self, name):
        keep = [a for a in self.proto.attrs if a.name != name]
        del self.proto.attrs[:]
        self.proto.attrs.extend(keep)

    _remove_attr = remove_attr

    def check_attrs(self):
        """Paddle's CheckAttrs: raise ProgramError for an attribute whose stored type is not
        its schema's, then write the schema's default of every attribute left unset."""
        opdef = registry.get(self.proto.type)
        for a in self.proto.attrs:
            want = opdef.attr_type(a.name)
            if want is not None and want != a.type:
                raise ProgramError(
                    f"op '{self.proto.type}': attribute '{a.name}' is stored as "
                    f"{registry.AttrType.Name(a.type)}, its schema says "
                    f"{registry.AttrType.Name(want)}")
        self.proto.check_attrs()   # and the schema's defaults written (ir/desc_api.py)

    # -- whole desc ----------------------------------------------------------------------
    def copy_from(self, other):
        self.proto.CopyFrom(unwrap(other))

    def serialize_to_string(self):
        return self.proto.SerializeToString()

    def infer_shape(self, block_desc=None):
        """Compile-time shape inference of this op on the variables of `block_desc` (by
        default the block it belongs to): its outputs' shapes, dtypes, LoD levels and types,
        as when it was appended. A gradient op without its own inference declares each
        `X@GRAD` output like `X`, as backward declares gradients."""
        op = self._view(block_desc, "infer_shape")
        opdef = registry.get(op.type)
        if opdef.infer_shape is not None:
            opdef.infer(InferShapeContext(op))
            return
        for name in op.output_arg_names:
            if GRAD_SUFFIX not in name:
                continue
            fwd = op.block.find_var_recursive(name.split(GRAD_SUFFIX)[0])
            out = op.block.find_var_recursive(name)
            if fwd is not None and out is not None and fwd.type in TENSORLIKE:
                out._set_type(fwd.type)
                out._set_shape(fwd.shape)
                out._set_dtype(fwd.dtype)
                out.lod_level = fwd.lod_level

    def infer_var_type(self, block_desc=None):
        """Paddle's variable-type inference. Fluidity's ops set their outputs' variable
        types (SelectedRows, tensor arrays) in the same inference as shapes, so this runs
        that inference."""
        self.infer_shape(block_desc)

    def _view(self, block_desc, what):
        """The op as a view in the block whose variables `what` reads and writes: its own
        block, or `block_desc` (a BlockDesc message or a builder's Block's desc) for an op
        desc that belongs to none (a grad op desc from core.get_grad_op_desc)."""
        op = self._op
        if op is not None and (block_desc is None or
                               getattr(block_desc, "idx", op.block.idx) == op.block.idx):
            return op
        if block_desc is None:
            raise ProgramError(f"OpDesc.{what}: op '{self.proto.type}' is in no block; "
                               f"name the block whose variables it reads")
        block_desc = getattr(block_desc, "desc", block_desc)
        if not isinstance(block_desc, pb.BlockDesc):
            raise TypeError(f"OpDesc.{what} takes a block's desc, got "
                            f"{type(block_desc).__name__}")
        return OpView(_BlockOf(block_desc), self.proto)


class _BlockOf(BlockView):
    """A view of one BlockDesc on its own (inference of an op desc against a block's
    variables when no program view is at hand). Parent and forward blocks are not seen."""

    def __init__(self, block_desc):
        self.program = None
        self.desc = block_desc
        self.vars = {vd.name: VarView(self, vd) for vd in block_desc.vars}
        self.ops = []

    def find_var_recursive(self, name):
        return self.vars.get(name)


def _block_idx(block):
    idx = getattr(block, "idx", block)
    if not isinstance(idx, int):
        raise TypeError(f"a block attribute takes a Block, got {type(block).__name__}")
    return idx


def _append_op(block_desc):
    """BlockDesc.append_op(): a new, empty op at the end of the block (Paddle's C++ API);
    the builder's Program sees it after `_sync_with_cpp()`."""
    return OpDesc(block_desc.ops.add())


def _prepend_op(block_desc):
    block_desc.ops.insert(0, pb.OpDesc())
    return OpDesc(block_desc.ops[0])


def _insert_op(block_desc, index):
    block_desc.ops.insert(int(index), pb.OpDesc())
    return OpDesc(block_desc.ops[int(index)])


def install():
    """Paddle's BlockDesc methods that make op descs (the read side is in desc_api)."""
    for name, fn in (("append_op", _append_op), ("_prepend_op", _prepend_op),
                     ("_insert_op", _insert_op)):
        assert name not in pb.BlockDesc.DESCRIPTOR.fields_by_name
        setattr(pb.BlockDesc, name, fn)


install()
