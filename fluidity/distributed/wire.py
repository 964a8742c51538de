"""What travels over the wire: a small JSON header (variable name, trainer id, what the
payload is) and the variable's bytes in Paddle's tensor format (`core.serialization`:
the LoDTensor / SelectedRows record Paddle writes to files), never pickle.

    message = u32 little-endian header length | header (UTF-8 JSON) | payload

A header comes from the network, so it is parsed by one checked function (`parse_header`):
at most `MAX_HEADER_BYTES` bytes, UTF-8, a JSON object at most `MAX_HEADER_DEPTH` levels
deep (an object of scalars, or of lists of scalars), with string keys. Anything else is a
`FormatError` (a `BadRequest` when a field is wrong), which the service answers
INVALID_ARGUMENT: never a RecursionError from deep nesting, never a raw TypeError.
"""
import json
import struct

from ..core import bounded_json
from ..core import serialization as ser
from ..core.tensor import LoDTensor, SelectedRows
from ..errors import FormatError

_LEN = struct.Struct("<I")
MAX_HEADER_BYTES = 16 << 10     # the largest header: names, a directory path, a few numbers
MAX_HEADER_DEPTH = 2            # {"field": [scalars]} at most
_SCALARS = (str, int, float, bool, type(None))


class BadRequest(FormatError):
    """A request whose header lacks a field the method needs, or holds one of the wrong
    type or range (refused INVALID_ARGUMENT, nothing touched)."""


def field(header, name, kind=str, default=None):
    """`header[name]` checked to be a `kind` (int: a JSON integer, not a bool); `default`
    when absent and a default is given, else BadRequest naming the field."""
    if name not in header:
        if default is not None:
            return default
        raise BadRequest(f"header field '{name}' is missing")
    v = header[name]
    ok = (isinstance(v, int) and not isinstance(v, bool)) if kind is int else isinstance(v, kind)
    if not ok:
        raise BadRequest(f"header field '{name}' must be a {kind.__name__}, got {v!r:.60}")
    return v


def encode(header, value=None):
    """A message of `header` (a dict of JSON values) and `value` (LoDTensor, SelectedRows,
    a numpy array, or None)."""
    header = dict(header)
    if value is None:
        header["kind"], payload = "none", b""
    elif isinstance(value, SelectedRows):
        header["kind"], payload = "selected_rows", ser.selected_rows_to_bytes(value)
    elif isinstance(value, LoDTensor):
        header["kind"], payload = "lod_tensor", ser.lod_tensor_to_bytes(value)
    else:
        header["kind"], payload = "lod_tensor", ser.lod_tensor_to_bytes(LoDTensor(value))
    h = json.dumps(header, separators=(",", ":")).encode()
    return _LEN.pack(len(h)) + h + payload


def parse_header(data):
    """The header dict of the JSON bytes `data`, checked: size, nesting, an object with
    string keys whose values are scalars or lists of scalars. Raises FormatError saying
    what is wrong."""
    header = bounded_json.loads(data, MAX_HEADER_BYTES, MAX_HEADER_DEPTH, "RPC message header")
    if not isinstance(header, dict):
        raise FormatError(f"RPC message header is a JSON {type(header).__name__}, not an "
                          f"object")
    for k, v in header.items():
        items = v if isinstance(v, list) else (v,)
        if not all(isinstance(x, _SCALARS) for x in items):
            raise BadRequest(f"header field {k!r:.60} holds a {type(v).__name__} of "
                             f"non-scalars")
    return header


def decode(message):
    """(header dict, value or None) of a message."""
    if len(message) < _LEN.size:
        raise FormatError(f"RPC message of {len(message)} bytes is too short")
    (n,) = _LEN.unpack_from(message)
    if _LEN.size + n > len(message):
        raise FormatError(f"RPC message header of {n} bytes overruns the message")
    header = parse_header(bytes(message[_LEN.size:_LEN.size + n]))
    payload = message[_LEN.size + n:]
    kind = header.get("kind")
    if kind == "none":
        if payload:
            raise FormatError(f"RPC message of kind 'none' carries {len(payload)} payload "
                              f"bytes")
        value = None
    elif kind == "lod_tensor":
        value = ser.lod_tensor_from_bytes(payload)
    elif kind == "selected_rows":
        value = ser.selected_rows_from_bytes(payload)
    else:
        raise FormatError(f"RPC message of unknown kind {kind!r}")
    return header, value
