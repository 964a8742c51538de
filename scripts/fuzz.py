"""Fuzz Fluidity's loaders and parsers: what corrupt and hostile input does to them.

Targets (each fed bytes; see TARGETS):
  program        framework.load_program_file, then check_program, serialize + re-parse,
                 and preparing block 0's plan (what load_inference_model and a first run do)
  tensor         serialization.load_tensor_file (a LoDTensor or a SelectedRows record)
  combined       serialization.load_combined_file (a `.pdiparams` / save_combine file)
  datafeed_desc  DataFeedDesc (protobuf text format)
  multislot_c    MultiSlotReader, C parser, read whole; each case is also read by the
                 Python parser and the two must agree (batches, origins, errors)
  multislot_py   MultiSlotReader, Python parser, read whole
  codegen        (not in the default set: --targets codegen) a one-op program of every op
                 with a compiled form (tests/codegen's samples) with one hostile change -
                 an attribute of the wrong type (a payload that would create a canary file
                 as C++), an extreme or random value, a variable renamed to a hostile name
                 (tests/security/hostile.py), declared dims changed, a corrupt fed LoD, a
                 wire-level mutation - loaded, run by the interpreter and run compiled
                 (`with_native_code`): the two must give the same values or both an error,
                 and the canary must never appear

Inputs: mutations of valid seed files (the Paddle models and parameters of
tests/fixtures/paddle_zoo, records and configs made here, generated MultiSlot data): bit
flips, byte overwrites with boundary values, insertions, deletions, duplications,
truncations, splices of two seeds, and structure-aware ones — protobuf field-level (a
wire-format tree: a varint set to 0/-1/2^31/2^63/an unknown enum, a field deleted,
duplicated, renumbered or given another wire type, a string made invalid UTF-8), tensor
record headers (versions, LoD levels, TensorDesc length), text-proto and MultiSlot tokens
(nan, inf, 1e39, 2^63, -5, ...); plus inputs generated from scratch (random ProgramDescs,
records, configs and data lines).

Each case runs in a worker subprocess (limited to 3 GiB of address space, so a lying header
that allocates gigabytes shows up) with a per-case time limit (a case that exceeds it is run once more in a fresh worker: only
a second timeout is a hang). A case FAILS when it raises
anything but its target's documented errors (FormatError; for programs also ProgramError,
e.g. UnsupportedProgramError; MultiSlot parse errors: DataError), exceeds the time limit
(hang) or kills the worker (crash, e.g. a segfault in the C parser); the input is saved
under --out with what happened, and the worker restarted.

    python scripts/fuzz.py [--targets program,tensor,...] [--cases 100000] [--seed 0]
                           [--timeout 10] [--out fuzz-out] [--json summary.json]

Exit status 1 when any case failed. The summary prints, per target, cases, outcomes by
kind (ok, each documented error class, raw exceptions, hangs, crashes) and wall time.

For `codegen` a case FAILS also when the compiled run and the interpreter disagree (values,
or one of them raising), and when the canary file appears; its documented outcomes are
FormatError (the loader refused the change) and InterpreterError (the interpreter refused
the case, and so did the compiled run). Its cases compile C++ (a build cache private to each
worker), so it runs about a case a second, and its per-case time limit is at least 120 s.
"""
import argparse
import collections
import glob
import hashlib
import io
import json
import os
import pickle
import random
import select
import shutil
import struct
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)   # this tree's fluidity, in the driver and its workers
ZOO = os.path.join(ROOT, "tests", "fixtures", "paddle_zoo")
AS_LIMIT = 3 << 30
BATCH = 64      # cases sent to the worker at once
READY = b"ready\n"
STARTUP_S = 300  # a worker's imports (and the C parser's build) on a busy machine

# =======================================================================================
# protobuf wire format: a tree to mutate field by field
# =======================================================================================


def _varint(data, i):
    value, shift = 0, 0
    while True:
        if i >= len(data) or shift > 63:
            raise ValueError("bad varint")
        b = data[i]
        i += 1
        value |= (b & 0x7F) << shift
        shift += 7
        if not b & 0x80:
            return value, i


def _enc_varint(v):
    v &= (1 << 64) - 1
    out = bytearray()
    while True:
        b = v & 0x7F
        v >>= 7
        if v:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def wire_fields(data):
    """[[field, wire type, value]] of one message level: value an int (varint) or bytes
    (fixed, or length-delimited: a nested message is parsed only when descended into, so a
    mutation costs the path to its field, not the whole file). ValueError if not protobuf."""
    out, i = [], 0
    while i < len(data):
        key, i = _varint(data, i)
        num, wt = key >> 3, key & 7
        if num == 0:
            raise ValueError("field 0")
        if wt == 0:
            v, i = _varint(data, i)
        elif wt in (1, 2, 5):
            if wt == 2:
                n, i = _varint(data, i)
            else:
                n = 8 if wt == 1 else 4
            if i + n > len(data):
                raise ValueError("short field")
            v, i = data[i:i + n], i + n
        else:
            raise ValueError("wire type")
        out.append([num, wt, v])
    return out


def wire_encode(fields):
    out = bytearray()
    for num, wt, v in fields:
        out += _enc_varint((num << 3) | wt)
        if wt == 0:
            out += _enc_varint(v)
        elif wt in (1, 5):
            out += v
        else:
            out += _enc_varint(len(v)) + v
    return bytes(out)


_VARINTS = [0, 1, 2, 3, 7, 99, 127, 128, 255, 1000, (1 << 31) - 1, 1 << 31, (1 << 32) - 1,
            (1 << 63) - 1, 1 << 63, (1 << 64) - 1, (1 << 64) - 2, (1 << 64) - 5]
_BAD_UTF8 = [b"\xff", b"\xc3\x28", b"\xed\xa0\x80", b"\xf0\x28\x8c\xbc", b"a\x80b", b"\xfe\xfe"]


