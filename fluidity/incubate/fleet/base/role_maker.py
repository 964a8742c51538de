"""Who this process is in a parameter-server job (Fluid 1.6's `role_maker`).

`PaddleCloudRoleMaker()` reads Paddle's environment variables, as `fluidity launch` (and
`paddle.distributed.launch_ps`, Kubernetes operators, ...) set them: TRAINING_ROLE (TRAINER
or PSERVER), PADDLE_PSERVERS_IP_PORT_LIST, PADDLE_TRAINERS_NUM, and PADDLE_TRAINER_ID (a
trainer) or POD_IP + PADDLE_PORT (a pserver's own endpoint). `UserDefinedRoleMaker` takes
the same facts as arguments."""
import os


class Role:
    WORKER = 1
    SERVER = 2


class RoleMakerBase:
    def __init__(self):
        self._role = None
        self._current_id = -1
        self._worker_num = 0
        self._server_endpoints = []
        self._generated = False

    def generate_role(self):
        self._generated = True

    def _check(self):
        if not self._generated:
            self.generate_role()

    def is_worker(self):
        self._check()
        return self._role == Role.WORKER

    def is_server(self):
        self._check()
        return self._role == Role.SERVER

    def is_first_worker(self):
        return self.is_worker() and self._current_id == 0

    def worker_index(self):
        self._check()
        return self._current_id if self._role == Role.WORKER else -1

    def server_index(self):
        self._check()
        return self._current_id if self._role == Role.SERVER else -1

    def worker_num(self):
        self._check()
        return self._worker_num

    def server_num(self):
        self._check()
        return len(self._server_endpoints)

    def get_pserver_endpoints(self):
        self._check()
        return list(self._server_endpoints)

    def current_endpoint(self):
        """A pserver's own endpoint ("" on a trainer)."""
        return self._server_endpoints[self._current_id] if self.is_server() else ""


def _env(name):
    v = os.environ.get(name)
    if v in (None, ""):
        raise ValueError(f"PaddleCloudRoleMaker: the environment variable {name} is not set "
                         f"(start the job with `fluidity launch` or set Paddle's variables)")
    return v


class PaddleCloudRoleMaker(RoleMakerBase):
    def __init__(self, is_collective=False):
        super().__init__()
        if is_collective:
            raise NotImplementedError("PaddleCloudRoleMaker(is_collective=True): collective "
                                      "(nccl2) training is not built")

    def generate_role(self):
        if self._generated:
            return
        role = _env("TRAINING_ROLE")
        eps = [e.strip() for e in _env("PADDLE_PSERVERS_IP_PORT_LIST").split(",") if e.strip()]
        self._server_endpoints = eps
        self._worker_num = int(_env("PADDLE_TRAINERS_NUM"))
        if role == "TRAINER":
            self._role, self._current_id = Role.WORKER, int(_env("PADDLE_TRAINER_ID"))
            if not 0 <= self._current_id < self._worker_num:
                raise ValueError(f"PADDLE_TRAINER_ID={self._current_id} is not in "
                                 f"[0, PADDLE_TRAINERS_NUM={self._worker_num})")
        elif role == "PSERVER":
            ep = f"{_env('POD_IP')}:{_env('PADDLE_PORT')}"
            if ep not in eps:
                raise ValueError(f"this pserver's endpoint {ep} (POD_IP:PADDLE_PORT) is not in "
                                 f"PADDLE_PSERVERS_IP_PORT_LIST={','.join(eps)}")
            self._role, self._current_id = Role.SERVER, eps.index(ep)
        else:
            raise ValueError(f"TRAINING_ROLE must be TRAINER or PSERVER, got {role!r}")
        self._generated = True


class UserDefinedRoleMaker(RoleMakerBase):
    def __init__(self, current_id=0, role=Role.WORKER, worker_num=0, server_endpoints=None):
        super().__init__()
        if role not in (Role.WORKER, Role.SERVER):
            raise ValueError(f"role must be Role.WORKER or Role.SERVER, got {role!r}")
        self._role, self._current_id = role, int(current_id)
        self._worker_num = int(worker_num)
        self._server_endpoints = list(server_endpoints or [])
        self._generated = True
