"""Who this process is in a distributed job (Fluid 1.6's `role_maker`).

Collective jobs (every process a trainer): `PaddleCloudRoleMaker(is_collective=True)` reads
PADDLE_TRAINER_ID and PADDLE_TRAINER_ENDPOINTS (as `fluidity launch --collective` sets
them); `UserDefinedCollectiveRoleMaker(current_id, worker_endpoints)` takes them as
arguments. Their workers can all-reduce, gather and wait for each other
(`all_reduce_worker`, `all_gather`, `barrier_worker`) over the collective library
(distributed/collective.py), meeting at the first worker's endpoint.

Parameter-server jobs:
`PaddleCloudRoleMaker()` reads Paddle's environment variables, as `fluidity launch` (and
`paddle.distributed.launch_ps`, Kubernetes operators, ...) set them: TRAINING_ROLE (TRAINER
or PSERVER), PADDLE_PSERVERS_IP_PORT_LIST, PADDLE_TRAINERS_NUM, and PADDLE_TRAINER_ID (a
trainer) or POD_IP + PADDLE_PORT (a pserver's own endpoint). `UserDefinedRoleMaker` takes
the same facts as arguments."""
import os

import numpy as np

__all__ = ["Role", "RoleMakerBase", "PaddleCloudRoleMaker", "UserDefinedRoleMaker",
           "UserDefinedCollectiveRoleMaker", "MPISymetricRoleMaker", "GeneralRoleMaker"]


class Role:
    WORKER = 1
    SERVER = 2


class RoleMakerBase:
    def __init__(self):
        self._role = None
        self._current_id = -1
        self._worker_num = 0
        self._server_endpoints = []
        self._worker_endpoints = []
        self._generated = False
        self._ring = None

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

    def get_trainer_endpoints(self):
        self._check()
        return list(self._worker_endpoints)

    def to_string(self):
        return (f"role: {self._role}, current_id: {self._current_id}, worker_endpoints: "
                f"{self._worker_endpoints}, server_endpoints: {self._server_endpoints}")

    # -- the workers together: over the collective library when they have endpoints --------
    def _worker_ring(self, what):
        """The ring of the workers (made on first use), None for one worker; raises for
        several workers that have no endpoints to meet at (a parameter-server job)."""
        n = self.worker_num()
        if n <= 1:
            return None
        if self._ring is None:
            eps = self.get_trainer_endpoints()
            if len(eps) != n:
                raise RuntimeError(f"{what}: the {n} workers of this role maker have no "
                                   f"endpoints to meet at (a collective role maker: "
                                   f"UserDefinedCollectiveRoleMaker or "
                                   f"PaddleCloudRoleMaker(is_collective=True))")
            from ....distributed import collective
            rank = self.worker_index()
            others = [e for e in eps if e != eps[rank]]
            comm = collective.CollectiveService.gen_comm_id(rank, eps[rank], others)
            self._ring = collective.init_ring(ROLE_MAKER_RING, comm, rank, n)
        return self._ring

    def all_reduce_worker(self, input, output, mode="sum"):
        """output[...] = `input` reduced ("sum", "max", "min", "prod") over the workers."""
        if mode not in ("sum", "max", "min", "prod"):
            raise ValueError(f"all_reduce_worker: unknown mode {mode!r}")
        arr = np.asarray(input)
        ring = self._worker_ring("all_reduce_worker")
        out = arr.copy() if ring is None else ring.allreduce(arr, mode)
        np.copyto(output, out.reshape(np.shape(output)), casting="unsafe")

    def all_gather(self, input):
        """[each worker's `input` (a number or array)], in worker order."""
        ring = self._worker_ring("all_gather")
        arr = np.asarray(input)
        if ring is None:
            return [input]
        got = ring.allgather(arr.reshape((1,) + arr.shape))
        return [g if arr.ndim else g.item() for g in got]

    def barrier_worker(self):
        ring = self._worker_ring("barrier_worker")
        if ring is not None:
            ring.barrier()

    def barrier_all(self):
        self.barrier_worker()

    def exchange_bytes(self, parts):
        """Send parts[k] (bytes) to worker k; returns [what each worker sent here]."""
        ring = self._worker_ring("exchange")
        if ring is None:
            return [parts[0]]
        mine = []
        for k in range(self.worker_num()):
            got = ring.gather_objects(parts[k])
            if k == self.worker_index():
                mine = got
        return mine


ROLE_MAKER_RING = 1 << 20     # the role makers' own ring id, apart from the programs' rings


def _env(name):
    v = os.environ.get(name)
    if v in (None, ""):
        raise ValueError(f"PaddleCloudRoleMaker: the environment variable {name} is not set "
                         f"(start the job with `fluidity launch` or set Paddle's variables)")
    return v


