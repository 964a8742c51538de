"""MultiSlotReader: batches against hand-written lines, both parser backends, chunking,
malformed lines, the compiler fallback, and the synthetic CTR generator."""
import glob
import json
import os
import warnings

import numpy as np
import pytest

from fluidity.datafeed import DataError, DataFeedDesc, DataWarning, MultiSlotReader
from fluidity.datafeed import generate, multislot

DESC = """\
name: "MultiSlotDataFeed"
batch_size: 2
multi_slot_desc {
  slots { name: "words" type: "uint64" is_used: true }
  slots { name: "dense" type: "float" is_dense: true is_used: true shape: [-1, 2] }
  slots { name: "unused" type: "float" }
  slots { name: "label" type: "uint64" is_dense: true is_used: true }
}
"""

BACKENDS = ["c", "python"]


@pytest.fixture
def desc():
    return DataFeedDesc.from_text(DESC)


def _write(tmp_path, name, text):
    path = tmp_path / name
    path.write_bytes(text.encode() if isinstance(text, str) else text)
    return str(path)


def _read(desc, files, **kw):
    return list(MultiSlotReader(desc, files, **kw))


def _plain(batches):
    return [{k: (np.asarray(t), t.lod()) for k, t in b.items()} for b in batches]


def _assert_same(got, want):
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert list(g) == list(w)
        for k in g:
            (ga, gl), (wa, wl) = g[k], w[k]
            assert ga.dtype == wa.dtype and ga.shape == wa.shape, k
            assert np.array_equal(ga, wa, equal_nan=ga.dtype.kind == "f"), k
            assert gl == wl, k


@pytest.mark.parametrize("backend", BACKENDS)
def test_batches_from_hand_written_lines(tmp_path, desc, backend):
    path = _write(tmp_path, "a.txt",
                  "3 1926 8 17 2 0.5 1.5 1 x 1 1\n"
                  "\n   \t \n"
                  "1 5 2 1 2 0 1 0\r\n"
                  "2 9223372036854775807 9\t2 -1 1e3  2 a b 1 1")  # no final newline
    with pytest.warns(DataWarning, match=r"skipped 2 blank line\(s\); the first: .*a.txt:2$"):
        batches = _read(desc, [path], backend=backend)
    assert [len(b["label"].numpy()) for b in batches] == [2, 1]
    b0, b1 = batches
    assert list(b0) == ["words", "dense", "label"]  # used slots, in desc order
    w = b0["words"]
    assert w.numpy().dtype == np.int64 and w.numpy().tolist() == [[1926], [8], [17], [5]]
    assert w.lod() == [[0, 3, 4]]
    assert b0["dense"].numpy().dtype == np.float32
    assert b0["dense"].numpy().tolist() == [[0.5, 1.5], [1.0, 2.0]] and b0["dense"].lod() == []
    assert b0["label"].numpy().tolist() == [[1], [0]] and b0["label"].numpy().dtype == np.int64
    assert b1["words"].numpy().tolist() == [[2**63 - 1], [9]]  # the largest id an int64 holds
    assert b1["words"].lod() == [[0, 2]]
    assert b1["dense"].numpy().tolist() == [[-1.0, 1000.0]]


@pytest.mark.parametrize("backend", BACKENDS)
def test_sparse_float_slot_empty_sequences_and_dense_dim_from_first_line(tmp_path, backend):
    d = DataFeedDesc.from_text("""multi_slot_desc {
        slots { name: "f" type: "float" is_used: true }
        slots { name: "v" type: "uint64" is_dense: true is_used: true } }""")
    path = _write(tmp_path, "a.txt", "2 0.25 -2 3 1 2 3\n0 3 4 5 6\n1 7 3 7 8 9\n")
    (b,) = _read(d, [path], batch_size=8, backend=backend)
    assert b["f"].numpy().dtype == np.float32 and b["f"].numpy().shape == (3, 1)
    assert b["f"].lod() == [[0, 2, 2, 3]]
    assert b["v"].numpy().tolist() == [[1, 2, 3], [4, 5, 6], [7, 8, 9]]
    bad = _write(tmp_path, "b.txt", "1 0.5 3 1 2 3\n1 0.5 2 1 2\n")
    with pytest.raises(DataError, match=r"b.txt:2: dense slot 'v' has 2 value\(s\) where 3 "
                                        r"are expected \(from the first line\)"):
        _read(d, [bad], backend=backend)


