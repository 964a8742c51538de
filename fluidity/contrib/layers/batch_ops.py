"""`fluid.contrib.layers` over rows of a batch: shuffle_batch (a seeded permutation of the
rows), partial_concat and partial_sum (one column window of several 2-D inputs,
concatenated or added). Paddle 1.8's signatures and programs."""
import warnings

import numpy as np

from ... import unique_name
from ...framework import Variable
from ...layer_helper import LayerHelper
from ...layers.checks import check_type, check_variable_and_dtype

__all__ = ["shuffle_batch", "partial_concat", "partial_sum"]


def shuffle_batch(x, seed=None):
    """Shuffle the rows of `x` (all dims but the last are rows). `seed`: an int start-up seed,
    a Variable holding the seed (int64 [1]), or None (the program's random_seed when set,
    else a random one). The seed lives in a persistable variable the op advances each run,
    so successive runs give different orders from one reproducible sequence."""
    helper = LayerHelper("shuffle_batch", x=x, seed=seed)
    check_variable_and_dtype(x, "x", ["float32", "float64", "int32", "int64"],
                             "shuffle_batch")
    out = helper.create_variable_for_type_inference(dtype=x.dtype)
    shuffle_idx = helper.create_variable_for_type_inference(dtype="int64")
    if seed is None and helper.main_program.random_seed != 0:
        seed = helper.main_program.random_seed
    if seed is None:
        seed = int(np.random.randint(-65536, 65535))
    attrs = {}
    if isinstance(seed, int):
        attrs["startup_seed"] = seed
        seed = helper.block().create_var(name=unique_name.generate("shuffle_batch_seed"),
                                         dtype="int64", shape=[1], persistable=True)
    elif not isinstance(seed, Variable):
        raise TypeError(f"shuffle_batch: 'seed' must be None, an int or a Variable, got "
                        f"{type(seed).__name__}")
    helper.append_op("shuffle_batch", inputs={"X": x, "Seed": seed},
                     outputs={"Out": out, "ShuffleIdx": shuffle_idx, "SeedOut": seed},
                     attrs=attrs)
    return out


def _partial(op, input, start_index, length, dtypes):
    if not isinstance(input, list):
        warnings.warn(f"The type of input in {op} should be list, but received "
                      f"{type(input)}.")
        input = [input]
    for i, x in enumerate(input):
        check_variable_and_dtype(x, f"input[{i}]", dtypes, op)
    check_type(start_index, "start_index", int, op)
    check_type(length, "length", int, op)
    helper = LayerHelper(op, input=input)
    out = helper.create_variable_for_type_inference(dtype=helper.input_dtype())
    helper.append_op(op, inputs={"X": input}, outputs={"Out": [out]},
                     attrs={"start_index": start_index, "length": length})
    return out


def partial_concat(input, start_index=0, length=-1):
    """Concatenate columns [start_index, start_index + length) of each 2-D input (length -1:
    to the end; a negative start_index counts from the end)."""
    return _partial("partial_concat", input, start_index, length,
                    ["float16", "float32", "float64", "int32", "int64"])


def partial_sum(input, start_index=0, length=-1):
    """Add columns [start_index, start_index + length) of the 2-D inputs (length -1: to the
    end)."""
    return _partial("partial_sum", input, start_index, length,
                    ["float32", "float64", "int32", "int64"])