class PaddleCloudRoleMaker(RoleMakerBase):
    """From Paddle's environment variables. is_collective: a collective job's trainer
    (PADDLE_TRAINER_ID, PADDLE_TRAINER_ENDPOINTS, PADDLE_CURRENT_ENDPOINT, as
    `fluidity launch --collective` and paddle.distributed.launch set them)."""

    def __init__(self, is_collective=False):
        super().__init__()
        self._is_collective = bool(is_collective)

    def generate_role(self):
        if self._generated:
            return
        if self._is_collective:
            self._generate_collective()
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

    def _generate_collective(self):
        eps = os.environ.get("PADDLE_TRAINER_ENDPOINTS")
        if not eps:
            raise ValueError("PaddleCloudRoleMaker(is_collective=True): can't find "
                             "PADDLE_TRAINER_ENDPOINTS")
        role = os.environ.get("PADDLE_TRAINING_ROLE", "TRAINER")
        if role != "TRAINER":
            raise ValueError(f"a collective job has trainers only, PADDLE_TRAINING_ROLE is "
                             f"{role!r}")
        self._worker_endpoints = [e.strip() for e in eps.split(",") if e.strip()]
        self._worker_num = len(self._worker_endpoints)
        self._role = Role.WORKER
        self._current_id = int(os.environ.get("PADDLE_TRAINER_ID", "0"))
        if not 0 <= self._current_id < self._worker_num:
            raise ValueError(f"PADDLE_TRAINER_ID={self._current_id} is not in [0, "
                             f"{self._worker_num}) (PADDLE_TRAINER_ENDPOINTS names "
                             f"{self._worker_num})")
        self._generated = True


def _endpoint_list(endpoints, what):
    if not isinstance(endpoints, list):
        raise TypeError(f"{what} must be as string list")
    if len(endpoints) <= 0:
        raise ValueError(f"the length of {what} list must be greater than 0")
    if len(endpoints) != len(set(map(repr, endpoints))):
        raise ValueError(f"{what} can't have duplicate elements")
    for e in endpoints:
        if not isinstance(e, str):
            raise TypeError(f"every element in {what} list must be as string")
    return list(endpoints)


def _current_id(current_id, limit=None, what=""):
    if isinstance(current_id, bool) or not isinstance(current_id, int):
        raise TypeError("current_id must be as int")
    if current_id < 0:
        raise ValueError("current_id must be greater than or equal to 0")
    if limit is not None and current_id >= limit:
        raise ValueError(f"current_id must be less than or equal to len({what}) - 1")
    return current_id


class UserDefinedRoleMaker(RoleMakerBase):
    """A parameter-server role given as arguments (checked as Fluid checks them)."""

    def __init__(self, current_id=0, role=Role.WORKER, worker_num=0, server_endpoints=None):
        super().__init__()
        self._server_endpoints = _endpoint_list(server_endpoints, "server_endpoints")
        if role not in (Role.WORKER, Role.SERVER):
            raise TypeError(f"role must be as Role (Role.WORKER or Role.SERVER), got {role!r}")
        self._role = role
        self._current_id = _current_id(
            current_id, len(self._server_endpoints) if role == Role.SERVER else None,
            "server_endpoints")
        if isinstance(worker_num, bool) or not isinstance(worker_num, int):
            raise TypeError("worker_num must be as int")
        if worker_num <= 0:
            raise ValueError("worker_num must be greater than 0")
        self._worker_num = worker_num
        self._generated = True


class UserDefinedCollectiveRoleMaker(RoleMakerBase):
    """A collective job's trainer given as arguments: its index and every trainer's
    endpoint (`worker_endpoints`, in rank order)."""

    def __init__(self, current_id=0, worker_endpoints=None):
        super().__init__()
        self._worker_endpoints = _endpoint_list(worker_endpoints, "worker_endpoints")
        self._current_id = _current_id(current_id, len(self._worker_endpoints),
                                       "worker_endpoints")
        self._worker_num = len(self._worker_endpoints)
        self._role = Role.WORKER
        self._generated = True


class MPISymetricRoleMaker(RoleMakerBase):
    """Fluid's MPI role maker (pslib jobs started by mpirun): needs mpi4py, which Fluidity
    does not use; as in a Fluid without it, making one raises ImportError."""

    def __init__(self):
        super().__init__()
        raise ImportError("MPISymetricRoleMaker needs mpi4py and pslib jobs; use "
                          "PaddleCloudRoleMaker or a UserDefined role maker")


class GeneralRoleMaker(MPISymetricRoleMaker):
    """Fluid's gloo-over-HDFS role maker of pslib jobs: not built (ImportError)."""

    def __init__(self, **kwargs):
        RoleMakerBase.__init__(self)
        raise ImportError("GeneralRoleMaker belongs to pslib jobs, which Fluidity does not "
                          "run; use PaddleCloudRoleMaker or a UserDefined role maker")
