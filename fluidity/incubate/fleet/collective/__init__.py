"""Fluid 1.6's collective fleet: data-parallel training in which every process is a trainer
and the gradients are summed over the trainers by ops in the program.

    from fluidity.incubate.fleet.collective import fleet, DistributedStrategy
    from fluidity.incubate.fleet.base import role_maker

    fleet.init(role_maker.PaddleCloudRoleMaker(is_collective=True))
    opt = fleet.distributed_optimizer(fluid.optimizer.SGD(0.1), DistributedStrategy())
    opt.minimize(loss)
    exe.run(fleet.startup_program)
    for batch in my_share_of_the_data:        # fleet.split_files / worker_index
        exe.run(fleet.main_program, feed=batch, fetch_list=[loss])

started as `fluidity launch --collective --worker_num 2 train.py` (or
`python -m fluidity.distributed.launch --collective ...`; Paddle's paddle.distributed.launch
environment). With one trainer the programs are the optimizer's own; with several,
`minimize` rewrites them with the collective transpiler (transpiler/collective.py:
`c_gen_nccl_id` / `c_comm_init` / `c_broadcast` in the startup program, the loss gradient
scaled by 1/nranks and `c_allreduce_sum` of every gradient in the main program), so every
trainer takes the same step, the one of the whole batch over all trainers. The all-reduce
goes over gloo (distributed/collective.py; `pip install 'fluidity[collective]'`).

`fleet.main_program` is a Program (Fluid's nccl2 mode gives a CompiledProgram over NCCL;
here the ops in the program do the all-reduce in both modes). `save_inference_model` and
`save_persistables` save the program as it was before the rewrite; `save_check_point` /
`load_check_point` keep numbered checkpoints with the training status.
"""
import json
import logging
import os
import shutil
import struct

from ....compiler import BuildStrategy
from ....executor.executor import Executor
from ....executor.strategy import ExecutionStrategy
from ....framework import Program, default_startup_program
from ....transpiler.collective import GradAllReduce
from ..base.fleet_base import DistributedOptimizer, Fleet, Mode
from ..base.role_maker import PaddleCloudRoleMaker

logger = logging.getLogger("fluidity")

__all__ = ["fleet", "Collective", "CollectiveOptimizer", "DistributedStrategy", "TrainStatus",
           "LambConfig", "DistFCConfig"]


class LambConfig:
    pass


class DistFCConfig:
    pass


class TrainStatus:
    """The epoch a checkpoint was taken after (`next()` is the one to train)."""

    def __init__(self, epoch_no=-1):
        self._epoch_no = epoch_no

    def next(self):
        return self._epoch_no + 1

    def __eq__(self, t):
        return isinstance(t, TrainStatus) and self._epoch_no == t._epoch_no

    def __ne__(self, t):
        return not self == t


