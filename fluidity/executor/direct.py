"""A prepared compiled run: what `Executor.run` does per call for a program compiled whole
(a native plan whose block is its feed ops, one compiled segment and its fetch ops).

Everything that depends only on the run's signature is worked out once, right after the
first run of that signature went the executor's full way: which segment input each fed
value goes to, the scope Variables of the persistables the segment reads, where each fetch
comes from. The signature is the program (and its revision), the block, the fed names in
the caller's order, the fetched names, the holders' names, the scope (and the revision of
it and of its ancestors: a variable made, erased or renamed there binds again) and
`return_numpy`. A run then only

  - checks each fed value against what was accepted before: an ndarray of the compiled
    dtype, C-contiguous, of the shape last accepted. Anything else (a first shape, a
    LoDTensor, a list, a scalar, another dtype) goes through the executor's full feed check
    (`Executor.check_feed`), which raises the same FeedError naming the variable as ever;
  - writes the fed arrays' addresses, and a parameter's when its array changed, into the
    segment's argument records (the segment checks every rank and literal dim itself) and
    calls the segment once, without the GIL: both in one call of direct_call.c's helper
    where it builds (it needs the Python headers), else in Python;
  - copies the fetched values out of the arena, and leaves the feed and fetch holders of
    the scope as the full path leaves them.

Temporaries never become scope variables (the full path makes them in a kid scope that it
drops after the run, so nothing a user can see changes). What this path does not do the
same way as the full one — inputs of other shapes than the segment was built for (its ops
then run interpreted), a value of another dtype than compiled, a persistable without a
value, an arena too large — it leaves to the full path for that call (`run` returns None
before anything ran), so every error and fallback is the full path's own.
"""
import ctypes
import os
import sysconfig
import threading
import weakref

import numpy as np

from ..codegen import abi
from ..core import native
from ..core.tensor import LoDTensor, as_fetched
from ..errors import FetchError
from .native import Interpret, NativePlan, SegmentOp

_DATA, _NDIM, _DIMS = abi.DATA, abi.NDIM, abi.DIMS
_HELPER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "direct_call.c")
_NOT_PACKED = -100           # direct_call.c's FL_NOT_PACKED
_helper = []                 # [(helper, runner maker, ns getter), or None], once per process

# direct_call.c's runner block: int64 slots, then per fed name (its record's slot or -1, the
# accepted rank or -1, MAX_DIMS dims) and per fetch (its record's slot, the data offset,
# rank and MAX_DIMS dims its view was made for)
R_FN, R_ARGS, R_VIEW_ARENA, R_ERR, R_NFEED, R_NFETCH, R_DATA, R_NDIM, R_DIMS, R_MAXD, \
    R_HEAD = range(11)
_MAX_RUNNER_FEEDS = 64       # direct_call.c's FL_MAX_FEEDS


def helper_cflags():
    """The compiler flags direct_call.c builds with (the Python headers' and numpy's
    directories added), or None where this Python has no headers (python3-dev not
    installed)."""
    include = sysconfig.get_paths().get("include")
    if include and os.path.exists(os.path.join(include, "Python.h")):
        return native.CFLAGS + (f"-I{include}", f"-I{np.get_include()}")
    return None


def _helpers():
    """(fl_direct_call, fl_direct_runner, fl_last_native_ns, fl_direct_hot) of
    direct_call.c, or None where it cannot be built: no Python headers, no C compiler, or
    FLUIDITY_NATIVE=0."""
    if not _helper:
        got = None
        flags = helper_cflags()
        if os.environ.get("FLUIDITY_NATIVE", "1") != "0" and flags is not None:
            try:
                lib = native.load(_HELPER, cflags=flags)
                # the GIL held: they read Python objects
                call = ctypes.PYFUNCTYPE(ctypes.c_int, ctypes.py_object, ctypes.c_void_p)(
                    ("fl_direct_call", lib))
                runner = ctypes.PYFUNCTYPE(ctypes.py_object, ctypes.py_object)(
                    ("fl_direct_runner", lib))
                ns = ctypes.CFUNCTYPE(ctypes.c_int64)(("fl_last_native_ns", lib))
                hot = ctypes.PYFUNCTYPE(ctypes.py_object, ctypes.py_object)(
                    ("fl_direct_hot", lib))
                got = (call, runner, ns, hot)
            except (native.NativeBuildError, AttributeError, OSError):
                got = None
        _helper.append(got)
    return _helper[0]


