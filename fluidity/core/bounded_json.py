"""JSON from untrusted bytes (an RPC header, a save's manifest), parsed within limits.

`json.loads` recurses once per nesting level, so ten thousand '[' raise RecursionError
(not a ValueError) and a huge document costs whatever memory it asks for. `loads` checks
the size first, then the nesting depth by a scan that does not recurse (string literals
blanked, brackets counted), and only then parses; every failure is one `FormatError`
saying what was wrong with `what`."""
import json
import re

from ..errors import FormatError

_STRING = re.compile(rb'"(?:[^"\\]|\\.)*"')
_BRACKETS = re.compile(rb"[\[\]{}]")


def depth(data):
    """How deeply the JSON bytes `data` nest (0 for a scalar, 1 for a flat object or list),
    counted without parsing; brackets inside string literals do not count."""
    level = deepest = 0
    for m in _BRACKETS.finditer(_STRING.sub(b'""', data)):
        level += 1 if m.group() in b"[{" else -1
        deepest = max(deepest, level)
    return deepest


def loads(data, max_bytes, max_depth, what):
    """The JSON value of the bytes `data`, refused with FormatError("<what> ...") when
    larger than `max_bytes`, nested deeper than `max_depth`, not UTF-8 or not JSON."""
    if len(data) > max_bytes:
        raise FormatError(f"{what} of {len(data)} bytes is larger than {max_bytes}")
    levels = depth(data)
    if levels > max_depth:
        raise FormatError(f"{what} nests {levels} levels deep (at most {max_depth})")
    try:
        return json.loads(data.decode("utf-8"))
    except (ValueError, RecursionError) as e:   # UnicodeDecodeError is a ValueError
        raise FormatError(f"{what} is not JSON: {e}") from None
