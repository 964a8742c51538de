"""Fluid's `fluid.compiler`: a program handed to the executor with a way to run it.

    compiled = fluid.CompiledProgram(main).with_native_code(feed=["x", "y"],
                                                            fetch_list=[loss])
    print(compiled.explain())          # which ops run as native code, which as Python, why
    exe.run(compiled, feed=..., fetch_list=[loss], scope=scope)

`with_native_code` runs the program's compilable ops as generated C++ (fluidity/codegen:
one native call per run of such ops, the rest as Python steps between them); results match
the interpreter's within float rounding. `with_data_parallel` runs it on the parallel
executor (independent ops at once on threads), `with_inference_optimize` on the linear one
(one memory arena). The program itself is never changed: the executor prepares, and
caches, a plan of the chosen kind per feed and fetch signature. `ParallelExecutor` is
Fluid's older face of `with_data_parallel`.
"""
import numpy as np

from .codegen.explain import explain_rows, format_explain
from .core.place import CPUPlace, CUDAPlace, Place, require_device
from .core.scope import global_scope
from .core.tensor import LoDTensor, create_lod_tensor
from .errors import DeviceError
from .executor import Executor
from .executor.executor import add_feed_fetch_ops
from .executor.strategy import ExecutionStrategy
from .framework import Program, Variable, cpu_places, default_main_program


class BuildStrategy:
    """Fluid's graph-building options (`fluid.BuildStrategy()`, its fields). Fluidity runs
    the program as its desc says, so the fusion and memory options change nothing here;
    they are kept so programs that set them run. Results do not depend on them in Fluid
    either; where Fluid's data parallelism splits a batch over devices, Fluidity runs the
    whole batch at once, which gives the same gradients (see CompiledProgram)."""

    class ReduceStrategy:
        AllReduce = 0
        Reduce = 1

    class GradientScaleStrategy:
        CoeffNumDevice = 0
        One = 1
        Customized = 2

    def __init__(self):
        self.reduce_strategy = BuildStrategy.ReduceStrategy.AllReduce
        self.gradient_scale_strategy = BuildStrategy.GradientScaleStrategy.CoeffNumDevice
        self.debug_graphviz_path = ""
        self.enable_sequential_execution = False
        self.fuse_elewise_add_act_ops = False
        self.fuse_relu_depthwise_conv = False
        self.fuse_broadcast_ops = False
        self.fuse_all_optimizer_ops = False
        self.fuse_all_reduce_ops = False
        self.enable_inplace = False
        self.memory_optimize = False
        self.sync_batch_norm = False
        self.num_trainers = 1
        self.trainer_id = 0
        self.remove_unnecessary_lock = True
        self.enable_backward_optimizer_op_deps = True
        self.cache_runtime_context = False
        self.mkldnn_enabled_op_types = set()
        self.is_distribution = False


def _names(xs):
    xs = [] if xs is None else (xs if isinstance(xs, (list, tuple)) else [xs])
    return [x.name if isinstance(x, Variable) else x for x in xs]


def _check_places(places, what):
    """The places of a data-parallel run: CPU ones, or CUDA ones that exist here (a
    DeviceError at once otherwise, core/place.py require_device); and whether they are
    CUDA places (the program then runs compiled on the device)."""
    if places is None:
        return None, False
    places = list(places) if isinstance(places, (list, tuple)) else [places]
    kinds = set()
    for p in places:
        if not isinstance(p, Place):
            raise TypeError(f"{what}: places must be Places, got {type(p).__name__}")
        kinds.add(require_device(p, what))
    if len(kinds) > 1:
        raise DeviceError(f"{what}: places mix the CPU and CUDA devices: {places}")
    return places, kinds != {"cpu"}


