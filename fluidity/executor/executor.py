"""The interpreter Executor (Paddle's `fluid.Executor`).

`run` adds feed/fetch ops to a cached copy of the program (one per program revision, block,
feed names and fetch names), prepares a Plan for it once, and then per call only validates
the feed, binds a frame in a local kid scope and runs the steps.

The executor sees programs as descs only (`ir.views`): what it is handed at its edge — the
builder's Program, a CompiledProgram, or a bare ProgramDesc — becomes a ProgramView there.
"""
import time
import warnings
import weakref
from collections import OrderedDict

import numpy as np

from ..core import defaults, dtypes
from ..core.allocator import keep_freed_memory
from ..core.flags import flag
from ..core.place import require_device
from ..core.dtypes import VarType
from ..core.scope import global_scope
from ..core.lod import check_fed_lod
from ..core.tensor import LoDTensor, SelectedRows, as_fetched, as_lod_tensor
from ..errors import (ArgumentTypeError, DeviceError, FeedError, FetchError, FluidityError,
                      MissingDtypeError,
                      RunError)
from ..ir import rewrite
from ..ir.views import ProgramView, VarView
from ..proto import framework_pb2 as pb
from . import direct, nan_inf, pruning
from . import profile as profiling
from .plan import Plan, RunEnv
from .services import Services
from .strategy import ExecutionStrategy

_RAW_DESC_VIEWS = 16   # bare ProgramDescs an executor keeps a view (and its plans) of
_DIRECT_RUNS = 64      # prepared compiled runs (signatures) an executor keeps


def _direct_key(program, feed, fetch_list, block_id, scope, return_numpy, feed_var_name,
                fetch_var_name):
    """The signature of a run as its prepared run (executor/direct.py) is kept under, or
    None for a run that always takes the full path: a feed that is not a dict of names,
    a fetch list with anything but variables and names (optimizer ops: pruned). The
    program and scope are keyed by identity (the DirectRun checks they are the same
    objects; a bare ProgramDesc, which cannot be referred to weakly, has none); a
    Variable's name is read as the run's."""
    if type(program) is pb.ProgramDesc:
        return None
    if type(feed) is not dict:
        if feed is not None:
            return None
        feed = {}
    names = tuple(feed)
    for n in names:
        if type(n) is not str:
            return None
    if fetch_list is None:
        fetch = ()
    else:
        if type(fetch_list) is not list and type(fetch_list) is not tuple:
            fetch_list = (fetch_list,)
        fetch = []
        for f in fetch_list:
            if type(f) is str:
                fetch.append(f)
            elif isinstance(f, VarView):
                fetch.append(f.name)
            else:
                return None
        fetch = tuple(fetch)
    return (id(program), id(scope), names, fetch, block_id, bool(return_numpy),
            feed_var_name, fetch_var_name)


def _feeds_and_fetches(feed, fetch_list):
    """(feed dict, feed names, fetch names) of `run`'s arguments as Fluid programs pass them:
    a dict, or one place's feed as a one-dict list (an iterable DataLoader's); a variable or
    a name, or a list of them, to fetch."""
    feed = feed or {}
    if isinstance(feed, (list, tuple)) and len(feed) == 1 and isinstance(feed[0], dict):
        feed = feed[0]   # one place's feed, as an iterable DataLoader gives it
    if isinstance(feed, (list, tuple)) and feed and all(isinstance(f, dict) for f in feed):
        raise FeedError(f"a list of {len(feed)} per-place feed dicts needs a data-parallel "
                        f"program on {len(feed)} places (CompiledProgram(program)."
                        f"with_data_parallel(...)); this one runs on one place: feed a "
                        f"dict")
    if not isinstance(feed, dict):
        raise FeedError(f"feed must be a dict of name -> value, got {type(feed).__name__}")
    feed_names = tuple(k.name if isinstance(k, VarView) else k for k in feed)
    return feed, feed_names, tuple(_fetch_name(f) for f in _fetch_list(fetch_list))


def _fetch_list(fetch_list):
    """`run`'s fetch_list as a list: none, one variable or name, or a list of them."""
    if fetch_list is None:
        return []
    return list(fetch_list) if isinstance(fetch_list, (list, tuple)) else [fetch_list]


def _fetch_name(f):
    if isinstance(f, VarView):
        return f.name
    if isinstance(f, str):
        return f
    raise FetchError(f"fetch_list entries must be Variables or names, got {type(f).__name__}")


