"""The gRPC service of a parameter server: grpcio generic handlers with bytes methods
(no generated stubs), Paddle's method names under `sendrecv.SendRecvService`.

Each method takes and returns a `wire` message; the handler object does the work
(`pserver.PServer`): each `(header, value) -> value or None`, named in `METHODS`. Around
every call the service

* checks the shared token (`rpc_token()`: env FLUIDITY_RPC_TOKEN or FLAGS_rpc_token) carried
  in the call's metadata when gRPC looks the method up, before a byte of the request is
  read: a call without the right token is answered UNAUTHENTICATED by a handler that never
  reads its request (a unary one included), so a stranger cannot make the server hold its
  messages or keep a worker thread;
* admits a streamed call through the server's `admission.StreamGate` (streams in flight,
  overall and per peer: RESOURCE_EXHAUSTED beyond; a stream idle for
  FLAGS_rpc_stream_idle_timeout seconds is cancelled), then reads it;
* decodes the request: bytes that are not a wire message, or a header the handler finds
  malformed (`wire.BadRequest`), are refused INVALID_ARGUMENT with the reason, nothing
  touched, and the server goes on serving;
* asks the handler to `admit(method, header)` the call (a pserver refuses, ABORTED, a call
  made for an earlier incarnation of itself, so the trainer resynchronises after a restart);
* adds the handler's `reply_header()` (incarnation, version) to the reply.

Metadata is capped at `MAX_METADATA` bytes a call (gRPC refuses more before any handler).

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
import threading
from concurrent import futures

from ..errors import FluidityError, FormatError
from . import wire
from .admission import Refused, StreamGate, read_stream

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
RETRY_KEY = "fluidity-retry"          # trailing metadata of a refusal worth retrying later
CHUNK = 1 << 20                       # bytes per message of a streamed call
_SLACK = 1 << 16                      # room for the header above the threshold
MAX_METADATA = 16 << 10               # bytes of metadata a call may carry
STREAM_IDLE_S = 30.0                  # default of FLAGS_rpc_stream_idle_timeout


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


def stream_limits(max_workers):
    """(max_streams, per_peer, idle_s) of a server with `max_workers` threads: flags
    FLAGS_rpc_max_streams (default half the workers, so unary calls always find a thread),
    FLAGS_rpc_max_streams_per_peer (default half of that) and FLAGS_rpc_stream_idle_timeout
    (seconds, default 30)."""
    overall = env_flag("FLAGS_rpc_max_streams", max(2, max_workers // 2), int)
    overall = min(overall, max(1, max_workers - 2))
    per_peer = env_flag("FLAGS_rpc_max_streams_per_peer", max(1, overall // 2), int)
    return overall, per_peer, env_flag("FLAGS_rpc_stream_idle_timeout", STREAM_IDLE_S)


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


def _generic(grpc, service):
    """`service` as a grpc.GenericRpcHandler."""
    class Generic(grpc.GenericRpcHandler):
        def service(self, details):
            return service.service(details)
    return Generic()


_call = threading.local()     # the gRPC context of the call this worker thread serves


def call_abandoned():
    """Whether the caller of the request this thread serves has gone (cancelled, past its
    deadline, disconnected): a method that waits (a sync get) stops waiting then, so a
    vanished caller does not keep a worker thread."""
    context = getattr(_call, "context", None)
    return context is not None and not context.is_active()


def _token_ok(metadata, token):
    """Whether call metadata carries exactly one token value, equal to `token`."""
    got = [v for k, v in (metadata or ()) if k == TOKEN_KEY]
    if len(got) != 1:
        return False
    value = got[0].encode() if isinstance(got[0], str) else bytes(got[0])
    return hmac.compare_digest(value, token.encode())


class _Service:
    """The server's method lookup (a grpc GenericRpcHandler): the token is checked here, on
    the call's metadata alone, and a call without it gets a handler that refuses it without
    reading a byte of its request."""

    def __init__(self, grpc, table, token):
        self.table, self.token = table, token

        def refuse(_request_iterator, context):
            context.abort(grpc.StatusCode.UNAUTHENTICATED,
                          "missing or wrong RPC token (FLUIDITY_RPC_TOKEN)")
            yield b""  # never reached: a generator, as a stream handler must be
        # a streaming handler whatever the method's arity: gRPC then starts no read at all
        self.refused = grpc.stream_stream_rpc_method_handler(
            refuse, request_deserializer=_identity, response_serializer=_identity)

    def service(self, details):
        handler = self.table.get(details.method)
        if handler is None or self.token is None:
            return handler
        if not _token_ok(details.invocation_metadata, self.token):
            return self.refused
        return handler


class _Handlers:
    """The per-method gRPC handlers of one server."""

    def __init__(self, grpc, handler, threshold, gate):
        self.grpc, self.handler, self.threshold, self.gate = grpc, handler, threshold, gate

    def _serve(self, method, fn, request, context):
        """The reply message of `request`, or an abort with the status that says why."""
        codes = self.grpc.StatusCode
        try:
            header, value = wire.decode(request)
        except FormatError as e:
            context.abort(codes.INVALID_ARGUMENT, f"{method}: bad request: {e}")
        _call.context = context
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
        finally:
            _call.context = None

    def unary(self, method, fn):
        def handle(request, context):
            reply = self._serve(method, fn, request, context)
            if len(reply) > self.threshold:
                return wire.encode({"stream_required": len(reply)})
            return reply
        return self.grpc.unary_unary_rpc_method_handler(
            handle, request_deserializer=_identity, response_serializer=_identity)

    def stream(self, method, fn):
        codes = self.grpc.StatusCode

        def handle(request_iterator, context):
            try:
                ticket = self.gate.enter(context.peer(), context)
            except Refused as e:       # busy, not wrong: the client retries until its deadline
                context.set_trailing_metadata(((RETRY_KEY, "1"),))
                context.abort(getattr(codes, e.code), f"{method}: {e}")
            try:
                try:
                    request = read_stream(ticket, request_iterator, self.gate)
                except Refused as e:
                    context.abort(getattr(codes, e.code), f"{method}: {e}")
                ticket.watched = False          # the method may wait (a sync get): not idle
                reply = self._serve(method, fn, request, context)
                del request
                ticket.moved()
                ticket.watched = True           # the peer must read the reply
                for part in chunks(reply):
                    yield part
                    ticket.moved()
            finally:
                self.gate.leave(ticket)
        return self.grpc.stream_stream_rpc_method_handler(
            handle, request_deserializer=_identity, response_serializer=_identity)


def start_server(endpoint, handler, max_workers=16, token=None, limits=None):
    """A started grpc.Server serving `handler` on `endpoint` ("host:port"; bound as
    `bind_address` says); `token` (default `rpc_token()`) is required of every call;
    `limits` (max_streams, per_peer, idle_s) of streamed calls default to
    `stream_limits(max_workers)`. Raises OSError naming the endpoint when it cannot bind."""
    import grpc
    token = rpc_token() if token is None else (token or None)
    threshold = stream_threshold()
    address = bind_address(endpoint)
    if token is None and not address.startswith(_LOOPBACK):
        logger.warning("pserver on %s accepts calls from any host that reaches it: set "
                       "FLUIDITY_RPC_TOKEN to refuse strangers", address)
    gate = StreamGate(*(limits or stream_limits(max_workers)))
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=max_workers),
                         options=message_options(threshold) + [
                             ("grpc.so_reuseport", 0), ("grpc.max_metadata_size", MAX_METADATA)])
    h = _Handlers(grpc, handler, threshold, gate)
    table = {}
    for m, attr in METHODS.items():
        fn = getattr(handler, attr)
        table[method_path(m)] = h.unary(m, fn)
        table[method_path(m, True)] = h.stream(m, fn)
    server.add_generic_rpc_handlers((_generic(grpc, _Service(grpc, table, token)),))
    try:
        port = server.add_insecure_port(address)
    except RuntimeError as e:
        raise OSError(f"pserver cannot listen on {endpoint}: {e}") from None
    if not port:
        raise OSError(f"pserver cannot listen on {endpoint} (address in use or not local)")
    server.start()
    server.selected_port = port      # the port bound (the one chosen for port 0)
    return server