@pytest.mark.parametrize("backend", BACKENDS)
def test_batches_span_file_boundaries(tmp_path, desc, backend):
    lines = [f"{i % 3 + 1} " + " ".join(str(100 * i + k) for k in range(i % 3 + 1))
             + f" 2 {i}.5 -{i} 1 0.1 1 {i % 2}" for i in range(7)]
    f1 = _write(tmp_path, "1.txt", "\n".join(lines[:3]) + "\n")
    f2 = _write(tmp_path, "2.txt", "\n".join(lines[3:]))
    batches = _read(desc, [f1, f2], batch_size=3, backend=backend)
    assert [len(b["label"].numpy()) for b in batches] == [3, 3, 1]
    ids = np.concatenate([b["words"].numpy()[:, 0] for b in batches]).tolist()
    assert ids == [100 * i + k for i in range(7) for k in range(i % 3 + 1)]
    lens = [i % 3 + 1 for i in range(7)]
    assert batches[1]["words"].lod() == [[0, lens[3], lens[3] + lens[4], sum(lens[3:6])]]
    dense = np.concatenate([b["dense"].numpy() for b in batches])
    assert dense.tolist() == [[i + 0.5, -i] for i in range(7)]
    # the same data in one file gives the same batches
    one = _write(tmp_path, "all.txt", "\n".join(lines))
    _assert_same(_plain(batches), _plain(_read(desc, [one], batch_size=3, backend=backend)))


def _random_lines(rng, n):
    """Varied valid lines for DESC: ragged counts, big ids, floats in many spellings."""
    floats = ["0", "-0", "1.5", ".5", "5.", "-2.25e-3", "1E5", "3.4028235e38", "1e39", "1e-46",
              "1.000000059604644775390625", "0.1", "123456789012345678901234.5", "inf",
              "-Infinity", "nan", "+7", "00012.500"]
    out = []
    for _ in range(n):
        k = int(rng.integers(0, 5))
        ids = rng.integers(0, 2**63, k, dtype=np.uint64)
        dense = rng.choice(floats, 2)
        unused = rng.choice(floats + ["garbage"], int(rng.integers(0, 3)))
        out.append(" ".join([str(k), *map(str, ids), "2", *dense, str(len(unused)), *unused,
                             "1", str(int(rng.integers(0, 2)))]))
    return out


def test_both_backends_give_identical_batches(tmp_path, desc):
    rng = np.random.default_rng(7)
    path = _write(tmp_path, "r.txt", "\n".join(_random_lines(rng, 500)) + "\n")
    for bs in (1, 7, 64, 1000):
        c = _plain(_read(desc, [path], batch_size=bs, backend="c", chunk_size=1000,
                         allow_nonfinite=True))
        py = _plain(_read(desc, [path], batch_size=bs, backend="python", chunk_size=1000,
                          allow_nonfinite=True))
        _assert_same(c, py)
    dense = np.concatenate([b["dense"][0] for b in c]).ravel()
    assert np.isinf(dense).any() and np.isnan(dense).any()


def test_floats_are_rounded_like_python(tmp_path):
    toks = ["1.000000059604644775390625", "1.00000005960464477539062500001", "0.1", "1e-45",
            "7e-46", "3.4028235677973366e38", "16777217", "9007199254740993", "2.5e-308",
            "1.7976931348623157e308", "-0.0", "4.9406564584124654e-324"]
    d = DataFeedDesc.from_text('multi_slot_desc { slots { name: "x" type: "float" '
                               'is_used: true } }')
    path = _write(tmp_path, "f.txt", "".join(f"1 {t}\n" for t in toks))
    with np.errstate(over="ignore"):
        want = np.array([float(t) for t in toks], np.float64).astype(np.float32)
    for backend in BACKENDS:
        (b,) = _read(d, [path], batch_size=100, backend=backend, allow_nonfinite=True)
        got = b["x"].numpy()[:, 0]
        assert got.tobytes() == want.tobytes(), backend


