"""Fluid's `fluid.compiler`: a program handed to the executor with a way to run it.

    compiled = fluid.CompiledProgram(main).with_native_code(feed=["x", "y"],
                                                            fetch_list=[loss])
    print(compiled.explain())          # which ops run as native code, which as Python, why
    exe.run(compiled, feed=..., fetch_list=[loss], scope=scope)

`with_native_code` runs the program's compilable ops as generated C++ (fluidity/codegen:
one native call per run of such ops, the rest as Python steps between them); results match
the interpreter's within float rounding. `with_data_parallel` runs N replicas of it on N
CPU places, each on its own batch, as threads over the shared parameters with all-reduced
gradients (transpiler/data_parallel.py rewrites the program, executor/data_parallel.py
runs it), `with_inference_optimize` on the linear plan (one memory arena). The program
itself is never changed: the executor prepares, and caches, a plan of the chosen kind per
feed and fetch signature. `ParallelExecutor` is Fluid's older face of
`with_data_parallel`.
"""
from .codegen.explain import explain_rows, format_explain
from .core.names import OpRole
from .core.place import (CPUPlace, CUDAPlace, Place, as_concrete, cpu_places, cuda_places,
                         require_device)
from .core.graph import Graph
from .core.scope import global_scope
from .errors import DeviceError
from .executor import Executor
from .executor.data_parallel import DataParallelRunner
from .executor.executor import add_feed_fetch_ops
from .executor.strategy import ExecutionStrategy
from .framework import Program, Variable, default_main_program
from . import inference_api
from .ir.views import ProgramView
from .transpiler import batch_merge as _batch_merge
from .transpiler import data_parallel as _dp

# The graph passes a user can add to a BuildStrategy's PassBuilder by name (Fluid's
# registered passes that change what a step computes): name -> (ProgramDesc pass, the
# attributes it requires, passed to it in this order)
GRAPH_PASSES = {_batch_merge.NAME: (_batch_merge.multi_batch_merge, ("num_repeats",))}


class Pass:
    """One graph pass of a PassBuilder (Fluid's `core.Pass`): its `type()` and the
    attributes `set(name, value)` gives it."""

    def __init__(self, pass_type):
        self._type, self._attrs = pass_type, {}

    def type(self):
        return self._type

    def set(self, name, value):
        self._attrs[str(name)] = value

    def has(self, name):
        return name in self._attrs

    def apply_to(self, desc):
        """`desc` (a ProgramDesc) rewritten by this pass (a new one)."""
        fn, required = GRAPH_PASSES[self._type]
        missing = [a for a in required if a not in self._attrs]
        if missing:
            raise ValueError(f"pass '{self._type}' needs attribute {missing[0]!r} "
                             f"(Pass.set({missing[0]!r}, value))")
        return fn(desc, *(self._attrs[a] for a in required))


class PassBuilder:
    """The ordered passes a data-parallel program is built with (Fluid's
    `BuildStrategy._finalize_strategy_and_create_passes()`). Fluid's fusion and memory
    passes are its graph engine's; here only the passes of GRAPH_PASSES, which change what
    a step computes, can be added, and they run in order over the program's desc before
    the data-parallel pass."""

    def __init__(self):
        self._passes = []

    @staticmethod
    def _make(pass_type):
        if pass_type not in GRAPH_PASSES:
            raise ValueError(f"Pass {pass_type} has not been registered (the passes that "
                             f"can be added: {sorted(GRAPH_PASSES)})")
        return Pass(pass_type)

    def append_pass(self, pass_type):
        p = self._make(pass_type)
        self._passes.append(p)
        return p

    def insert_pass(self, idx, pass_type):
        if not 0 <= idx <= len(self._passes):
            raise IndexError(f"insert_pass: index {idx} is out of [0, {len(self._passes)}]")
        p = self._make(pass_type)
        self._passes.insert(idx, p)
        return p

    def remove_pass(self, idx):
        if not 0 <= idx < len(self._passes):
            raise IndexError(f"remove_pass: index {idx} is out of [0, {len(self._passes)})")
        del self._passes[idx]

    def all_passes(self):
        return list(self._passes)

    def apply(self, desc):
        for p in self._passes:
            desc = p.apply_to(desc)
        return desc