def mutate_wire(rng, data, depth=0):
    """`data` (a protobuf message) with one field somewhere in it mutated: a random path
    down nested messages, then at its end a field deleted, duplicated, renumbered, given
    another wire type, a varint set to a boundary value or an unknown enum, a string made
    invalid UTF-8, ... (bytes-level when `data` does not parse)."""
    try:
        fields = wire_fields(data)
    except ValueError:
        return mutate_bytes(rng, data)
    if not fields:
        return data + wire_encode([[rng.randint(1, 20), 0, rng.choice(_VARINTS)]])
    k = rng.randrange(len(fields))
    f = fields[k]
    if f[1] == 2 and f[2] and depth < 12 and rng.random() < 0.75:
        try:
            wire_fields(f[2])          # a message: go down into it
            f[2] = mutate_wire(rng, f[2], depth + 1)
            return wire_encode(fields)
        except ValueError:
            pass
    op = rng.randrange(9)
    if op == 0:
        del fields[k]                                      # a field (maybe required) gone
    elif op == 1:
        fields.insert(k, list(f))                          # duplicated
    elif op == 2:
        f[0] = rng.choice([f[0] + 1, max(1, f[0] - 1), rng.randint(1, 40), 536870911])
    elif op == 3:                                          # another wire type
        f[1] = rng.choice([w for w in (0, 1, 2, 5) if w != f[1]])
        f[2] = {0: rng.choice(_VARINTS), 1: rng.randbytes(8), 5: rng.randbytes(4),
                2: rng.randbytes(rng.randint(0, 6))}[f[1]]
    elif f[1] == 0:
        f[2] = rng.choice(_VARINTS + [f[2] + 1, max(0, f[2] - 1), rng.getrandbits(64)])
    elif f[1] in (1, 5):
        n = len(f[2])
        f[2] = rng.choice([rng.randbytes(n), b"\xff" * n, b"\x00" * n,
                           struct.pack("<d", float("nan")) if n == 8 else
                           struct.pack("<f", float("inf"))])
    else:
        b = f[2]
        if op < 6 and b:
            j = rng.randrange(len(b))
            f[2] = b[:j] + rng.choice(_BAD_UTF8) + b[j + 1:]
        elif op < 7:
            f[2] = rng.choice([b"", b * rng.randint(2, 50), rng.randbytes(rng.randint(1, 30))])
        elif op < 8 and len(fields) > 1:
            rng.shuffle(fields)
        else:
            f[2] = mutate_bytes(rng, b)
    return wire_encode(fields)


# =======================================================================================
# byte- and token-level mutations
# =======================================================================================
_INTERESTING32 = [0, 1, 0x7F, 0x80, 0xFF, 0x7FFFFFFF, 0x80000000, 0xFFFFFFFF, 0xFFFFFFFE]
_INTERESTING64 = [0, 1, 0x7FFFFFFFFFFFFFFF, 0x8000000000000000, 0xFFFFFFFFFFFFFFFF, 1 << 40]


def mutate_bytes(rng, data, other=None):
    data = bytearray(data)
    for _ in range(rng.choice([1, 1, 1, 2, 3, 5])):
        n = len(data)
        op = rng.randrange(11)
        if op == 0 and n:                                        # bit flip
            k = rng.randrange(n)
            data[k] ^= 1 << rng.randrange(8)
        elif op == 1 and n:                                      # byte overwrite
            data[rng.randrange(n)] = rng.choice([0, 0xFF, 0x7F, 0x80, rng.randrange(256)])
        elif op == 2:                                            # insert
            k = rng.randint(0, n)
            data[k:k] = rng.randbytes(rng.choice([1, 2, 4, 8, 16, 64]))
        elif op == 3 and n:                                      # delete a range
            k = rng.randrange(n)
            del data[k:k + rng.choice([1, 2, 4, 8, 64, n])]
        elif op == 4 and n:                                      # duplicate a range
            k = rng.randrange(n)
            data[k:k] = data[k:k + rng.choice([1, 4, 16, 256])]
        elif op == 5:                                            # truncate
            del data[rng.randint(0, n):]
        elif op == 6:                                            # trailing garbage
            data += rng.randbytes(rng.choice([1, 3, 8, 100]))
        elif op == 7 and n >= 4:                                 # 32-bit boundary value
            k = rng.randrange(n - 3)
            data[k:k + 4] = struct.pack("<I", rng.choice(_INTERESTING32))
        elif op == 8 and n >= 8:                                 # 64-bit boundary value
            k = rng.randrange(n - 7)
            data[k:k + 8] = struct.pack("<Q", rng.choice(_INTERESTING64))
        elif op == 9 and other:                                  # splice with another seed
            a, b = rng.randint(0, n), rng.randint(0, len(other))
            data = data[:a] + bytearray(other[b:])
        elif n:                                                  # repeat a byte run
            k = rng.randrange(n)
            data[k:k] = bytes([data[k]]) * rng.choice([10, 100, 1000])
    return bytes(data)


def mutate_tokens(rng, data, vocab):
    toks = data.split(b" ")
    for _ in range(rng.choice([1, 1, 2, 3])):
        k = rng.randrange(len(toks)) if toks else 0
        op = rng.randrange(4)
        if op == 0 and toks:
            toks[k] = rng.choice(vocab)
        elif op == 1:
            toks.insert(k, rng.choice(vocab))
        elif op == 2 and toks:
            del toks[k]
        elif toks:
            toks.insert(k, toks[k])
    return b" ".join(toks)


# =======================================================================================
# seeds and generators, per target
# =======================================================================================
def _zoo(pattern):
    return [open(p, "rb").read() for p in sorted(glob.glob(os.path.join(ZOO, pattern)))]


