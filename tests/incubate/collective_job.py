"""One trainer of a collective job (started by `fluidity launch --collective`):

    collective_job.py train OUT_DIR   trains the test model on this rank's half of each
                                      global batch; writes OUT_DIR/params.<rank>.npz
    collective_job.py ops OUT_DIR     runs each collective op once; writes
                                      OUT_DIR/ops.<rank>.npz
    collective_job.py die OUT_DIR     trains as `train`, but the last rank exits (status 3)
                                      after its first step: the others must fail, not hang
    collective_job.py stall OUT_DIR   the same, but the last rank stays alive and silent
"""
import os
import sys
import time

import numpy as np

import fluidity as fluid
from fluidity.incubate.fleet.base import role_maker
from fluidity.incubate.fleet.collective import DistributedStrategy, fleet

STEPS, BATCH, LR = 4, 16, 0.1


def model():
    """A small classifier; `main`, `startup`, the loss and the parameters' names."""
    main, startup = fluid.Program(), fluid.Program()
    main.random_seed = startup.random_seed = 7
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        x = fluid.layers.data("x", [6])
        y = fluid.layers.data("y", [1], dtype="int64")
        h = fluid.layers.fc(x, 8, act="tanh")
        p = fluid.layers.fc(h, 3, act="softmax")
        loss = fluid.layers.mean(fluid.layers.cross_entropy(p, y))
    return main, startup, loss


def batches():
    """The global batches every rank and the one-process reference see."""
    rng = np.random.default_rng(11)
    for _ in range(STEPS):
        yield (rng.standard_normal((BATCH, 6)).astype(np.float32),
               rng.integers(0, 3, (BATCH, 1)).astype(np.int64))


def train(out, die_after=None, stall=False):
    fleet.init(role_maker.PaddleCloudRoleMaker(is_collective=True))
    rank, n = fleet.worker_index(), fleet.worker_num()
    main, startup, loss = model()
    with fluid.program_guard(main, startup):
        strategy = DistributedStrategy()
        fleet.distributed_optimizer(fluid.optimizer.SGD(LR), strategy).minimize(loss)
    exe = fluid.Executor()
    if rank:          # a different start: the broadcast from rank 0 must win
        startup.random_seed = 99
    exe.run(fleet.startup_program)
    share = BATCH // n
    for step, (x, y) in enumerate(batches()):
        if die_after is not None and rank == n - 1 and step == die_after:
            if stall:
                time.sleep(600)
            os._exit(3)
        part = slice(rank * share, (rank + 1) * share)
        exe.run(fleet.main_program, feed={"x": x[part], "y": y[part]}, fetch_list=[loss])
    scope = fluid.global_scope()
    params = {p.name: np.array(scope.find_var(p.name).get_tensor())
              for p in main.global_block().all_parameters()}
    types = [op.type for op in fleet.main_program.global_block().ops]
    np.savez(os.path.join(out, f"params.{rank}.npz"), **params)
    with open(os.path.join(out, f"ops.{rank}.txt"), "w") as f:
        f.write(" ".join(types))


def ops(out):
    rm = role_maker.PaddleCloudRoleMaker(is_collective=True)
    rm.generate_role()
    rank, n, eps = rm.worker_index(), rm.worker_num(), rm.get_trainer_endpoints()
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = fluid.layers.data("x", [4, 3], append_batch_size=False)
        block = main.global_block()
        sblock = startup.global_block()
        nid = sblock.create_var(name="nccl_id", persistable=True,
                                type=fluid.core.VarDesc.VarType.RAW)
        sblock.append_op(type="c_gen_nccl_id", outputs={"Out": nid},
                         attrs={"rank": rank, "endpoint": eps[rank],
                                "other_endpoints": [e for e in eps if e != eps[rank]]})
        sblock.append_op(type="c_comm_init", inputs={"X": nid},
                         attrs={"nranks": n, "rank": rank, "ring_id": 0})
        outs = {}
        for op, attrs in [("c_allreduce_sum", {}), ("c_allreduce_max", {}),
                          ("c_allreduce_prod", {}), ("c_broadcast", {"root": 1}),
                          ("c_allgather", {"nranks": n}), ("c_reducescatter", {"nranks": n})]:
            o = block.create_var(name=f"out_{op}", dtype="float32")
            block.append_op(type=op, inputs={"X": x}, outputs={"Out": o},
                            attrs=dict(attrs, ring_id=0))
            block.append_op(type="c_sync_comm_stream", inputs={"X": o}, outputs={"Out": o},
                            attrs={"ring_id": 0})
            outs[op] = o
    exe = fluid.Executor()
    exe.run(startup)
    xv = (np.arange(12, dtype=np.float32).reshape(4, 3) + 1) * (rank + 1)
    res = exe.run(main, feed={"x": xv}, fetch_list=list(outs.values()))
    total = np.zeros(2)
    rm.all_reduce_worker(np.array([rank + 1.0, 1.0]), total)
    gathered = rm.all_gather(rank * 10)
    rm.barrier_worker()
    np.savez(os.path.join(out, f"ops.{rank}.npz"), total=total, gathered=np.array(gathered),
             **{k: v for k, v in zip(outs, res)})


if __name__ == "__main__":
    {"train": train, "ops": ops, "die": lambda out: train(out, die_after=1),
     "stall": lambda out: train(out, die_after=1, stall=True)}[sys.argv[1]](sys.argv[2])