class BuildStrategy:
    """Fluid's graph-building options (`fluid.BuildStrategy()`, its fields). Two change the
    numbers of a data-parallel run, and are honoured: `gradient_scale_strategy`
    (CoeffNumDevice: the replicas' gradients are averaged; One: summed; Customized: the
    program is fed `<loss>@GRAD` itself) and `reduce_strategy` (AllReduce: every replica
    gets the summed gradient; Reduce: replica 0 does; the optimizer runs once either way, so
    both train alike). The fusion and memory options name passes of Fluid's graph engine;
    Fluidity runs the program as its desc says, and they are kept so programs that set them
    run (results do not depend on them in Fluid either)."""

    class ReduceStrategy:
        AllReduce = _dp.ALL_REDUCE
        Reduce = _dp.REDUCE

    class GradientScaleStrategy:
        CoeffNumDevice = _dp.COEFF_NUM_DEVICE
        One = _dp.ONE
        Customized = _dp.CUSTOMIZED

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
        self._pass_builder = None

    def _finalize_strategy_and_create_passes(self):
        """The PassBuilder of the passes a data-parallel program is built with (Fluid's);
        a pass added to it (`insert_pass(0, "multi_batch_merge_pass").set("num_repeats",
        2)`) runs when a CompiledProgram with this strategy is first run."""
        if self._pass_builder is None:
            self._pass_builder = PassBuilder()
        return self._pass_builder


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
    if not places:
        raise ValueError(f"{what}: places is empty")
    kinds = set()
    for p in places:
        if not isinstance(p, Place):
            raise TypeError(f"{what}: places must be Places, got {type(p).__name__}")
        kinds.add(require_device(p, what))
    if len(kinds) > 1:
        raise DeviceError(f"{what}: places mix the CPU and CUDA devices: {places}")
    return [as_concrete(p) for p in places], kinds != {"cpu"}


def _has_backward_op(program):
    return any(op.type.endswith("_grad") for op in program.global_block().ops)


def _has_optimizer_in_control_flow(program):
    """Whether a conditional block's gradient holds optimize ops (Fluid cannot train such
    a program on several places; neither can Fluidity)."""
    view = ProgramView(program.desc)
    for op in view.global_block().ops:
        if op.type == "conditional_block_grad":
            sub = view.block(op.attr("sub_block"))
            if any(o.role & OpRole.Optimize and o.has_attr("op_role_var") for o in sub.ops):
                return True
    return False