def _record(array, lod=None):
    from fluidity.core import serialization as ser
    return ser.lod_tensor_to_bytes(array, lod)


def _tensor_seeds():
    import numpy as np
    from fluidity.core import serialization as ser
    from fluidity.core.tensor import SelectedRows
    seeds = [(d, {"sr": False}) for d in _zoo("*/model_dir/*") if not d[:2] == b"\n\x8e"][:6]
    seeds += [(_record(np.arange(12, dtype=np.float32).reshape(3, 4)), {"sr": False}),
              (_record(np.arange(6, dtype=np.int64).reshape(6, 1), [[0, 2, 3], [0, 1, 4, 6]]),
               {"sr": False}),
              (_record(np.float32(2.5).reshape(())), {"sr": False}),           # 0-D
              (_record(np.ones((2, 2), np.float16)), {"sr": False}),
              (_record(np.array([True, False])), {"sr": False}),
              (ser.selected_rows_to_bytes(SelectedRows([0, 3], 5, np.ones((2, 3), np.float32))),
               {"sr": True})]
    return seeds


def _records(data):
    """How many LoDTensor records a combined file holds."""
    from fluidity.core import serialization as ser
    r = ser.reader(io.BytesIO(data))
    n = 0
    while not r.at_end():
        ser.read_lod_tensor(r)
        n += 1
    return n


def _combined_seeds():
    import numpy as np
    seeds = [(d, {"n": _records(d)}) for d in _zoo("*/model.pdiparams")]
    two = _record(np.arange(4, dtype=np.float32)) + _record(np.arange(3, dtype=np.int64)
                                                           .reshape(3, 1), [[0, 1, 3]])
    return seeds + [(two, {"n": 2})]


DATAFEED_DESCS = [
    b'name: "MultiSlotDataFeed"\nbatch_size: 2\nmulti_slot_desc {\n'
    b'  slots { name: "words" type: "uint64" is_used: true }\n'
    b'  slots { name: "dense" type: "float" is_dense: true is_used: true shape: [-1, 2] }\n'
    b'  slots { name: "unused" type: "float" }\n'
    b'  slots { name: "label" type: "uint64" is_dense: true is_used: true }\n}\n',
    b'batch_size: 3\nmulti_slot_desc {\n  slots { name: "f" type: "float" is_used: true }\n'
    b'  slots { name: "v" type: "uint64" is_dense: true is_used: true }\n}\n',
    b'name: "MultiSlotDataFeed"\nbatch_size: 4\nmulti_slot_desc {\n'
    b'  slots { name: "x" type: "float" is_dense: true is_used: true shape: [3] }\n'
    b'  slots { name: "ids" type: "uint64" is_used: false }\n'
    b'  slots { name: "y" type: "f" is_used: true }\n}\n',
]
_DESC_VOCAB = [b"{", b"}", b":", b"[", b"]", b",", b"-1", b"0", b"2147483648",
               b"99999999999999999999", b'"uint64"', b'"float"', b'"int"', b'"\\xff"',
               b'"\\303\\050"', b'"a"', b"name", b"type", b"shape", b"slots", b"is_used",
               b"is_dense", b"true", b"false", b"batch_size", b"multi_slot_desc", b"#", b"\n",
               b"pipe_command", b'"', b"\\", b"slots {", b"shape: [-1, 0]", b"1e400", b"nan"]
_DATA_VOCAB = [b"nan", b"-nan", b"inf", b"-inf", b"Infinity", b"1e39", b"-1e39", b"1e400",
               b"3.4028235677973366e38", b"3.4028234e38", b"1e-50", b"-0", b"0x10", b"1_0",
               b"9223372036854775807", b"9223372036854775808", b"18446744073709551615",
               b"18446744073709551616", b"-5", b"-0", b"0", b"1", b"2", b"3", b"100000000000",
               b"\n", b"\r\n", b"\t", b"\x00", b"\xff", b"", b"1." * 3, b".", b"e5", b"+",
               b"99999999999999999999999999", b"4294967296"]


def _multislot_seeds():
    import numpy as np
    rng = np.random.default_rng(0)
    seeds = []
    for d, desc in enumerate(DATAFEED_DESCS):
        for n in (3, 20):
            lines = []
            for _ in range(n):
                if d == 0:
                    k = int(rng.integers(0, 4))
                    lines.append(" ".join([str(k)] + [str(int(i)) for i in rng.integers(0, 2**40, k)]
                                          + ["2", f"{rng.normal():.3f}", f"{rng.normal():.2e}",
                                             "1", "0.5", "1", str(int(rng.integers(0, 2)))]))
                elif d == 1:
                    k = int(rng.integers(0, 3))
                    lines.append(" ".join([str(k)] + [f"{x:.4f}" for x in rng.normal(size=k)]
                                          + ["2", "7", "8"]))
                else:
                    lines.append(" ".join(["3", "1", "2.5", "-3", "1", "9", "1", "0.25"]))
            seeds.append((("\n".join(lines) + "\n").encode(), {"desc": d}))
    return seeds


def _program_seeds():
    return ([(d, {}) for d in _zoo("*/model.pdmodel")] +
            [(d, {}) for d in _zoo("*/model_dir/__model__")])


