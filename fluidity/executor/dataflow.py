"""The dataflow executor: an op runs once every op it depends on has run.

At prepare time the block's dependency graph is built from the desc
(`analysis.dependencies`: read-after-write, write-after-read and write-after-write on names,
barriers around I/O and control-flow ops). Each run copies the predecessor counts, starts
from the ops with none, and after each op releases its successors into a FIFO ready queue;
so ops run in a dependency order that is generally not the block's order, with the same
results.

Use it through the Executor: `fluid.Executor(place, strategy=ExecutionStrategy("dataflow"))`.
"""
from collections import deque

from ..ir.analysis import dependencies
from .plan import Plan


class DataflowPlan(Plan):
    """A Plan run in dependency order from a ready queue."""

    def __init__(self, program, block_idx=0):
        super().__init__(program, block_idx)
        self.succ, self.n_pred = dependencies(program, self.ops)

    def _run_op(self, i, frame, env):
        try:
            self.steps[i](frame, env)
        except Exception as e:
            err = self.failure(i, frame, e)
            if err is e:
                raise
            raise err from e

    def run(self, frame, env):
        count = list(self.n_pred)
        succ = self.succ
        ready = deque(i for i, c in enumerate(count) if c == 0)
        while ready:
            i = ready.popleft()
            self._run_op(i, frame, env)
            for j in succ[i]:
                count[j] -= 1
                if count[j] == 0:
                    ready.append(j)