def call_helper():
    """direct_call.c's `fl_direct_call` (packs the fed arrays and calls the segment, in one
    call from Python), or None where it cannot be built. Without it the same work is done
    in Python (a few microseconds more a run)."""
    h = _helpers()
    return h[0] if h is not None else None


def runner_maker():
    """direct_call.c's `fl_direct_runner` (makes a run's builtin from its context), or
    None where direct_call.c cannot be built."""
    h = _helpers()
    return h[1] if h is not None else None


def hot_call(known, feed, fetch_list, args):
    """The signature check and run of `known` (a DirectRun whose run just went well) for
    later calls with the same arguments: `hot(program, feed, fetch_list, scope, block_id,
    return_numpy, feed_var_name, fetch_var_name)` returns None when a call is not that
    signature or no longer valid (nothing ran), a list (the fetched values), or a code to
    hand to `known.run(feed, code)`. In C (direct_call.c's `fl_direct_hot`) where it
    builds, else the same checks in Python. `args`: (block_id, return_numpy,
    feed_var_name, fetch_var_name) as Executor.run resolved them; `fetch_list`: a list."""
    names, fetched = tuple(feed) if feed else (), tuple(fetch_list)
    h = _helpers()
    if h is not None:
        return h[3]((known.tls, known.program_ref, known.scope_ref, names, fetched,
                     args[0], bool(args[1]), args[2], args[3], known.view, known.revision,
                     known.setup, tuple(known.chain)))
    program_ref, scope_ref = known.program_ref, known.scope_ref

    def hot(program, feed, fetch_list, scope, block_id, return_numpy, feed_var_name,
            fetch_var_name):
        if program_ref() is not program or scope_ref() is not scope or \
                type(feed) is not dict or type(fetch_list) is not list or \
                tuple(feed) != names or len(fetch_list) != len(fetched) or \
                any(a is not b for a, b in zip(fetch_list, fetched)) or \
                (block_id, bool(return_numpy), feed_var_name, fetch_var_name) != \
                (args[0], bool(args[1]), args[2], args[3]) or \
                not known.valid_for(program, scope):
            return None
        return _NOT_PACKED
    return hot


def last_native_seconds():
    """The wall time of this thread's last segment call made by direct_call.c (the native
    call alone, without what a run does around it), or None without direct_call.c."""
    h = _helpers()
    return h[2]() * 1e-9 if h is not None else None


def _address(a, _char=ctypes.c_char, _addressof=ctypes.addressof):
    """The address of C-contiguous ndarray `a`'s data. Through ctypes' buffer view, which
    costs about a fifth of numpy's `__array_interface__` (a dict built per call); that
    needs a writable array of at least one byte, so others go numpy's way."""
    try:
        return _addressof(_char.from_buffer(a))
    except (TypeError, ValueError):
        return a.__array_interface__["data"][0]


class _Fed:
    """One fed name: its executor feed spec, the segment input it fills (None: the segment
    does not read it), whether the segment reads its LoD, and the (dtype, shape) last
    accepted as a plain C-contiguous ndarray (the run's fast check)."""
    __slots__ = ("spec", "j", "lod", "dtype", "shape")

    def __init__(self, spec, seg_input):
        self.spec = spec
        self.j = seg_input.j if seg_input is not None else None
        self.lod = seg_input is not None and seg_input.lod
        self.dtype = seg_input.dtype if seg_input is not None else spec[2]
        self.shape = None


class _Fetch:
    """Where one fetch comes from: output `j` of the segment (copied out of the arena; its
    LoD the fed value's at position `lod_from`, or none), or a persistable's Variable.
    `view`: the arena view last copied from, with the (arena, record head) it was made for
    (one thread's: a run of another thread makes its own)."""
    __slots__ = ("name", "j", "dtype", "ndim", "lod_from", "var", "persistable", "view")

    def __init__(self, name, out=None, lod_from=None, var=None, persistable=False):
        self.name, self.var, self.persistable = name, var, persistable
        self.lod_from = lod_from
        if out is not None:
            self.j, self.dtype, self.ndim = out.j, out.dtype, out.ndim
        else:
            self.j, self.dtype, self.ndim = None, None, 0
        self.view = (None, None, None)

    def copy_out(self, st, record, as_numpy):
        """A copy of the output's value in the arena (as `run(return_numpy=True)` returns
        it when `as_numpy`: core.tensor.as_fetched)."""
        head = record[:_DIMS + self.ndim].tolist()
        arena, at, view = self.view
        if arena is not st.arena or at != head:
            if head[_NDIM] == abi.NOT_WRITTEN:
                raise FetchError(f"fetch target '{self.name}' has no value after the run "
                                 f"(no op wrote it and it was not fed or initialized)")
            view = np.ndarray(tuple(head[_DIMS:]), self.dtype, st.arena, head[_DATA])
            if as_numpy:
                view = as_fetched(view)
            self.view = (st.arena, head, view)
        return view.copy()