# --- generated from scratch -------------------------------------------------------------
def gen_program(rng):
    from fluidity.ops import registry
    from fluidity.proto import framework_pb2 as pb
    types = sorted(registry.all_ops()) if hasattr(registry, "all_ops") else ["mul", "while"]
    desc = pb.ProgramDesc()
    nb = rng.choice([0, 1, 1, 2, 3, 5])
    for i in range(nb):
        b = desc.blocks.add()
        b.idx = i if rng.random() > 0.05 else rng.randint(-2, nb + 2)
        b.parent_idx = (-1 if i == 0 else rng.randrange(i)) if rng.random() > 0.1 else \
            rng.randint(-3, nb + 2)
        if rng.random() < 0.1:
            b.forward_block_idx = rng.randint(-3, nb + 2)
        names = []
        for k in range(rng.randint(0, 5)):
            v = b.vars.add()
            v.name = rng.choice([f"v{k}", f"v{k}", "", "v0"])
            names.append(v.name)
            v.type.type = rng.choice([7, 7, 7, 8, 13, 9, 10, 17, 5])
            td = (v.type.lod_tensor.tensor if v.type.type == 7 else v.type.selected_rows
                  if v.type.type == 8 else v.type.tensor_array.tensor)
            td.data_type = rng.choice([5, 3, 2, 0, 22, 32, 7, 6])
            td.dims.extend(rng.choice([-1, 0, 1, 3, 1 << 31, 1 << 62, -4, -7])
                           for _ in range(rng.randint(0, 4)))
            if rng.random() < 0.2:
                v.type.lod_tensor.lod_level = rng.choice([-1, 0, 1, 1 << 30])
            v.persistable = rng.random() < 0.3
        for k in range(rng.randint(0, 4)):
            op = b.ops.add()
            op.type = rng.choice(types + ["", "no_such_op", "while", "conditional_block"])
            for slot, many in (("inputs", "X"), ("outputs", "Out")):
                s = getattr(op, slot).add()
                s.parameter = rng.choice([many, "Input", "Condition", "Out", "Y", ""])
                s.arguments.extend(rng.choice(names + ["nope", "@EMPTY@"])
                                   for _ in range(rng.randint(0, 2)) if names or True)
            for _ in range(rng.randint(0, 3)):
                a = op.attrs.add()
                a.name = rng.choice(["sub_block", "axis", "scale", "blocks", "col", "shape"])
                a.type = rng.choice([0, 1, 2, 3, 6, 8, 8, 10, 9])
                a.i = rng.choice([0, 1, -1, 7])
                a.block_idx = rng.randint(-2, nb + 1)
                a.blocks_idx.extend(rng.randint(-1, nb) for _ in range(rng.randint(0, 2)))
                a.ints.extend(rng.choice([-1, 0, 3, 1 << 30]) for _ in range(rng.randint(0, 3)))
                a.f = rng.choice([0.0, float("nan"), 1e38])
    if rng.random() < 0.2:
        pair = desc.op_version_map.pair.add()
        pair.op_name = rng.choice(types)
        pair.op_version.version = rng.choice([0, 1, 99, -1])
    return desc.SerializePartialToString()


def gen_tensor(rng):
    code = rng.choice([0, 1, 2, 3, 4, 5, 6, 19, 20, 21, 22, 23, 24, 37, 38, 7, 99, -1])
    dims = [rng.choice([0, 1, 2, 3, 5, -1, 1 << 40]) for _ in range(rng.choice([0, 1, 2, 3, 9]))]
    desc = wire_encode([[1, 0, code & ((1 << 64) - 1)]] + [[2, 0, d & ((1 << 64) - 1)] for d in dims])
    n = 1
    for d in dims:
        n *= max(d, 0)
    size = min(n * 4, 4096) + rng.choice([0, 0, -1, 1, 8])
    lod = []
    for _ in range(rng.choice([0, 0, 1, 2])):
        offs = sorted(rng.randint(0, 6) for _ in range(rng.randint(0, 4)))
        lod.append(struct.pack("<Q", 8 * len(offs)) + b"".join(struct.pack("<Q", o) for o in offs))
    return (struct.pack("<IQ", 0, len(lod)) + b"".join(lod) + struct.pack("<Ii", 0, len(desc)) +
            desc + rng.randbytes(max(size, 0))), {"sr": rng.random() < 0.2}


def gen_desc_text(rng):
    toks = [rng.choice(_DESC_VOCAB) for _ in range(rng.randint(0, 30))]
    return b" ".join(toks)


def gen_multislot(rng):
    lines = []
    for _ in range(rng.randint(0, 6)):
        toks = [rng.choice(_DATA_VOCAB + [str(rng.randint(0, 4)).encode()] * 8)
                for _ in range(rng.randint(0, 14))]
        lines.append(b" ".join(toks))
    return b"\n".join(lines), {"desc": rng.randrange(len(DATAFEED_DESCS))}


# --- the generated-code target ------------------------------------------------------------
def _test_paths():
    for d in ("tests", os.path.join("tests", "codegen"), os.path.join("tests", "security")):
        d = os.path.join(ROOT, d)
        if d not in sys.path:
            sys.path.insert(0, d)


def _codegen_seeds():
    """(one-op program, {"op", "feed": {name: (array, lod)}, "fetch"}) of every op with a
    compiled form that tests/codegen has a sample for."""
    _test_paths()
    import numpy as np
    from codegen_samples import all_samples
    from op_test import build_op
    samples, _extra, _ = all_samples()
    out = []
    for op_type in sorted(samples):
        try:
            inputs, attrs, _wrt, *outputs = samples[op_type]()
            main, _, feed, out_vars, _ = build_op(op_type, inputs, attrs, *outputs)
        except Exception:  # noqa: BLE001 - an op its tests build another way
            continue
        fed = {n: (np.asarray(getattr(v, "_array", v)),
                   [list(x) for x in getattr(v, "_lod", [])]) for n, v in feed.items()}
        fetch = [v.name for vs in out_vars.values() for v in vs]
        out.append((main.desc.SerializePartialToString(), {"op": op_type, "feed": fed, "fetch": fetch}))
    return out


_RANDOM_INTS = [-2, -1, 0, 1, 2, 3, 4, 7, 64, 1 << 20]
_RANDOM_FLOATS = [0.0, -1.0, 0.5, 1.0, 2.0, 1e-8, 1e8, -3.5]
_RANDOM_STRINGS = ["", "NCHW", "NHWC", "AnyLayout", "max", "avg", "sum", "mean", "sqrt",
                   "relu", "sigmoid", "tanh", "identity", "upscale_in_train", "IOB", "x"]


