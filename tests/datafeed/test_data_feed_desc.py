"""DataFeedDesc: Paddle's data_feed.proto on the wire and in text, loading, editing, errors."""
import pytest

from fluidity.datafeed import DataError, DataFeedDesc
from fluidity.datafeed import data_feed_pb2 as pb

PADDLE_EXAMPLE = """\
name: "MultiSlotDataFeed"
batch_size: 2
multi_slot_desc {
    slots {
         name: "words"
         type: "uint64"
         is_dense: false
         is_used: true
     }
     slots {
         name: "label"
         type: "uint64"
         is_dense: false
         is_used: true
    }
    slots {
         name: "wd"
         type: "float"
    }
}
"""


def _write(tmp_path, text, name="data.proto"):
    path = tmp_path / name
    path.write_text(text)
    return str(path)


def test_field_numbers_and_defaults_match_paddle():
    numbers = lambda m: {f.name: f.number for f in m.DESCRIPTOR.fields}  # noqa: E731
    assert numbers(pb.Slot) == {"name": 1, "type": 2, "is_dense": 3, "is_used": 4, "shape": 5}
    assert numbers(pb.MultiSlotDesc) == {"slots": 1}
    assert numbers(pb.DataFeedDesc) == {
        "name": 1, "batch_size": 2, "multi_slot_desc": 3, "pipe_command": 4, "thread_num": 5,
        "rank_offset": 6, "pv_batch_size": 7, "input_type": 8}
    assert pb.DataFeedDesc().batch_size == 32
    # bytes as Paddle writes them: field 1 "a", field 2 = 2, slot {1: "w", 2: "uint64", 4: 1}
    msg = pb.DataFeedDesc(name="a", batch_size=2)
    msg.multi_slot_desc.slots.add(name="w", type="uint64", is_used=True)
    assert msg.SerializeToString() == (b"\n\x01a\x10\x02\x1a\x0f\n\r\n\x01w\x12\x06uint64 \x01")


def test_load_paddle_example_and_read_properties(tmp_path):
    d = DataFeedDesc(_write(tmp_path, PADDLE_EXAMPLE))
    assert d.name == "MultiSlotDataFeed" and d.batch_size == 2
    assert d.slot_names == ["words", "label", "wd"]
    assert d.used_slots == ["words", "label"] and d.dense_slots == []
    assert [s.type for s in d.slots] == ["uint64", "uint64", "float"]
    assert "words" in repr(d)


def test_edit_and_round_trip(tmp_path):
    d = DataFeedDesc(_write(tmp_path, PADDLE_EXAMPLE))
    d.set_batch_size(128)
    d.set_use_slots(["wd"])
    d.set_dense_slots("wd")  # a single name works too
    assert d.batch_size == 128 and d.used_slots == ["words", "label", "wd"]
    assert d.dense_slots == ["wd"]
    text = d.desc()
    assert "batch_size: 128" in text
    again = DataFeedDesc(_write(tmp_path, text, "again.proto"))
    assert again.proto_desc == d.proto_desc
    wire = pb.DataFeedDesc.FromString(d.proto_desc.SerializeToString())
    assert wire == d.proto_desc
    assert DataFeedDesc.from_text(text).desc() == text


def test_unknown_slot_names_are_named(tmp_path):
    d = DataFeedDesc(_write(tmp_path, PADDLE_EXAMPLE))
    with pytest.raises(DataError, match=r"set_use_slots: unknown slot\(s\) \['wrods'\].*"
                                        r"declares \['words', 'label', 'wd'\]"):
        d.set_use_slots(["wrods"])
    with pytest.raises(DataError, match="set_dense_slots.*'nope'"):
        d.set_dense_slots(["words", "nope"])
    assert d.dense_slots == []  # nothing half-applied


