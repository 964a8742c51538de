"""Fluid's collective transpiler (`fluid.transpiler.collective`): data-parallel training in
which each of `nranks` processes trains on its own batches and the gradients are summed
over the ranks by ops in the program.

`GradAllReduce(nrings).transpile(startup_program, main_program, rank, endpoints,
current_endpoint, wait_port)` rewrites both programs in place, writing the ops Fluid's
does, so the programs are Paddle's:

* startup: per ring `c_gen_nccl_id` + `c_comm_init` (ring_id 0..nrings-1), then every
  parameter `c_broadcast` from rank 0 (all ranks start alike), then `c_sync_comm_stream`;
* main: a `scale` by 1/nranks after the loss gradient's op (so the summed gradient is the
  mean over all ranks' examples), after each backward op that produces a parameter's
  gradient (its `op_role_var`) a `c_sync_calc_stream` and a `c_allreduce_sum` per gradient
  (rings taken in turn), and before the first optimizer op a `c_sync_comm_stream` per ring.

With one rank there is nothing to sum: Fluid refuses an endpoint list of one (and so does
this). Parameters marked `is_distributed` are left alone, as in Fluid.
"""
from ..core.dtypes import VarType
from ..core.names import OpRole
from ..ir import rewrite
from ..ir.views import op_role

__all__ = ["GradAllReduce", "LocalSGD", "init_communicators", "insert_grad_allreduce",
           "parameters"]

ROLE = "op_role"
ROLE_VAR = "op_role_var"


def _endpoints(endpoints):
    eps = endpoints.split(",") if isinstance(endpoints, str) else list(endpoints)
    return [e.strip() for e in eps if e.strip()]


def _fresh(block, stem):
    k = 0
    while f"{stem}_{k}" in block.vars:
        k += 1
    return f"{stem}_{k}"


def parameters(main):
    """The names of `main`'s parameters the rings keep alike (not `is_distributed`)."""
    return [v.name for v in main.global_block().vars.values()
            if v.is_parameter and not getattr(v.desc, "is_distributed", False)]


def init_communicators(startup, endpoints, current_endpoint, rank, nrings=1, params=None):
    """Append the rings' setup and the broadcast from rank 0 of `params` (names; default:
    the parameters `startup` declares) to `startup` (a program view), as Fluid's
    Collective._transpile_startup_program."""
    endpoints = _endpoints(endpoints)
    if current_endpoint not in endpoints:
        raise ValueError(f"current endpoint {current_endpoint} is not in {endpoints}")
    others = [e for e in endpoints if e != current_endpoint]
    block = startup.global_block()
    for ring_id in range(nrings):
        nccl_id = rewrite.add_var(block, _fresh(block, "nccl_id"), type=VarType.RAW,
                                  persistable=True)
        rewrite.append_op(block, "c_gen_nccl_id", outputs={"Out": [nccl_id.name]},
                          attrs={"rank": rank, "endpoint": current_endpoint,
                                 "other_endpoints": others, ROLE: OpRole.Forward})
        rewrite.append_op(block, "c_comm_init", inputs={"X": [nccl_id.name]},
                          attrs={"nranks": len(endpoints), "rank": rank, "ring_id": ring_id,
                                 ROLE: OpRole.Forward})
    params = [n for n in (parameters(startup) if params is None else params)
              if n in block.vars]
    ring_id = -1
    for p in params:
        ring_id = (ring_id + 1) % nrings
        rewrite.append_op(block, "c_broadcast", inputs={"X": [p]}, outputs={"Out": [p]},
                          attrs={"ring_id": ring_id, "root": 0, ROLE: OpRole.Forward})
    if params:
        for ring_id in range(nrings):
            rewrite.append_op(block, "c_sync_comm_stream", inputs={"X": [params[-1]]},
                              outputs={"Out": [params[-1]]},
                              attrs={"ring_id": ring_id, ROLE: OpRole.Forward})


def _role_var(op):
    for a in op.desc.attrs:
        if a.name == ROLE_VAR:
            return list(a.strings)
    return []


