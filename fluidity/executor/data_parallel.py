"""Data parallelism over CPU places, as Fluid 1.x's ParallelExecutor runs it.

`CompiledProgram(main).with_data_parallel(loss_name=..., places=fluid.cpu_places(N))`
runs N replicas of the program, each on its own batch (a place's share of a fed batch, or
its own feed dict), as threads of this process over the parameters in the user's scope:

* The program each replica runs is the data-parallel pass's
  (transpiler/data_parallel.py): the loss gradient scaled by 1/N and a `c_allreduce_sum`
  after each parameter gradient. A `ReplicaPlan` prepares it once (an interpreter plan)
  and cuts its ops into segments by role: optimizer, learning-rate schedule and RPC ops
  run **once**, on replica 0's frame, after every replica has reached them; every other op
  runs on **each replica**, on N threads at once (numpy and the native kernels release the
  GIL, so replicas use separate cores). The collective ops meet at a rendezvous of the
  run (`env.collective`): each replica hands its gradient, the sum is taken once, in
  replica order, and every replica continues with it. Ops that read a program's reader
  run in replica order, so replica k takes the k-th batch of each group of N.
* Scopes, as Fluid lays them out: replica 0 runs in the user's scope, replica k > 0 in a
  kid of it (its *place scope*, kept across runs) holding its own copies of the persistable
  tensors the replicas write (batch-norm statistics: copied from the user's scope when the
  program is first run, as Fluid broadcasts them); parameters are not copied, every
  replica reads the user's. Each run's temporaries live in a kid of the place scope,
  dropped after the run.
* Feeding follows Fluid's `Executor.run` for a data-parallel program: a list of N feed
  dicts gives each place its own; one dict is split along the batch axis (Fluid's
  SplitLoDTensor: ceil(B / N) examples a place, whole sequences for LoD input), and a
  batch too small to give every place an example is refused, as Fluid refuses it, except
  for inference programs (no backward or optimize op), where places without data sit the
  run out (Fluid's partial feed).
* Fetches come back merged along the batch axis (Fluid's MergeLoDTensor: a `[1]` loss
  from 2 places is `[2]`), or per place with `return_merged=False`.
* `ExecutionStrategy._dry_run`: the run goes through feeding and scheduling but runs no
  op (Fluid skips every op handle's kernel); fetched values are None.
"""
import threading
import weakref
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from ..core import dtypes
from ..core.dtypes import VarType
from ..core.names import OpRole
from ..core.tensor import LoDTensor, LoDTensorArray, SelectedRows
from ..errors import EOFException, ExecutionError, FeedError, FetchError
from ..ir.views import VarView
from .executor import fed_array, fetch_name
from .plan import Plan, RunEnv

_ONCE_ROLES = OpRole.Optimize | OpRole.LRSched | OpRole.RPC | OpRole.Dist
_REPLICA_COPIED = (VarType.LOD_TENSOR, VarType.SELECTED_ROWS)


def runs_once(op):
    """Whether a data-parallel run runs `op` (an OpView) once rather than on every replica:
    the optimizer (and regularization, clipping), learning-rate schedule and RPC ops,
    which update what the replicas share."""
    return bool(op.role & _ONCE_ROLES)


def _touches_reader(block, op):
    for n in op.input_arg_names + op.output_arg_names:
        v = block.find_var_recursive(n)
        if v is not None and v.type == VarType.READER:
            return True
    return False


class _Aborted(Exception):
    """A replica stopped because another one failed (never reaches the caller)."""