fetch_name = _fetch_name   # public: the runner of data-parallel programs names fetches so


def _to_numpy(value):
    """A fetched value as `run(return_numpy=True)` returns it: a LoDTensor's array (a
    FetchedArray when it is one element in one or more dims, so `float(loss)` works on
    Fluid 1.x's `[1]` loss under numpy 2; core/tensor.py says why), a SelectedRows' value
    rows, a LoDTensorArray as a list of them."""
    if isinstance(value, LoDTensor):
        arr = value._array     # a numpy scalar (0-D arithmetic) is fetched as a 0-D array
        return np.asarray(arr) if isinstance(arr, np.generic) else as_fetched(arr)
    if isinstance(value, SelectedRows):
        return as_fetched(value.value)
    if isinstance(value, list):
        return [_to_numpy(v) for v in value]
    return value


def as_numpy(tensor):
    """Fluid's `fluid.executor.as_numpy`: a fetched LoDTensor (or a list / LoDTensorArray of
    them) as ndarrays, shaped as `run(return_numpy=True)` returns them; None for one that
    holds no data. A tensor with a LoD cannot be one ndarray: RuntimeError (keep the
    LoDTensor, `return_numpy=False`)."""
    if isinstance(tensor, list):
        return [as_numpy(t) for t in tensor]
    if not isinstance(tensor, LoDTensor):
        raise TypeError(f"as_numpy takes a LoDTensor, got {type(tensor).__name__}")
    if tensor._lod:
        raise RuntimeError("Some of your fetched tensors hold LoD information. They can not "
                           "be completely cast to Python ndarray. Please set the parameter "
                           "'return_numpy' as 'False' to return LoDTensor itself directly.")
    return _to_numpy(tensor) if tensor._array is not None else None


def fed_array(value, np_dtype, zero_d=False):
    """The ndarray a fed non-tensor value stands for: a Python or numpy scalar is one
    element, `[value]` of the variable's dtype (Fluid 1.x's executor), or 0-D when the
    variable is declared `[]` (`zero_d`); anything else as numpy converts it."""
    if np.isscalar(value) and not isinstance(value, (str, bytes)) and not zero_d:
        return np.array([value], dtype=np_dtype)
    return np.asarray(value, dtype=np_dtype)


def _as_lodtensor(data, place=None, dtype=None):
    """Fluid's `fluid.executor._as_lodtensor`: a LoDTensor of `data` (an ndarray; a Python
    scalar or a (nested, rectangular) tuple with `dtype`). A list is refused (RuntimeError):
    as in Fluid, lists stand for sequences, which `fluid.create_lod_tensor` makes."""
    if isinstance(data, list):
        raise RuntimeError("Some of your feed data hold LoD information. They can not be "
                           "completely cast from a list of Python ndarray to LoDTensor. "
                           "Please convert data to LoDTensor directly before feeding the data.")
    if not isinstance(data, np.ndarray):
        if np.isscalar(data):
            if dtype is None:
                raise MissingDtypeError("dtype should be given when casting python scalar to "
                                        "tensor")
            data = np.array([data]).astype(dtypes.to_numpy(dtype))
        elif isinstance(data, tuple):
            data = np.array(data)
            if data.dtype == object:
                raise TypeError("Failed to convert input data to a regular ndarray: it holds "
                                "nested sequences of different lengths; use "
                                "fluid.create_lod_tensor to make a LoDTensor of them")
            if dtype is not None:
                data = data.astype(dtypes.to_numpy(dtype))
        else:
            raise TypeError(f"Convert data of type {type(data).__name__} to Tensor is not "
                            f"supported")
    t = LoDTensor()
    t.set(data, place)
    return t


class _Prepared:
    """A program copy with feed/fetch ops, its plan, and what feeding needs: the fed
    variables (to check values against), the holder column of each fed name and of each
    fetched name (in the caller's order), the holders' sizes, and the tensors a run must
    find with a value although nothing feeds or computes them (`needs`)."""
    __slots__ = ("program", "plan", "feed_vars", "feed_specs", "feed_cols", "fetch_cols",
                 "n_feed", "n_fetch", "fetch_persistable", "needs", "feed_pos")

    def __init__(self, program, plan, feed_vars, feed_cols, fetch_cols, fetch_persistable,
                 feed_pos=None):
        self.program = program
        # positions (in the caller's feed) of the names the program has; None: all of them
        self.feed_pos = feed_pos
        self.plan = plan
        self.feed_vars = feed_vars
        readers = plan.nonempty_readers({v.name for v in feed_vars})
        self.feed_specs = [_feed_spec(v, readers.get(v.name)) for v in feed_vars]
        self.needs = plan.inputs_from_outside()
        self.feed_cols = feed_cols
        self.fetch_cols = fetch_cols
        self.n_feed = max(feed_cols, default=-1) + 1
        self.n_fetch = max(fetch_cols, default=-1) + 1
        self.fetch_persistable = fetch_persistable


