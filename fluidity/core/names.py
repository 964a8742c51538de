"""Reserved variable names and suffixes (Paddle's operator.h) and op roles (op_proto_maker.h)."""
GRAD_SUFFIX = "@GRAD"
EMPTY_VAR_NAME = "@EMPTY@"
TEMP_VAR_NAME = "@TEMP@"
ZERO_SUFFIX = "@ZERO"


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
