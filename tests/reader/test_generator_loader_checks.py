"""`fluid.reader.GeneratorLoader._check_input_array`: a batch field is a regular array;
ragged data is a TypeError advising a LoDTensor, as in Fluid (also from a batch
generator); and `python -m fluidity.reader` runs."""
import subprocess
import sys

import numpy as np
import pytest

import fluidity as fluid


def test_check_input_array():
    arr = fluid.reader.GeneratorLoader._check_input_array([np.arange(2), np.arange(2)])
    assert arr.shape == (2, 2)
    with pytest.raises(TypeError, match="create_lod_tensor"):
        fluid.reader.GeneratorLoader._check_input_array([np.arange(2), np.arange(3)])


def test_a_ragged_batch_from_a_generator_is_a_type_error():
    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()):
        x = fluid.data("x", [-1, 2], dtype="int64")
        loader = fluid.io.DataLoader.from_generator(feed_list=[x], capacity=2, iterable=True)
    loader.set_batch_generator(lambda: iter([[[[1, 2], [3]]]]), fluid.CPUPlace())
    with pytest.raises(TypeError, match="regular ndarray"):
        for _ in loader():
            pass


def test_reader_runs_as_a_module():
    subprocess.run([sys.executable, "-m", "fluidity.reader"], check=True, timeout=120)


def test_a_loaders_queue_tells_its_size_and_capacity_as_paddles():
    """PaddleRec's word2vec prints `data_loader.queue.size()` as it trains."""
    import time
    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()):
        x = fluid.data("x", [-1, 2], dtype="int64")
        loader = fluid.io.DataLoader.from_generator(feed_list=[x], capacity=4, iterable=True)
    loader.set_batch_generator(lambda: iter([[np.ones((1, 2), "int64")]] * 6),
                               fluid.CPUPlace())
    it = iter(loader())
    next(it)
    deadline = time.monotonic() + 30
    while loader.queue.size() < 2 and time.monotonic() < deadline:   # the feeder fills it
        time.sleep(0.01)
    assert loader.queue.capacity() == 4 and 2 <= loader.queue.size() <= 4
    assert sum(1 for _ in it) == 5 and loader.queue.size() == 0
