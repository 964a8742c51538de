"""Where a batch came from: a batch's `origin` (MultiSlotReader yields Batch dicts) and a parsed chunk's origin()
give the file lines of its examples, counting empty and skipped lines, across chunks and
files, with either parser (errors about a batch name these lines)."""
import warnings

import pytest

from fluidity.datafeed import DataFeedDesc, MultiSlotReader
from fluidity.datafeed.multislot import describe_origin

DESC = """\
name: "MultiSlotDataFeed"
batch_size: 3
multi_slot_desc {
  slots { name: "words" type: "uint64" is_used: true }
  slots { name: "label" type: "uint64" is_dense: true is_used: true }
}
"""


def _file(tmp_path, name, lines):
    path = tmp_path / name
    path.write_text("\n".join(lines) + "\n")
    return str(path)


def _good(i):
    return f"2 {i} {i + 1} 1 {i % 2}"


@pytest.mark.parametrize("backend", ["c", "python"])
@pytest.mark.parametrize("chunk_size", [1 << 20, 40])
def test_batch_origin_counts_empty_and_skipped_lines(tmp_path, backend, chunk_size):
    # lines 1-2 good, 3 empty, 4 bad (skipped), 5-7 good, 8 blank; b.txt: 1-2 good
    a = _file(tmp_path, "a.txt", [_good(1), _good(2), "", "2 x 1 1 0", _good(5), _good(6),
                                  _good(7), "   "])
    b = _file(tmp_path, "b.txt", [_good(10), _good(11)])
    reader = MultiSlotReader(DataFeedDesc.from_text(DESC), [a, b], skip_bad_lines=True,
                             backend=backend, chunk_size=chunk_size)
    origins = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for batch in reader:
            origins.append([tuple(o) for o in batch.origin])
    assert origins == [[(a, 1, 5)], [(a, 6, 7), (b, 1, 1)], [(b, 2, 2)]]
    assert describe_origin([(a, 6, 8), (b, 1, 1)]) == f"{a}:6-8, {b}:1"


@pytest.mark.filterwarnings("ignore:MultiSlotReader skipped:UserWarning")  # blank lines
@pytest.mark.parametrize("backend", ["c", "python"])
def test_chunk_origin_of_any_example_range(tmp_path, backend):
    a = _file(tmp_path, "a.txt", ["", _good(2), _good(3), "", "", _good(6)])
    reader = MultiSlotReader(DataFeedDesc.from_text(DESC), [a], backend=backend)
    (chunk, _), = list(reader.chunks())
    assert chunk.n == 3
    assert [chunk.origin(i, i + 1) for i in range(3)] == [(a, 2, 2), (a, 3, 3), (a, 6, 6)]
    assert chunk.origin(0, 3) == (a, 2, 6)