@pytest.mark.parametrize("backend", BACKENDS)
def test_file_bigger_than_the_chunk(tmp_path, desc, backend):
    rng = np.random.default_rng(3)
    lines = [ln for ln in _random_lines(rng, 300) if "garbage" not in ln]
    lines[10] = "200 " + " ".join(["12345"] * 200) + " 2 1 2 0 1 1"  # longer than a chunk
    path = _write(tmp_path, "big.txt", "\n".join(lines) + "\n")
    assert os.path.getsize(path) > 50 * 64
    small = _plain(_read(desc, [path], batch_size=16, chunk_size=64, backend=backend,
                         allow_nonfinite=True))
    whole = _plain(_read(desc, [path], batch_size=16, backend=backend, allow_nonfinite=True))
    _assert_same(small, whole)
    assert sum(len(b["label"][0]) for b in small) == len(lines)


def _chunk_lines(reader, **kw):
    """[(lines, first line of the file in the chunk)] of reader.chunks(**kw)."""
    return [(c.n, c.base) for c, _ in reader.chunks(**kw)]


@pytest.mark.parametrize("backend", BACKENDS)
def test_first_lines_parse_apart_and_the_rest_as_before(tmp_path, desc, backend):
    """chunks(first_lines=k): each file's first k lines are a chunk of their own (the
    compiled worker loop starts on them before the rest is parsed); the lines, their values
    and their places in the file are those of the plain chunks."""
    rng = np.random.default_rng(5)
    lines = [ln for ln in _random_lines(rng, 90) if "garbage" not in ln]
    a = _write(tmp_path, "a.txt", "\n".join(lines) + "\n")
    b = _write(tmp_path, "b.txt", "\n".join(lines[:30]) + "\n")
    r = MultiSlotReader(desc, [a, b], backend=backend, allow_nonfinite=True)
    assert _chunk_lines(r) == [(len(lines), 0), (30, 0)]
    assert _chunk_lines(r, first_lines=16) == [(16, 0), (len(lines) - 16, 16), (16, 0),
                                               (14, 16)]
    assert _chunk_lines(r, first_lines=30) == [(30, 0), (len(lines) - 30, 30), (30, 0)]
    plain, apart = list(r.chunks()), list(r.chunks(first_lines=16))
    for (c1, dd), (c0, _), a in zip(apart, [plain[0], plain[0], plain[1], plain[1]],
                                    [0, 16, 0, 16]):
        _assert_same(_plain([r.chunk_batch(c1, 0, c1.n, dd)]),
                     _plain([r.chunk_batch(c0, a, a + c1.n, dd)]))
        assert c1.origin(0, c1.n) == c0.origin(a, a + c1.n)
    long_first = "20000 " + " ".join(["12345"] * 20000) + " 2 1 2 0 1 1"   # > 64 KiB
    c = _write(tmp_path, "c.txt", "\n".join([long_first] + [GOOD] * 20) + "\n")
    r = MultiSlotReader(desc, [c], backend=backend)
    assert _chunk_lines(r, first_lines=16) == [(16, 0), (5, 16)]


@pytest.mark.parametrize("backend", BACKENDS)
def test_first_lines_with_a_blank_or_bad_line_among_them_are_not_apart(tmp_path, desc,
                                                                       backend):
    """A blank or skipped line among the first k would make that chunk fewer than k
    examples (a short batch where iteration has none): the file is chunked as without
    first_lines, and the lines are counted once."""
    blank = _write(tmp_path, "blank.txt", "\n".join([GOOD] * 5 + [""] + [GOOD] * 20) + "\n")
    bad = _write(tmp_path, "bad.txt", "\n".join([GOOD] * 3 + ["1 5 2 oops 0.5 0 1 1"] +
                                                [GOOD] * 20) + "\n")
    r = MultiSlotReader(desc, [blank], backend=backend)
    with pytest.warns(DataWarning):
        assert _chunk_lines(r, first_lines=8) == [(25, 0)]
    assert r.blank_lines == 1
    r = MultiSlotReader(desc, [bad], backend=backend, skip_bad_lines=True)
    with pytest.warns(DataWarning):
        assert _chunk_lines(r, first_lines=8) == [(23, 0)]
    assert r.skipped_lines == 1
    r = MultiSlotReader(desc, [bad], backend=backend)
    with pytest.raises(DataError, match=r"bad.txt:4: slot 'dense': value 'oops'"):
        _chunk_lines(r, first_lines=8)