class CompiledProgram:
    """A program with a way to run it, handed to `Executor.run` in place of the program.

    - `with_data_parallel(loss_name, build_strategy, exec_strategy, share_vars_from,
      places)`: N replicas on N CPU places (`places`, default `fluid.cpu_places()`, i.e.
      CPU_NUM), each on its own batch, as threads over the shared parameters, their
      gradients all-reduced before the optimizer runs once (executor/data_parallel.py).
      Fetched values come back joined along the batch axis (a `[1]` loss from 2 places
      is `[2]`), or per place with `exe.run(..., return_merged=False)`. On CUDA places the
      whole batch runs compiled on the (first) device.
    - `with_inference_optimize(config)`: runs on the linear plan (a fixed op order and one
      memory arena, temporaries sharing memory), Fluidity's inference-optimised executor.
    - `with_native_code(feed, fetch_list)`: the compilable ops as generated C++.

    As in Fluid, a data-parallel program is bound to the scope and place of its first run
    (`_compile(scope, place)`): running it in another scope is a ValueError.
    """

    def __init__(self, program_or_graph, build_strategy=None):
        self._graph, self._graph_program = None, None
        if isinstance(program_or_graph, Graph):
            # Fluid's CompiledProgram(core.Graph): no Program (`_program` is None, so the
            # io functions refuse it, as Fluid's); it runs the program the graph was made
            # from, the graph being a view of it here (core/graph.py)
            self._graph = program_or_graph
            program_or_graph = None
        elif not isinstance(program_or_graph, Program):
            raise TypeError(f"CompiledProgram takes a Program or a core.Graph, got "
                            f"{type(program_or_graph).__name__}")
        self._program = program_or_graph
        self._build_strategy = build_strategy
        self._exec_strategy = None
        self.plan_strategy = None          # the executor's plan kind for this program
        self._feed, self._fetch = None, None
        self._loss_name = None
        self._share_vars_from = None
        self._places = None
        self._on_device = False
        self._is_data_parallel = False
        self._is_inference = False
        self._compiled = False
        self._scope = None
        self._place = None
        self._executor = None              # the DataParallelRunner, once compiled
        # counts the changes to how the program runs (each with_*): an executor's prepared
        # runs of this program (executor/direct.py) hold only while it is unchanged
        self.setup_revision = 0
        # Fluid's `_local_scopes`: the places' scopes of the program this one shares its
        # variables with (share_vars_from), else empty, as Fluid 1.8 leaves it
        self._local_scopes = []

    def program_for_executor(self):
        if self._program is None:
            if self._graph_program is None:
                self._graph_program = Program(self._graph.origin_program_desc())
            return self._graph_program
        return self._program

    def with_native_code(self, feed=None, fetch_list=None):
        """Run the program's compilable ops as native code. `feed` / `fetch_list` (names
        or Variables) are the signature `explain()` reports on; any signature runs."""
        self.plan_strategy = ExecutionStrategy("native")
        self._feed, self._fetch = _names(feed), _names(fetch_list)
        self.setup_revision += 1
        return self

    def with_data_parallel(self, loss_name=None, build_strategy=None, exec_strategy=None,
                           share_vars_from=None, places=None):
        """Run as N replicas on `places` (default: `fluid.cpu_places()` when first run), each
        on its own batch, their gradients all-reduced (see the class docstring).
        `loss_name` names the loss (a Variable's name is taken too), required when the
        program has backward ops; `build_strategy` / `exec_strategy` as Fluid's (the
        gradient scale and reduce strategies and `exec_strategy._dry_run` are honoured);
        `share_vars_from` (another data-parallel CompiledProgram, run first: e.g. the
        training program for its test program) shares that program's places' copies."""
        if self._is_data_parallel:
            raise ValueError("with_data_parallel: this program is already data parallel")
        if self._is_inference:
            raise ValueError("with_data_parallel: this program is already set up for "
                             "inference (with_inference_optimize)")
        if share_vars_from is not None and not isinstance(share_vars_from, CompiledProgram):
            raise TypeError(f"with_data_parallel: share_vars_from must be a "
                            f"CompiledProgram, got {type(share_vars_from).__name__}")
        self._places, self._on_device = _check_places(places, "with_data_parallel")
        self._loss_name = _names(loss_name)[0] if loss_name else None   # "": none, as Fluid
        if self._loss_name is not None and \
                self._program.global_block().find_var_recursive(self._loss_name) is None:
            raise ValueError(f"with_data_parallel: loss '{self._loss_name}' is not a "
                             f"variable of the program")
        if self._loss_name is None and _has_backward_op(self._program):
            raise ValueError("with_data_parallel: the program has backward ops, so "
                             "loss_name (the loss they differentiate) must be given")
        if build_strategy is not None:
            self._build_strategy = build_strategy
        self._exec_strategy = exec_strategy
        self._share_vars_from = share_vars_from
        if self._on_device:   # CUDA places: the whole batch runs compiled on the device
            self.plan_strategy = ExecutionStrategy("cuda")
        self._is_data_parallel = True
        self.setup_revision += 1
        return self

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
        self.setup_revision += 1
        return self

    _with_inference_optimize = with_inference_optimize

    def run_inference(self, exe, inputs, scope=None):
        """What `exe.run(self, feed=[PaddleTensor, ...])` does for an inference program
        (Paddle's predictor): the i-th tensor feeds the i-th feed target; the fetch targets
        come back as PaddleTensors (inference_api.py)."""
        if not self._is_inference:
            raise TypeError("a list of PaddleTensors is fed to an inference program: call "
                            "_with_inference_optimize(config) first")
        return inference_api.run_inference(exe, self, inputs, scope,
                                           view=self._program)

    # -- compiling (Fluid's _compile: bind to a scope and place on the first run) -----------
    def _compile(self, scope, place):
        """Bind the program to `scope` and `place` (what Fluid's Executor does on its first
        run): a data-parallel program gets its places and replicas here. A second call
        with another scope or place is a ValueError, as in Fluid."""
        if self._compiled:
            if scope is not None and self._scope is not scope:
                raise ValueError("Cannot compile program with different scope.")
            if place is not None and self._place is not None and \
                    not as_concrete(self._place)._equals(place):
                raise ValueError("Cannot compile program with different place.")
            return self
        place = as_concrete(place) if place is not None else CPUPlace()
        if self._is_data_parallel:
            share = self._share_vars_from
            given = self._places
            if given is None and share is not None and share._compiled:
                given = share._places     # the places of the program it shares with
            if share is not None and share._executor is not None:
                self._local_scopes = share._executor.local_scopes()
            places = self._get_places(place, given)
            if len(places) > 1 and _has_optimizer_in_control_flow(self._program):
                raise NotImplementedError("If optimizer is used in control flow, training "
                                          "on multi-places is not supported now.")
            places, self._on_device = _check_places(places, "with_data_parallel")
            build = self._build_strategy
            if self._on_device and getattr(build, "_pass_builder", None) is not None and \
                    build._pass_builder.all_passes():
                raise NotImplementedError("BuildStrategy passes (multi_batch_merge_pass) "
                                          "on CUDA places are not built; run on CPU places")
            if self._on_device:   # CUDA places: the whole batch runs compiled on the device
                self.plan_strategy = ExecutionStrategy("cuda")
            else:
                self._executor = self._compile_data_parallel(places, scope)
            self._places = places
        else:
            self._places = [place]
        self._compiled = True
        self._scope, self._place = scope, place
        return self

    @staticmethod
    def _get_places(place, place_list):
        if place_list is not None:
            for p in place_list:
                if p._type() != place._type():
                    raise ValueError(f"Place type not match: the program runs on {place!r}, "
                                     f"with_data_parallel was given {p!r}")
            return list(place_list)
        places = cuda_places() if isinstance(place, CUDAPlace) else cpu_places()
        if not places:
            raise ValueError("No places for execution.")
        return places

    def _compile_data_parallel(self, places, scope):
        share = self._share_vars_from
        place_scopes = None
        if share is not None:
            if not share._is_data_parallel:
                raise ValueError("The shared Program is not data parallel, cannot share "
                                 "variables from it.")
            if share._executor is None:
                raise ValueError("The shared Program is not compiled and executed, so there "
                                 "is no variables to share.")
            place_scopes = share._executor.local_scopes()
            scope = share._scope
        build = self._build_strategy or BuildStrategy()
        if getattr(build, "num_trainers", 1) > 1:
            raise NotImplementedError("BuildStrategy.num_trainers > 1 (multi-process "
                                      "collective training over NCCL) is not built; "
                                      "use the distribute transpiler's pserver mode")
        desc = self._program.desc
        if getattr(build, "_pass_builder", None) is not None:
            desc = build._pass_builder.apply(desc)
        desc = _dp.data_parallel(desc, len(places), self._loss_name,
                                 build.gradient_scale_strategy, build.reduce_strategy)
        return DataParallelRunner(ProgramView(desc), places, scope, place_scopes,
                                  training=_dp.is_training(desc),
                                  dry_run=bool(getattr(self._exec_strategy, "_dry_run",
                                                       False)))

    def data_parallel_runner(self, scope, executor):
        """The runner of a data-parallel program on CPU places, compiled for `scope` and
        the executor's place on first use (None for any other program: the executor runs
        it itself). Executor.run calls it."""
        if not self._is_data_parallel or self._on_device:
            return None
        self._compile(scope, getattr(executor, "place", None))
        return self._executor

    def explain(self, feed=None, fetch_list=None, block_id=0):
        """The table of where each op of the block runs (native segment or Python) and why,
        for the given (or `with_native_code`'s) feed and fetch names."""
        feed = _names(feed) if feed is not None else (self._feed or [])
        fetch = _names(fetch_list) if fetch_list is not None else (self._fetch or [])
        view = add_feed_fetch_ops(self._program, block_id, feed, fetch)
        return format_explain(explain_rows(view, block_id, keep=fetch))