class _Rendezvous:
    """Where the replicas of one run meet for a collective op: each deposits its value, the
    last to arrive combines them (once, in replica order), all leave with the result."""

    def __init__(self, n):
        self.n = n
        self._deposits = [None] * n
        self._result = None
        self._error = None
        self._barrier = threading.Barrier(n, action=self._combine)

    def _combine(self):
        keys = [d[0] for d in self._deposits]
        if len(set(keys)) != 1:
            self._error = ExecutionError(
                f"the replicas of a data-parallel run reached different collective ops "
                f"{keys}: their programs diverged")
            return
        try:
            self._result = self._deposits[0][2]([d[1] for d in self._deposits])
        except BaseException as e:   # noqa: B036 -- raised on every replica
            self._error = e

    def exchange(self, rank, key, value, merge):
        self._deposits[rank] = (key, value, merge)
        try:
            self._barrier.wait()
        except threading.BrokenBarrierError:
            raise _Aborted() from None
        if self._error is not None:
            raise self._error
        return self._result

    def abort(self):
        self._barrier.abort()


class _Member:
    """One replica's handle on the rendezvous (`env.collective` of the collective ops)."""
    __slots__ = ("_rv", "rank")

    def __init__(self, rv, rank):
        self._rv, self.rank = rv, rank

    @property
    def nranks(self):
        return self._rv.n

    def allreduce(self, key, value, merge):
        return self._rv.exchange(self.rank, key, value, merge)

    def reduce(self, key, value, merge, root):
        out = self._rv.exchange(self.rank, key, value, merge)
        return out if self.rank == root else value


class _Turns:
    """Replica order for the ops that read a shared reader: replica k runs such an op after
    replica k-1 has run it."""

    def __init__(self):
        self._next = {}
        self._cv = threading.Condition()
        self._broken = False

    def wait(self, i, rank):
        with self._cv:
            while self._next.get(i, 0) != rank and not self._broken:
                self._cv.wait()
            if self._broken:
                raise _Aborted()

    def done(self, i):
        with self._cv:
            self._next[i] = self._next.get(i, 0) + 1
            self._cv.notify_all()

    def abort(self):
        with self._cv:
            self._broken = True
            self._cv.notify_all()


class ReplicaEnv(RunEnv):
    """A replica's run environment: a RunEnv with the run's collective handle."""
    __slots__ = ("collective",)

    def __init__(self, scope, executor, program, collective):
        super().__init__(scope, executor, program)
        self.collective = collective


