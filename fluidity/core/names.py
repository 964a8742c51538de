"""Reserved variable names and suffixes (Paddle's operator.h) and op roles (op_proto_maker.h)."""
GRAD_SUFFIX = "@GRAD"
EMPTY_VAR_NAME = "@EMPTY@"
TEMP_VAR_NAME = "@TEMP@"
ZERO_SUFFIX = "@ZERO"
CONTROL_DEP_VAR_PREFIX = "__control_var"


def grad_var_name(name):
    return name + GRAD_SUFFIX


class OpRole:
    """Bits of an op's `op_role` attribute: what part of training the op belongs to."""
    Forward = 0x0000
    Backward = 0x0001
    Optimize = 0x0002
    RPC = 0x0004
    Dist = 0x0008
    LRSched = 0x0010
    Loss = 0x0100
    NotSpecified = 0x1000


class op_proto_and_checker_maker:  # noqa: N801 -- Paddle's core.op_proto_and_checker_maker
    """The names of the attributes every op carries, and the op roles (Paddle's
    OpProtoAndCheckerMaker, as fluid.core exposes it)."""
    OpRole = OpRole

    @staticmethod
    def kOpRoleAttrName():  # noqa: N802
        return "op_role"

    @staticmethod
    def kOpRoleVarAttrName():  # noqa: N802
        return "op_role_var"

    @staticmethod
    def kOpNameScopeAttrName():  # noqa: N802
        return "op_namescope"

    @staticmethod
    def kOpCreationCallstackAttrName():  # noqa: N802
        return "op_callstack"

    @staticmethod
    def kOpDeviceAttrName():  # noqa: N802
        return "op_device"
