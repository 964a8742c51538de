"""Fluidity: a PaddlePaddle-Fluid-style deep-learning framework. `import fluidity as fluid`."""
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
                        default_startup_program, name_scope, program_guard)
from .param_attr import ParamAttr

__version__ = "0.1.0"

# readers, datasets (fluid.io.DataLoader lives in io)
from . import reader  # noqa: E402,F401
from .dataset import DatasetFactory  # noqa: E402,F401

# the profiler and global flags (FLAGS_check_nan_inf)
from . import profiler  # noqa: E402,F401
from .core.flags import get_flags, set_flags  # noqa: E402,F401