class ReplicaPlan(Plan):
    """An interpreter plan of the data-parallel program whose ops are cut into segments
    that run once (on replica 0's frame) or on every replica (see the module docstring).
    Run alone (`run(frame, env)`) it is the plain interpreter plan."""

    def __init__(self, program, block_idx=0):
        super().__init__(program, block_idx)
        block = self.block
        once = [runs_once(op) for op in self.ops]
        self.segments = []          # (runs once, first op, end)
        for i, flag in enumerate(once):
            if self.segments and self.segments[-1][0] == flag:
                self.segments[-1][2] = i + 1
            else:
                self.segments.append([flag, i, i + 1])
        self.segments = [tuple(s) for s in self.segments]
        self.in_order = frozenset(i for i, op in enumerate(self.ops)
                                  if not once[i] and _touches_reader(block, op))
        # what a once-segment writes that is not persistable: handed to every replica's frame
        self.shared_after = {}
        for k, (flag, start, end) in enumerate(self.segments):
            if flag:
                names = {n for op in self.ops[start:end] for n in op.output_arg_names}
                self.shared_after[k] = sorted(self._slot[n] for n in names
                                              if n in self._slot and not self._persistable(n))
        # a read op with drop_last=False: places that find no batch may sit a run out
        self.partial_read = any(op.type == "read" and op.has_attr("drop_last") and
                                not op.attr("drop_last") for i, op in enumerate(self.ops)
                                if i in self.in_order)
        # persistable tensors the replicas write: each place keeps its own copy
        self.replica_persistables = sorted({
            n for i, op in enumerate(self.ops) if not once[i]
            for n in op.output_arg_names if self._replica_copied(n)})

    def _persistable(self, name):
        v = self.block.find_var_recursive(name)
        return v is not None and v.persistable

    def _replica_copied(self, name):
        v = self.block.find_var_recursive(name)
        return v is not None and v.persistable and v.type in _REPLICA_COPIED and \
            name not in ("feed", "fetch")

    # -- running ------------------------------------------------------------------------
    def _run_range(self, start, end, frame, env, turns, rank):
        steps, in_order = self.steps, self.in_order
        i = start
        try:
            while i < end:
                if i in in_order:
                    turns.wait(i, rank)
                    try:
                        steps[i](frame, env)
                    finally:
                        turns.done(i)
                else:
                    steps[i](frame, env)
                i += 1
        except _Aborted:
            raise
        except Exception as e:
            err = self.failure(i, frame, e)
            if err is e:
                raise
            raise err from e

    def run_replicas(self, frames, envs, pool, rendezvous, partial=False):
        """Run the block on len(frames) replicas (frames[k] bound in replica k's scope).
        Returns how many ran to the end: all, unless `partial` (an inference run over a
        read op with drop_last=False) let the places from the first one whose read found
        the data at its end sit the run out (replica 0's end of data is the pass's)."""
        turns = _Turns()
        for k, (once, start, end) in enumerate(self.segments):
            if once or len(frames) == 1:
                self._run_range(start, end, frames[0], envs[0], turns, 0)
                for slot in self.shared_after.get(k, ()):
                    value = frames[0][slot].value
                    for f in frames[1:]:
                        f[slot].value = value
                continue
            ran = self._run_parallel(start, end, frames, envs, pool, rendezvous, turns,
                                     partial and self.partial_read)
            frames, envs = frames[:ran], envs[:ran]
        return len(frames)

    def _run_parallel(self, start, end, frames, envs, pool, rendezvous, turns,
                      partial=False):
        errors = [None] * len(frames)
        out_of_data = [False] * len(frames)

        def replica(rank):
            try:
                self._run_range(start, end, frames[rank], envs[rank], turns, rank)
            except EOFException as e:
                if partial and rank > 0:      # this place got no batch: it sits out
                    out_of_data[rank] = True
                    return
                errors[rank] = e
                if rendezvous is not None:
                    rendezvous.abort()
                turns.abort()
            except BaseException as e:   # noqa: B036 -- the first real one is raised below
                errors[rank] = e
                if rendezvous is not None:
                    rendezvous.abort()
                turns.abort()

        helpers = [pool.submit(replica, rank) for rank in range(1, len(frames))]
        replica(0)
        for f in helpers:
            f.result()
        real = [e for e in errors if e is not None and not isinstance(e, _Aborted)]
        if real:
            raise real[0]
        if any(errors):   # aborted without a cause: should not happen
            raise ExecutionError("a data-parallel run stopped without an error")
        # reads go in place order: the places after the first that found no batch found none
        return out_of_data.index(True) if any(out_of_data) else len(frames)


class ReplicaStrategy:
    """The plan kind a data-parallel run prepares its program into (what
    `Executor.prepare` asks of a strategy: a kind name, `make_plan`, `observed`)."""
    kind = "replicas"
    profile = None

    def make_plan(self, program, block_id=0):
        return ReplicaPlan(program, block_id)

    def observed(self, plan):
        return plan


# --- feeding -------------------------------------------------------------------------------
def batch_size_of(t):
    """Examples in a LoDTensor: its top-level sequences when it has LoD, else rows."""
    if t._lod:
        return len(t._lod[0]) - 1
    return int(t._array.shape[0]) if t._array.ndim else 1


def _sub_lod(lod, begin, end):
    """(LoD of top-level sequences [begin, end), rebased to 0; (first row, end row))."""
    levels = []
    for level in lod:
        offs = level[begin:end + 1]
        levels.append([o - offs[0] for o in offs])
        begin, end = offs[0], offs[-1]
    return levels, (begin, end)