class CompiledProgram:
    """A program with a way to run it, handed to `Executor.run` in place of the program.

    - `with_data_parallel(loss_name, ...)`: Fluid runs one copy per device, each on a slice
      of the batch, and averages the gradients. Fluidity runs the whole batch once on the
      parallel executor (independent ops at once on `exec_strategy.num_threads` threads):
      with Fluid's default gradient scale (1 / devices) that is the same mean gradient, so
      training matches; a fetched loss is the batch's one value, where Fluid returns one per
      device (average them the same way: `np.mean`).
    - `with_inference_optimize(config)`: runs on the linear plan (a fixed op order and one
      memory arena, temporaries sharing memory), Fluidity's inference-optimised executor.
    - `with_native_code(feed, fetch_list)`: the compilable ops as generated C++.
    """

    def __init__(self, program_or_graph, build_strategy=None):
        if not isinstance(program_or_graph, Program):
            raise TypeError(f"CompiledProgram takes a Program, got "
                            f"{type(program_or_graph).__name__}")
        self._program = program_or_graph
        self._build_strategy = build_strategy or BuildStrategy()
        self.plan_strategy = None          # the executor's plan kind for this program
        self._feed, self._fetch = None, None
        self._loss_name = None
        self._places = None
        self._is_data_parallel = False
        self._is_inference = False

    def program_for_executor(self):
        return self._program

    def with_native_code(self, feed=None, fetch_list=None):
        """Run the program's compilable ops as native code. `feed` / `fetch_list` (names
        or Variables) are the signature `explain()` reports on; any signature runs."""
        self.plan_strategy = ExecutionStrategy("native")
        self._feed, self._fetch = _names(feed), _names(fetch_list)
        return self

    def with_data_parallel(self, loss_name=None, build_strategy=None, exec_strategy=None,
                           share_vars_from=None, places=None):
        """Run on the parallel executor: independent ops at once on threads
        (`exec_strategy.num_threads`, 0 or unset: 2). `loss_name` names the loss (a
        Variable's name is taken too); `share_vars_from` (another data-parallel
        CompiledProgram, e.g. the training one for a test program) is accepted: parameters
        live in the scope both run in, so they are shared already."""
        if self._is_data_parallel:
            raise ValueError("with_data_parallel: this program is already data parallel")
        if self._is_inference:
            raise ValueError("with_data_parallel: this program is already set up for "
                             "inference (with_inference_optimize)")
        if share_vars_from is not None and not isinstance(share_vars_from, CompiledProgram):
            raise TypeError(f"with_data_parallel: share_vars_from must be a "
                            f"CompiledProgram, got {type(share_vars_from).__name__}")
        self._loss_name = _names(loss_name)[0] if loss_name is not None else None
        if self._loss_name is not None and \
                self._program.global_block().find_var_recursive(self._loss_name) is None:
            raise ValueError(f"with_data_parallel: loss '{self._loss_name}' is not a "
                             f"variable of the program")
        self._places, on_device = _check_places(places, "with_data_parallel")
        n = getattr(exec_strategy, "num_threads", 0) or 2
        # CUDA places: the whole batch runs compiled on the (first) device
        self.plan_strategy = ExecutionStrategy("cuda") if on_device else \
            ExecutionStrategy("parallel", num_threads=n)
        if build_strategy is not None:
            self._build_strategy = build_strategy
        self._is_data_parallel = True
        return self

    def join_device_feeds(self, feeds):
        """Fluid's data-parallel feed form, a list of one feed dict per device, as the one
        batch this program runs: each name's values joined along the batch dimension
        (LoD lengths carried). Executor.run calls it when given such a list."""
        if not self._is_data_parallel:
            raise ValueError("a list of per-device feeds needs a data-parallel program "
                             "(with_data_parallel); feed a dict")
        return _join_device_feeds(feeds)

    def with_inference_optimize(self, config):
        """Run as an inference program on the linear plan (fixed order, one memory arena).
        `config` (Fluid's AnalysisConfig / NativeConfig) is kept; its GPU and MKLDNN
        switches have nothing to select here."""
        if self._is_data_parallel:
            raise ValueError("with_inference_optimize: this program is already data "
                             "parallel")
        if config is None:
            raise TypeError("with_inference_optimize: config is required")
        self._config = config
        self.plan_strategy = ExecutionStrategy("linear")
        self._is_inference = True
        return self

    def explain(self, feed=None, fetch_list=None, block_id=0):
        """The table of where each op of the block runs (native segment or Python) and why,
        for the given (or `with_native_code`'s) feed and fetch names."""
        feed = _names(feed) if feed is not None else (self._feed or [])
        fetch = _names(fetch_list) if fetch_list is not None else (self._fetch or [])
        view = add_feed_fetch_ops(self._program, block_id, feed, fetch)
        return format_explain(explain_rows(view, block_id, keep=fetch))


