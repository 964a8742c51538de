"""Is a protobuf message read from outside (a file, a user's text) whole and well-typed?

protobuf's parser accepts bytes that break later, far from the file:

* a proto2 `string` holding invalid UTF-8 comes back as `bytes` (upb), so the first
  `name + "@GRAD"` raises TypeError;
* a missing `required` field parses (`IsInitialized()` is False) and surfaces as an
  EncodeError at the next serialization;
* an enum value the schema does not know, or a known field number carrying the wrong wire
  type, goes to the unknown-field set and leaves the field unset (a dtype silently FP32...).

`check_message(msg, what)` finds the first of these and raises FormatError naming the field
by its path (`blocks[0].ops[3].type`), as `FindInitializationErrors` names fields. Field
numbers the schema does not know at all are allowed: Paddle's older and newer programs carry
fields that this schema dropped or does not have yet.
"""
from google.protobuf import unknown_fields
from google.protobuf.descriptor import FieldDescriptor

from ..errors import FormatError

__all__ = ["find_problem", "check_message"]

_STRING, _MESSAGE = FieldDescriptor.TYPE_STRING, FieldDescriptor.TYPE_MESSAGE
_KNOWN_NUMBERS = {}   # message descriptor -> {field number: field name}


def _known(descriptor):
    known = _KNOWN_NUMBERS.get(descriptor)
    if known is None:
        known = _KNOWN_NUMBERS[descriptor] = {f.number: f.name for f in descriptor.fields}
    return known


def _misread(msg, path):
    """(path, why) for a known field number in `msg`'s unknown-field set, else None."""
    known = _known(msg.DESCRIPTOR)
    for f in unknown_fields.UnknownFieldSet(msg):
        name = known.get(f.field_number)
        if name is not None:
            field = msg.DESCRIPTOR.fields_by_number[f.field_number]
            if field.enum_type is not None and f.wire_type == 0:
                why = f"unknown {field.enum_type.name} value {f.data}"
            else:
                why = f"a value of the wrong wire type ({f.wire_type})"
            return f"{path}{name}", why
    return None


def _walk(msg, path):
    found = _misread(msg, path)
    if found is not None:
        return found
    for field, value in msg.ListFields():
        if field.type == _STRING:
            values = value if field.is_repeated else (value,)
            for k, v in enumerate(values):
                if not isinstance(v, str):
                    at = f"[{k}]" if field.is_repeated else ""
                    return f"{path}{field.name}{at}", f"invalid UTF-8 in a string: {v[:40]!r}"
        elif field.type == _MESSAGE:
            if field.is_repeated:
                for k, sub in enumerate(value):
                    found = _walk(sub, f"{path}{field.name}[{k}].")
                    if found is not None:
                        return found
            else:
                found = _walk(value, f"{path}{field.name}.")
                if found is not None:
                    return found
    return None


def find_problem(msg):
    """(field path, what is wrong) for the first problem of `msg`, or None when it is whole:
    every required field set, every string valid UTF-8, every known field well-typed."""
    found = _walk(msg, "")
    if found is not None:
        return found
    if not msg.IsInitialized():
        missing = msg.FindInitializationErrors()
        return missing[0], ("required field missing" if len(missing) == 1 else
                            f"required field missing (and {len(missing) - 1} more)")
    return None


def check_message(msg, what, error=FormatError):
    """Raise `error` ("<what>: field <path>: <problem>") when `msg` is not whole."""
    found = find_problem(msg)
    if found is not None:
        raise error(f"{what}: field {found[0]}: {found[1]}")
