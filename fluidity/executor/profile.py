"""Per-op timing as an observer of prepared plans, for every executor kind.

`observe(plan, profile)` wraps each of a plan's steps, at prepare time, in a timer that
records into `profile`; a plan made without a profile runs its steps untouched, so profiling
off costs nothing on the hot path. `print(profile)` lists each op with its calls, total and
mean time, sorted by total time; `profile.report(by="type")` sums per op type;
`profile.events` holds the latest run's (label, thread, start, end) timeline (ops of
sub-blocks included).

Use it through the Executor: `fluid.Executor(place, strategy=ExecutionStrategy(kind,
profile=True))`, then `print(exe.strategy.profile)`.
"""
import threading
import time


class Profile:
    """Per-op wall times of the plans a strategy observes."""

    def __init__(self):
        self._rows = {}          # key -> [label, op type, calls, seconds]
        self.events = []         # the latest run: (label, thread id, start, end)
        self._n_plans = 0
        self._lock = threading.Lock()
        self._minmax = {}        # key -> [min, max] seconds of one call
        self.steps = []          # (thread id, start, end) of every observed Executor.run
        self.max_events = 1_000_000

    def register(self, plan):
        """Row keys and labels for a plan's ops; returns the keys."""
        with self._lock:
            self._n_plans += 1
            tag = f"p{self._n_plans}"
        keys = []
        for i, op in enumerate(plan.ops):
            outs = ",".join(op.output_arg_names[:2]) or "-"
            keys.append((tag, plan.block_idx, i))
            self._rows[keys[-1]] = [f"{tag} b{plan.block_idx} #{i} {op.type} -> {outs}",
                                    op.type, 0, 0.0]
        return keys

    def record(self, key, start, end):
        row = self._rows[key]
        row[2] += 1
        d = end - start
        row[3] += d
        mm = self._minmax.get(key)
        if mm is None:
            self._minmax[key] = [d, d]
        elif d < mm[0]:
            mm[0] = d
        elif d > mm[1]:
            mm[1] = d
        if len(self.events) < self.max_events:
            self.events.append((row[0], threading.get_ident(), start, end))

    def op_types(self):
        """{row label: op type} of every op the profile knows."""
        return {r[0]: r[1] for r in self._rows.values()}

    def record_step(self, start, end):
        """A whole Executor.run (a step) took [start, end]."""
        self.steps.append((threading.get_ident(), start, end))

    def stats(self):
        """[(op type, calls, total, min, max seconds)] per op type, for every op that ran."""
        agg = {}
        for key, (_label, t, calls, secs) in self._rows.items():
            if not calls:
                continue
            lo, hi = self._minmax[key]
            a = agg.get(t)
            if a is None:
                agg[t] = [calls, secs, lo, hi]
            else:
                a[0] += calls
                a[1] += secs
                a[2] = min(a[2], lo)
                a[3] = max(a[3], hi)
        return [(t, c, s, lo, hi) for t, (c, s, lo, hi) in agg.items()]

    def rows(self, by="op"):
        """[(label, calls, total seconds)] sorted by total time, per op or per op type."""
        if by == "op":
            rows = [(r[0], r[2], r[3]) for r in self._rows.values()]
        elif by == "type":
            agg = {}
            for _label, t, calls, secs in self._rows.values():
                a = agg.setdefault(t, [0, 0.0])
                a[0] += calls
                a[1] += secs
            rows = [(t, c, s) for t, (c, s) in agg.items()]
        else:
            raise ValueError(f"Profile.rows: by must be 'op' or 'type', got {by!r}")
        return sorted(rows, key=lambda r: (-r[2], r[0]))

    def report(self, by="op", top=None):
        rows = self.rows(by)
        total = sum(r[2] for r in rows) or 1.0
        lines = [f"{'total ms':>10} {'calls':>6} {'mean ms':>9} {'share':>6}  {by}"]
        for label, calls, secs in rows[:top]:
            mean = secs / calls * 1e3 if calls else 0.0
            lines.append(f"{secs * 1e3:10.3f} {calls:6d} {mean:9.3f} {secs / total:6.1%}  "
                         f"{label}")
        return "\n".join(lines)

    __str__ = report

    def begin_run(self):
        """A new top-level run starts: `events` will hold its timeline."""
        self.events = []

    def reset(self):
        for r in self._rows.values():
            r[2], r[3] = 0, 0.0
        self.events = []
        self._minmax = {}
        self.steps = []


def observe(plan, profile):
    """Make `plan`'s steps record their wall time into `profile`; returns the plan."""
    record, clock = profile.record, time.perf_counter

    def timed(step, key):
        def run(frame, env):
            t0 = clock()
            try:
                step(frame, env)
            finally:
                record(key, t0, clock())
        return run
    plan.steps = [timed(s, k) for s, k in zip(plan.steps, profile.register(plan))]
    return plan


# --- the process-wide profiler (fluid.profiler) ----------------------------------------------
# While it is on, every plan an Executor prepares is observed by it (plans are cached per
# on/off, so switching it off goes back to the untouched plans).
_active = None


def active():
    """The process-wide Profile while fluid.profiler is on, else None."""
    return _active


def set_active(profile):
    global _active
    _active = profile
