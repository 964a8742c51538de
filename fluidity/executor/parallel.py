"""The parallel executor: independent ready ops run at the same time on threads.

The dataflow executor's dependency graph and ready queue, worked by `num_threads` threads:
the calling thread and `num_threads - 1` pool threads each take a ready op, run it, and
release its successors into the shared queue (under one condition variable). numpy and BLAS
release the GIL inside large kernels, so ops on independent branches (the towers of a wide
model, the weight gradients of one layer and the input gradient of the next) overlap. The
graph orders every pair of ops that touch the same variable, so results are bit-identical
to the interpreter's whatever the interleaving.

BLAS itself is multi-threaded: `blas_threads` (ExecutionStrategy's; "auto" is
cores // num_threads) caps its threads per call while a run lasts, so op threads x BLAS
threads stay within the cores. Off by default: BLAS blocks some shapes differently by thread
count, so a cap can change the last bits of those matmuls.

Use it through the Executor:
`fluid.Executor(place, strategy=ExecutionStrategy("parallel", num_threads=2))`.
"""
import contextlib
import threading
from collections import deque
from concurrent.futures import ThreadPoolExecutor

from .dataflow import DataflowPlan


class _Run:
    """One run's shared state: counts, ready queue, ops not yet finished, first error."""
    __slots__ = ("count", "ready", "left", "error", "cond")

    def __init__(self, plan):
        self.count = list(plan.n_pred)
        self.ready = deque(i for i, c in enumerate(self.count) if c == 0)
        self.left = len(self.count)
        self.error = None
        self.cond = threading.Condition()


_blas = None


def blas_limit(n):
    """Cap BLAS's threads at n (threadpoolctl): for the duration of a `with`, or from now on
    when the returned limiter is dropped (a worker process)."""
    global _blas
    if _blas is None:
        from threadpoolctl import ThreadpoolController
        _blas = ThreadpoolController()
    return _blas.limit(limits=n, user_api="blas")


class ParallelPlan(DataflowPlan):
    def __init__(self, program, block_idx=0, num_threads=2, pool=None, blas_threads=None):
        super().__init__(program, block_idx)
        self.num_threads = num_threads
        self.blas_threads = blas_threads
        self._pool = pool

    def _work(self, run, frame, env):
        cond, succ = run.cond, self.succ
        while True:
            with cond:
                while not run.ready and run.left and run.error is None:
                    cond.wait()
                if not run.ready or run.error is not None:
                    return
                i = run.ready.popleft()
            try:
                self._run_op(i, frame, env)
            except BaseException as e:   # noqa: B036 -- handed to the calling thread
                with cond:
                    if run.error is None:
                        run.error = e
                    cond.notify_all()
                return
            with cond:
                run.left -= 1
                new = 0
                for j in succ[i]:
                    run.count[j] -= 1
                    if run.count[j] == 0:
                        run.ready.append(j)
                        new += 1
                if not run.left:
                    cond.notify_all()
                elif new > 1:            # this thread takes one of them itself
                    cond.notify(new - 1)

    def run(self, frame, env):
        with blas_limit(self.blas_threads) if self.blas_threads else contextlib.nullcontext():
            if self.num_threads <= 1 or self._pool is None:
                return super().run(frame, env)
            self._run_threads(frame, env)

    def _run_threads(self, frame, env):
        run = _Run(self)
        helpers = [self._pool.submit(self._work, run, frame, env)
                   for _ in range(self.num_threads - 1)]
        try:
            self._work(run, frame, env)
        except BaseException as e:       # e.g. KeyboardInterrupt: stop the helpers too
            with run.cond:
                run.error = run.error or e
            raise
        finally:
            with run.cond:
                run.cond.notify_all()
            for f in helpers:
                f.result()
        if run.error is not None:
            raise run.error


def make_pool(num_threads):
    """The helper threads a ParallelPlan with `num_threads` threads uses."""
    return ThreadPoolExecutor(max(num_threads - 1, 1), thread_name_prefix="fluidity-op")
