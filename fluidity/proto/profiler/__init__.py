"""`fluid.proto.profiler.profiler_pb2`: the Profile message fluid.profiler writes (Paddle's
profiler.proto; `scripts/gen_proto.sh` regenerates the module)."""
from . import profiler_pb2  # noqa: F401