MALFORMED = [  # (line, fault); DESC slots: words (uint64), dense (float, 2), unused, label
    ("1 5 2 0.5 0.5", r"slot 'unused': count missing \(the line ends after 2 of 4 slots\)"),
    ("1 5 2 0.5 0.5 0", r"slot 'label': count missing"),
    ("x 5 2 0.5 0.5 0 1 1", r"slot 'words': count 'x' is not an integer"),
    ("1.0 5 2 0.5 0.5 0 1 1", r"slot 'words': count '1.0' is not an integer"),
    ("-1 5 2 0.5 0.5 0 1 1", r"slot 'words': negative count '-1'"),
    ("1 5 2 0.5 0.5 0 1", r"slot 'label': count '1' but only 0 value\(s\) follow"),
    ("3 5 6", r"slot 'words': count '3' but only 2 value\(s\) follow"),
    ("99999999999999999999999 5", r"slot 'words': count '9+' but only 1 value\(s\) follow"),
    ("1 5 2 0.5 0.5 3 1 2", r"slot 'unused': count '3' but only 2 value\(s\) follow"),
    ("1 5x 2 0.5 0.5 0 1 1", r"slot 'words': value '5x' is not a valid uint64"),
    ("1 -5 2 0.5 0.5 0 1 1", r"slot 'words': negative id '-5'; uint64 ids are 0 to 2\^63-1"),
    ("1 -x 2 0.5 0.5 0 1 1", r"slot 'words': value '-x' is not a valid uint64"),
    ("1 9223372036854775808 2 0.5 0.5 0 1 1",
     r"slot 'words': id '9223372036854775808' is above 2\^63-1, the largest id an int64"),
    ("1 18446744073709551616 2 0.5 0.5 0 1 1", r"slot 'words': id '18446744073709551616' is "
                                               r"above 2\^63-1"),
    ("1 5 2 0.5 nan 0 1 1", r"slot 'dense': value 'nan' is not a finite float32 \(nan, inf, "
                            r"or beyond \+-3.4e38\); allow_nonfinite=True"),
    ("1 5 2 -Infinity 0.5 0 1 1", r"slot 'dense': value '-Infinity' is not a finite float32"),
    ("1 5 2 1e400 0.5 0 1 1", r"slot 'dense': value '1e400' is not a finite float32"),
    ("1 5 2 0.5 -1e39 0 1 1", r"slot 'dense': value '-1e39' is not a finite float32"),
    ("1 5 2 0.5 3.4028235677973366e38 0 1 1", r"slot 'dense': value '3.4028235677973366e38' "
                                              r"is not a finite float32"),
    ("1 5 2 0.5 abc 0 1 1", r"slot 'dense': value 'abc' is not a valid float"),
    ("1 5 2 0.5 0x1p3 0 1 1", r"slot 'dense': value '0x1p3' is not a valid float"),
    ("1 5 2 0.5 1_0 0 1 1", r"slot 'dense': value '1_0' is not a valid float"),
    ("1 5 2 0.5 1e 0 1 1", r"slot 'dense': value '1e' is not a valid float"),
    ("1 5 2 0.5 0.5 0 1 1 7 8", r"2 extra token\(s\) after the last slot, starting with '7'"),
    ("1 5 3 0.5 0.5 0.5 0 1 1", r"dense slot 'dense' has 3 value\(s\) where 2 are expected "
                                r"\(from its shape\)"),
    ("1 5 2 0.5 0.5 0 2 1 1", r"dense slot 'label' has 2 value\(s\) where 1 are expected"),
]
GOOD = "2 1 2 2 0.5 0.5 1 xyz 1 1"


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("line, fault", MALFORMED)
def test_malformed_line_names_file_line_and_fault(tmp_path, desc, backend, line, fault):
    path = _write(tmp_path, "bad.txt", f"{GOOD}\n\n{line}\n{GOOD}\n")
    with pytest.raises(DataError, match=f"^{path}:3: {fault}") as e:
        _read(desc, [path], backend=backend)
    assert e.value.path == path and e.value.line == 3


