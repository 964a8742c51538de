"""DataFeedDesc: the config of a MultiSlot reader, as in Paddle 1.2-1.4.

It is a `DataFeedDesc` protobuf message (data_feed.proto) kept in protobuf *text* format:

    name: "MultiSlotDataFeed"
    batch_size: 32
    multi_slot_desc {
      slots { name: "words" type: "uint64" is_dense: false is_used: true }
      slots { name: "label" type: "uint64" is_dense: true is_used: true shape: [-1, 1] }
    }

Every declared slot appears in each data line, in this order; only used slots are fed.

A config is checked when it is read: text-format syntax (file and line), then its fields
(file and field path): every required field, slot types 'uint64'/'float', unique slot names,
dense shapes of positive dims (a leading -1 aside) whose product fits a line, a positive
batch_size. Problems raise DataFeedDescError, a DataError and a FormatError (ValueError).
"""
import math
import os

from google.protobuf import text_format

from ..core import proto_check
from .data_feed_pb2 import DataFeedDesc as DataFeedDescProto
from .errors import DataError, DataFeedDescError

SLOT_TYPES = {"u": "uint64", "f": "float"}  # Paddle checks only the first letter
MAX_DENSE_DIM = (1 << 31) - 1   # values of one dense slot on one line


def slot_kind(slot):
    """'uint64' or 'float' for a Slot message (type checked by DataFeedDesc on load)."""
    return SLOT_TYPES[slot.type[:1]]


def dense_dims(slot):
    """Per-example shape of a dense slot from its `shape` (a leading -1 is the batch), or
    None when the shape is not given (then the count on the first line decides)."""
    shape = list(slot.shape)
    if shape and shape[0] == -1:
        shape = shape[1:]
    return tuple(shape) if shape else None


# --- the rules a config must keep: each returns its first problem, or None ---------------
def _slot_problem(i, slot, seen):
    at = f"slot #{i} (field multi_slot_desc.slots[{i}])"
    if not slot.HasField("name") or not slot.name:
        return f"{at} has no name"
    if not slot.HasField("type") or slot.type[:1] not in SLOT_TYPES:
        return (f"{at} ('{slot.name}') has type '{slot.type}'; MultiSlot slots are 'uint64' "
                f"or 'float'")
    if slot.name in seen:
        return f"{at}: slot name '{slot.name}' is declared twice"
    dims = dense_dims(slot)
    if slot.is_dense and dims is not None:
        if any(d <= 0 for d in dims):
            return (f"{at} ('{slot.name}') has shape {list(slot.shape)}; only a leading -1 "
                    f"(the batch) may be non-positive")
        if math.prod(dims) > MAX_DENSE_DIM:
            return (f"{at} ('{slot.name}') has shape {list(slot.shape)}: "
                    f"{math.prod(dims)} values a line, more than {MAX_DENSE_DIM}")
    return None


def _slots(desc):
    seen = set()
    for i, slot in enumerate(desc.multi_slot_desc.slots):
        problem = _slot_problem(i, slot, seen)
        if problem is not None:
            return problem
        seen.add(slot.name)
    return None


def _batch_size(desc):
    if desc.batch_size <= 0:
        return f"field batch_size: batch_size must be positive, got {desc.batch_size}"
    return None


def _whole(desc):
    found = proto_check.find_problem(desc)
    return None if found is None else f"field {found[0]}: {found[1]}"


_RULES = (_slots, _batch_size, _whole)


class DataFeedDesc:
    """`DataFeedDesc(proto_file)` loads a DataFeedDesc in protobuf text format from a file.

    `set_batch_size(n)`, `set_use_slots(names)`, `set_dense_slots(names)` edit it (like
    Paddle, they mark the named slots and leave the others as they are); `desc()` gives the
    text back. `proto_desc` is the message itself.

    `allow_nonfinite` (False; not part of the text, which is Paddle's): the readers of this
    desc keep float values that are nan, inf or overflow float32 instead of rejecting their
    lines (`MultiSlotReader(allow_nonfinite=...)` overrides it per reader).
    """
    allow_nonfinite = False

    def __init__(self, proto_file):
        path = os.fspath(proto_file)
        try:
            with open(path, encoding="utf-8") as f:
                text = f.read()
        except OSError as e:
            raise DataError(f"cannot read DataFeedDesc file {path}: {e}") from None
        except UnicodeDecodeError as e:
            raise DataFeedDescError(f"DataFeedDesc file {path} is not UTF-8 text: {e}") from None
        self._load(text, path)

    @classmethod
    def from_text(cls, text, source="<string>"):
        """A DataFeedDesc from text-format content instead of a file."""
        self = cls.__new__(cls)
        self._load(text, source)
        return self

    def _load(self, text, source):
        self.source = source
        self.proto_desc = DataFeedDescProto()
        if isinstance(text, (bytes, bytearray)):
            try:
                text = bytes(text).decode("utf-8")
            except UnicodeDecodeError as e:
                raise DataFeedDescError(f"DataFeedDesc {source} is not UTF-8 text: {e}") \
                    from None
        try:
            text_format.Parse(text, self.proto_desc)
        except text_format.ParseError as e:
            msg = str(e)
            prefix = f"{e.GetLine()}:{e.GetColumn()} : "
            msg = msg[len(prefix):] if msg.startswith(prefix) else msg
            raise DataFeedDescError(f"malformed DataFeedDesc (column {e.GetColumn()}): {msg}",
                                    source, e.GetLine()) from None
        for rule in _RULES:
            problem = rule(self.proto_desc)
            if problem is not None:
                raise DataFeedDescError(f"DataFeedDesc {source}: {problem}")

    # --- editing (Paddle's API) -------------------------------------------------------
    def set_batch_size(self, batch_size):
        if int(batch_size) != batch_size or batch_size <= 0:
            raise DataError(f"batch_size must be a positive integer, got {batch_size!r}")
        self.proto_desc.batch_size = int(batch_size)

    def set_use_slots(self, use_slots_name):
        for slot in self._find(use_slots_name, "set_use_slots"):
            slot.is_used = True

    def set_dense_slots(self, dense_slots_name):
        for slot in self._find(dense_slots_name, "set_dense_slots"):
            slot.is_dense = True

    def _find(self, names, caller):
        names = [names] if isinstance(names, str) else list(names)
        by_name = {s.name: s for s in self.slots}
        unknown = [n for n in names if n not in by_name]
        if unknown:
            raise DataError(f"{caller}: unknown slot(s) {unknown}; DataFeedDesc {self.source} "
                            f"declares {list(by_name)}")
        return [by_name[n] for n in names]

    def desc(self):
        """The config in protobuf text format."""
        return text_format.MessageToString(self.proto_desc)

    # --- reading ----------------------------------------------------------------------
    @property
    def name(self):
        return self.proto_desc.name

    @property
    def batch_size(self):
        return self.proto_desc.batch_size

    @property
    def slots(self):
        """The Slot messages, in declaration (= data line) order."""
        return list(self.proto_desc.multi_slot_desc.slots)

    @property
    def slot_names(self):
        return [s.name for s in self.slots]

    @property
    def used_slots(self):
        return [s.name for s in self.slots if s.is_used]

    @property
    def dense_slots(self):
        return [s.name for s in self.slots if s.is_dense]

    def __repr__(self):
        return (f"DataFeedDesc(name={self.name!r}, batch_size={self.batch_size}, "
                f"slots={self.slot_names}, used={self.used_slots})")
