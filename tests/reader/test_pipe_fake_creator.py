"""paddle.reader.PipeReader, Fake and creator (np_array, text_file; recordio declined)."""
import gzip
import sys

import numpy as np
import pytest

import fluidity as fluid
from fluidity import reader


def test_pipe_reader_lines_plain_and_gzip(tmp_path):
    text = "".join(f"line {i}\n" for i in range(1000)) + "last without newline"
    plain = tmp_path / "a.txt"
    plain.write_text(text)
    lines = list(reader.PipeReader(f"cat {plain}", bufsize=7).get_line())
    assert lines == [f"line {i}" for i in range(1000)] + ["last without newline"]
    gz = tmp_path / "a.txt.gz"
    gz.write_bytes(gzip.compress(text.encode()))
    assert list(reader.PipeReader(f"cat {gz}", bufsize=64, file_type="gzip").get_line()) \
        == lines
    chunks = list(reader.PipeReader(f"cat {plain}", bufsize=100).get_line(cut_lines=False))
    assert "".join(chunks) == text and max(len(c) for c in chunks) <= 100
    semis = list(reader.PipeReader(f"cat {plain}").get_line(line_break=" "))
    assert semis[:2] == ["line", "0\nline"]


def test_pipe_reader_feeds_batches_and_stops_early(tmp_path):
    cmd = f"{sys.executable} -c \"import sys; [print(i) for i in range(10 ** 7)]\""
    first = []
    for line in reader.PipeReader(cmd).get_line():      # left early: the command is killed
        first.append(int(line))
        if len(first) == 5:
            break
    assert first == [0, 1, 2, 3, 4]
    samples = lambda: (int(s) for s in reader.PipeReader("seq 1 10").get_line())  # noqa
    assert list(fluid.batch(samples, 4)()) == [[1, 2, 3, 4], [5, 6, 7, 8], [9, 10]]


def test_pipe_reader_errors(tmp_path):
    with pytest.raises(TypeError):
        reader.PipeReader(["cat", "x"])
    with pytest.raises(TypeError):
        reader.PipeReader("cat x", file_type="bz2")
    with pytest.raises(RuntimeError, match="exited with status"):
        list(reader.PipeReader(f"cat {tmp_path / 'nowhere'}").get_line())


def test_fake_repeats_the_first_sample():
    calls = []

    def real():
        calls.append(1)
        yield from ([i, i] for i in range(100))
    fake = reader.Fake()(real, 5)
    assert list(fake()) == [[0, 0]] * 5
    assert list(fake()) == [[0, 0]] * 5 and len(calls) == 1   # read once
    with pytest.raises(ValueError):
        reader.Fake()(real, -1)


def test_creator_np_array_and_text_file(tmp_path):
    x = np.arange(6).reshape(3, 2)
    rows = list(reader.creator.np_array(x)())
    assert len(rows) == 3 and all((r == x[i]).all() for i, r in enumerate(rows))
    assert list(reader.creator.np_array(np.float32(2.5))()) == [2.5]
    with pytest.raises(TypeError):
        reader.creator.np_array([1, 2])
    p = tmp_path / "t.txt"
    p.write_text("a b\nc\n\nd")
    assert list(reader.creator.text_file(str(p))()) == ["a b", "c", "", "d"]
    with pytest.raises(NotImplementedError, match="RecordIO"):
        reader.creator.recordio([str(p)])