class ParallelExecutor:
    """Fluid's `fluid.ParallelExecutor`: a program run data parallel, with its own `run`.
    Here it is `CompiledProgram(main_program).with_data_parallel(...)` run by an Executor on
    the parallel executor (see CompiledProgram for how that matches Fluid's results).
    `use_cuda=True` runs on CUDAPlace(0) (DeviceError at once when there is no GPU)."""

    def __init__(self, use_cuda, loss_name=None, main_program=None, share_vars_from=None,
                 exec_strategy=None, build_strategy=None, num_trainers=1, trainer_id=0,
                 scope=None):
        place = CUDAPlace(0) if use_cuda else CPUPlace()
        require_device(place, "ParallelExecutor(use_cuda=True)")  # at once, without a GPU
        if num_trainers != 1:
            raise NotImplementedError("ParallelExecutor(num_trainers > 1): multi-trainer "
                                      "(distributed) training is not built yet")
        if share_vars_from is not None and not isinstance(share_vars_from, ParallelExecutor):
            raise TypeError(f"ParallelExecutor: share_vars_from must be a ParallelExecutor, "
                            f"got {type(share_vars_from).__name__}")
        program = main_program if main_program is not None else default_main_program()
        self._compiled = CompiledProgram(program, build_strategy).with_data_parallel(
            loss_name=loss_name, build_strategy=build_strategy, exec_strategy=exec_strategy,
            share_vars_from=share_vars_from._compiled if share_vars_from else None)
        self._scope = scope if scope is not None else (
            share_vars_from._scope if share_vars_from else global_scope())
        self._exe = Executor(place)
        self._places = [place] if use_cuda else cpu_places()

    @property
    def device_count(self):
        return len(self._places)

    def run(self, fetch_list, feed=None, feed_dict=None, return_numpy=True):
        """Run once; `feed` is a dict, or (as Fluid's per-device form) a list of dicts,
        joined into one batch here."""
        if feed is None:
            feed = feed_dict
        return self._exe.run(self._compiled, feed=feed, fetch_list=fetch_list,
                             scope=self._scope, return_numpy=return_numpy)

    def drop_local_exe_scopes(self):
        """Fluid frees the per-device local scopes here; Fluidity's executor drops a run's
        local scope at the end of every run, so there is nothing left to drop."""

    def _need_create_local_exe_scopes(self):
        return False


def _join_device_feeds(feeds):
    """Per-device feed dicts (Fluid's list form) -> one dict, each name's values joined
    along the batch dimension (LoD offsets shifted)."""
    if not feeds:
        return {}
    names = set(feeds[0])
    for i, f in enumerate(feeds):
        if not isinstance(f, dict) or set(f) != names:
            raise ValueError(f"ParallelExecutor.run: every per-device feed must be a dict of "
                             f"the same names; device {i} has {sorted(f) if isinstance(f, dict) else type(f).__name__}")
    out = {}
    for name in feeds[0]:
        values = [f[name] for f in feeds]
        if any(isinstance(v, LoDTensor) and v.lod() for v in values):
            lens = None
            for v in values:
                part = v.recursive_sequence_lengths()
                lens = part if lens is None else [a + b for a, b in zip(lens, part)]
            out[name] = create_lod_tensor(np.concatenate([np.asarray(v) for v in values]), lens)
        else:
            out[name] = np.concatenate([np.asarray(v) for v in values])
    return out


def _load_model(model_dir, model_filename=None, params_filename=None):
    from . import io as fio
    from .core.scope import Scope, scope_guard
    from .executor import Executor
    scope = Scope()
    with scope_guard(scope):
        prog, feeds, fetches = fio.load_inference_model(model_dir, Executor(),
                                                        model_filename, params_filename)
    return prog, list(feeds), [v.name for v in fetches], scope


def compile_inference_model(model_dir, out_dir, model_filename=None, params_filename=None,
                            portable=False, bundle_blas=False):
    """A saved inference model (directory or path prefix, as `io.load_inference_model`
    takes) built into `out_dir` as a native library with a C API, an executable over .npy
    files and its parameters (`fluidity compile MODEL -o OUT/`; codegen/standalone.py).
    Returns the paths written. Raises CompileError naming each op that cannot compile."""
    from .codegen import standalone
    prog, feeds, fetches, scope = _load_model(model_dir, model_filename, params_filename)
    return standalone.compile_model(prog, feeds, fetches, scope, out_dir, name=str(model_dir),
                                    portable=portable, bundle_blas=bundle_blas)


def explain_inference_model(model_dir, model_filename=None, params_filename=None):
    """Where each op of a saved inference model would run compiled (native segment or
    Python step) and why, as a table."""
    from .codegen import standalone
    prog, _, fetches, _ = _load_model(model_dir, model_filename, params_filename)
    return standalone.explain_model(prog, fetches)