class ParallelExecutor:
    """Fluid's `fluid.ParallelExecutor`: `CompiledProgram(main_program).with_data_parallel(
    ...)` on `fluid.cpu_places()` (CPU_NUM places; `use_cuda=True`: the GPUs, DeviceError at
    once without one), run by its own Executor in `scope` (default the global scope)."""

    def __init__(self, use_cuda, loss_name=None, main_program=None, share_vars_from=None,
                 exec_strategy=None, build_strategy=None, num_trainers=1, trainer_id=0,
                 scope=None):
        place = CUDAPlace(0) if use_cuda else CPUPlace()
        require_device(place, "ParallelExecutor(use_cuda=True)")  # at once, without a GPU
        if build_strategy is None:
            build_strategy = BuildStrategy()
        if num_trainers != 1:
            raise NotImplementedError("ParallelExecutor(num_trainers > 1): multi-trainer "
                                      "(NCCL) training is not built; use the distribute "
                                      "transpiler's pserver mode")
        build_strategy.trainer_id = trainer_id
        if share_vars_from is not None and not isinstance(share_vars_from, ParallelExecutor):
            raise TypeError(f"ParallelExecutor: share_vars_from must be a ParallelExecutor, "
                            f"got {type(share_vars_from).__name__}")
        self._places = cuda_places() if use_cuda else cpu_places()
        self._scope = scope if scope is not None else global_scope()
        program = main_program if main_program is not None else default_main_program()
        self._compiled_program = CompiledProgram(program).with_data_parallel(
            loss_name=loss_name, build_strategy=build_strategy, exec_strategy=exec_strategy,
            share_vars_from=share_vars_from._compiled_program if share_vars_from else None)
        self._place = place
        self._exe = Executor(place)

    @property
    def device_count(self):
        return len(self._places)

    def run(self, fetch_list, feed=None, feed_dict=None, return_numpy=True):
        """Run once: `feed` is a dict (split over the places along the batch) or a list of
        one dict per place; fetched values are joined along the batch axis."""
        if feed is None and feed_dict is not None:
            feed = feed_dict
        return self._exe.run(program=self._compiled_program, scope=self._scope, feed=feed,
                             fetch_list=fetch_list, return_numpy=return_numpy)

    def drop_local_exe_scopes(self):
        """Fluid frees the places' per-run scopes here; Fluidity drops them after every
        run, so there is nothing left to free."""
        runner = self._compiled_program._executor
        if runner is not None:
            runner.drop_local_exe_scopes()

    def _need_create_local_exe_scopes(self):
        runner = self._compiled_program._executor
        return runner._need_create_local_exe_scopes() if runner is not None else False


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