@pytest.mark.parametrize("backend", BACKENDS)
def test_line_numbers_count_across_chunks_and_files(tmp_path, desc, backend):
    good = _write(tmp_path, "good.txt", "\n".join([GOOD] * 30) + "\n")
    bad = _write(tmp_path, "bad.txt", "\n".join([GOOD] * 57 + ["1 5 2 oops 0.5 0 1 1"]) + "\n")
    with pytest.raises(DataError, match=r"bad.txt:58: slot 'dense': value 'oops'"):
        _read(desc, [good, bad], chunk_size=100, backend=backend)


@pytest.mark.parametrize("backend", BACKENDS)
def test_skip_bad_lines_skips_and_counts(tmp_path, desc, backend):
    lines = [GOOD.replace(" 1 1", f" 1 {i % 2}") for i in range(20)]
    for k, (bad, _) in zip(range(1, 20, 3), MALFORMED):
        lines[k] = bad
    path = _write(tmp_path, "mixed.txt", "\n".join(lines) + "\n")
    reader = MultiSlotReader(desc, [path], batch_size=4, skip_bad_lines=True, chunk_size=64,
                             backend=backend)
    with pytest.warns(DataWarning, match=r"skipped 7 malformed line\(s\); the first: "
                                         r".*mixed.txt:2: slot 'unused': count missing"):
        batches = list(reader)
    assert reader.skipped_lines == 7 and reader.examples == 13
    labels = np.concatenate([b["label"].numpy()[:, 0] for b in batches]).tolist()
    assert labels == [i % 2 for i in range(20) if i not in range(1, 20, 3)]
    with warnings.catch_warnings():  # a clean file: no warning, nothing skipped
        warnings.simplefilter("error")
        clean = _write(tmp_path, "clean.txt", GOOD + "\n")
        reader = MultiSlotReader(desc, [clean], skip_bad_lines=True, backend=backend)
        assert len(list(reader)) == 1 and reader.skipped_lines == 0


BLANKS = ["", "   ", "\t \x0b\x0c", "\r"]  # empty, spaces, tab/vt/ff, a CRLF line's "\r"


@pytest.mark.parametrize("chunk_size", [64, multislot.CHUNK_SIZE])
def test_blank_lines_are_counted_and_named_in_the_warning(tmp_path, desc, chunk_size):
    lines = []
    for i in range(12):
        lines.append(GOOD)
        if i % 3 == 1:
            lines.append(BLANKS[i % len(BLANKS)])
    lines += ["", ""]                              # two at the end, before the last newline
    path = _write(tmp_path, "gaps.txt", "\n".join(lines) + "\n")
    first = next(i for i, ln in enumerate(lines) if not ln.split()) + 1
    got = {}
    for backend in BACKENDS:
        reader = MultiSlotReader(desc, [path], batch_size=5, chunk_size=chunk_size,
                                 backend=backend)
        with pytest.warns(DataWarning) as caught:
            batches = list(reader)
        (w,) = [str(c.message) for c in caught]
        assert w == f"MultiSlotReader skipped 6 blank line(s); the first: {path}:{first}"
        assert reader.blank_lines == 6 and reader.skipped_lines == 0
        assert reader.examples == 12
        got[backend] = (_plain(batches), [b.origin for b in batches])
    assert got["c"][1] == got["python"][1]           # the same lines, the same origins
    _assert_same(got["c"][0], got["python"][0])


@pytest.mark.parametrize("backend", BACKENDS)
def test_blank_and_malformed_lines_share_one_warning(tmp_path, desc, backend):
    path = _write(tmp_path, "both.txt", "\n".join([GOOD, "", "1 5 2 0.5 0.5", "  ", GOOD]))
    reader = MultiSlotReader(desc, [path], skip_bad_lines=True, backend=backend)
    with pytest.warns(DataWarning, match=r"skipped 1 malformed line\(s\); the first: .*"
                                         r"both.txt:3: .*; and 2 blank line\(s\); the first: "
                                         r".*both.txt:2$"):
        list(reader)
    assert (reader.skipped_lines, reader.blank_lines, reader.examples) == (1, 2, 2)
    # without skip_bad_lines the malformed line still stops the read, naming its line
    with pytest.raises(DataError, match=r"both.txt:3: slot 'unused'"):
        _read(desc, [path], backend=backend)


