"""Distributed training over parameter servers: the gRPC transport, the trainer's RPC
client and the pserver runtime behind `listen_and_serv`, and the local launcher
(`python -m fluidity.distributed.launch`). Importing this package registers the `rpc` and
`pserver` run-time services the RPC ops reach through their run environment; grpc itself
is imported only when one is first used."""
from ..executor import services as _services
from .client import RPCClient, RPCError  # noqa: F401
from .collective import CollectiveService
from .pserver import PServer
from .sparse_table import TableService

_services.register("rpc", lambda executor: RPCClient())
_services.register("pserver", lambda executor: PServer(executor))
_services.register("sparse_table", lambda executor: TableService())
_services.register("collective", lambda executor: CollectiveService())
