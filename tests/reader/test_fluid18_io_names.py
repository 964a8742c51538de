"""Fluid 1.8's names: fluid.save / fluid.load, fluid.io's reader decorators, and
PyReader.decorate_sample_generator(sample_generator, ...) / PyReader.next()."""
import numpy as np
import pytest

import fluidity as fluid
from fluidity.reader import decorator


def test_top_level_save_load_round_trip(tmp_path):
    assert fluid.save is fluid.io.save and fluid.load is fluid.io.load
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        x = fluid.data("x", [2, 3], "float32")
        fluid.layers.fc(x, 4)
    exe = fluid.Executor(fluid.CPUPlace())
    exe.run(startup)
    w = main.global_block().all_parameters()[0].name
    before = np.array(fluid.global_scope().find_var(w).get_tensor())
    fluid.save(main, str(tmp_path / "model"))
    fluid.global_scope().find_var(w).get_tensor().set(np.zeros_like(before), fluid.CPUPlace())
    fluid.load(main, str(tmp_path / "model"), exe)
    np.testing.assert_array_equal(np.array(fluid.global_scope().find_var(w).get_tensor()),
                                  before)


@pytest.mark.parametrize("name", ["batch", "shuffle", "buffered", "cache", "chain", "compose",
                                  "firstn", "map_readers", "xmap_readers",
                                  "multiprocess_reader"])
def test_io_reader_decorators_are_paddle_readers(name):
    assert getattr(fluid.io, name) is getattr(decorator, name)


def test_io_batch_and_shuffle_as_a_user_writes_them():
    samples = lambda: iter(range(10))  # noqa: E731
    batches = list(fluid.io.batch(fluid.io.shuffle(samples, 4), 3, drop_last=True)())
    assert [len(b) for b in batches] == [3, 3, 3]
    flat = sum(batches, [])
    assert len(set(flat)) == 9 and set(flat) <= set(range(10))


def _reader_program():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        x = fluid.layers.data("x", [3])
        reader = fluid.io.PyReader(feed_list=[x], capacity=2, iterable=True)
        s = fluid.layers.reduce_sum(x)
    return main, reader, s


def test_pyreader_decorate_sample_generator_keyword_and_next():
    main, reader, s = _reader_program()
    samples = [(np.full(3, i, "float32"),) for i in range(5)]
    reader.decorate_sample_generator(sample_generator=lambda: iter(samples), batch_size=2,
                                     drop_last=True)
    exe = fluid.Executor(fluid.CPUPlace())
    sums = []
    for _ in range(2):
        sums.append(float(exe.run(main, feed=reader.next(), fetch_list=[s])[0]))
    with pytest.raises(StopIteration):
        reader.next()
    assert sums == [3.0, 15.0]          # samples 0,1 then 2,3; the short last one dropped
    # a new pass starts after the last one ended
    assert float(exe.run(main, feed=next(reader), fetch_list=[s])[0]) == 3.0