def split_tensor(t, n):
    """Fluid's SplitLoDTensor: `t` cut along the batch into at most `n` parts of
    ceil(B / n) examples (whole sequences for LoD input); fewer parts when B < n; n empty
    copies for an empty batch."""
    arr = t._array
    batch = batch_size_of(t)
    if batch == 0:
        return [LoDTensor(arr[:0] if arr.ndim else arr, [list(lv) for lv in t._lod])
                for _ in range(n)]
    if arr.ndim == 0:
        return [t]
    step = -(-batch // n)
    parts = []
    for begin in range(0, batch, step):
        end = min(begin + step, batch)
        if t._lod:
            lod, (r0, r1) = _sub_lod(t._lod, begin, end)
            parts.append(LoDTensor(arr[r0:r1], lod))
        else:
            parts.append(LoDTensor(arr[begin:end]))
    return parts


def merge_tensors(values, name):
    """Fluid's MergeLoDTensor: the places' tensors of one fetched variable joined along the
    batch axis, LoD offsets carried (0-D values are stacked)."""
    first = values[0]
    if isinstance(first, LoDTensorArray) or isinstance(first, list):
        if any(len(v) != len(first) for v in values):
            raise FetchError(f"fetch '{name}': the places' tensor arrays have different "
                             f"lengths {[len(v) for v in values]}; fetch with "
                             f"return_merged=False")
        out = LoDTensorArray()
        for parts in zip(*values):
            out.append(merge_tensors(list(parts), name))
        return out
    if isinstance(first, SelectedRows):
        return SelectedRows(np.concatenate([np.asarray(v.rows) for v in values]),
                            first.height,
                            np.concatenate([np.asarray(v.value) for v in values]))
    if not isinstance(first, LoDTensor):
        return first
    arrays = [v._array for v in values]
    if any(a is None for a in arrays):
        raise FetchError(f"fetch '{name}': a place holds no value for it")
    if arrays[0].ndim == 0:
        return LoDTensor(np.stack(arrays))
    tails = {a.shape[1:] for a in arrays}
    if len(tails) != 1 or len({a.ndim for a in arrays}) != 1:
        raise FetchError(f"fetch '{name}': the places' values have shapes "
                         f"{[list(a.shape) for a in arrays]}, which do not join along the "
                         f"batch axis; fetch it with return_merged=False")
    lod = []
    if first._lod:
        for level in range(len(first._lod)):
            merged = [0]
            for v in values:
                offs = v._lod[level] if level < len(v._lod) else [0]
                base = merged[-1] - offs[0]
                merged.extend(base + o for o in offs[1:])
            lod.append(merged)
    return LoDTensor(np.concatenate(arrays, axis=0), lod)


# --- the runner (Fluid's core.ParallelExecutor) -------------------------------------------
class DataParallelRunner:
    """N replicas of one data-parallel program over one scope: what a compiled
    data-parallel CompiledProgram runs (`CompiledProgram._executor`, Fluid's name).

    `program` is a ProgramView of the data-parallel pass's output; `scope` the user's;
    `place_scopes` (Fluid's local scopes) another runner's, to share its places' copies
    (`share_vars_from`); `training`: whether the program has backward/optimize ops (no
    partial feeds then); `dry_run`: run no op (ExecutionStrategy._dry_run)."""

    def __init__(self, program, places, scope, place_scopes=None, training=True,
                 dry_run=False):
        self.program = program
        self.places = list(places)
        self.scope = scope
        self.training = training
        self.dry_run = dry_run
        n = len(self.places)
        if place_scopes is not None:
            if len(place_scopes) != n:
                raise ValueError(f"share_vars_from: the shared program runs on "
                                 f"{len(place_scopes)} places, this one on {n}")
            self._place_scopes = list(place_scopes)
        else:
            self._place_scopes = [scope] + [scope.new_scope() for _ in range(n - 1)]
        self._copied = set()
        self._exe_scopes = True      # Fluid makes the places' run scopes up front
        self._pool = ThreadPoolExecutor(max(n - 1, 1), thread_name_prefix="fluidity-replica")
        self._finalizer = weakref.finalize(self, self._pool.shutdown, False)
        self._strategy = ReplicaStrategy()

    # Fluid's core.ParallelExecutor questions
    def device_count(self):
        return len(self.places)

    def local_scopes(self):
        return list(self._place_scopes)

    def drop_local_exe_scopes(self):
        """Fluid frees the places' per-run scopes here (it keeps them for
        num_iteration_per_drop_scope runs); Fluidity drops a run's scopes when the run ends,
        so this only records, as Fluid's flag does, that the next run makes them anew."""
        self._exe_scopes = False

    def _need_create_local_exe_scopes(self):
        return not self._exe_scopes

    def close(self):
        self._finalizer()

    # -- one run --------------------------------------------------------------------------
    def run(self, executor, feed, fetch_list, feed_var_name="feed", fetch_var_name="fetch",
            return_numpy=True, return_merged=True):
        n = len(self.places)
        feeds = self._place_feeds(feed, n)
        names = sorted({k for f in feeds if f for k in f})
        # the places that run are those given data (non-persistable values); a persistable
        # value fed once is every place's copy and does not make a place run (Fluid)
        data = [x for x in names if not self._fed_persistable(x)] or names
        active = [k for k, f in enumerate(feeds) if any(x in f for x in data)] \
            if names else list(range(n))
        for k in active:
            if sorted(feeds[k]) != names:
                raise FeedError(f"data-parallel feed: place {k} is fed {sorted(feeds[k])}, "
                                f"another place {names}; every place that runs must be fed "
                                f"the same variables (a persistable variable needs as many "
                                f"values as the others, or one for every place)")
        if len(active) < n and self.training:
            raise FeedError(
                f"the feed has data for {len(active)} of the {n} places; a training program "
                f"needs a batch for every place (a DataLoader over {n} places with "
                f"drop_last=False gave a short last step? use drop_last=True)")
        fetch_names = tuple(fetch_name(f) for f in fetch_list)
        feed_names = tuple(names)
        self._exe_scopes = True
        prep = executor.prepare(self.program, 0, feed_names, fetch_names, feed_var_name,
                                fetch_var_name, self._strategy)
        self._copy_replica_persistables(prep.plan)
        plan = prep.plan
        exec_scopes, frames, envs = [], [], []
        rendezvous = _Rendezvous(len(active)) if len(active) > 1 else None
        try:
            for r, k in enumerate(active):
                scope = self._place_scopes[k].new_scope()
                exec_scopes.append((k, scope))
                if feed_names:
                    fed = [None] * prep.n_feed
                    for spec, col in zip(prep.feed_specs, prep.feed_cols):
                        fed[col] = executor.check_feed(spec, feeds[k][spec[0]])
                    scope.var(feed_var_name).value = fed
                if prep.n_fetch:
                    scope.var(fetch_var_name).value = [None] * prep.n_fetch
                frame = plan.frame(scope)
                if prep.needs and not self.dry_run:
                    err = executor.missing_input(prep, frame, feed_names)
                    if err is not None:
                        raise err
                frames.append(frame)
                envs.append(ReplicaEnv(scope, executor, prep.program,
                                       _Member(rendezvous, r) if rendezvous else None))
            ran = len(frames)
            if not self.dry_run:
                ran = plan.run_replicas(frames, envs, self._pool, rendezvous,
                                        partial=not self.training)
            per_place = [[s.find_var(fetch_var_name).value[c] for c in prep.fetch_cols]
                         for _k, s in exec_scopes[:ran]] if fetch_names else []
        finally:
            for k, s in exec_scopes:
                self._place_scopes[k].delete_scope(s)
        return self._results(executor, fetch_names, per_place, return_numpy, return_merged)

    def _results(self, executor, fetch_names, per_place, return_numpy, return_merged):
        """The fetched values: per fetch target, the places' values merged (Fluid's
        return_merged) or listed, as numpy arrays when return_numpy."""
        results = []
        for j, name in enumerate(fetch_names):
            values = [p[j] for p in per_place]
            if self.dry_run or any(v is None for v in values):
                results.append(None if return_merged else values)
                continue
            results.append(merge_tensors(values, name) if return_merged else values)
        if return_numpy:
            results = [executor.to_numpy(r) if return_merged else
                       [executor.to_numpy(v) for v in r] for r in results]
        return results

    def _place_feeds(self, feed, n):
        """One feed dict per place (empty: the place has no data this run)."""
        if feed is None:
            return [{} for _ in range(n)]
        if isinstance(feed, dict):
            return self._split_feed(feed, n)
        if isinstance(feed, (list, tuple)):
            if len(feed) > n:
                raise FeedError(f"data-parallel feed: {len(feed)} feed dicts for {n} places")
            if len(feed) < n and self.training:
                raise FeedError(f"data-parallel feed: {len(feed)} feed dicts for {n} places; "
                                f"a training program needs one per place (if a DataLoader "
                                f"gave them, use drop_last=True)")
            out = []
            for k, f in enumerate(feed):
                if not isinstance(f, dict):
                    raise TypeError(f"each element of a data-parallel feed list must be a "
                                    f"dict, element {k} is {type(f).__name__}")
                out.append({_feed_name(key): v for key, v in f.items()})
            return out + [{} for _ in range(n - len(out))]
        raise FeedError(f"feed must be a dict or a list of dicts (one per place), got "
                        f"{type(feed).__name__}")

    def _fed_persistable(self, name):
        var = self.program.global_block().find_var_recursive(name)
        return var is not None and var.persistable

    def _split_feed(self, feed, n):
        block = self.program.global_block()
        out = [{} for _ in range(n)]
        for key, value in feed.items():
            name = _feed_name(key)
            var = block.find_var_recursive(name)
            if var is None:
                raise FeedError(f"cannot feed '{name}': the program has no variable of "
                                f"that name")
            parts = split_tensor(_as_tensor(name, value, var), n)
            if var.persistable and len(parts) == 1:
                parts = parts * n          # one value for every place's copy
            if len(parts) < n and self.training:
                total = sum(batch_size_of(part) for part in parts)
                raise FeedError(
                    f"feed '{name}': the batch of {total} example(s) gives {len(parts)} of "
                    f"the {n} places an example; a data-parallel program splits a fed batch "
                    f"over its places (Fluid's rule: ceil(batch / places) examples each). "
                    f"Feed at least {n} examples, or set CPU_NUM / places to fewer places")
            for k, part in enumerate(parts):
                out[k][name] = part
        return out

    def _copy_replica_persistables(self, plan):
        """Give places 1.. their own copy of each persistable tensor the replicas write
        (Fluid broadcasts them to the devices when the program is first run)."""
        todo = [n for n in plan.replica_persistables if n not in self._copied]
        for name in todo:
            self._copied.add(name)
            src = self.scope.find_var(name)
            value = src.value if src is not None else None
            for ps in self._place_scopes[1:]:
                if ps.find_local_var(name) is not None:
                    continue
                ps.var(name).value = _copy_value(value)


def _copy_value(value):
    if isinstance(value, LoDTensor):
        return LoDTensor(None if value._array is None else value._array.copy(),
                         [list(level) for level in value._lod])
    if isinstance(value, SelectedRows):
        return SelectedRows(value.rows.copy(), value.height,
                            None if value.value is None else np.array(value.value))
    return value


def _feed_name(key):
    return key.name if isinstance(key, VarView) else key


def _as_tensor(name, value, var):
    """A fed value as a LoDTensor to split (its dtype checked later, per place)."""
    if isinstance(value, LoDTensor):
        if value._array is None:
            raise FeedError(f"feed '{name}': the LoDTensor holds no data")
        return value
    if isinstance(value, np.ndarray):
        return LoDTensor(value)
    try:
        np_dtype = dtypes.to_numpy(var.dtype) if var.dtype is not None else None
    except Exception:   # a dtype numpy lacks: let numpy choose, the check names it
        np_dtype = None
    try:
        return LoDTensor(fed_array(value, np_dtype, zero_d=var.need_check_feed and
                                   tuple(var.shape) == ()))
    except (TypeError, ValueError) as e:
        raise FeedError(f"feed '{name}': cannot convert {type(value).__name__} to a tensor: "
                        f"{e}") from None