def _random_value(rng, attr_type):
    from fluidity.proto import framework_pb2 as pb
    T = pb.AttrType
    if attr_type in (T.INT, T.LONG):
        return attr_type, rng.choice(_RANDOM_INTS)
    if attr_type in (T.FLOAT, T.FLOAT64):
        return attr_type, rng.choice(_RANDOM_FLOATS)
    if attr_type == T.BOOLEAN:
        return attr_type, rng.random() < 0.5
    if attr_type == T.STRING:
        return attr_type, rng.choice(_RANDOM_STRINGS)
    if attr_type in (T.INTS, T.LONGS):
        return attr_type, [rng.choice(_RANDOM_INTS) for _ in range(rng.randint(0, 4))]
    if attr_type in (T.FLOATS, T.FLOAT64S):
        return attr_type, [rng.choice(_RANDOM_FLOATS) for _ in range(rng.randint(0, 4))]
    if attr_type == T.BOOLEANS:
        return attr_type, [rng.random() < 0.5 for _ in range(rng.randint(0, 3))]
    return None


def mutate_codegen(rng, data, opts, canary):
    """(data, opts) of a one-op program with one hostile change (see the module's doc)."""
    _test_paths()
    import hostile
    from fluidity.ops import registry
    from fluidity.proto import framework_pb2 as pb
    opts = dict(opts, canary=canary, feed=dict(opts["feed"]), fetch=list(opts["fetch"]))
    desc = pb.ProgramDesc()
    desc.ParseFromString(data)
    block = desc.blocks[0]
    op = next(o for o in block.ops if o.type == opts["op"])
    r = rng.random()
    if r < 0.5:                                   # an attribute
        opdef = registry.get(op.type)
        names = [n for n in opdef.attr_names() if opdef.attr_type(n) not in
                 (pb.AttrType.BLOCK, pb.AttrType.BLOCKS)]
        name = rng.choice(names)
        want = opdef.attr_type(name)
        pick = rng.random()
        choices = (hostile.wrong_values(want, canary) if pick < 0.35 else
                   hostile.extreme_values(want) if pick < 0.7 else
                   [v for v in [_random_value(rng, want)] if v])
        if choices:
            hostile.set_raw_attr(op, name, *rng.choice(choices))
    elif r < 0.7:                                 # a variable renamed
        old = rng.choice([v.name for v in block.vars])
        new = rng.choice(hostile.hostile_names(canary))
        for v in block.vars:
            if v.name == old:
                v.name = new
        for o in block.ops:
            for slot in list(o.inputs) + list(o.outputs):
                slot.arguments[:] = [new if a == old else a for a in slot.arguments]
        if old in opts["feed"]:
            opts["feed"][new] = opts["feed"].pop(old)
        opts["fetch"] = [new if f == old else f for f in opts["fetch"]]
    elif r < 0.85:                                # a declared shape
        v = rng.choice(list(block.vars))
        td = v.type.lod_tensor.tensor
        if td.dims:
            k = rng.randrange(len(td.dims))
            td.dims[k] = rng.choice([-1, 0, 1, 2, 1 << 31, 1 << 40, 1 << 62])
    elif r < 0.95 and opts["feed"]:               # a fed LoD
        name = rng.choice(sorted(opts["feed"]))
        a, _lod = opts["feed"][name]
        rows = int(a.shape[0]) if a.ndim else 0
        opts["feed"][name] = (a, [rng.choice([[0, rows + 3], [1, rows], [0, rows, rows - 1],
                                              [0, 1 << 40], [0, -1, rows], [rows],
                                              [0, rows // 2, rows], []])])
    else:
        return mutate_wire(rng, data), opts
    return desc.SerializeToString(), opts


def _codegen_case(rng, seeds, out_dir):
    data, opts = rng.choice(seeds)
    os.makedirs(out_dir, exist_ok=True)           # where a payload would make the canary
    canary = os.path.join(os.path.abspath(out_dir), "CANARY")
    return mutate_codegen(rng, data, opts, canary)


def _interpreter_error():
    from fluidity.errors import FluidityError

    class InterpreterError(FluidityError):
        """The interpreter refused a codegen case, and the compiled run refused it too (the
        documented outcome: the interpreter's error in every case)."""
    return InterpreterError


def _run_both(program, feed, fetch):
    """Both runs from a fresh scope in which every random op with seed 0 has the same
    [key, run] state (ops/random_stream.py), so they draw the same numbers."""
    import numpy as np
    import fluidity as fluid
    from fluidity.ops import random_stream
    exe = fluid.Executor()

    def scope():
        s = fluid.Scope()
        for op in program.global_block().ops:
            name = random_stream.state_var(op)
            if name is not None:
                s.var(name).get_tensor().set(np.array([1234, 0], np.int64), fluid.CPUPlace())
        return s

    def run(p):
        try:
            return "ok", exe.run(p, feed=feed, fetch_list=fetch, scope=scope())
        except Exception as e:  # noqa: BLE001 - compared, not hidden
            return "error", f"{type(e).__name__}: {str(e)[:200]}"
    return run(program), run(fluid.CompiledProgram(program).with_native_code())


def run_codegen(data, opts):
    import numpy as np
    from fluidity.core.tensor import LoDTensor
    from fluidity.framework import Program
    canary = opts["canary"]
    try:
        program = Program.parse_from_string(data)
        feed = {n: LoDTensor(a, lod) if lod else a for n, (a, lod) in opts["feed"].items()}
        want, got = _run_both(program, feed, opts["fetch"])
    finally:
        if os.path.exists(canary):
            raise AssertionError(f"THE CANARY {canary} WAS CREATED: generated code ran a payload")
    if want[0] != got[0]:
        raise AssertionError(f"interpreter {want[0]} {str(want[1])[:200]} but compiled {got[0]} "
                             f"{str(got[1])[:200]}")
    if want[0] == "error":
        raise InterpreterError(want[1])
    for w, g in zip(want[1], got[1]):
        w, g = np.asarray(w), np.asarray(g)
        if w.shape != g.shape or w.dtype != g.dtype:
            raise AssertionError(f"compiled {g.dtype}{g.shape}, interpreter {w.dtype}{w.shape}")
        if w.dtype.kind in "fc":
            np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-5, equal_nan=True)
        else:
            np.testing.assert_array_equal(g, w)


# =======================================================================================
# targets (run in the worker)
# =======================================================================================
class _Case:
    """Scratch files of the worker process."""
    dir = None

    @classmethod
    def path(cls, name, data):
        p = os.path.join(cls.dir, name)
        with open(p, "wb") as f:
            f.write(data)
        return p


def _plan_error():
    from fluidity.errors import FluidityError

    class PlanError(FluidityError):
        """A well-formed program whose block 0 the executor refuses to prepare, with a
        FluidityError naming the op (an attribute value the op does not accept, a variable
        no block declares): a clear error at the first run, not a loader's."""
    return PlanError


def run_program(data, opts):
    from fluidity.errors import FluidityError
    from fluidity.executor.plan import Plan
    from fluidity.framework import Program, load_program_file
    from fluidity.ir.views import ProgramView
    from fluidity.transpiler.compat_check import check_program
    program = load_program_file(_Case.path("__model__", data))
    check_program(program, "fuzzed program")
    again = Program.parse_from_string(program.serialize_to_string())  # round trip
    assert len(again.blocks) == len(program.blocks), "round trip lost blocks"
    try:
        Plan(ProgramView(program.desc), 0)
    except FluidityError as e:
        raise PlanError(f"{type(e).__name__}: {e}") from None


def run_tensor(data, opts):
    from fluidity.core import serialization as ser
    ser.load_tensor_file(_Case.path("tensor", data), selected_rows=opts.get("sr", False),
                         name="x")


def run_combined(data, opts):
    from fluidity.core import serialization as ser
    values = ser.load_combined_file(_Case.path("params", data),
                                    [f"v{i}" for i in range(opts.get("n", 1))])
    assert len(values) == opts.get("n", 1)


def run_datafeed_desc(data, opts):
    from fluidity.datafeed import DataFeedDesc
    d = DataFeedDesc(_Case.path("desc.prototxt", data))
    DataFeedDesc.from_text(d.desc())  # what it writes back reads again


def _read_multislot(data, opts, backend):
    from fluidity.datafeed import DataFeedDesc, MultiSlotReader
    desc = DataFeedDesc.from_text(DATAFEED_DESCS[opts.get("desc", 0) % len(DATAFEED_DESCS)])
    path = _Case.path("data.txt", data)
    reader = MultiSlotReader(desc, [path], batch_size=opts.get("bs", 2),
                             chunk_size=opts.get("chunk", 1 << 20), backend=backend,
                             skip_bad_lines=opts.get("skip", False),
                             allow_nonfinite=opts.get("nonfinite", False))
    out = []
    for b in reader:
        out.append((b.origin, {k: (v.numpy().tobytes(), v.numpy().shape, str(v.numpy().dtype),
                                   v.lod()) for k, v in b.items()}))
    return out, reader.skipped_lines


def _outcome(fn):
    try:
        return ("ok", fn())
    except Exception as e:
        return (type(e).__name__, str(e))


def run_multislot_c(data, opts):
    from fluidity.datafeed import DataError
    c = _outcome(lambda: _read_multislot(data, opts, "c"))
    py = _outcome(lambda: _read_multislot(data, opts, "python"))
    if c != py:
        raise AssertionError(f"the C and Python parsers disagree: C {str(c)[:300]} / Python "
                             f"{str(py)[:300]}")
    if c[0] != "ok":
        raise DataError(c[1])


def run_multislot_py(data, opts):
    _read_multislot(data, opts, "python")


def run_selftest(data, opts):
    """The harness's own check (tests/test_fuzz.py): each way a case can fail, on demand."""
    if data == b"crash":
        os.kill(os.getpid(), 11)      # as a segfault in a C parser would
    elif data == b"hang":
        time.sleep(3600)
    elif data == b"raw":
        raise KeyError("raw")
    elif data == b"documented":
        from fluidity.errors import FormatError
        raise FormatError("documented")


def _documented():
    from fluidity.datafeed.errors import DataError
    from fluidity.errors import FormatError, ProgramError
    return {"program": (FormatError, ProgramError, PlanError), "tensor": (FormatError,),
            "combined": (FormatError,), "datafeed_desc": (FormatError,),
            "multislot_c": (DataError,), "multislot_py": (DataError,),
            "codegen": (FormatError, InterpreterError), "_selftest": (FormatError,)}


PlanError = _plan_error()
InterpreterError = _interpreter_error()
RUNNERS = {"program": run_program, "tensor": run_tensor, "combined": run_combined,
           "datafeed_desc": run_datafeed_desc, "multislot_c": run_multislot_c,
           "multislot_py": run_multislot_py, "codegen": run_codegen, "_selftest": run_selftest}
SLOW = {"codegen": 120.0}      # targets that compile: out of the default set; their time limit
TARGETS = [t for t in RUNNERS if not t.startswith("_") and t not in SLOW]


def worker_main():
    """Read batches of (target, data, opts) cases from stdin; answer each case, as soon as
    it is done, with (kind, class, message)."""
    import logging
    import resource
    import warnings
    warnings.simplefilter("ignore")
    logging.disable(logging.CRITICAL)
    try:
        resource.setrlimit(resource.RLIMIT_AS, (AS_LIMIT, AS_LIMIT))
    except (ValueError, OSError):
        pass
    _Case.dir = os.environ["FLUIDITY_FUZZ_SCRATCH"]   # the driver's, removed by it
    os.environ.pop("FLUIDITY_TRUSTED_CACHE_DIR", None)  # builds go to the scratch cache
    documented = _documented()
    from fluidity.datafeed import multislot
    multislot.build()
    inp, out = sys.stdin.buffer, sys.stdout.buffer
    out.write(READY)      # imports done: the driver's per-case clock starts now
    out.flush()
    while True:
        head = inp.read(4)
        if len(head) < 4:
            return
        for target, data, opts in pickle.loads(inp.read(struct.unpack("<I", head)[0])):
            try:
                RUNNERS[target](data, opts)
                answer = ("ok", None, None)
            except documented[target] as e:
                answer = ("documented", type(e).__name__, str(e)[:300])
            except Exception as e:  # noqa: BLE001 - what the fuzzer is looking for
                import traceback
                answer = ("raw", type(e).__name__,
                          f"{e}"[:500] + "\n" + "".join(traceback.format_exc(limit=-6))[-2500:])
            blob = pickle.dumps(answer)
            out.write(struct.pack("<I", len(blob)) + blob)
            out.flush()


# =======================================================================================
# the driver
# =======================================================================================
class Worker:
    """A worker subprocess and its scratch folder (in /dev/shm where there is one: no disk
    per case), which is removed however the worker ends: closed, killed or crashed."""

    def __init__(self):
        shm = "/dev/shm" if os.access("/dev/shm", os.W_OK) else None
        self.scratch = tempfile.mkdtemp(prefix="fluidity-fuzz-", dir=shm)
        env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""),
                   OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1",
                   FLUIDITY_FUZZ_SCRATCH=self.scratch,
                   FLUIDITY_CACHE_DIR=os.path.join(self.scratch, "cache"))
        self.p = subprocess.Popen([sys.executable, os.path.abspath(__file__), "--worker"],
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env)
        fd = self.p.stdout.fileno()
        if not select.select([fd], [], [], STARTUP_S)[0] or \
                os.read(fd, len(READY)) != READY:
            self._kill()
            raise RuntimeError(f"the fuzz worker did not start in {STARTUP_S} s")

    def _kill(self):
        self.p.kill()
        self.p.wait()
        shutil.rmtree(self.scratch, ignore_errors=True)

    def run(self, cases, timeout):
        """Yield (kind, class, message) per case, in order; the worker answers each case as
        it finishes (a batch saves a round trip per case). Kind 'hang' (no answer in
        `timeout` s) or 'crash' (the worker died) ends the batch: the worker is gone."""
        blob = pickle.dumps(cases)
        try:
            self.p.stdin.write(struct.pack("<I", len(blob)) + blob)
            self.p.stdin.flush()
        except BrokenPipeError:
            yield self._died()
            return
        fd, buf = self.p.stdout.fileno(), b""
        for _ in cases:
            deadline = time.monotonic() + timeout
            while len(buf) < 4 or len(buf) < 4 + struct.unpack("<I", buf[:4])[0]:
                left = deadline - time.monotonic()
                if left <= 0 or not select.select([fd], [], [], left)[0]:
                    self._kill()
                    yield ("hang", None, f"no answer in {timeout} s")
                    return
                chunk = os.read(fd, 1 << 16)
                if not chunk:
                    yield self._died()
                    return
                buf += chunk
            need = struct.unpack("<I", buf[:4])[0]
            yield pickle.loads(buf[4:4 + need])
            buf = buf[4 + need:]

    def _died(self):
        rc = self.p.wait()
        shutil.rmtree(self.scratch, ignore_errors=True)
        return ("crash", None, f"worker exited with {rc}" + (f" (signal {-rc})" if rc < 0 else ""))

    def alive(self):
        return self.p.poll() is None

    def close(self):
        if self.alive():
            self.p.stdin.close()
            self.p.wait()
        shutil.rmtree(self.scratch, ignore_errors=True)


SEEDS = {"program": _program_seeds, "tensor": _tensor_seeds, "combined": _combined_seeds,
         "datafeed_desc": lambda: [(d, {}) for d in DATAFEED_DESCS],
         "multislot_c": _multislot_seeds, "multislot_py": _multislot_seeds,
         "codegen": _codegen_seeds,
         "_selftest": lambda: [(d, {}) for d in (b"ok", b"raw", b"crash", b"documented",
                                                b"hang")]}
GENERATORS = {"program": lambda rng: (gen_program(rng), {}), "tensor": gen_tensor,
              "combined": lambda rng: (gen_tensor(rng)[0] * rng.randint(1, 2), {"n": 1}),
              "datafeed_desc": lambda rng: (gen_desc_text(rng), {}),
              "multislot_c": gen_multislot, "multislot_py": gen_multislot}


def _structured(target, rng, data):
    """A structure-aware mutation for the target's format."""
    if target == "program":
        return mutate_wire(rng, data)
    if target in ("tensor", "combined"):
        return _mutate_record(rng, data)
    if target == "datafeed_desc":
        return mutate_tokens(rng, data, _DESC_VOCAB)
    return mutate_tokens(rng, data, _DATA_VOCAB)


def _mutate_record(rng, data):
    """Mutate the header fields of the first tensor record: versions, LoD, TensorDesc."""
    try:
        v, levels = struct.unpack_from("<IQ", data, 0)
        i = 12
        for _ in range(levels):
            (size,) = struct.unpack_from("<Q", data, i)
            i += 8 + size
        j = i + 4
        (n,) = struct.unpack_from("<i", data, j)
        desc = data[j + 4:j + 4 + n]
    except struct.error:
        return mutate_bytes(rng, data)
    op = rng.randrange(5)
    if op == 0:  # the TensorDesc, field by field (its length kept right)
        new = mutate_wire(rng, desc)
        return data[:j] + struct.pack("<i", len(new)) + new + data[j + 4 + n:]
    if op == 1:  # LoD level count
        return data[:4] + struct.pack("<Q", rng.choice(_INTERESTING64 + [levels + 1, 2])) + data[12:]
    if op == 2:  # a version
        k = rng.choice([0, i])
        return data[:k] + struct.pack("<I", rng.choice(_INTERESTING32)) + data[k + 4:]
    if op == 3:  # TensorDesc length
        v = rng.choice(_INTERESTING32 + [n + 1, n - 1]) & 0xFFFFFFFF
        return data[:j] + struct.pack("<I", v) + data[j + 4:]
    return data[:j + 4 + n + rng.randint(0, max(0, len(data) - j - 4 - n))]  # data cut


def make_case(target, rng, seeds, k=0, out_dir="fuzz-out"):
    """(data, opts) for case k: mostly mutated seeds, some generated from scratch."""
    if target == "_selftest":
        return seeds[k % len(seeds)]
    if target == "codegen":
        return _codegen_case(rng, seeds, out_dir)
    r = rng.random()
    if r < 0.15:
        data, opts = GENERATORS[target](rng)
    else:
        data, opts = rng.choice(seeds)
        opts = dict(opts)
        other = rng.choice(seeds)[0]
        if r < 0.55:
            data = _structured(target, rng, data)
        if r >= 0.45:
            data = mutate_bytes(rng, data, other)
    if target.startswith("multislot"):
        opts.update(bs=rng.choice([1, 2, 3, 64]), chunk=rng.choice([16, 64, 1000, 1 << 20]),
                    skip=rng.random() < 0.2, nonfinite=rng.random() < 0.2)
        opts.setdefault("desc", rng.randrange(len(DATAFEED_DESCS)))
    return data, opts


def fuzz(target, cases, seed, timeout, out_dir, progress=True, worker=None):
    """Run `cases` cases of `target`; the summary dict, and the worker (alive) for the
    next target."""
    rng = random.Random(f"{target}:{seed}")   # every input follows from target and seed
    seeds = SEEDS[target]()
    counts, failures = collections.Counter(), []
    worker = worker if worker is not None and worker.alive() else Worker()
    timeout = max(timeout, SLOW.get(target, 0.0))
    t0 = time.time()
    pending, done, reported = [], 0, 0
    while done < cases:
        while len(pending) < min(BATCH, cases - done):
            pending.append(make_case(target, rng, seeds, done + len(pending), out_dir))
        answered = 0
        for (data, opts), (kind, cls, msg) in zip(
                pending, worker.run([(target, d, o) for d, o in pending], timeout)):
            answered += 1
            if kind == "hang":  # a busy machine, or a real hang? once more, in a new worker
                worker = Worker()
                kind, cls, msg = next(worker.run([(target, data, opts)], timeout))
                if kind != "hang":
                    counts["slow (answered when run again)"] += 1
            counts[kind if kind != "documented" else f"documented:{cls}"] += 1
            if kind in ("raw", "hang", "crash"):
                failures.append(_save(out_dir, target, kind, cls, msg, data, opts))
        done += answered
        del pending[:answered]     # a hang or crash: the rest go to a new worker
        if not worker.alive():
            worker = Worker()
        if progress and done - reported >= 10000:
            reported = done
            print(f"  {target}: {done}/{cases} cases, {len(failures)} failures, "
                  f"{time.time() - t0:.0f} s", file=sys.stderr, flush=True)
    return {"target": target, "cases": cases, "seed": seed,
            "wall_s": round(time.time() - t0, 1), "outcomes": dict(sorted(counts.items())),
            "failures": failures}, worker


def _save(out_dir, target, kind, cls, msg, data, opts):
    h = hashlib.sha1(data + repr(sorted(opts.items())).encode()).hexdigest()[:12]
    d = os.path.join(out_dir, target)
    os.makedirs(d, exist_ok=True)
    base = os.path.join(d, f"{kind}-{h}")
    with open(base + ".bin", "wb") as f:
        f.write(data)
    with open(base + ".json", "w") as f:
        json.dump({"target": target, "kind": kind, "class": cls, "message": msg,
                   "opts": opts}, f, indent=1, default=repr)
    with open(base + ".opts.pkl", "wb") as f:       # the case again: run_<target>(data, opts)
        pickle.dump(opts, f)
    return {"kind": kind, "class": cls, "message": (msg or "")[:200], "input": base + ".bin"}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--targets", default=",".join(TARGETS))
    ap.add_argument("--cases", type=int, default=100_000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--timeout", type=float, default=10.0)
    ap.add_argument("--out", default="fuzz-out")
    ap.add_argument("--json", default=None, help="write the summary here too")
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.worker:
        return worker_main()
    results, worker = [], None
    for target in args.targets.split(","):
        if target not in RUNNERS:
            ap.error(f"unknown target {target!r}; targets: {', '.join(TARGETS + list(SLOW))}")
        res, worker = fuzz(target, args.cases, args.seed, args.timeout, args.out,
                           worker=worker)
        results.append(res)
        bad = len(res["failures"])
        print(f"{target:14} {res['cases']:>7} cases  {res['wall_s']:>7.1f} s  "
              f"failures {bad}  {json.dumps(res['outcomes'])}", flush=True)
        for f in res["failures"][:5]:
            print(f"    {f['kind']} {f['class']}: {f['message'][:160]!r} -> {f['input']}")
    if worker is not None:
        worker.close()
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)
    return 1 if any(r["failures"] for r in results) else 0


if __name__ == "__main__":
    sys.exit(main())