def test_reader_errors(tmp_path, desc):
    with pytest.raises(DataError, match="cannot open data file .*nope.txt"):
        _read(desc, [str(tmp_path / "nope.txt")])
    unused = DataFeedDesc.from_text('multi_slot_desc { slots { name: "a" type: "float" } }')
    with pytest.raises(DataError, match=r"uses no slot.*\['a'\]"):
        MultiSlotReader(unused, [])
    with pytest.raises(DataError, match="backend must be"):
        MultiSlotReader(desc, [], backend="fortran")
    assert _read(desc, [_write(tmp_path, "empty.txt", "")]) == []


@pytest.mark.parametrize("cc", ["/nonexistent/cc", "false"])
def test_compile_failure_falls_back_to_python(tmp_path, desc, monkeypatch, cc):
    path = _write(tmp_path, "a.txt", GOOD + "\n" + GOOD + "\n")
    want = _plain(_read(desc, [path], backend="c"))
    monkeypatch.setenv("CC", cc)
    monkeypatch.setenv("FLUIDITY_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(multislot, "_c_parser", None)
    with pytest.warns(DataWarning, match="using the pure-Python MultiSlot parser"):
        reader = MultiSlotReader(desc, [path])
    assert reader.backend == "python"
    _assert_same(_plain(list(reader)), want)
    with warnings.catch_warnings():  # warned once per process, not per reader
        warnings.simplefilter("error")
        assert MultiSlotReader(desc, [path]).backend == "python"
    with pytest.raises(DataError, match="C compiler|failed to compile"):
        MultiSlotReader(desc, [path], backend="c")


def test_parser_is_built_into_the_cache_dir_by_hash(tmp_path, monkeypatch):
    monkeypatch.setenv("FLUIDITY_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv("CC", raising=False)
    monkeypatch.setattr(multislot, "_c_parser", None)
    multislot.c_parser()
    (lib,) = [f for f in os.listdir(tmp_path / "native") if f.endswith(".so")]
    assert lib.startswith("multislot_parser-")


def test_generator_is_deterministic_and_its_files_parse(tmp_path):
    a = generate.generate_ctr(str(tmp_path / "a"), 3000, files=2, seed=5)
    b = generate.generate_ctr(str(tmp_path / "b"), 3000, files=1, seed=5)
    text_a = b"".join(open(f, "rb").read() for f in a["files"])
    assert text_a == open(b["files"][0], "rb").read()  # same lines, whatever the split
    assert open(a["model"]).read() == open(b["model"]).read()
    c = generate.generate_ctr(str(tmp_path / "c"), 3000, seed=6)
    assert open(c["files"][0], "rb").read() != text_a
    first = text_a.split(b"\n")[0].split()
    assert len(first) == 1 + 13 + 2 * 26 + 2 and first[0] == b"13"
    assert 0 < a["optimal_logloss"] < a["base_logloss"]

    model = json.load(open(a["model"]))
    reader = MultiSlotReader(a["desc"], a["files"], batch_size=512)
    batches = list(reader)
    assert reader.examples == 3000 and set(batches[0]) == {"dense_input", "click"} | {
        f"C{i}" for i in range(1, 27)}
    assert batches[0]["dense_input"].numpy().shape == (512, 13)
    assert batches[0]["click"].numpy().shape == (512, 1)
    assert batches[0]["C1"].lod() == [list(range(513))]
    assert max(int(b["C7"].numpy().max()) for b in batches) < model["vocab"]
    ev = generate.evaluate_model(a["model"], a["files"])
    assert ev["lines"] == 3000
    assert ev["optimal_logloss"] == pytest.approx(a["optimal_logloss"], rel=1e-9)
    assert ev["realized_logloss"] == pytest.approx(a["realized_logloss"], rel=1e-9)


def test_generator_held_out_split_shares_the_model(tmp_path):
    train = generate.generate_ctr(str(tmp_path), 500, seed=1)
    test = generate.generate_ctr(str(tmp_path), 500, seed=1, prefix="test")
    assert sorted(glob.glob(str(tmp_path / "test-*"))) == test["files"]
    assert open(train["files"][0]).read() != open(test["files"][0]).read()
    ev = generate.evaluate_model(test["model"], test["files"])
    assert ev["optimal_logloss"] == pytest.approx(test["optimal_logloss"], rel=1e-9)


# --- values checked, the option that keeps non-finite floats, batch origins --------------
NONFINITE = ["nan", "-NaN", "inf", "-inf", "Infinity", "1e400", "1e39", "-3.4028235677973366e38"]


@pytest.mark.parametrize("backend", BACKENDS)
def test_nonfinite_floats_are_kept_only_when_allowed(tmp_path, desc, backend):
    lines = [f"1 5 2 0.5 {tok} 0 1 1" for tok in NONFINITE]
    path = _write(tmp_path, "nf.txt", "\n".join(lines) + "\n")
    with pytest.raises(DataError, match=r"nf.txt:1: slot 'dense': value 'nan' is not a finite"):
        _read(desc, [path], backend=backend)
    kept = _read(desc, [path], backend=backend, batch_size=100, allow_nonfinite=True)
    got = kept[0]["dense"].numpy()[:, 1]
    assert np.isnan(got[:2]).all() and np.isinf(got[2:]).all()
    desc.allow_nonfinite = True        # the desc's setting, which AsyncExecutor's readers take
    assert len(_read(desc, [path], backend=backend, batch_size=100)[0]["dense"].numpy()) == 8
    with pytest.warns(DataWarning, match=r"skipped 8 malformed line\(s\)"):
        assert _read(desc, [path], backend=backend, allow_nonfinite=False,
                     skip_bad_lines=True, batch_size=100) == []


def test_float32_overflow_threshold_is_the_same_in_both_parsers(tmp_path):
    d = DataFeedDesc.from_text('multi_slot_desc { slots { name: "x" type: "float" '
                               'is_used: true } }')
    edge = [3.4028235677973366e38, 3.4028235677973362e38, 3.4028234663852886e38]
    for tok in [repr(v) for v in edge] + [repr(-v) for v in edge]:
        path = _write(tmp_path, "e.txt", f"1 {tok}\n")
        got = []
        for backend in BACKENDS:
            try:
                got.append(float(_read(d, [path], backend=backend)[0]["x"].numpy()[0, 0]))
            except DataError as e:
                got.append(str(e).split(": ", 1)[1])
        assert got[0] == got[1], (tok, got)
        with np.errstate(over="ignore"):
            finite = np.isfinite(np.float32(float(tok)))
        assert isinstance(got[0], float) == finite, (tok, got)


@pytest.mark.filterwarnings("ignore:MultiSlotReader skipped:UserWarning")  # blank lines
@pytest.mark.parametrize("backend", BACKENDS)
def test_batches_name_their_file_and_lines(tmp_path, desc, backend):
    lines = [GOOD.replace(" 1 1", f" 1 {i % 2}") for i in range(5)]
    f1 = _write(tmp_path, "1.txt", "\n".join(lines[:3]) + "\n\n")   # an empty line 4
    f2 = _write(tmp_path, "2.txt", "\n" + "\n".join(lines[3:]) + "\n")
    reader = MultiSlotReader(desc, [f1, f2], batch_size=2, chunk_size=30, backend=backend)
    origins = [b.origin for b in reader]
    assert origins == [((f1, 1, 2),), ((f1, 3, 3), (f2, 2, 2)), ((f2, 3, 3),)]
    assert origins[1][0].path == f1 and origins[1][1].first_line == 2
    for chunk, dense_dim in reader.chunks():   # the compiled worker loop's view of it
        assert chunk.origin(0, chunk.n).path == chunk.path
        assert reader.chunk_batch(chunk, 0, chunk.n, dense_dim).origin == (
            chunk.origin(0, chunk.n),)
    import pickle
    b = next(iter(reader))
    assert pickle.loads(pickle.dumps(b)).origin == b.origin


def test_ids_up_to_int64_max_are_read_exactly(tmp_path, desc):
    path = _write(tmp_path, "ids.txt", "2 0 9223372036854775807 2 1 1 0 1 1\n")
    for backend in BACKENDS:
        (b,) = _read(desc, [path], backend=backend)
        assert b["words"].numpy()[:, 0].tolist() == [0, 2**63 - 1]
