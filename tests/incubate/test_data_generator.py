"""fluid.incubate.data_generator: Fluid 1.8's MultiSlot text, checked samples, and its use as
a Dataset's pipe_command (the output goes to the MultiSlot parser unchanged)."""
import io
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import fluidity as fluid
import fluidity.incubate.data_generator as dg
from fluidity.datafeed import MultiSlotReader
from fluidity.datafeed.data_feed_desc import DataFeedDesc


class Words(dg.MultiSlotDataGenerator):
    def generate_sample(self, line):
        def it():
            words = [int(w) for w in line.split()]
            yield [("words", words), ("label", [len(words) % 2])]
        return it


def _run(gen, text, monkeypatch):
    out = io.StringIO()
    monkeypatch.setattr(sys, "stdin", io.StringIO(text))
    monkeypatch.setattr(sys, "stdout", out)
    gen.run_from_stdin()
    return out.getvalue()


def test_multislot_lines_are_fluid_18s_text(monkeypatch):
    assert Words()._gen_str([("words", [1926, 8, 17]), ("label", [1])]) == "3 1926 8 17 1 1\n"
    assert _run(Words(), "1 2 3\n4\n", monkeypatch) == "3 1 2 3 1 1\n1 4 1 1\n"
    g = dg.MultiSlotDataGenerator()
    g._gen_str((("a", [1, 2]), ("b", [3])))
    assert g._proto_info == [("a", "uint64"), ("b", "uint64")]
    assert g._gen_str([("a", [1, 2.5]), ("b", [np.int64(4)])]) == "2 1 2.5 1 4\n"
    assert g._proto_info == [("a", "float"), ("b", "uint64")]     # a float makes it float
    s = dg.MultiSlotStringDataGenerator()
    assert s._gen_str([("words", ["1926", "08"]), ("label", ["1"])]) == "2 1926 08 1 1\n"


def test_a_zip_of_names_and_values_is_a_sample(monkeypatch):
    """PaddleRec's CTR-DNN generator (written for Python 2) yields zip(names, values)."""
    class Zipped(dg.MultiSlotDataGenerator):
        def generate_sample(self, line):
            def it():
                yield zip(["dense", "C1", "label"], [[0.5, 1.0], [int(line)], [1]])
            return it
    assert _run(Zipped(), "7\n", monkeypatch) == "2 0.5 1.0 1 7 1 1\n"
    s = dg.MultiSlotStringDataGenerator()
    assert s._gen_str(zip(["w"], [["a", "b"]])) == "2 a b\n"


@pytest.mark.parametrize("sample, match", [
    ("words 1", "list or tuple"),
    ([("words", [])], "can not be empty"),
    ([("words", (1, 2))], "must be in list type"),
    ([(3, [1])], "must be in str type"),
    ([("words", ["1"])], "must be in int or float"),
    ([("words", [True])], "must be in int or float"),
])
def test_bad_samples_are_refused(sample, match):
    with pytest.raises(ValueError, match=match):
        dg.MultiSlotDataGenerator()._gen_str(sample)


def test_later_samples_must_match_the_first():
    g = dg.MultiSlotDataGenerator()
    g._gen_str([("a", [1]), ("b", [2])])
    with pytest.raises(ValueError, match="inconsistent"):
        g._gen_str([("a", [1])])
    with pytest.raises(ValueError, match="require<b>, get<c>"):
        g._gen_str([("a", [1]), ("c", [2])])


def test_generate_batch_sees_set_batch_samples(monkeypatch):
    class Padded(Words):
        def generate_batch(self, samples):     # pad each batch's words to its longest
            def it():
                n = max(len(s[0][1]) for s in samples)
                for words, label in samples:
                    yield [("words", words[1] + [0] * (n - len(words[1]))), label]
            return it

    g = Padded()
    g.set_batch(2)
    out = _run(g, "1 2 3\n4\n5\n", monkeypatch)
    assert out == "3 1 2 3 1 1\n3 4 0 0 1 1\n1 5 1 1\n"
    with pytest.raises(ValueError):
        g.set_batch(0)


def test_run_from_memory_and_none_samples_skipped(monkeypatch):
    class Mem(dg.MultiSlotDataGenerator):
        def generate_sample(self, line):
            def it():
                for i in range(3):
                    yield None if i == 1 else (("x", [i + 1]),)
            return it
    out = io.StringIO()
    monkeypatch.setattr(sys, "stdout", out)
    Mem().run_from_memory()
    assert out.getvalue() == "1 1\n1 3\n"


GEN = textwrap.dedent("""
    import fluidity.incubate.data_generator as dg

    class Raw(dg.MultiSlotDataGenerator):
        def generate_sample(self, line):
            def it():
                label, a, b, *ids = line.split(",")
                yield [("dense", [float(a), float(b)]), ("ids", [int(i) for i in ids]),
                       ("label", [int(label)])]
            return it

    Raw().run_from_stdin()
""")


def test_generator_as_a_pipe_command_feeds_the_parser(tmp_path):
    script = tmp_path / "gen.py"
    script.write_text(GEN)
    raw = tmp_path / "raw.csv"
    raw.write_text("1,0.5,1.5,3,4\n0,2,3,7\n")
    out = subprocess.run([sys.executable, str(script)], stdin=open(raw), capture_output=True,
                         check=True).stdout
    assert out == b"2 0.5 1.5 2 3 4 1 1\n2 2.0 3.0 1 7 1 0\n"
    with fluid.program_guard(fluid.Program(), fluid.Program()):
        dense = fluid.layers.data("dense", [2])
        ids = fluid.layers.data("ids", [1], dtype="int64", lod_level=1)
        label = fluid.layers.data("label", [1], dtype="int64")
    ds = fluid.QueueDataset()
    ds.set_use_var([dense, ids, label])
    ds.set_filelist([str(raw)])
    ds.set_pipe_command(f"{sys.executable} {script}")
    (batch,) = list(ds.batches(drop_last=False))
    np.testing.assert_array_equal(np.asarray(batch["dense"]), [[0.5, 1.5], [2, 3]])
    assert batch["ids"].lod() == [[0, 2, 3]]
    assert np.asarray(batch["label"]).ravel().tolist() == [1, 0]
    # the same lines read from a file give the same batch
    f = tmp_path / "lines.txt"
    f.write_bytes(out)
    (same,) = list(MultiSlotReader(DataFeedDesc.from_text(ds.desc()), [str(f)]))
    for k in batch:
        np.testing.assert_array_equal(np.asarray(batch[k]), np.asarray(same[k]))
