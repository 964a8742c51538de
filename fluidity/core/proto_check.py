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
_STRING_PLANS = {}    # message descriptor -> ((field, is string), ...) that can hold strings


def _known(descriptor):
    known = _KNOWN_NUMBERS.get(descriptor)
    if known is None:
        known = _KNOWN_NUMBERS[descriptor] = {f.number: f.name for f in descriptor.fields}
    return known


def _string_plan(descriptor, busy=()):
    """The fields of a message type that are strings or messages that may hold strings:
    the string walk skips the rest (a VarDesc's type, TensorDescs: most of a program)."""
    plan = _STRING_PLANS.get(descriptor)
    if plan is None:
        busy = busy + (descriptor,)
        plan = tuple((f, f.type == _STRING) for f in descriptor.fields
                     if f.type == _STRING or (f.type == _MESSAGE and (
                         f.message_type in busy or _string_plan(f.message_type, busy))))
        _STRING_PLANS[descriptor] = plan
    return plan


def _bad_strings(msg, path):
    """(path, why) for the first string of `msg` that is not valid UTF-8 (upb hands such a
    proto2 string back as bytes), else None."""
    for field, is_string in _string_plan(msg.DESCRIPTOR):
        name = field.name
        if field.is_repeated:
            values = getattr(msg, name)
            if is_string:
                for k, v in enumerate(values):
                    if type(v) is not str:
                        return f"{path}{name}[{k}]", f"invalid UTF-8 in a string: {v[:40]!r}"
            else:
                for k, sub in enumerate(values):
                    found = _bad_strings(sub, f"{path}{name}[{k}].")
                    if found is not None:
                        return found
        elif msg.HasField(name):
            v = getattr(msg, name)
            if is_string:
                if type(v) is not str:
                    return f"{path}{name}", f"invalid UTF-8 in a string: {v[:40]!r}"
            else:
                found = _bad_strings(v, f"{path}{name}.")
                if found is not None:
                    return found
    return None


def _has_unknown(msg):
    """Whether `msg` or a message in it holds unknown fields (cheap: sizes, in C)."""
    bare = type(msg)()
    bare.CopyFrom(msg)
    bare.DiscardUnknownFields()
    return len(bare.SerializePartialToString()) != len(msg.SerializePartialToString())


def _misread(msg, path):
    """(path, why) for the first known field number in the unknown-field set of `msg` or a
    message in it, else None."""
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
    for field, value in msg.ListFields():
        if field.type != _MESSAGE:
            continue
        subs = enumerate(value) if field.is_repeated else ((None, value),)
        for k, sub in subs:
            found = _misread(sub, f"{path}{field.name}{'' if k is None else f'[{k}]'}.")
            if found is not None:
                return found
    return None


def find_problem(msg):
    """(field path, what is wrong) for the first problem of `msg`, or None when it is whole:
    every known field well-typed, every string valid UTF-8, every required field set."""
    found = _misread(msg, "") if _has_unknown(msg) else None
    if found is None:
        found = _bad_strings(msg, "")
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