class Collective(Fleet):
    def __init__(self):
        super().__init__(Mode.COLLECTIVE)
        self._local_ip = 0
        self.startup_program = None
        self._origin_program = None
        self._transpiled_program = None
        self.main_program = None
        self._checkoint_prefix = "__paddle_fleet_checkpoint__"
        self._param_file_name = "_paddle_fleet_param__"

    def _default_role_maker(self):
        return PaddleCloudRoleMaker(is_collective=True)

    # the parameter-server calls mean nothing here (Fluid warns too)
    def init_worker(self):
        logger.warning("You should not call 'init_worker' method for collective mode.")

    def run_worker(self, main_programs=None, scopes=None):
        logger.warning("You should not call 'run_worker' method for collective mode.")

    def init_server(self, model_dir=None):
        logger.warning("You should not call 'init_server' method for collective mode.")

    def run_server(self):
        logger.warning("You should not call 'run_server' method for collective mode.")

    def stop_worker(self):
        logger.warning("You should not call 'stop_worker' method for collective mode.")

    def distributed_optimizer(self, optimizer, strategy=None):
        self._optimizer = CollectiveOptimizer(optimizer, strategy)
        return self._optimizer

    # -- the records of a global shuffle (InMemoryDataset.global_shuffle(fleet)) ------------
    def exchange_records(self, packs):
        """Send packs[k] (lists of bytes blobs) to trainer k; return the packs received."""
        out = self._rm().exchange_bytes([_pack(p) for p in packs])
        return [_unpack(b) for b in out]

    # -- saving ----------------------------------------------------------------------------
    def _saved_program(self, executor, main_program, what):
        if not isinstance(executor, Executor):
            raise TypeError(f"In fleet.{what}() function, executor must be as Executor type, "
                            f"got {type(executor).__name__}")
        main_program = self._origin_program if main_program is None else main_program
        if not isinstance(main_program, Program):
            raise TypeError(f"In fleet.{what}() function, main_program must be as Program "
                            f"type, got {type(main_program).__name__}")
        return main_program

    def save_inference_model(self, executor, dirname, feeded_var_names=None, target_vars=None,
                             main_program=None, export_for_deployment=True):
        from ....io import save_inference_model
        main_program = self._saved_program(executor, main_program, "save_inference_model")
        save_inference_model(dirname, feeded_var_names, target_vars, executor, main_program,
                             None, None, export_for_deployment)

    def save_persistables(self, executor, dirname, main_program=None, filename=None):
        from ....io import save_persistables
        main_program = self._saved_program(executor, main_program, "save_persistables")
        save_persistables(executor, dirname, main_program, filename=filename)

    # -- checkpoints: <path>/__paddle_fleet_checkpoint__.<n> --------------------------------
    def _get_last_checkpoint_no(self, root_path, fs=None):
        fs = fs or _LocalFS()
        best = -1
        for d in fs.list_dirs(root_path):
            head, _, n = d.partition(".")
            if head == self._checkoint_prefix and n.isdigit():
                best = max(best, int(n))
        return best

    def clean_redundant_check_points(self, root_path, fs=None, checkpoint_num=1):
        fs = fs or _LocalFS()
        last = self._get_last_checkpoint_no(root_path, fs)
        if last < 0:
            return
        keep = max(1, int(checkpoint_num))
        for d in fs.list_dirs(root_path):
            head, _, n = d.partition(".")
            if head == self._checkoint_prefix and n.isdigit() and int(n) <= last - keep:
                fs.rmr(os.path.join(root_path, d))

    def save_check_point(self, executor, path, train_status, main_program=None, fs=None,
                         local_cache_path=".cache", remain_all_checkpoint=True):
        """Save the persistables and `train_status` as checkpoint n+1 under `path` (written
        to a .tmp directory, then renamed: a crash leaves the previous ones)."""
        fs = fs or _LocalFS()
        main_program = self._transpiled_program if main_program is None else main_program
        if not fs.stat(path):
            fs.mkdir(path)
        n = self._get_last_checkpoint_no(path, fs) + 1
        real = os.path.join(path, f"{self._checkoint_prefix}.{n}")
        tmp = real + ".tmp"
        if fs.stat(tmp):
            fs.rmr(tmp)
        self.save_persistables(executor, tmp, main_program, filename=self._param_file_name)
        with open(os.path.join(tmp, "fleet_train_status"), "w") as f:
            json.dump({"epoch_no": train_status._epoch_no}, f)
        fs.mv(tmp, real)
        if not remain_all_checkpoint:
            self.clean_redundant_check_points(path, fs)

    def load_check_point(self, executor, path, trainer_id, main_program=None, fs=None,
                         local_cache_path=".cache", ignore_empty=True):
        """Load the last checkpoint under `path`; its TrainStatus (None when there is none
        and ignore_empty)."""
        from ....io import load_persistables
        fs = fs or _LocalFS()
        n = self._get_last_checkpoint_no(path, fs)
        if n < 0:
            if not ignore_empty:
                raise FileNotFoundError(f"no checkpoint under {path}")
            return None
        real = os.path.join(path, f"{self._checkoint_prefix}.{n}")
        main_program = self._transpiled_program if main_program is None else main_program
        load_persistables(executor, real, main_program, filename=self._param_file_name)
        status = TrainStatus()
        fn = os.path.join(real, "fleet_train_status")
        if os.path.isfile(fn):
            with open(fn) as f:
                d = json.load(f)
            if not isinstance(d.get("epoch_no"), int) or d["epoch_no"] < 0:
                raise ValueError(f"Data in checkpoint file is not valid: {d}")
            status._epoch_no = d["epoch_no"]
        return status


class _LocalFS:
    """The file-system calls checkpoints make (Paddle's fs_wrapper.LocalFS)."""

    @staticmethod
    def list_dirs(path):
        if not os.path.isdir(path):
            return []
        return [d for d in os.listdir(path) if os.path.isdir(os.path.join(path, d))]

    stat = staticmethod(os.path.exists)

    @staticmethod
    def mkdir(path):
        os.makedirs(path, exist_ok=True)

    @staticmethod
    def rmr(path):
        shutil.rmtree(path, ignore_errors=True)

    @staticmethod
    def mv(src, dst):
        os.replace(src, dst)

    @staticmethod
    def need_upload_download():
        return False


def _pack(blobs):
    return struct.pack(f"<{len(blobs)}Q", *map(len, blobs)) + b"".join(blobs)