def prepare(prep, view, program, scope, executor, return_numpy, holders, forget=None):
    """The DirectRun of a signature whose full run just went through `prep` (the executor's
    prepared plan) in `scope`, or a FullPath when the plan is not one compiled segment
    between its feeds and fetches (those programs keep the full path). `holders`: the
    names of the feed and fetch holder variables; `forget(ref)` is called when the program
    or the scope is collected (the executor then drops the entry, and what it holds)."""
    d = _direct_run(prep, view, program, scope, executor, return_numpy, holders)
    if d is None:
        d = FullPath()
    d.bind(view, program, scope, forget)
    return d


def _direct_run(prep, view, program, scope, executor, return_numpy, holders):
    plan = prep.plan
    if type(plan) is not NativePlan or prep.needs or plan.block_idx != 0 or plan.outer:
        return None
    step, seen_segment = None, False
    for s, op in zip(plan.steps, plan.ops):
        if isinstance(op, SegmentOp):
            if step is not None:
                return None
            step = s
        elif op.type == "feed" and step is None or op.type == "fetch" and step is not None:
            continue
        else:
            return None
    if step is None or not hasattr(step, "pack"):
        return None
    if step.blocks:
        return None                  # values handed back as blocks: the step's unpack adopts
    persist = {n for _, n in plan.persist}
    fed_at = {spec[0]: k for k, spec in enumerate(prep.feed_specs)}
    if persist & set(fed_at):
        return None                  # a fed persistable stays in the scope: full path
    by_name = {spec.name: spec for spec in step.inputs}
    params = []
    for spec in step.inputs:
        if spec.sparse:
            return None
        if spec.name in fed_at:
            continue
        var = scope.find_var(spec.name)
        if spec.name not in persist or var is None:
            return None
        params.append((spec.j, var, spec.dtype))
    feeds = [_Fed(spec, by_name.get(spec[0])) for spec in prep.feed_specs]
    outs = {o.name: o for o in step.outputs}
    fetches = []
    for name, col, p in zip(_fetch_names(prep), prep.fetch_cols, prep.fetch_persistable):
        out = outs.get(name)
        if out is not None and not out.in_place:
            if out.sparse:
                return None
            lod_from = None
            if out.lod_slot is not None:
                lod_from = fed_at.get(plan.names[out.lod_slot])
                if lod_from is None:
                    return None
            fetches.append((col, _Fetch(name, out=out, lod_from=lod_from)))
        elif name in persist and scope.find_var(name) is not None:
            fetches.append((col, _Fetch(name, var=scope.find_var(name), persistable=p)))
        else:
            return None
    return DirectRun(prep, scope, executor, step, feeds, params, fetches, return_numpy,
                     holders)


def _fetch_names(prep):
    """The fetched names in the caller's order (the fetch ops' inputs by column)."""
    by_col = {op.attr("col"): op.input("X")[0] for op in prep.program.block(0).ops
              if op.type == "fetch"}
    return [by_col[c] for c in prep.fetch_cols]


class FullPath:
    """A signature that has no prepared run (its plan is not a program compiled whole):
    remembered so that its runs do not look again while the program and scope are the
    same."""

    def bind(self, view, program, scope, forget=None):
        """Remember what this signature was prepared for: the program and scope (weakly:
        `forget` is called when either is collected), the program's revision and setup, and
        the revisions of the scope and its ancestors (a scope's parent never changes)."""
        self.program_ref = weakref.ref(program, forget)
        self.scope_ref = weakref.ref(scope, forget)
        # how a CompiledProgram is set up to run (with_native_code, with_data_parallel...)
        self.setup = getattr(program, "setup_revision", None)
        self.view, self.revision = view, view.revision
        chain, s = [], scope
        while s is not None:
            chain.append(s.revision)
            s = s.parent
        self.chain = chain

    def valid_for(self, program, scope):
        """Whether this prepared run still describes `program` run in `scope`."""
        if self.program_ref() is not program or self.scope_ref() is not scope or \
                self.view.revision != self.revision or \
                getattr(program, "setup_revision", None) != self.setup:
            return False
        chain = self.chain
        if scope.revision != chain[0]:
            return False
        for r in chain[1:]:            # a kid scope's ancestors (none for a root scope)
            scope = scope.parent
            if scope.revision != r:
                return False
        return True

    def run(self, feed):
        """None: the executor's full path runs it."""
        return None


