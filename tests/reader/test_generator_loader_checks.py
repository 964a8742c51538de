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