def _unpack(data, n=3):
    sizes = struct.unpack_from(f"<{n}Q", data)
    out, at = [], 8 * n
    for s in sizes:
        out.append(data[at:at + s])
        at += s
    return out


fleet = Collective()


class DistributedStrategy(BuildStrategy):
    """Fluid's collective strategy: a BuildStrategy plus the collective options. `mode`
    "nccl2" (default) and "collective" both train with the all-reduce ops here;
    `nccl_comm_num` is the number of rings the gradients are spread over."""

    def __init__(self):
        super().__init__()
        self.use_local_sgd = False
        self.use_dist_fc = False
        self.dist_fc_config = None
        self.mode = "nccl2"
        self.collective_mode = None
        self.nccl_comm_num = 1
        self.forward_recompute = False
        self.recompute_checkpoints = []
        self.use_amp = False
        self.amp_loss_scaling = 2 ** 15
        self.exec_strategy = ExecutionStrategy()
        self.use_hierarchical_allreduce = False
        self.hierarchical_allreduce_inter_nranks = 0
        self._ut4grad_allreduce = False


class CollectiveOptimizer(DistributedOptimizer):
    """What `fleet.distributed_optimizer` returns: `minimize(loss)` runs the optimizer's
    minimize, keeps the program as it was (fleet._origin_program), then rewrites it for
    the trainers' all-reduce (fleet.main_program, fleet.startup_program)."""

    def __init__(self, optimizer, strategy=None):
        strategy = DistributedStrategy() if strategy is None else strategy
        if not isinstance(strategy, DistributedStrategy):
            raise TypeError(f"strategy must be a DistributedStrategy, got "
                            f"{type(strategy).__name__}")
        super().__init__(optimizer, strategy)
        if not isinstance(strategy.recompute_checkpoints, list):
            raise ValueError("DistStrategy.recompute_checkpoints should be a List")
        self._forward_recompute = strategy.forward_recompute
        self._recompute_checkpoints = strategy.recompute_checkpoints
        self._use_amp = strategy.use_amp
        self._amp_loss_scaling = strategy.amp_loss_scaling
        self.print_config = False

    def _raise(self, strategy_name, optimize_name):
        raise ValueError(f"can not use {optimize_name} when you set DistStrategy."
                         f"{strategy_name} as True")

    def _check_strategy(self):
        s = self._strategy
        if s.use_local_sgd or s.collective_mode == "local_sgd":
            raise NotImplementedError("DistributedStrategy.use_local_sgd: LocalSGD is not "
                                      "built; the gradients are all-reduced every step")
        if s.use_dist_fc:
            raise NotImplementedError("DistributedStrategy.use_dist_fc is not built")

    def minimize(self, loss, startup_program=None, parameter_list=None, no_grad_set=None):
        from .... import optimizer as opt_mod
        if self._forward_recompute:
            if self._recompute_checkpoints == []:
                raise ValueError("please set strategy.recompute_checkpoints when set "
                                 "strategy.forward_recompute as True")
            if type(self._optimizer).__name__ in ("RecomputeOptimizer",
                                                  "OptimizerWithMixedPrecision"):
                self._raise("forward_recompute", type(self._optimizer).__name__)
            self._optimizer = opt_mod.RecomputeOptimizer(self._optimizer)
            self._optimizer._set_checkpoints(self._recompute_checkpoints)
        if self._use_amp:
            if type(self._optimizer).__name__ in ("OptimizerWithMixedPrecision",
                                                  "DGCMomentumOptimizer"):
                self._raise("mixed_precision", type(self._optimizer).__name__)
            raise NotImplementedError("DistributedStrategy.use_amp: mixed precision in "
                                      "collective training is not built (the all-reduce "
                                      "of loss-scaled gradients); one process trains with "
                                      "fluid.contrib.mixed_precision.decorate(optimizer)")
        self._check_strategy()
        if loss is None or not hasattr(loss, "block"):
            raise ValueError(f"minimize needs the loss Variable, got {loss!r}")
        main_program = loss.block.program
        startup_program = default_startup_program() if startup_program is None \
            else startup_program
        fleet.startup_program = startup_program
        self._loss = loss
        out = self._optimizer.minimize(loss, startup_program=startup_program,
                                       parameter_list=parameter_list, no_grad_set=no_grad_set)
        fleet._origin_program = main_program.clone(for_test=False)
        fleet._transpiled_program = main_program
        nranks = fleet.worker_num()
        if nranks > 1:
            eps = fleet.worker_endpoints()
            rank = fleet.worker_index()
            GradAllReduce(max(1, int(self._strategy.nccl_comm_num))).transpile(
                startup_program, main_program, rank, eps, eps[rank], wait_port=False)
        fleet.main_program = main_program
        return out
