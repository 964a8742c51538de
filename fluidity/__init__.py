"""Fluidity: a PaddlePaddle-Fluid-style deep-learning framework. `import fluidity as fluid`."""
from .core import log as _log
_log.configure_from_env()       # FLUIDITY_LOG_LEVEL (core/log.py)
from . import backward, clip, core, errors, initializer, layers, ops, optimizer  # noqa: F401
from . import compiler, io, regularizer, unique_name  # noqa: F401
from .backward import append_backward, gradients
from .clip import set_gradient_clip
from .core import (CPUPlace, CUDAPlace, LoDTensor, LoDTensorArray, Scope, SelectedRows,
                   Tensor, create_lod_tensor, global_scope, scope_guard)
from .core.dtypes import VarType
from .errors import FluidityError
from .datafeed import DataFeedDesc
from .compiler import BuildStrategy, CompiledProgram
from .executor import ExecutionStrategy, Executor
from .executor.async_executor import AsyncExecutor
from .transpiler.memory_optimization import memory_optimize, release_memory
from .framework import (Block, Operator, Parameter, Program, Variable, default_main_program,
                        default_startup_program, device_guard, name_scope, program_guard)
from .param_attr import ParamAttr

__version__ = "0.1.0"

# Fluid 1.x's top-level names for places and modes, fluid.data, data-parallel running,
# metrics, the install check and the transpiler (h4-api).
from . import evaluator, install_check, metrics, transpiler  # noqa: F401,E402
from .compiler import ParallelExecutor  # noqa: E402
from .core import (CUDAPinnedPlace, create_random_int_lodtensor,  # noqa: E402
                   is_compiled_with_cuda)
from .framework import (cpu_places, cuda_pinned_places, cuda_places,  # noqa: E402
                        in_dygraph_mode, load_op_library, require_version)
from .layers.input import data, embedding, one_hot  # noqa: E402
from . import input  # noqa: E402,F401  (fluid.input.one_hot / embedding, Fluid 1.8's module)
from .param_attr import WeightNormParamAttr  # noqa: E402
from .transpiler import DistributeTranspiler, DistributeTranspilerConfig  # noqa: E402
from .transpiler import distribute_transpiler as _dist_t  # noqa: E402
from .framework import default_main_program as _dmp, default_startup_program as _dsp  # noqa: E402
_dist_t.default_programs = lambda: (_dmp(), _dsp())
from . import distributed  # noqa: F401,E402  (registers the RPC ops' run-time services)

# h6-book: DataFeeder, fluid.nets, paddle.reader's decorators and batch
from . import nets, reader  # noqa: F401
from .data_feeder import DataFeeder
from .reader import batch

# readers, datasets (fluid.io.DataLoader lives in io)
from . import reader  # noqa: E402,F401
from .dataset import DatasetFactory  # noqa: E402,F401
from .dataset import FileInstantDataset, InMemoryDataset, QueueDataset  # noqa: E402,F401
# Paddle's fluid.core.Dataset (the runtime object behind a Dataset) and fluid.core.Fleet (its
# parameter-server wrapper) live above core; core names them here
from .datafeed.dataset_core import Dataset as _CoreDataset  # noqa: E402
from .incubate.fleet.parameter_server.pslib.fleet_wrapper import FleetWrapper as _Fleet  # noqa: E402
core.Dataset, core.Fleet = _CoreDataset, _Fleet
from .executor.core_executor import CoreExecutor as _CoreExecutor  # noqa: E402
core.Executor = _CoreExecutor   # Fluid's binding under fluid.Executor
# Fluid's TrainerDesc builders: fluid.trainer_desc, fluid.device_worker, fluid.trainer_factory
from . import device_worker, trainer_desc, trainer_factory  # noqa: E402,F401

# the profiler and global flags (FLAGS_check_nan_inf)
from . import average, profiler  # noqa: E402,F401
from .core.flags import get_flags, set_flags  # noqa: E402,F401

# Fluid 1.8's top-level fluid.save / fluid.load: the same functions as fluid.io.save / load
from .io import load, save  # noqa: E402,F401

# fluid.op (ops made and run alone from their protos) and the op questions of fluid.core
from . import op  # noqa: E402
op.install_core_names(core)
from . import inference_api  # noqa: E402  (Paddle's inference API, on fluid.core as Paddle's)
for _n in ("PaddleTensor", "PaddleBuf", "PaddleDType", "NativeConfig", "AnalysisConfig"):
    setattr(core, _n, getattr(inference_api, _n))
from . import dygraph  # noqa: E402,F401  (the eager mode OpTest's dygraph checks run in)
# Fluid 1.8's Layer classes at the top level too (fluid.Linear, fluid.LayerNorm, fluid.Layer)
from .dygraph.nn import *  # noqa: E402,F401,F403
from .dygraph.layers import Layer  # noqa: E402,F401

# fluid.debugger / fluid.graphviz (drawing programs), fluid.default_scope_funcs
from . import debugger, default_scope_funcs, graphviz, wrapped_decorator  # noqa: E402,F401

# fluid.contrib: basic_lstm / basic_gru and the 1.0-1.5 beam search decoder
from . import contrib  # noqa: E402,F401
