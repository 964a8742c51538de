"""The gRPC service of a parameter server: grpcio generic handlers with bytes methods
(no generated stubs), Paddle's method names under `sendrecv.SendRecvService`.

Each method takes and returns a `wire` message; the handler object does the work
(`pserver.PServer`): each `(header, value) -> value or None`, named in `METHODS`. Around
every call the service

* checks the shared token (`rpc_token()`: env FLUIDITY_RPC_TOKEN or FLAGS_rpc_token) carried
  in the call's metadata: a missing or wrong one is refused UNAUTHENTICATED before the
  request is even decoded;
* decodes the request: bytes that are not a wire message, or a header the handler finds
  malformed (`wire.BadRequest`), are refused INVALID_ARGUMENT with the reason, nothing
  touched, and the server goes on serving;
* asks the handler to `admit(method, header)` the call (a pserver refuses, ABORTED, a call
  made for an earlier incarnation of itself, so the trainer resynchronises after a restart);
* adds the handler's `reply_header()` (incarnation, version) to the reply.

Large messages: every method exists twice, unary (`<Method>`) and chunked streaming
(`<Method>Stream`, both ways). Unary messages are capped at `stream_threshold()` bytes
(FLAGS_rpc_stream_threshold, default 4 MiB, gRPC's own default cap, set deliberately);
a request above it goes by the streaming form, and a unary reply above it is replaced by a
small `{"stream_required": n}` reply that sends the client to the streaming form. So no
variable's size is limited by a message cap (a stream carries any number of
`CHUNK`-byte pieces), and small calls keep the unary form, which grpcio serves ten times
faster than a stream.

Servers bind 127.0.0.1 unless the endpoint names another address (`bind_address`)."""
import hmac
import logging
import os
from concurrent import futures

from ..errors import FluidityError, FormatError
from . import wire

logger = logging.getLogger("fluidity")

SERVICE = "sendrecv.SendRecvService"
# method -> the handler's attribute; one row per method (new methods: add a row)
METHODS = {"SendVariable": "send_variable", "GetVariable": "get_variable",
           "SendBarrier": "send_barrier", "FetchBarrier": "fetch_barrier",
           "Goodbye": "goodbye", "CheckpointNotify": "checkpoint_notify",
           "GetStatus": "get_status", "Heartbeat": "heartbeat",
           "PrefetchVariable": "prefetch_variable"}    # the distributed lookup table's rows
UNCHECKED = ("GetStatus", "Heartbeat")  # methods any incarnation of a server answers
STREAM_SUFFIX = "Stream"
TOKEN_KEY = "fluidity-rpc-token"      # gRPC metadata key of the shared token
CHUNK = 1 << 20                       # bytes per message of a streamed call
_SLACK = 1 << 16                      # room for the header above the threshold


class Refused(FluidityError):
    """A call the handler refuses with a given gRPC status (`code`: a StatusCode name)."""

    def __init__(self, code, message):
        super().__init__(message)
        self.code = code


def env_flag(name, default, kind=float):
    """The number in environment variable `name` (Paddle's FLAGS_* are set that way), or
    `default`; a value that is not a number raises ValueError naming the variable."""
    v = os.environ.get(name)
    if v in (None, ""):
        return default
    try:
        return kind(float(v)) if kind is int else kind(v)
    except ValueError:
        raise ValueError(f"{name}={v!r} is not a number") from None


def rpc_token():
    """The shared token of this job (env FLUIDITY_RPC_TOKEN, else FLAGS_rpc_token), or None."""
    return os.environ.get("FLUIDITY_RPC_TOKEN") or os.environ.get("FLAGS_rpc_token") or None


def stream_threshold():
    return env_flag("FLAGS_rpc_stream_threshold", 4 << 20, int)


def message_options(threshold=None):
    """gRPC channel / server options: unary messages capped at the threshold (+ header room)."""
    cap = (stream_threshold() if threshold is None else threshold) + _SLACK
    return [("grpc.max_send_message_length", max(cap, CHUNK + _SLACK)),
            ("grpc.max_receive_message_length", max(cap, CHUNK + _SLACK))]


def method_path(method, stream=False):
    return f"/{SERVICE}/{method}{STREAM_SUFFIX if stream else ''}"


def chunks(message):
    """`message` cut into CHUNK-byte pieces (at least one)."""
    mv = memoryview(message)
    return [bytes(mv[i:i + CHUNK]) for i in range(0, max(len(message), 1), CHUNK)] or [b""]