def _feed_spec(var, reader):
    """(name, dtype code, numpy dtype, shape to check or None, (op label, input slot) of
    the first op that cannot take an empty batch of it, or None), read from the desc once."""
    code = var.dtype
    try:
        np_dtype = dtypes.to_numpy(code) if code is not None else None
    except FluidityError:  # a dtype numpy lacks (bfloat16): checked by code only
        np_dtype = None
    check = var.need_check_feed and var.type == VarType.LOD_TENSOR
    return (var.name, code, np_dtype, tuple(var.shape) if check else None, reader)


def _empty_batch(spec, t):
    """FeedError for a fed value holding no example (0 rows and no sequence) that goes into
    an op that cannot compute on one (a conv2d fails, a batch_norm's statistics turn nan)."""
    name, (label, slot) = spec[0], spec[4]
    return FeedError(f"feed '{name}' is an empty batch: shape {list(t._array.shape)}"
                     f"{f' lod {t._lod}' if t._lod else ''}, no example; {label} cannot take "
                     f"it as input {slot}. Feed at least one example (a reader's last partial "
                     f"batch is never empty)")


def _unset(prep, frame, feed_names):
    """FeedError for the first tensor the run needs from outside that has no value."""
    for i, name, label, slot in prep.needs:
        v = frame[i].value
        if v is None or (type(v) is LoDTensor and v._array is None):
            fed = f"this run feeds {sorted(feed_names)}" if feed_names else "nothing is fed"
            return FeedError(f"variable '{name}' has no value, and {label} needs it (input "
                             f"{slot}): it is neither fed nor computed by an op before; feed "
                             f"it (exe.run(feed={{'{name}': ...}})); {fed}")
    return None


def _columns(block, op_type, slot, names, what):
    """{var name: col} of the block's existing feed (slot Out) or fetch (slot X) ops, checked
    against the names the caller feeds/fetches (Paddle's rule: they must match)."""
    cols = {op.output(slot)[0] if op_type == "feed" else op.input(slot)[0]: op.attr("col")
            for op in block.ops if op.type == op_type}
    if not cols:
        return None
    err = FeedError if op_type == "feed" else FetchError
    unknown = [n for n in names if n not in cols]
    if unknown:
        raise err(f"the program already has {op_type} ops (for {sorted(cols)}); cannot "
                  f"{what} {unknown}")
    if op_type == "feed" and set(names) != set(cols):
        raise err(f"the program's feed ops need {sorted(cols)}; got {sorted(names)}")
    return cols


def _holder(block, name, var_type):
    v = block.vars.get(name)
    if v is None:
        return rewrite.add_var(block, name, var_type, persistable=True)
    v.persistable = True
    return v


def _observers():
    """What observes the plans prepared now: (the process-wide profile or None, whether
    FLAGS_check_nan_inf is on). Part of every plan's cache key."""
    return profiling.active(), flag("FLAGS_check_nan_inf")


def _observed(plan, observers):
    profile, check = observers
    if check:
        plan = nan_inf.observe(plan)
    if profile is not None:
        plan = profiling.observe(plan, profile)
    return plan