class _PerThread(threading.local):
    """A DirectRun's per-thread state: this thread's runner (direct_call.c's, once a run
    went the Python way), its parts, and its call block; None until made."""
    runner = runner_parts = block = None


class DirectRun(FullPath):
    """One prepared signature (see the module docstring). Shareable by threads: each has
    its own argument records and arena (the segment step's per-thread state)."""

    def __init__(self, prep, scope, executor, step, feeds, params, fetches, return_numpy,
                 holders):
        self.step, self.feeds, self.params = step, feeds, params
        self.feed_pos = prep.feed_pos
        self.check_feed, self.to_numpy = executor.check_feed, executor.to_numpy
        self.n_feed, self.feed_cols = prep.n_feed, prep.feed_cols
        self.wrappers = [None] * prep.n_feed   # the feed holder's LoDTensors made here
        self.n_fetch = prep.n_fetch
        self.fetch_cols = [c for c, _ in fetches]
        self.fetches = [f for _, f in fetches]
        self.return_numpy = return_numpy
        self.helper, self.tls = call_helper(), _PerThread()
        feed_name, fetch_name = holders
        self.feed_holder = scope.var(feed_name) if feeds else None
        self.fetch_holder = scope.var(fetch_name) if fetches else None
        self.fetch_wrappers = [None] * prep.n_fetch   # the fetch holder's, when return_numpy
        # the whole run in C (direct_call.c's runner) where it does all a run does: fetches
        # of the segment's outputs without LoD, returned as numpy, no fed LoD read
        self.make_runner = runner_maker() if (
            return_numpy and len(feeds) <= _MAX_RUNNER_FEEDS and
            all(f.j is not None and f.lod_from is None for f in self.fetches) and
            not any(f.lod for f in feeds)) else None

    def run(self, feed, rc=None):
        """The fetched values of one run with `feed` (the caller's dict), or None when this
        call must take the executor's full path (nothing has run then). `rc`: what this
        thread's runner returned for this call when the caller called it (its `hot_call`),
        else None (called here)."""
        if rc is None:
            runner = self.tls.runner
            rc = runner(feed) if runner is not None else _NOT_PACKED
            if type(rc) is list:       # the whole run went in C
                return rc
        values = list(feed.values()) if feed else []
        if self.feed_pos is not None:
            values = [values[i] for i in self.feed_pos]
        step = self.step
        st = step.state()
        if rc > _NOT_PACKED:           # the runner called the segment: rc is its code
            tensors = [None] * len(values)
        else:
            rc = self._call_native(values, st) if self.helper is not None else None
            if rc is not None:
                tensors = [None] * len(values)
            else:                      # a value off the fast check: packed in Python
                tensors = self._pack_feeds(values, st)
                if tensors is None or not self._pack_params(st):
                    return None
                rc = 1
        try:
            if rc == 1:                # packed, not run yet (or the arena must grow)
                rc = step.call(st)
        except Interpret:
            return None
        if rc == -1:                   # shapes the segment was not built for
            return None
        if rc:
            raise step.op_failed(rc, st)
        self._hold_feed(values, tensors)
        out = self._fetched(st, tensors)
        if self.make_runner is not None:
            self._arm(st)
        return out

    def _arm(self, st):
        """After a run that went the Python way: this thread's runner (made once) brought up
        to date with what that run accepted and made, so that the next run of the same
        kind goes in C: each fed name's accepted shape, each fetch's view of the arena (its
        `copy`, and the record head it was made for)."""
        tls = self.tls
        parts = tls.runner_parts
        if parts is None or parts[0] is not st:
            parts = self._runner_parts(st)
            if parts is None:
                return
            tls.runner_parts = parts
        st_, block, copiers, runner, dtypes = parts
        maxd = abi.MAX_DIMS
        for i, f in enumerate(self.feeds):
            dtypes[i] = f.dtype
            at = R_HEAD + i * (2 + maxd)
            ok = f.shape is not None and len(f.shape) <= maxd
            block[at + 1] = len(f.shape) if ok else -1
            if ok:
                block[at + 2:at + 2 + len(f.shape)] = f.shape
        base = R_HEAD + len(self.feeds) * (2 + maxd)
        for k, f in enumerate(self.fetches):
            at = base + k * (3 + maxd)
            arena, head, view = f.view
            if arena is st.arena and head is not None and head[_NDIM] >= 0:
                block[at + 1] = head[_DATA]
                block[at + 2] = head[_NDIM]
                block[at + 3:at + 3 + head[_NDIM]] = head[_DIMS:_DIMS + head[_NDIM]]
                copiers[k] = view.copy
            else:
                copiers[k] = None
        block[R_VIEW_ARENA] = st.arena_ptr
        tls.runner = runner

    def _runner_parts(self, st):
        """(state, block, copiers, runner, dtypes) of this thread's runner, or None when one cannot
        be made (direct_call.c's context check)."""
        maxd, n_in = abi.MAX_DIMS, len(self.step.inputs)
        feed_recs = [abi.input_slot(f.j) if f.j is not None else -1 for f in self.feeds]
        block = np.zeros(R_HEAD + len(self.feeds) * (2 + maxd) +
                         len(self.fetches) * (3 + maxd), np.int64)
        block[[R_FN, R_ARGS, R_ERR, R_NFEED, R_NFETCH, R_DATA, R_NDIM, R_DIMS, R_MAXD]] = [
            ctypes.cast(self.step.fn, ctypes.c_void_p).value, st.args.address,
            ctypes.addressof(st.err), len(self.feeds), len(self.fetches), abi.DATA,
            abi.NDIM, abi.DIMS, maxd]
        for i, at in enumerate(feed_recs):
            block[R_HEAD + i * (2 + maxd)] = at
            block[R_HEAD + i * (2 + maxd) + 1] = -1          # no shape accepted yet
        base = R_HEAD + len(self.feeds) * (2 + maxd)
        for k, f in enumerate(self.fetches):
            block[base + k * (3 + maxd)] = abi.input_slot(n_in + f.j)
        copiers = [None] * len(self.fetches)
        names = tuple(f.spec[0] for f in self.feeds)
        dtypes = [f.dtype for f in self.feeds]     # _arm keeps them the accepted ones
        ctx = (block.ctypes.data, names, dtypes, np.ndarray, LoDTensor,
               tuple((var, j) for j, var, _ in self.params), st.seen,
               self.feed_holder, self.wrappers, self.fetch_holder, self.fetch_wrappers,
               copiers, tuple(f.j for f in self.feeds), st.shapes, st,
               tuple(self.feed_cols), tuple(self.fetch_cols))
        try:
            runner = self.make_runner(ctx)
        except ValueError:
            return None
        # the context keeps the block alive: ctx holds only its address, so keep it here
        return st, block, copiers, runner, dtypes

    def _call_native(self, values, st):
        """The segment's return code after direct_call.c packed `values` and called it,
        when every value passes the fast check; else None (nothing ran)."""
        seen, shapes = st.seen, st.shapes
        for f, v in zip(self.feeds, values):
            if type(v) is not np.ndarray or v.dtype is not f.dtype or v.shape != f.shape \
                    or not v.flags.c_contiguous:
                return None
        for f, v in zip(self.feeds, values):
            j = f.j
            if j is not None:          # what the Python packing's record cache assumes
                seen[j], shapes[j] = v, v.shape
        if not self._pack_params(st):
            return None
        rc = self.helper(values, self._block(st))
        return None if rc <= _NOT_PACKED else rc

    def _block(self, st):
        """This thread's call block for direct_call.c (its address as a c_void_p), the
        arena's address and size brought up to date."""
        b = self.tls.block
        if b is None or b[0] is not st:
            recs = [abi.input_slot(f.j) if f.j is not None else -1 for f in self.feeds]
            vec = np.array([ctypes.cast(self.step.fn, ctypes.c_void_p).value,
                            st.args.address, 0, 0, ctypes.addressof(st.err), len(recs),
                            abi.DATA, abi.NDIM, abi.DIMS, abi.MAX_DIMS] + recs, np.int64)
            b = self.tls.block = [st, vec, ctypes.c_void_p(vec.ctypes.data), None]
        if b[3] is not st.arena:       # grown since: a new arena
            b[1][2], b[1][3], b[3] = st.arena_ptr, st.cap, st.arena
        return b[2]

    def _pack_feeds(self, values, st):
        """Each fed value checked and its address in its input record; per fed value the
        checked LoDTensor (None for an ndarray that passed the fast check), or None when
        the full path must run."""
        records, seen, shapes = st.args.inputs, st.seen, st.shapes
        tensors = []
        for f, v in zip(self.feeds, values):
            if type(v) is np.ndarray and v.dtype is f.dtype and v.shape == f.shape \
                    and v.flags.c_contiguous:
                a, t = v, None
            else:
                t = self.check_feed(f.spec, v)      # raises the full path's FeedError
                a = t._array
                if a.dtype != f.dtype or a.ndim > abi.MAX_DIMS:
                    return None                     # the full path says what is wrong
                if not a.flags.c_contiguous:
                    a = np.ascontiguousarray(a)
                elif type(v) is np.ndarray and not t._lod:
                    f.shape, f.dtype = a.shape, a.dtype   # later runs: three compares
            tensors.append(t)
            j = f.j
            if j is None:
                continue
            rec = records[j]
            if a.shape == shapes[j]:
                rec[_DATA] = _address(a)
            else:
                abi.put_tensor(rec, _address(a), a.shape)
                shapes[j] = a.shape
            seen[j] = a
            if f.lod:
                packed = self._lod(t, a, f.lod)
                if packed is None:
                    return None
                lod, count = packed
                abi.put_aux(rec, _address(lod), count)
                tensors[-1] = (t, lod)             # alive through the call
        return tensors

    def _pack_params(self, st):
        """The persistables' records, rewritten where a parameter's array changed; False
        when one has no usable value (the full path says why)."""
        records, seen, shapes = st.args.inputs, st.seen, st.shapes
        for j, var, dtype in self.params:
            t = var.value
            if type(t) is not LoDTensor:
                return False
            a = t._array
            if a is not seen[j]:
                if a is None or a.dtype != dtype or a.ndim > abi.MAX_DIMS or \
                        not a.flags.c_contiguous:
                    return False
                abi.put_tensor(records[j], _address(a), a.shape)
                seen[j], shapes[j] = a, a.shape
        return True

    @staticmethod
    def _lod(t, a, n_levels):
        """(offsets, count) the segment reads of a fed LoDTensor's `n_levels` finest levels,
        checked (abi.packed_lod), or None (the full path then says what is wrong)."""
        if t is None or not t._lod:
            return None
        packed = abi.packed_lod(t._lod, n_levels, a.shape[0] if a.ndim else None)
        return None if isinstance(packed, str) else packed

    def _hold_feed(self, values, tensors):
        """The feed holder's columns, as the full path leaves them: the fed tensors (an
        ndarray's wrapper reused run to run, as Fluid's feed holder is)."""
        if self.feed_holder is None:
            return
        fed = self.feed_holder.value
        if type(fed) is not list or len(fed) != self.n_feed:
            fed = self.feed_holder.value = [None] * self.n_feed
        wraps = self.wrappers
        for col, v, t in zip(self.feed_cols, values, tensors):
            if t is None:
                w = wraps[col]
                if w is not None and fed[col] is w:
                    w._array = v
                else:
                    fed[col] = wraps[col] = LoDTensor(v)
            else:
                fed[col] = t[0] if type(t) is tuple else t

    def _fetched(self, st, tensors):
        """The fetched values (and the fetch holder's columns) after the call."""
        outs = st.args.outputs
        held = [None] * self.n_fetch
        results = []
        for col, f in zip(self.fetch_cols, self.fetches):
            if f.j is not None:
                arr = f.copy_out(st, outs[f.j], self.return_numpy)
                lod = None
                if f.lod_from is not None:
                    t = tensors[f.lod_from]
                    lod = (t[0] if type(t) is tuple else t)._lod if t is not None else None
                if self.return_numpy and lod is None:   # the holder's wrapper, refilled
                    value = self.fetch_wrappers[col]
                    if value is None:
                        value = self.fetch_wrappers[col] = LoDTensor(arr)
                    else:
                        value._array = arr
                else:
                    value = LoDTensor(arr, lod)
                results.append(arr if self.return_numpy else value)
            else:
                value = f.var.value
                if value is None:
                    raise FetchError(f"fetch target '{f.name}' has no value after the run "
                                     f"(no op wrote it and it was not fed or initialized)")
                r = value
                if self.return_numpy:
                    r = self.to_numpy(value)
                    if f.persistable and isinstance(r, np.ndarray):
                        r = r.copy()      # the next update must not change the caller's
                results.append(r)
            held[col] = value
        if self.fetch_holder is not None:
            self.fetch_holder.value = held
        return results