@pytest.mark.parametrize("text, line, fragment", [
    ('name: "x"\nmulti_slot_desc {\n  slot { name: "a" type: "uint64" }\n}\n', 3,
     'has no field named "slot"'),
    ('name: "x"\nbatch_size: "big"\n', 2, "Couldn't parse integer"),
    ('batch_size: 2\nbatch_size: 3\n', 2, 'multiple "batch_size"'),
    ('multi_slot_desc {\n  slots { name: "a" type: "uint64"\n', 2, 'Expected "}"'),
])
def test_malformed_config_names_file_and_line(tmp_path, text, line, fragment):
    path = _write(tmp_path, text)
    with pytest.raises(DataError) as e:
        DataFeedDesc(path)
    assert e.value.path == path and e.value.line == line
    assert str(e.value).startswith(f"{path}:{line}: malformed DataFeedDesc")
    assert fragment in str(e.value)


@pytest.mark.parametrize("slots, fragment", [
    ('slots { type: "uint64" }', "slot #0 (field multi_slot_desc.slots[0]) has no name"),
    ('slots { name: "a" }', "has type ''"),
    ('slots { name: "a" type: "int64" }', "has type 'int64'"),
    ('slots { name: "a" type: "float" } slots { name: "a" type: "float" }', "declared twice"),
    ('slots { name: "a" type: "float" is_dense: true shape: [-1, 0] }', "shape [-1, 0]"),
])
def test_invalid_slots(tmp_path, slots, fragment):
    path = _write(tmp_path, f"multi_slot_desc {{ {slots} }}")
    with pytest.raises(DataError, match="DataFeedDesc .*data.proto") as e:
        DataFeedDesc(path)
    assert fragment in str(e.value)


def test_bad_batch_size_and_missing_file(tmp_path):
    with pytest.raises(DataError, match="batch_size must be positive"):
        DataFeedDesc(_write(tmp_path, "batch_size: 0"))
    d = DataFeedDesc(_write(tmp_path, PADDLE_EXAMPLE))
    with pytest.raises(DataError, match="positive integer"):
        d.set_batch_size(0)
    with pytest.raises(DataError, match="cannot read DataFeedDesc file .*missing.proto"):
        DataFeedDesc(str(tmp_path / "missing.proto"))


def test_config_errors_are_format_errors_naming_file_and_field(tmp_path):
    from fluidity.datafeed.errors import DataFeedDescError
    from fluidity.errors import FormatError
    path = _write(tmp_path, 'multi_slot_desc { slots { name: "a" type: "float" } }\n'
                            'batch_size: 0\n')
    with pytest.raises(DataFeedDescError) as e:
        DataFeedDesc(path)
    assert isinstance(e.value, FormatError) and isinstance(e.value, ValueError)
    assert isinstance(e.value, DataError) and path in str(e.value)
    assert "field batch_size: batch_size must be positive" in str(e.value)
    raw = tmp_path / "latin1.proto"
    raw.write_bytes(b'name: "caf\xe9"\n')
    with pytest.raises(DataFeedDescError, match="latin1.proto is not UTF-8 text"):
        DataFeedDesc(str(raw))
    with pytest.raises(DataFeedDescError, match="is not UTF-8 text"):
        DataFeedDesc.from_text(b'name: "\xff"')
    with pytest.raises(DataFeedDescError, match=r":1: malformed DataFeedDesc .*utf-8"):
        DataFeedDesc.from_text('name: "\\xff"')
    with pytest.raises(DataFeedDescError, match="4294901758 values a line, more than 2147483647"):
        DataFeedDesc.from_text('multi_slot_desc { slots { name: "a" type: "float" '
                               'is_dense: true shape: [65534, 65537] } }')


def test_allow_nonfinite_is_off_unless_set(tmp_path):
    d = DataFeedDesc(_write(tmp_path, PADDLE_EXAMPLE))
    assert d.allow_nonfinite is False
    d.allow_nonfinite = True
    assert DataFeedDesc(_write(tmp_path, PADDLE_EXAMPLE)).allow_nonfinite is False