def add_feed_fetch_ops(program, block_id, feed_names, fetch_names, feed_var_name="feed",
                       fetch_var_name="fetch"):
    """A ProgramView of a copy of `program` (a view or a ProgramDesc) whose block `block_id`
    starts with one feed op per fed name and ends with one fetch op per fetched name
    (Paddle's layout: holder vars + `col`)."""
    desc = program.desc if isinstance(program, ProgramView) else program
    p = ProgramView(rewrite.copy_program(desc))
    block = p.block(block_id)
    for name in feed_names:
        if block.find_var_recursive(name) is None:
            raise FeedError(f"cannot feed '{name}': the program has no variable of that name")
    for name in fetch_names:
        if block.find_var_recursive(name) is None:
            raise FetchError(f"cannot fetch '{name}': the program has no variable of that name")
    has_feed = any(op.type == "feed" for op in block.ops)
    has_fetch = any(op.type == "fetch" for op in block.ops)
    if feed_names and not has_feed:
        holder = _holder(block, feed_var_name, VarType.FEED_MINIBATCH)
        for col, name in reversed(list(enumerate(feed_names))):
            rewrite.insert_op(block, 0, "feed", {"X": holder}, {"Out": name}, {"col": col})
    if fetch_names and not has_fetch:
        holder = _holder(block, fetch_var_name, VarType.FETCH_LIST)
        for col, name in enumerate(fetch_names):
            rewrite.append_op(block, "fetch", {"X": name}, {"Out": holder}, {"col": col})
    return p


def _shape_diff(t, shape):
    """The fed shape when LoDTensor `t` does not fit a `fluid.data` variable's declared
    `shape`, else None: Fluid's rule (`check_feed_shape_type`): the ranks agree, every
    known dim matches, and a sequence batch's (LoD) first dim is not checked."""
    got = list(t._array.shape)
    if len(got) != len(shape):
        return got
    first = 1 if t._lod else 0
    if any(s >= 0 and s != g for s, g in zip(shape[first:], got[first:])):
        return got
    return None


