"""Fluid's `fluid.compiler`: a program handed to the executor with a way to run it.

    compiled = fluid.CompiledProgram(main).with_native_code(feed=["x", "y"],
                                                            fetch_list=[loss])
    print(compiled.explain())          # which ops run as native code, which as Python, why
    exe.run(compiled, feed=..., fetch_list=[loss], scope=scope)

`with_native_code` runs the program's compilable ops as generated C++ (fluidity/codegen:
one native call per run of such ops, the rest as Python steps between them); results match
the interpreter's within float rounding. `with_data_parallel` runs it on the parallel
executor (independent ops at once on threads). The program itself is never changed: the
executor prepares, and caches, a plan of the chosen kind per feed and fetch signature.
"""
from .codegen.explain import explain_rows, format_explain
from .executor.executor import add_feed_fetch_ops
from .executor.strategy import ExecutionStrategy
from .framework import Program, Variable


class BuildStrategy:
    """Fluid's graph-building options. Fluidity runs the program as written; the options
    are kept so programs that set them run."""

    def __init__(self):
        self.reduce_strategy = 0
        self.gradient_scale_strategy = 0
        self.fuse_elewise_add_act_ops = False
        self.fuse_all_reduce_ops = False
        self.enable_inplace = False
        self.memory_optimize = False
        self.debug_graphviz_path = ""


def _names(xs):
    xs = [] if xs is None else (xs if isinstance(xs, (list, tuple)) else [xs])
    return [x.name if isinstance(x, Variable) else x for x in xs]


class CompiledProgram:
    def __init__(self, program_or_graph, build_strategy=None):
        if not isinstance(program_or_graph, Program):
            raise TypeError(f"CompiledProgram takes a Program, got "
                            f"{type(program_or_graph).__name__}")
        self._program = program_or_graph
        self._build_strategy = build_strategy or BuildStrategy()
        self.plan_strategy = None          # the executor's plan kind for this program
        self._feed, self._fetch = None, None

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
        (`exec_strategy.num_threads`, default 2)."""
        n = getattr(exec_strategy, "num_threads", 0) or 2
        self.plan_strategy = ExecutionStrategy("parallel", num_threads=n)
        if build_strategy is not None:
            self._build_strategy = build_strategy
        return self

    def explain(self, feed=None, fetch_list=None, block_id=0):
        """The table of where each op of the block runs (native segment or Python) and why,
        for the given (or `with_native_code`'s) feed and fetch names."""
        feed = _names(feed) if feed is not None else (self._feed or [])
        fetch = _names(fetch_list) if fetch_list is not None else (self._fetch or [])
        view = add_feed_fetch_ops(self._program, block_id, feed, fetch)
        return format_explain(explain_rows(view, block_id, keep=fetch))


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
                            portable=False):
    """A saved inference model (directory or path prefix, as `io.load_inference_model`
    takes) built into `out_dir` as a native library with a C API, an executable over .npy
    files and its parameters (`fluidity compile MODEL -o OUT/`; codegen/standalone.py).
    Returns the paths written. Raises CompileError naming each op that cannot compile."""
    from .codegen import standalone
    prog, feeds, fetches, scope = _load_model(model_dir, model_filename, params_filename)
    return standalone.compile_model(prog, feeds, fetches, scope, out_dir, name=str(model_dir),
                                    portable=portable)


def explain_inference_model(model_dir, model_filename=None, params_filename=None):
    """Where each op of a saved inference model would run compiled (native segment or
    Python step) and why, as a table."""
    from .codegen import standalone
    prog, _, fetches, _ = _load_model(model_dir, model_filename, params_filename)
    return standalone.explain_model(prog, fetches)
