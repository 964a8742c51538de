"""Paddle's Python inference API (`fluid.core.PaddleTensor`, `PaddleBuf`, `PaddleDType`,
`NativeConfig`, `AnalysisConfig`) over the Executor.

    config = fluid.core.NativeConfig()
    config.model_dir = "model_dir"                    # what save_inference_model wrote
    compiled = fluid.CompiledProgram(program)._with_inference_optimize(config)
    outs = exe.run(compiled, feed=[PaddleTensor(...), ...])   # one tensor per feed target
    outs[0].data.float_data()

A predictor's inputs are positional: the i-th PaddleTensor feeds the program's i-th feed
target (its feed op with `col` i), as Paddle's NativePredictor reads them; the outputs are the
fetch targets in `col` order, as PaddleTensors holding copies of the values. The tensors are
plain data holders: no device memory, no zero-copy (Paddle's `ZeroCopyTensor` is not here).
"""
import enum

import numpy as np

from .core.tensor import LoDTensor
from .errors import ArgumentTypeError, FeedError


class PaddleDType(enum.IntEnum):
    """Element types of a PaddleTensor (Paddle's values)."""
    FLOAT32 = 0
    INT64 = 1
    INT32 = 2
    UINT8 = 3


_NUMPY = {PaddleDType.FLOAT32: np.float32, PaddleDType.INT64: np.int64,
          PaddleDType.INT32: np.int32, PaddleDType.UINT8: np.uint8}
_DTYPE_OF = {np.dtype(v): k for k, v in _NUMPY.items()}


class PaddleBuf:
    """A flat buffer of a PaddleTensor's elements: made from an ndarray or a list."""

    def __init__(self, data=None):
        self._array = np.zeros(0, np.float32) if data is None else \
            np.ascontiguousarray(np.asarray(data)).reshape(-1)

    def resize(self, length):
        self._array = np.resize(self._array, int(length))

    def length(self):
        return int(self._array.nbytes)

    def empty(self):
        return self._array.size == 0

    def float_data(self):
        return self._array.astype(np.float32).tolist()

    def int64_data(self):
        return self._array.astype(np.int64).tolist()

    def int32_data(self):
        return self._array.astype(np.int32).tolist()

    def tolist(self):
        return self._array.tolist()

    def as_ndarray(self):
        return self._array


class PaddleTensor:
    """One input or output of a predictor: name, shape, data (a PaddleBuf), lod, dtype."""

    def __init__(self, data=None, name="", lod=None, dtype=None):
        self.name = name
        self.lod = [list(level) for level in lod] if lod else []
        if data is None:
            self.data, self.shape = PaddleBuf(), []
            self.dtype = PaddleDType.FLOAT32 if dtype is None else PaddleDType(dtype)
        else:
            arr = np.asarray(data)
            self.data, self.shape = PaddleBuf(arr), list(arr.shape)
            self.dtype = _DTYPE_OF.get(arr.dtype, PaddleDType.FLOAT32) if dtype is None \
                else PaddleDType(dtype)

    def as_ndarray(self):
        """The data as an ndarray of `shape` and `dtype`; FeedError naming the tensor when
        they do not fit the buffer (a caller's shape is not trusted)."""
        shape = [int(d) for d in self.shape]
        data = self.data.as_ndarray()
        if any(d < 0 for d in shape) or int(np.prod(shape, dtype=object)) != data.size:
            raise FeedError(f"PaddleTensor {self.name!r}: shape {shape} does not hold the "
                            f"{data.size} elements of its data")
        return data.astype(_NUMPY[PaddleDType(self.dtype)], copy=False).reshape(shape)


class NativeConfig:
    """Paddle's NativeConfig: where the model is and which device (the executor's place is
    what runs it here; the GPU fields are kept for programs that set them)."""

    def __init__(self):
        self.model_dir = ""
        self.prog_file = ""
        self.param_file = ""
        self.use_gpu = False
        self.device = 0
        self.fraction_of_gpu_memory = 0.0
        self.specify_input_name = False


class AnalysisConfig(NativeConfig):
    """Paddle's AnalysisConfig, as far as a program run on the Executor uses it."""

    def __init__(self, model_dir=None, params_file=None):
        super().__init__()
        if params_file is not None:
            self.prog_file, self.param_file = model_dir or "", params_file
        else:
            self.model_dir = model_dir or ""

    def set_model(self, model_dir, params_file=None):
        self.__init__(model_dir, params_file)

    def disable_gpu(self):
        self.use_gpu = False

    def switch_ir_optim(self, on=True):
        self.ir_optim = bool(on)


def targets(block, op_type, slot):
    """The variable names of a block's feed (slot "Out") or fetch (slot "X") ops, by `col`."""
    found = sorted((op.attr("col"), (op.output(slot) if op_type == "feed" else
                                    op.input(slot))[0])
                   for op in block.ops if op.type == op_type)
    return [name for _, name in found]


def run_inference(exe, program, inputs, scope=None, view=None):
    """Run inference `program` (what `exe.run` takes; `view`: its ProgramView, holding feed
    and fetch ops, when it is a CompiledProgram) on `inputs` (a list of PaddleTensors, one
    per feed target, in order); the fetch targets as PaddleTensors."""
    if not isinstance(inputs, (list, tuple)) or not all(
            isinstance(t, PaddleTensor) for t in inputs):
        raise ArgumentTypeError("an inference program (_with_inference_optimize) is fed a "
                                "list of fluid.core.PaddleTensor, one per feed target")
    block = (view if view is not None else program).global_block()
    feeds, fetches = targets(block, "feed", "Out"), targets(block, "fetch", "X")
    if not fetches:
        raise FeedError("the inference program has no fetch ops (load it with "
                        "fluid.io.load_inference_model, which keeps its feed and fetch "
                        "targets)")
    if len(inputs) != len(feeds):
        raise FeedError(f"the inference program has {len(feeds)} feed target(s) {feeds}, "
                        f"given {len(inputs)} PaddleTensor(s)")
    feed = {}
    for name, t in zip(feeds, inputs):
        value = LoDTensor(t.as_ndarray())
        if t.lod:
            value.set_lod(t.lod)
        feed[name] = value
    outs = exe.run(program, feed=feed, fetch_list=fetches, scope=scope, return_numpy=False)
    result = []
    for name, v in zip(fetches, outs):
        arr = np.array(v._array) if isinstance(v, LoDTensor) else np.asarray(v)
        result.append(PaddleTensor(arr, name=name, lod=v.lod() if isinstance(v, LoDTensor)
                                   else None))
    return result
