"""`fluid.dygraph.parallel`: the trainer's place in a data-parallel job, read from the
launcher's environment (`ParallelEnv`, as Fluid 1.8 reads it), and the dygraph data-parallel
wrappers, which are not built (Fluidity's eager mode is the minimal one OpTest needs;
`fluid.incubate.fleet.collective` and the distribute transpiler train static programs on
several processes)."""
import os

from ..errors import declined, declined_class

__all__ = ["prepare_context", "ParallelEnv", "DataParallel"]

_WHY = ("dygraph data parallelism is not built: train a static program with "
        "fluid.incubate.fleet.collective or the distribute transpiler")


class ParallelEnv:
    """This trainer's rank, the number of trainers and the endpoints, from the variables
    `fluid.distributed.launch` sets (PADDLE_TRAINERS_NUM, PADDLE_TRAINER_ID,
    FLAGS_selected_gpus, PADDLE_TRAINER_ENDPOINTS, PADDLE_CURRENT_ENDPOINT)."""

    def __init__(self):
        self._nranks = int(os.getenv("PADDLE_TRAINERS_NUM", "1"))
        self._local_rank = int(os.getenv("PADDLE_TRAINER_ID", "0"))
        self._dev_id = int(os.getenv("FLAGS_selected_gpus", "0").split(",")[0] or 0)
        self._trainer_endpoints = os.getenv("PADDLE_TRAINER_ENDPOINTS", "").split(",")
        self._current_endpoint = os.getenv("PADDLE_CURRENT_ENDPOINT", "")

    nranks = property(lambda self: self._nranks)
    local_rank = property(lambda self: self._local_rank)
    dev_id = property(lambda self: self._dev_id)
    current_endpoint = property(lambda self: self._current_endpoint)
    trainer_endpoints = property(lambda self: self._trainer_endpoints)


Env = ParallelEnv   # Fluid 1.8's old name

DataParallel = declined_class("dygraph.parallel.DataParallel", _WHY,
                              methods=("scale_loss", "apply_collective_grads"))
ParallelStrategy = declined_class("dygraph.parallel.ParallelStrategy", _WHY)
prepare_context = declined("dygraph.parallel.prepare_context", _WHY)
