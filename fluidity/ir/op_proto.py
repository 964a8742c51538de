"""Op protos: Paddle's `OpProto` of every registered op type, made from its `OpDef` schema.

Paddle's C++ registry describes each op type by an OpProto (framework.proto): its input and
output slots (with `duplicable`, `dispensable`, `intermediate`) and its attributes (with their
AttrType). `fluid.op`, `framework.OpProtoHolder` and `core`'s op questions all read it from
here, so the builder need not import the one-op runner (`fluidity.op`) that sits above it.
"""
from ..ops import registry
from ..proto import framework_pb2 as pb


# Attributes every op carries that the framework fills, not the user (Paddle's
# OpProtoAndCheckerMaker adds them to every proto).
GENERATED_ATTRS = ("op_role", "op_role_var", "op_namescope", "op_callstack", "op_device",
                   "with_quant_attr")


# --- protos --------------------------------------------------------------------------------
def _var_proto(slot, out):
    out.name = slot.name
    out.comment = ""
    out.duplicable = bool(slot.duplicable)
    out.dispensable = bool(slot.dispensable)
    out.intermediate = bool(slot.intermediate)


def op_proto(op_type):
    """The OpProto of a registered op type, made from its OpDef schema (UnknownOpError
    naming close matches for an unknown one)."""
    opdef = registry.get(op_type)
    proto = pb.OpProto(type=opdef.type, comment=(opdef.doc or opdef.__doc__ or "").strip())
    for slot in opdef.inputs:
        _var_proto(slot, proto.inputs.add())
    for slot in opdef.outputs:
        _var_proto(slot, proto.outputs.add())
    for name in opdef.attr_names(common=True):
        a = proto.attrs.add()
        a.name, a.type, a.comment = name, opdef.attr_type(name), ""
    return proto


def get_all_op_protos():
    """Every registered op's OpProto (Paddle's fluid.op.get_all_op_protos)."""
    return [op_proto(t) for t in registry.all_ops()]


class OpProtoHolder:
    """Paddle's framework.OpProtoHolder: the OpProto of every op type, by type."""
    _instance = None

    @classmethod
    def instance(cls):
        if cls._instance is None:
            cls._instance = cls()
        return cls._instance

    def __init__(self):
        if OpProtoHolder._instance is not None:
            raise ValueError("OpProtoHolder is a singleton: use OpProtoHolder.instance()")
        self.op_proto_map = {}
        self.update_op_proto()

    def update_op_proto(self):
        for t in registry.all_ops():
            if t not in self.op_proto_map:
                self.op_proto_map[t] = op_proto(t)

    def get_op_proto(self, type):
        if type not in self.op_proto_map:
            if not registry.has(type):
                raise ValueError(f'Operator "{type}" has not been registered.')
            self.op_proto_map[type] = op_proto(type)
        return self.op_proto_map[type]

    @staticmethod
    def generated_op_attr_names():
        return set(GENERATED_ATTRS)
