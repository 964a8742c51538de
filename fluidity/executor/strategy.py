"""How an Executor runs programs: the interpreter (default), linear, dataflow or parallel.

    exe = fluid.Executor(fluid.CPUPlace(),
                         strategy=fluid.ExecutionStrategy("parallel", num_threads=2))
    exe.run(startup); exe.run(main, feed=..., fetch_list=[loss])   # same calls, same results

kind           runs the block                                       module (executor/)
-------------  ---------------------------------------------------  ------------------
"interpreter"  in program order, every temporary kept to the end    plan.py
"linear"       in a fixed topological order over a static memory    linear.py,
               plan: tensors whose lifetimes don't overlap share    memory_plan.py
               bytes, in place where ops allow
               (`print(strategy.memory_report())`)
"dataflow"     each op once its inputs are ready                    dataflow.py
"parallel"     independent ready ops at once on `num_threads`       parallel.py
               threads; `blas_threads` caps BLAS meanwhile (below)
"native"       runs of ops compiled to C++ (fluidity/codegen) as    native.py
               native calls, the other ops as Python steps; results
               match the interpreter within float rounding
"cuda"         the block compiled whole to CUDA, run on the device  cuda.py
               (what Executor(fluid.CUDAPlace(0)) uses)

The program is never changed: a strategy only picks the kind of prepared plan the Executor
builds for it (once per program revision, block, feed and fetch names) from `PLAN_KINDS`.
Sub-blocks of control flow ops are run by the interpreter. The interpreted kinds give
bit-identical results. `profile=True`, for every kind, times every op, sub-blocks' included
(`print(strategy.profile)`; executor/profile.py).

`blas_threads` (parallel only): None (default) leaves BLAS alone, so two matmuls at once
each want every core; an int, or "auto" (cores // num_threads), caps BLAS while the run
lasts, which is faster on few cores. But BLAS blocks some shapes differently by thread
count, so with a cap the last bits of such matmuls can differ from a run with BLAS's
default threads (they match the interpreter run under the same cap).
"""
import os
import weakref

from ..errors import FluidityError
from . import profile as profiling
from .dataflow import DataflowPlan
from .linear import LinearPlan
from .cuda import CudaPlan
from .native import NativePlan
from .parallel import ParallelPlan, make_pool
from .plan import Plan


def _linear(strategy, program, block_id):
    plan = LinearPlan(program, block_id)
    strategy._linear_plans = [r for r in strategy._linear_plans if r() is not None]
    strategy._linear_plans.append(weakref.ref(plan))
    return plan


def _parallel(strategy, program, block_id):
    n = strategy.num_threads
    if strategy._pool is None and n > 1:
        strategy._pool = make_pool(n)
    blas = strategy.blas_threads
    if blas == "auto":
        blas = max(1, (os.cpu_count() or 1) // n) if n > 1 else None
    return ParallelPlan(program, block_id, n, strategy._pool, blas)


# kind -> plan(strategy, program view, block index): the one place a kind is chosen
PLAN_KINDS = {
    "interpreter": lambda strategy, program, block_id: Plan(program, block_id),
    "linear": _linear,
    "dataflow": lambda strategy, program, block_id: DataflowPlan(program, block_id),
    "parallel": _parallel,
    "native": lambda strategy, program, block_id: NativePlan(program, block_id),
    "cuda": lambda strategy, program, block_id: CudaPlan(program, block_id),
}
KINDS = tuple(PLAN_KINDS)


class ExecutionStrategy:
    def __init__(self, kind="interpreter", num_threads=2, profile=False, blas_threads=None):
        if kind not in PLAN_KINDS:
            raise FluidityError(f"ExecutionStrategy: kind must be one of {', '.join(KINDS)}; "
                                f"got {kind!r}")
        if not isinstance(num_threads, int) or num_threads < 1:
            raise FluidityError(f"ExecutionStrategy: num_threads must be a positive int, got "
                                f"{num_threads!r}")
        if blas_threads not in (None, "auto") and (not isinstance(blas_threads, int)
                                                   or blas_threads < 1):
            raise FluidityError(f"ExecutionStrategy: blas_threads must be 'auto', None or a "
                                f"positive int, got {blas_threads!r}")
        self.kind = kind
        self.num_threads = num_threads
        self.blas_threads = blas_threads
        self.profile = profiling.Profile() if profile else None
        # Fluid's ParallelExecutor fields, so Fluid programs that set them run. Only
        # num_threads (of the "parallel" kind) and _dry_run (of a data-parallel program)
        # change how a program runs; the executor drops a run's temporaries after every
        # run (num_iteration_per_drop_scope = 1).
        self.use_cuda = False
        self.allow_op_delay = False
        self.num_iteration_per_drop_scope = 1
        self.num_iteration_per_run = 1
        self.use_thread_barrier = False
        self.use_experimental_executor = False
        # Fluid's: a data-parallel run schedules its ops but runs no kernel (executor/
        # data_parallel.py); what Fluid's tests use to time the scheduler alone
        self._dry_run = False
        self._pool = None
        self._linear_plans = []     # weak references, for memory_report()

    def make_plan(self, program, block_id=0):
        """The prepared plan of this kind for one block of `program` (a ProgramView),
        observed by the profile when there is one."""
        return self.observed(PLAN_KINDS[self.kind](self, program, block_id))

    def observed(self, plan):
        """`plan`, its steps timed by this strategy's profile when it has one."""
        return profiling.observe(plan, self.profile) if self.profile is not None else plan

    def memory_report(self):
        """The memory plans (arena vs naive sum) of the linear plans this strategy made and
        ran, one paragraph each."""
        plans = [r() for r in self._linear_plans]
        return "\n".join(p.memory.report() for p in plans if p is not None and p.memory)

    def close(self):
        if self._pool is not None:
            self._pool.shutdown(wait=True)
            self._pool = None

    def __repr__(self):
        extra = f", num_threads={self.num_threads}" if self.kind == "parallel" else ""
        if self.blas_threads is not None:
            extra += f", blas_threads={self.blas_threads!r}"
        if self.profile is not None:
            extra += ", profile=True"
        return f"ExecutionStrategy({self.kind!r}{extra})"
