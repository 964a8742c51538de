"""The gRPC service of a parameter server: grpcio generic handlers with bytes methods
(no generated stubs), Paddle's method names under `sendrecv.SendRecvService`.

Each method takes and returns a `wire` message; the handler object does the work
(`pserver.PServer`): send_variable, get_variable, send_barrier, fetch_barrier, goodbye,
each `(header, value) -> value or None`. A handler's error is returned as the RPC's status
with its message, so the trainer's error names what went wrong on the server."""
from concurrent import futures

from ..errors import FluidityError
from . import wire

SERVICE = "sendrecv.SendRecvService"
METHODS = {"SendVariable": "send_variable", "GetVariable": "get_variable",
           "SendBarrier": "send_barrier", "FetchBarrier": "fetch_barrier",
           "Goodbye": "goodbye"}
METHODS["PrefetchVariable"] = "prefetch_variable"    # the distributed lookup table's rows


def method_path(method):
    return f"/{SERVICE}/{method}"


def _identity(b):
    return b


def _unary(grpc, fn):
    def handle(request, context):
        try:
            header, value = wire.decode(request)
            return wire.encode({}, fn(header, value))
        except (FluidityError, ValueError, KeyError) as e:
            context.abort(grpc.StatusCode.FAILED_PRECONDITION, f"{type(e).__name__}: {e}")
        except Exception as e:  # noqa: BLE001 - any server failure goes back to the caller
            context.abort(grpc.StatusCode.INTERNAL, f"{type(e).__name__}: {e}")
    return grpc.unary_unary_rpc_method_handler(handle, request_deserializer=_identity,
                                               response_serializer=_identity)


def start_server(endpoint, handler, max_workers=16):
    """A started grpc.Server serving `handler` on `endpoint` ("host:port"); raises
    OSError naming the endpoint when it cannot bind."""
    import grpc
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=max_workers),
                         options=[("grpc.max_send_message_length", -1),
                                  ("grpc.max_receive_message_length", -1),
                                  ("grpc.so_reuseport", 0)])
    handlers = {m: _unary(grpc, getattr(handler, attr)) for m, attr in METHODS.items()}
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(SERVICE, handlers),))
    try:
        port = server.add_insecure_port(endpoint)
    except RuntimeError as e:
        raise OSError(f"pserver cannot listen on {endpoint}: {e}") from None
    if not port:
        raise OSError(f"pserver cannot listen on {endpoint} (address in use or not local)")
    server.start()
    return server
