"""Fluid's `fleet.base.fleet_base`: what every fleet answers (`Fleet`: who am I, the other
workers, splitting files) and the base of the optimizers fleets hand out
(`DistributedOptimizer`)."""
from ....executor.executor import Executor
from .mode import Mode
from .role_maker import RoleMakerBase

__all__ = ["Fleet", "DistributedOptimizer", "Mode"]


class Fleet:
    def __init__(self, mode):
        self._is_initialized = False
        self._mode = mode
        self._optimizer = None
        self._role_maker = None
        self._executor = None

    def _rm(self):
        if self._role_maker is None:
            raise RuntimeError("call fleet.init(role_maker) first")
        return self._role_maker

    def is_first_worker(self):
        return self._rm().is_first_worker()

    def worker_index(self):
        return self._rm().worker_index()

    def worker_num(self):
        return self._rm().worker_num()

    def is_worker(self):
        return self._rm().is_worker()

    def worker_endpoints(self, to_string=False):
        eps = self._rm().get_trainer_endpoints()
        return ",".join(eps) if to_string else eps

    def server_num(self):
        return len(self._rm().get_pserver_endpoints())

    def server_index(self):
        return self._rm().server_index()

    def server_endpoints(self, to_string=False):
        eps = self._rm().get_pserver_endpoints()
        return ",".join(eps) if to_string else eps

    def is_server(self):
        return self._rm().is_server()

    def split_files(self, files):
        """This worker's share of `files`: consecutive blocks, the first ones one longer."""
        if not isinstance(files, list):
            raise TypeError("files should be a list of file need to be read.")
        trainers, tid = self.worker_num(), self.worker_index()
        size, extra = divmod(len(files), trainers)
        begin = tid * size + min(tid, extra)
        return files[begin:begin + size + (1 if tid < extra else 0)]

    def init(self, role_maker=None):
        if role_maker is None:
            role_maker = self._default_role_maker()
        if not isinstance(role_maker, RoleMakerBase):
            raise TypeError(f"role_maker must be an instance of RoleMakerBase, got "
                            f"{type(role_maker).__name__}")
        self._executor = Executor()
        self._role_maker = role_maker
        role_maker.generate_role()
        self._is_initialized = True

    def _default_role_maker(self):
        raise TypeError("fleet.init needs a role maker")

    def all_reduce_worker(self, input, output):
        self._rm().all_reduce_worker(input, output)

    def barrier_worker(self):
        self._rm().barrier_worker()


class DistributedOptimizer:
    """Wraps a fluid optimizer; `minimize` also rewrites the program for the fleet."""

    def __init__(self, optimizer, strategy=None):
        from ....optimizer import Optimizer
        if not isinstance(optimizer, Optimizer) and \
                type(optimizer).__name__ != "OptimizerWithMixedPrecision":
            raise TypeError(f"optimizer must be an instance of Optimizer, got "
                            f"{type(optimizer).__name__}")
        self._optimizer = optimizer
        self._strategy = strategy

    def backward(self, loss, startup_program=None, parameter_list=None, no_grad_set=None,
                 callbacks=None):
        return self._optimizer.backward(loss, startup_program, parameter_list, no_grad_set,
                                        callbacks)

    def apply_gradients(self, params_grads):
        return self._optimizer.apply_gradients(params_grads)

    def minimize(self, losses, scopes=None, startup_programs=None, parameter_list=None,
                 no_grad_set=None):
        raise NotImplementedError