def insert_grad_allreduce(main, nranks, nrings=1):
    """Scale the loss gradient by 1/nranks and all-reduce every parameter gradient in
    `main` (a program view), as Fluid's GradAllReduce._transpile_main_program. Returns the
    gradients' names."""
    block = main.global_block()
    for idx in reversed(range(len(block.ops))):
        op = block.ops[idx]
        role = op_role(op.desc)
        if role & OpRole.Backward and role & OpRole.Loss:
            g = op.output_arg_names[0]
            rewrite.insert_op(block, idx + 1, "scale", inputs={"X": [g]}, outputs={"Out": [g]},
                              attrs={"scale": 1.0 / nranks, ROLE: OpRole.Backward})
    grads, ring_id = [], -1
    for idx in reversed(range(len(block.ops))):
        op = block.ops[idx]
        if not op_role(op.desc) & OpRole.Backward:
            continue
        pairs = _role_var(op)
        if not pairs:
            continue
        offset = idx
        for i in range(0, len(pairs) - 1, 2):
            param, grad = pairs[i], pairs[i + 1]
            pv = block.vars.get(param)
            if pv is not None and getattr(pv.desc, "is_distributed", False):
                continue
            if offset == idx:
                offset += 1
                rewrite.insert_op(block, offset, "c_sync_calc_stream", inputs={"X": [grad]},
                                  outputs={"Out": [grad]}, attrs={ROLE: OpRole.Backward})
                offset += 1
            ring_id = (ring_id + 1) % nrings
            rewrite.insert_op(block, offset, "c_allreduce_sum", inputs={"X": [grad]},
                              outputs={"Out": [grad]},
                              attrs={"ring_id": ring_id, ROLE: OpRole.Backward})
            grads.append(grad)
    if not grads:
        return grads
    for idx, op in enumerate(block.ops):
        if op_role(op.desc) & OpRole.Optimize:
            for ring_id in range(nrings):
                rewrite.insert_op(block, idx + ring_id, "c_sync_comm_stream",
                                  inputs={"X": [grads[0]]}, outputs={"Out": [grads[0]]},
                                  attrs={"ring_id": ring_id, ROLE: OpRole.Backward})
            break
    return grads


class Collective:
    """Fluid's transpiler base: `transpile(startup_program, main_program, rank, endpoints,
    current_endpoint, wait_port)` rewrites the programs in place."""
    mode = None

    def __init__(self, nrings):
        self.nrings = int(nrings)
        self.endpoints = self.current_endpoint = self.nranks = self.rank = None
        self.startup_program = self.main_program = None

    def transpile(self, startup_program, main_program, rank, endpoints, current_endpoint,
                  wait_port=True):
        from .distribute_transpiler import given_or_default_programs
        main_program, startup_program = given_or_default_programs(main_program,
                                                                  startup_program)
        endpoints = _endpoints(endpoints)
        self.nranks = len(endpoints)
        if self.nranks == 1:
            raise ValueError("the number of endpoints must > 1")
        if rank < 0:
            raise ValueError("rank must >= 0")
        if current_endpoint not in endpoints:
            raise ValueError(f"current endpoint {current_endpoint} is not in {endpoints}")
        self.rank, self.endpoints, self.current_endpoint = int(rank), endpoints, current_endpoint
        self.startup_program, self.main_program = startup_program, main_program
        init_communicators(startup_program, endpoints, current_endpoint, self.rank,
                           self.nrings, parameters(main_program))
        self._transpile_main_program()

    def _transpile_main_program(self):
        raise NotImplementedError


class GradAllReduce(Collective):
    mode = "grad_allreduce"

    def __init__(self, nrings=2):
        super().__init__(nrings)

    def _transpile_main_program(self):
        insert_grad_allreduce(self.main_program, self.nranks, self.nrings)


class LocalSGD(Collective):
    mode = "local_sgd"

    def __init__(self, nrings=2):
        super().__init__(nrings)

    def transpile(self, *args, **kwargs):
        raise NotImplementedError("LocalSGD (parameters averaged every step instead of "
                                  "gradients summed) is not built; use GradAllReduce")