class Executor:
    """Runs programs. `strategy` (an ExecutionStrategy or its kind: "interpreter",
    "linear", "dataflow", "parallel") picks the kind of plan each program block is prepared
    into; None is the interpreter."""

    def __init__(self, place=None, strategy=None):
        self.place = place
        # a CUDAPlace runs every program compiled for the device (executor/cuda.py), or
        # fails here, at once, when there is no such device (never silently on the CPU)
        self.device = require_device(place)
        keep_freed_memory()  # temporaries' memory stays mapped between runs
        if isinstance(strategy, str):
            strategy = ExecutionStrategy(strategy)
        if self.device != "cpu":
            if strategy is not None and strategy.kind != "cuda":
                raise DeviceError(f"Executor({place!r}) runs programs compiled for the "
                                  f"device; strategy {strategy.kind!r} runs on the CPU")
            strategy = strategy or ExecutionStrategy("cuda")
        self.strategy = strategy
        self._kinds = strategy if strategy is not None else ExecutionStrategy()
        # program -> {(revision, block, feeds, fetches, holder names): _Prepared}
        self._cache = weakref.WeakKeyDictionary()
        self._block_plans = weakref.WeakKeyDictionary()  # program -> {(revision, block): Plan}
        self._raw_views = OrderedDict()   # id(ProgramDesc) -> (desc, its view), LRU
        self._pruned_cache = weakref.WeakKeyDictionary()   # program -> {signature: pruned}
        self.services = Services(self)    # run-time services of RPC ops (services.py)
        self._direct = {}    # signature (_direct_key) -> its DirectRun (executor/direct.py)
        # (direct.hot_call of the last run a DirectRun took, that DirectRun): a run with the
        # same arguments (the fetched objects themselves) skips _direct_key
        self._hot = None

    # -- preparing ----------------------------------------------------------------------
    def _prepare(self, program, block_id, feed_names, fetch_names, feed_var_name,
                 fetch_var_name, strategy=None):
        """The prepared plan (and feed/fetch layout) of one signature; `strategy`, when
        given (a CompiledProgram's), picks the plan kind instead of the executor's."""
        per_prog = self._cache.get(program)
        strategy = self._kinds if self.device != "cpu" else (strategy or self._kinds)
        observers = _observers()
        key = (program.revision, block_id, feed_names, fetch_names, feed_var_name,
               fetch_var_name, strategy.kind, observers)
        if per_prog is not None:
            prep = per_prog.get(key)
            if prep is not None:
                return prep
        else:
            per_prog = self._cache[program] = {}
        # a changed program makes older entries useless
        for k in [k for k in per_prog if k[0] != program.revision]:
            del per_prog[k]
        # Fluid feeds what the program has and warns about the rest (a variable pruned away,
        # or one a test feeds for every case of a program that lacks it in some)
        fed_block = program.block(block_id)
        known = []
        for i, n in enumerate(feed_names):
            if fed_block.find_var_recursive(n) is None:
                warnings.warn(f"The variable {n} is not found in program. It is not declared "
                              f"or is pruned.")
            else:
                known.append(i)
        feed_pos = None if len(known) == len(feed_names) else known
        feed_names = tuple(feed_names[i] for i in known)
        p = add_feed_fetch_ops(program, block_id, list(feed_names), list(fetch_names),
                               feed_var_name, fetch_var_name)
        block = p.block(block_id)
        feed_vars = [block.find_var_recursive(n) for n in feed_names]
        fetch_persistable = [block.find_var_recursive(n).persistable for n in fetch_names]
        feed_cols = _columns(block, "feed", "Out", feed_names, "feed")
        fetch_cols = _columns(block, "fetch", "X", fetch_names, "fetch")
        plan = _observed(strategy.make_plan(p, block_id), observers)
        prep = _Prepared(p, plan, feed_vars,
                         [feed_cols[n] for n in feed_names] if feed_cols else
                         list(range(len(feed_names))),
                         [fetch_cols[n] for n in fetch_names] if fetch_cols else
                         list(range(len(fetch_names))), fetch_persistable, feed_pos)
        per_prog[key] = prep
        return prep

    def prepare(self, program, block_id, feed_names, fetch_names, feed_var_name="feed",
                fetch_var_name="fetch", strategy=None):
        """The prepared plan of one (program view, block, feed names, fetch names) signature,
        cached as `run` caches it; `strategy` (anything with `kind` and `make_plan`) picks
        the plan kind. For runners above the executor (executor/data_parallel.py)."""
        return self._prepare(program, block_id, tuple(feed_names), tuple(fetch_names),
                             feed_var_name, fetch_var_name, strategy)

    @staticmethod
    def missing_input(prep, frame, feed_names):
        """The FeedError `run` raises for a frame that lacks a tensor the plan needs from
        outside (neither fed nor computed), or None."""
        return _unset(prep, frame, feed_names)

    @staticmethod
    def to_numpy(value):
        """A fetched value as `run(return_numpy=True)` returns it."""
        return _to_numpy(value)

    def prepare_block(self, program, block_id):
        """The cached Plan of a block as is (no feed/fetch): used to run sub-blocks."""
        if self.device != "cpu":
            raise DeviceError(f"Executor({self.place!r}): block {block_id} would run "
                              f"interpreted on the CPU (control flow has no device form)")
        plans = self._block_plans.setdefault(program, {})
        observers = _observers()
        key = (program.revision, block_id, observers)
        plan = plans.get(key)
        if plan is None:
            plan = plans[key] = _observed(self._kinds.observed(Plan(program, block_id)),
                                          observers)
        return plan

    def run_block(self, program, block_id, scope):
        """Run one block of `program` in `scope` as is (for control-flow ops)."""
        plan = self.prepare_block(program, block_id)
        plan.run(plan.frame(scope), RunEnv(scope, self, program))

    # -- feeding ------------------------------------------------------------------------
    @staticmethod
    def _check_feed(spec, value):
        """The LoDTensor to feed for `value`, checked against the variable (FeedSpec)."""
        name, want, np_dtype, shape, _reader = spec
        if isinstance(value, (LoDTensor, np.ndarray)):
            t = value if type(value) is LoDTensor else as_lod_tensor(value, name)
            arr = t._array
            if arr is None:
                raise FeedError(f"feed '{name}': the LoDTensor holds no data")
            # Fluid's check_feed_shape_type checks only a fluid.data variable
            # (need_check_feed); a layers.data one takes the fed array's dtype, as Fluid's
            # kernels pick theirs from the runtime tensor
            if shape is not None and want is not None and arr.dtype != np_dtype \
                    and dtypes.to_code(arr.dtype) != want:
                raise FeedError(f"The data type of fed Variable {name!r} must be "
                                f"{dtypes.name(want)!r}, but received {str(arr.dtype)!r}")
        else:
            try:
                arr = fed_array(value, np_dtype, zero_d=shape is not None and len(shape) == 0)
            except (TypeError, ValueError) as e:
                raise FeedError(f"feed '{name}': cannot convert {type(value).__name__} to a "
                                f"tensor: {e}") from None
            t = LoDTensor(arr)
        if shape is not None:      # a fluid.data variable (need_check_feed), as Fluid
            diff = _shape_diff(t, shape)
            if diff is not None:
                raise FeedError(f"The fed Variable {name!r} should have dimensions = "
                                f"{len(shape)}, shape = {tuple(shape)!r}, but received fed "
                                f"shape {diff!r} on each device")
        if t._lod:
            check_fed_lod(name, t)     # before any op (numpy or compiled) indexes with it
        if spec[4] is not None:
            a = t._array
            if a.ndim and not a.shape[0] and (not t._lod or len(t._lod[0]) < 2):
                raise _empty_batch(spec, t)
        return t

    check_feed = _check_feed   # public: the runner of data-parallel programs checks its feeds

    # -- running ------------------------------------------------------------------------
    def run(self, program=None, feed=None, fetch_list=None, feed_var_name="feed",
            fetch_var_name="fetch", scope=None, return_numpy=True, use_program_cache=True,
            block_id=0, create_local_scope=True, return_merged=True, use_prune=False):
        """Run `program` (the default main program) once: feed, run, fetch (Fluid's
        arguments). With `use_prune`, or when the fetch list names optimizer ops (what
        `minimize` returns), the program is first pruned to what the fetches and those ops
        need, and the pruned program cached per signature (executor/pruning.py). A program
        compiled whole runs its later calls of one signature through a prepared run
        (executor/direct.py): the same checks, results and errors, little else."""
        if scope is None:
            scope = global_scope()
        if program is None:
            program = defaults.main_program()
        key = known = None
        if create_local_scope and not use_prune:
            direct_ok = profiling.active() is None and not flag("FLAGS_check_nan_inf")
            hot = self._hot
            if hot is not None and direct_ok:      # the signature last run: checked in C
                rc = hot[0](program, feed, fetch_list, scope, block_id, return_numpy,
                            feed_var_name, fetch_var_name)
                if type(rc) is list:
                    return rc
            else:
                rc = None
            args = (block_id, bool(return_numpy), feed_var_name, fetch_var_name)
            out, key, known = self._run_direct(program, feed, fetch_list, scope, args,
                                               direct_ok, hot, rc)
            if out is not None:
                return out
        given = program
        program, feed, fetch_list = self._prune_for(program, feed, fetch_list, use_prune)
        if isinstance(feed, (list, tuple)) and getattr(program, "_is_inference", False) \
                and not (feed and isinstance(feed[0], dict)):
            return program.run_inference(self, feed, scope)   # Paddle's predictor API
        runner_for = getattr(program, "data_parallel_runner", None)
        runner = runner_for(scope, self) if runner_for is not None else None
        strategy = getattr(program, "plan_strategy", None)
        if runner is not None:   # a data-parallel CompiledProgram: N replicas
            return runner.run(self, feed, _fetch_list(fetch_list), feed_var_name,
                              fetch_var_name, return_numpy, return_merged)
        view = self._as_view(program)
        feed, feed_names, fetch_names = _feeds_and_fetches(feed, fetch_list)

        prep = self._prepare(view, block_id, feed_names, fetch_names, feed_var_name,
                             fetch_var_name, strategy)
        results = self._run_prepared(prep, scope, feed, feed_names, fetch_names,
                                     feed_var_name, fetch_var_name, create_local_scope,
                                     return_numpy)
        if key is not None and known is None and self.device == "cpu" and \
                self._kinds.profile is None and _observers() == (None, False):
            forget = lambda _ref, k=key, kept=self._direct: kept.pop(k, None)  # noqa: E731
            self._remember_direct(key, direct.prepare(
                prep, view, given, scope, self, return_numpy, (feed_var_name, fetch_var_name),
                forget))
        return results

    def _run_direct(self, program, feed, fetch_list, scope, args, direct_ok, hot, hot_rc):
        """(the fetched values or None, the signature key, its DirectRun or None): the run
        through its prepared run when there is one and it took the call (nothing ran
        otherwise). `hot_rc`: what the C check of the signature last run this way (`hot`,
        the executor's `_hot` when the run began) returned, when it was not the fetched
        list: None (not that signature: nothing ran), or the code its runner left for the
        DirectRun's Python way."""
        if hot_rc is not None:                 # that signature: the DirectRun goes on
            out = hot[1].run(feed, hot_rc)
            if out is not None:
                return out, None, None
            direct_ok = False                  # this call takes the full path
        key, known = self._lookup_direct(program, feed, fetch_list, scope, args)
        if known is not None and direct_ok:
            out = known.run(feed)
            if out is not None:
                if type(fetch_list) is list:
                    self._hot = (direct.hot_call(known, feed, fetch_list, args), known)
                return out, key, known
        return None, key, known

    def _lookup_direct(self, program, feed, fetch_list, scope, args):
        """(the run's signature key, its DirectRun when one still holds for `program` in
        `scope`, else None). `args`: (block_id, return_numpy, feed_var_name,
        fetch_var_name)."""
        key = _direct_key(program, feed, fetch_list, args[0], scope, args[1], args[2], args[3])
        known = self._direct.get(key) if key is not None else None
        if known is not None and not known.valid_for(program, scope):
            known = None
        return key, known

    def _remember_direct(self, key, d):
        """Keep the prepared run (or FullPath) of a signature; the oldest go past
        _DIRECT_RUNS kept (a run of a forgotten one prepares it again)."""
        self._direct.pop(key, None)
        self._direct[key] = d
        self._hot = None
        if len(self._direct) > _DIRECT_RUNS:
            del self._direct[next(iter(self._direct))]

    def _run_prepared(self, prep, scope, feed, feed_names, fetch_names, feed_var_name,
                      fetch_var_name, create_local_scope, return_numpy):
        """One run of a prepared signature the full way: the feed checked into its holder,
        a frame bound in a local kid scope, every step, the fetches read from their holder."""
        if feed_names:
            scope.var(feed_var_name).value = self._fed(prep, feed)
        if prep.n_fetch:
            holder = scope.var(fetch_var_name)
            holder.value = [None] * prep.n_fetch

        local = scope.new_scope() if create_local_scope else scope
        plan = prep.plan
        if self._kinds.profile is not None:
            self._kinds.profile.begin_run()
        step_profile = profiling.active()
        if step_profile is not None:
            t0 = time.perf_counter()
        try:
            frame = plan.frame(local)
            if prep.needs:  # a tensor nothing feeds or computes: say so before any op runs
                err = _unset(prep, frame, feed_names)
                if err is not None:
                    raise err
            plan.run(frame, RunEnv(local, self, prep.program))
        finally:
            if create_local_scope:
                scope.delete_scope(local)
            else:
                scope.drop_kids()
            if step_profile is not None:
                step_profile.record_step(t0, time.perf_counter())
        if not fetch_names:
            return []
        results = [holder.value[c] for c in prep.fetch_cols]
        if return_numpy:
            results = [_to_numpy(v) for v in results]
            results = [r.copy() if p and isinstance(r, np.ndarray) else r
                       for r, p in zip(results, prep.fetch_persistable)]
        return results

    def _fed(self, prep, feed):
        """The feed holder's columns: each fed value checked against its variable; names
        the program lacks (prep.feed_pos leaves them out) are not fed."""
        fed = [None] * prep.n_feed
        values = feed.values()
        if prep.feed_pos is not None:
            values = list(values)
            values = [values[i] for i in prep.feed_pos]
        for spec, col, value in zip(prep.feed_specs, prep.feed_cols, values):
            fed[col] = self._check_feed(spec, value)
        return fed

    # -- pruning to the fetches (Fluid 1.8's use_prune) -----------------------------------
    def _prune_for(self, program, feed, fetch_list, use_prune):
        """(program, feed, fetch_list) to run: pruned to the fetches, with use_prune or when
        the fetch list names optimizer ops (which then leave the fetch list)."""
        if fetch_list is not None and not isinstance(fetch_list, (VarView, str)):
            given = list(fetch_list)
            fetch_list, optimize_ops = self._split_optimize_ops_in_fetch_list(given)
            if optimize_ops or use_prune:
                program = self._pruned(program, feed, given, fetch_list, optimize_ops)
                feed = self._update_feed(program, feed)
        elif use_prune:
            fetches = _fetch_list(fetch_list)
            program = self._pruned(program, feed, fetches, fetches, [])
            feed = self._update_feed(program, feed)
        return program, feed, fetch_list

    @staticmethod
    def _split_optimize_ops_in_fetch_list(fetch_list):
        return pruning.split_optimize_ops(fetch_list)

    def _prune_program(self, program, feed=None, fetch_list=None, optimize_ops=None):
        return pruning.prune_program(program, feed, fetch_list or [], optimize_ops or [])

    @staticmethod
    def _update_feed(program, feed):
        return pruning.update_feed(program, feed)

    def _pruned(self, program, feed, given_fetch_list, fetch_list, optimize_ops):
        """The pruned program of this signature, pruned once and cached (Fluid's
        `_get_pruned_program_cache`)."""
        if program is None:
            program = defaults.main_program()
        per_prog = self._pruned_cache.setdefault(program, {})
        key = pruning.cache_key(program, feed, given_fetch_list)
        pruned = per_prog.get(key)
        if pruned is None:
            pruned = per_prog[key] = self._prune_program(program, feed, fetch_list,
                                                         optimize_ops)
        return pruned

    def _as_view(self, program):
        """The ProgramView to run for what a caller hands `run`: the default main program
        for None; a CompiledProgram's program; a view (the builder's Program is one) as is;
        a bare ProgramDesc in a view kept for the next runs (the desc is taken as unchanged
        between them: change it and hand a new one, or a view)."""
        if program is None:
            program = defaults.main_program()
            if program is None:
                raise FluidityError("Executor.run: no program given and no default main "
                                    "program")
        program_for_executor = getattr(program, "program_for_executor", None)
        if program_for_executor is not None:
            program = program_for_executor()
        if isinstance(program, ProgramView):
            return program
        if isinstance(program, pb.ProgramDesc):
            hit = self._raw_views.get(id(program))
            if hit is not None and hit[0] is program:
                self._raw_views.move_to_end(id(program))
                return hit[1]
            view = ProgramView(program)
            self._raw_views[id(program)] = (program, view)
            if len(self._raw_views) > _RAW_DESC_VIEWS:
                self._raw_views.popitem(last=False)
            return view
        raise ArgumentTypeError(f"Executor requires Program as its Parameter. But you passed "
                                f"in {type(program).__name__}")

    # -- datasets (Paddle 1.4+) --------------------------------------------------------------
    def train_from_dataset(self, program=None, dataset=None, scope=None, thread=0,
                           debug=False, fetch_list=None, fetch_info=None, print_period=100,
                           fetch_handler=None, tensorboard_dir=None):
        """Train `program` on `dataset` (fluid.DatasetFactory) with Hogwild workers, as
        AsyncExecutor.run does: `thread` > 0 caps the dataset's thread count; fetch_list's
        means are printed to stdout every `print_period` batches (labelled by fetch_info;
        also a bar on a terminal, the logger, and TensorBoard scalars in `tensorboard_dir`:
        executor/progress.py);
        `fetch_handler` (a fluid.executor.FetchHandler) is called every its period_secs
        (executor/fetch_handler.py). Returns the run's fetched means and record (Paddle
        returns None)."""
        return self._run_dataset(program, dataset, scope, thread, debug, fetch_list,
                                 fetch_info, print_period, fetch_handler, infer=False,
                                 tensorboard_dir=tensorboard_dir)

    def infer_from_dataset(self, program=None, dataset=None, scope=None, thread=0,
                           debug=False, fetch_list=None, fetch_info=None, print_period=100,
                           fetch_handler=None, tensorboard_dir=None):
        """Run `program`'s inference copy (no backward or optimizer ops) over `dataset` with
        the same workers: the parameters are not changed."""
        return self._run_dataset(program, dataset, scope, thread, debug, fetch_list,
                                 fetch_info, print_period, fetch_handler, infer=True,
                                 tensorboard_dir=tensorboard_dir)

    @staticmethod
    def _run_dataset(program, dataset, scope, thread, debug, fetch_list, fetch_info,
                     print_period, fetch_handler, infer, tensorboard_dir=None):
        if dataset is None:     # Paddle's words, which its programs compare
            raise RunError("dataset is need and should be initialized")
        run_workers = getattr(dataset, "run_workers", None)
        if run_workers is None:
            raise RunError(f"train_from_dataset needs a dataset made by "
                               f"fluid.DatasetFactory(), got {type(dataset).__name__}")
        return run_workers(program=program, scope=scope, thread=thread, debug=debug,
                           fetch_list=fetch_list, fetch_info=fetch_info,
                           print_period=print_period, infer=infer,
                           fetch_handler=fetch_handler, tensorboard_dir=tensorboard_dir)

    def close(self):
        self.services.close()             # a trainer says goodbye to its pservers here
        self._cache.clear()
        self._block_plans.clear()
        self._raw_views.clear()
        self._pruned_cache.clear()
        self._direct.clear()
        self._hot = None
        self._kinds.close()