def bind_address(endpoint):
    """The address a server for `endpoint` binds: the endpoint's own host, 127.0.0.1 when it
    names none ("6174" or ":6174"). Raises ValueError for an endpoint without a port."""
    ep = str(endpoint).strip()
    host, sep, port = ep.rpartition(":")
    if not sep:
        host, port = "", ep
    if not port.isdigit():
        raise ValueError(f"pserver endpoint {endpoint!r} has no port (expected host:port)")
    if not host:
        host = "127.0.0.1"
    return f"{host}:{port}"


_LOOPBACK = ("127.", "localhost", "[::1]", "::1")


def _identity(b):
    return b


class _Handlers:
    """The per-method gRPC handlers of one server."""

    def __init__(self, grpc, handler, token, threshold):
        self.grpc, self.handler, self.token, self.threshold = grpc, handler, token, threshold

    def _check_token(self, context):
        if self.token is None:
            return
        got = dict(context.invocation_metadata()).get(TOKEN_KEY)
        if got is None or not hmac.compare_digest(str(got).encode(), self.token.encode()):
            context.abort(self.grpc.StatusCode.UNAUTHENTICATED,
                          "missing or wrong RPC token (FLUIDITY_RPC_TOKEN)")

    def _serve(self, method, fn, request, context):
        """The reply message of `request`, or an abort with the status that says why."""
        codes = self.grpc.StatusCode
        self._check_token(context)
        try:
            header, value = wire.decode(request)
        except FormatError as e:
            context.abort(codes.INVALID_ARGUMENT, f"{method}: bad request: {e}")
        try:
            admit = getattr(self.handler, "admit", None)
            if admit is not None:
                admit(method, header)
            out = fn(header, value)
            extra = getattr(self.handler, "reply_header", dict)()
            return wire.encode(extra, out)
        except Refused as e:
            context.abort(getattr(codes, e.code), str(e))
        except FormatError as e:      # wire.BadRequest: a malformed header field
            context.abort(codes.INVALID_ARGUMENT, f"{method}: bad request: {e}")
        except (FluidityError, ValueError, KeyError) as e:
            context.abort(codes.FAILED_PRECONDITION, f"{type(e).__name__}: {e}")
        except Exception as e:  # noqa: BLE001 - any server failure goes back to the caller
            logger.exception("pserver: %s failed", method)
            context.abort(codes.INTERNAL, f"{type(e).__name__}: {e}")

    def unary(self, method, fn):
        def handle(request, context):
            reply = self._serve(method, fn, request, context)
            if len(reply) > self.threshold:
                return wire.encode({"stream_required": len(reply)})
            return reply
        return self.grpc.unary_unary_rpc_method_handler(
            handle, request_deserializer=_identity, response_serializer=_identity)

    def stream(self, method, fn):
        def handle(request_iterator, context):
            request = b"".join(request_iterator)
            yield from chunks(self._serve(method, fn, request, context))
        return self.grpc.stream_stream_rpc_method_handler(
            handle, request_deserializer=_identity, response_serializer=_identity)


def start_server(endpoint, handler, max_workers=16, token=None):
    """A started grpc.Server serving `handler` on `endpoint` ("host:port"; bound as
    `bind_address` says); `token` (default `rpc_token()`) is required of every call.
    Raises OSError naming the endpoint when it cannot bind."""
    import grpc
    token = rpc_token() if token is None else (token or None)
    threshold = stream_threshold()
    address = bind_address(endpoint)
    if token is None and not address.startswith(_LOOPBACK):
        logger.warning("pserver on %s accepts calls from any host that reaches it: set "
                       "FLUIDITY_RPC_TOKEN to refuse strangers", address)
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=max_workers),
                         options=message_options(threshold) + [("grpc.so_reuseport", 0)])
    h = _Handlers(grpc, handler, token, threshold)
    table = {}
    for m, attr in METHODS.items():
        fn = getattr(handler, attr)
        table[m] = h.unary(m, fn)
        table[m + STREAM_SUFFIX] = h.stream(m, fn)
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(SERVICE, table),))
    try:
        port = server.add_insecure_port(address)
    except RuntimeError as e:
        raise OSError(f"pserver cannot listen on {endpoint}: {e}") from None
    if not port:
        raise OSError(f"pserver cannot listen on {endpoint} (address in use or not local)")
    server.start()
    return server
