"""GEO-SGD (Paddle 1.6's `GeoSgdTranspiler`, `DistributeTranspilerConfig.geo_sgd_mode`): each
trainer trains its own copy of the model at full speed (the AsyncExecutor's compiled Hogwild
workers, no RPC in the step), and a communicator thread (fluidity/distributed/communicator.py)
every `geo_sgd_need_push_nums` batches pushes the change since the last sync to the
parameter servers, which add it, then pulls the servers' values back.

    transpile(main, startup, trainer_id, endpoints, trainers, config) -> GeoPrograms

is a pure function of ProgramDescs (the inputs are never touched):

* The trainer program is the training program unchanged: the optimizer stays on the trainer.
  (Paddle appends a `send` of the sparse ids to it so that its communicator learns the rows a
  batch touched; here the AsyncExecutor's workers report them to the communicator, which
  keeps the step one compiled native call.)
* Parameters are the optimizer ops' (`op_role_var`); one whose gradient is SelectedRows (an
  `is_sparse` embedding) is a sparse table: only touched rows travel. Parameters are cut into
  row blocks `<param>.block<i>` (`slice_var_up`, `min_block_size`, Paddle's rule) and spread
  over the servers by `split_method`.
* Parameter server: block 0 holds its parameter blocks and one `listen_and_serv`
  (`sync_mode` False, `distributed_mode` 3 = GEO) whose optimize blocks are, per parameter
  block, Paddle's `sum(X=[<block>, <block>.delta]) -> <block>` (the delta is a LoDTensor for
  a dense parameter and a SelectedRows of the touched rows for a sparse one;
  `grad_to_block_id` maps `<block>.delta` to it), and per sparse block and trainer k a pull
  block `lookup_table_v2(W=<block>, Ids=<block>.rows.trainer_<k>) -> <block>.pulled.trainer_<k>`
  (int32 ids, 4 bytes a row, below 2**31 rows a block; a trainer sends the ids it touched, then gets their current rows; one pair per trainer,
  so trainers never read each other's ids). Its startup program runs the original
  initializers on the blocks.

`GeoPlan` (what the communicator reads) lists each parameter, its blocks and endpoints, and
for a sparse table the data slots whose ids index it.
"""
from collections import namedtuple

from ..core.dtypes import VarType
from ..core.names import OpRole
from ..errors import ProgramError
from ..ir import rewrite
from ..ir.views import ProgramView
from ..proto import framework_pb2 as pb
from .distribute import (DistributeTranspilerConfig, checked_job, pserver_startup,
                         slice_variable)
from .distribute_transpiler import given_or_default_programs, wrap_program

GEO_MODE = 3   # Paddle's DistributedMode.GEO, listen_and_serv's `distributed_mode`

GeoPrograms = namedtuple("GeoPrograms", "trainer pservers plan")


class GeoBlock(namedtuple("GeoBlock", "name begin rows endpoint")):
    """Rows [begin, begin + rows) of a parameter, held by `endpoint` as variable `name`."""

    @property
    def delta(self):
        return f"{self.name}.delta"

    def rows_var(self, trainer_id):
        return f"{self.name}.rows.trainer_{trainer_id}"

    def pulled_var(self, trainer_id):
        return f"{self.name}.pulled.trainer_{trainer_id}"

    @property
    def ids_dtype(self):
        """The dtype of the row ids a pull sends: int32 (4 bytes a row on the wire) unless
        the block has 2**31 rows or more."""
        return "int32" if self.rows < 2**31 else "int64"


class GeoVar(namedtuple("GeoVar", "name shape sparse blocks id_slots")):
    """A trained parameter: its shape, whether it is a sparse table (SelectedRows gradient),
    its blocks, and (sparse) the variables whose ids index it in the forward pass."""


class GeoPlan(namedtuple("GeoPlan", "vars endpoints trainers trainer_id push_nums")):
    """What the communicator of trainer `trainer_id` syncs, and how often."""

    @property
    def sparse(self):
        return [v for v in self.vars if v.sparse]

    @property
    def dense(self):
        return [v for v in self.vars if not v.sparse]


def _attr(op, name, default=None):
    return op.attr(name) if op.has_attr(name) else default


def trained_params(b0):
    """[(param, grad)] updated by the optimizer ops of block `b0`, in their order."""
    out, seen = [], set()
    for op in b0.ops:
        if not op.role & OpRole.Optimize:
            continue
        rv = list(_attr(op, "op_role_var", []) or [])
        if len(rv) >= 2 and rv[0] not in seen:
            seen.add(rv[0])
            out.append((rv[0], rv[1]))
    return out + special_update_params(b0, seen)


def special_update_params(b0, seen=()):
    """[(param, param)] for the parameters an op names in its `distribute_update_vars`
    attribute (pyramid_hash: a table its backward pass updates in place, no optimizer op
    involved), as Fluid's transpilers add them: the parameter is sent and received as it is."""
    out, seen = [], set(seen)
    for op in b0.ops:
        names = _attr(op, "distribute_update_vars", "") or ""
        for name in (n for n in names.split(",") if n):
            if name not in seen:
                seen.add(name)
                out.append((name, name))
    return out


def id_slots(b0, param):
    """The variables whose ids index table `param` in the forward ops (`Ids` inputs of the
    ops that read it as `W`)."""
    out = []
    for op in b0.ops:
        if op.role & (OpRole.Backward | OpRole.Optimize):
            continue
        if "W" in op.input_names and param in op.input("W") and "Ids" in op.input_names:
            out += [n for n in op.input("Ids") if n not in out]
    return out


def plan(main, endpoints, trainers, trainer_id, config):
    """The GeoPlan of training program `main` (a ProgramDesc) over `endpoints`."""
    b0 = ProgramView(main).global_block()
    params = trained_params(b0)
    if not params:
        raise ProgramError("geo-sgd transpile: the program has no optimizer ops (call "
                           "optimizer.minimize(loss) before transpiling)")
    dispatcher = config.split_method(endpoints)
    pending = []
    for p, g in params:
        var = b0.find_var_recursive(p)
        if var is None:
            raise ProgramError(f"the optimizer updates '{p}', which the program does not declare")
        gvar = b0.find_var_recursive(g)
        sparse = gvar is not None and gvar.type == VarType.SELECTED_ROWS
        shape = [int(d) for d in var.shape]
        if any(d < 0 for d in shape):
            raise ProgramError(f"geo-sgd: parameter '{p}' has an unknown dimension {shape}")
        slices = (slice_variable(shape, len(endpoints), config.min_block_size)
                  if config.slice_var_up else [(0, shape[0] if shape else 1)])
        names = [f"{p}.block{i}" if len(slices) > 1 else p for i in range(len(slices))]
        pending.append((p, shape, sparse, slices, names))
    eps = iter(dispatcher.dispatch([n for *_, names in pending for n in names]))
    out = []
    for p, shape, sparse, slices, names in pending:
        blocks = [GeoBlock(n, b, r, next(eps)) for n, (b, r) in zip(names, slices)]
        out.append(GeoVar(p, shape, sparse, blocks, id_slots(b0, p) if sparse else []))
    return GeoPlan(out, list(endpoints), trainers, trainer_id,
                   int(config.geo_sgd_need_push_nums))


def _declare(block, src, name, shape, type_=None, persistable=False, dtype=None):
    return rewrite.add_var(block, name, src.type if type_ is None else type_, shape,
                           src.dtype if dtype is None else dtype, 0, persistable=persistable)


def _pserver(main, geo, endpoint):
    """(pserver main ProgramDesc, {pserver var: (original var, shape)})."""
    src = ProgramView(main).global_block()
    desc = pb.ProgramDesc()
    desc.version.CopyFrom(main.version)
    desc.blocks.add(idx=0, parent_idx=-1)
    prog = ProgramView(desc)
    b0 = prog.global_block()
    received, opt_blocks, grad_to_block, var_map = [], [], [], {}
    for v in geo.vars:
        pvar = src.find_var_recursive(v.name)
        for blk in v.blocks:
            if blk.endpoint != endpoint:
                continue
            bshape = [blk.rows] + list(v.shape[1:])
            _declare(b0, pvar, blk.name, bshape, VarType.LOD_TENSOR, persistable=True)
            var_map[blk.name] = (v.name, bshape)
            _declare(b0, pvar, blk.delta, bshape,
                     VarType.SELECTED_ROWS if v.sparse else VarType.LOD_TENSOR)
            sub = rewrite.add_block(prog, 0)
            rewrite.append_op(sub, "sum", {"X": [blk.name, blk.delta]}, {"Out": [blk.name]},
                              {"op_role": OpRole.Optimize})
            received.append(blk.delta)
            opt_blocks.append(sub.idx)
            grad_to_block.append(f"{blk.delta}:{sub.idx}")
            if not v.sparse:
                continue
            for k in range(geo.trainers):
                ids, pulled = blk.rows_var(k), blk.pulled_var(k)
                _declare(b0, pvar, ids, [-1], VarType.LOD_TENSOR,
                         dtype=VarType.INT32 if blk.ids_dtype == "int32" else VarType.INT64)
                _declare(b0, pvar, pulled, [-1] + list(v.shape[1:]), VarType.LOD_TENSOR)
                sub = rewrite.add_block(prog, 0)
                rewrite.append_op(sub, "lookup_table_v2", {"W": [blk.name], "Ids": [ids]},
                                  {"Out": [pulled]}, {"op_role": OpRole.RPC})
                received.append(ids)
                opt_blocks.append(sub.idx)
                grad_to_block.append(f"{ids}:{sub.idx}")
    # a server no block is dispatched to (more servers than blocks) still gets its program,
    # a listen_and_serv with no optimize block, as Fluid builds it
    rewrite.append_op(b0, "listen_and_serv", {"X": received}, {},
                      {"endpoint": endpoint, "optimize_blocks": opt_blocks,
                       "Fanin": geo.trainers, "sync_mode": False,
                       "grad_to_block_id": grad_to_block, "distributed_mode": GEO_MODE,
                       "op_role": OpRole.RPC})
    return desc, var_map


def transpile(main, startup, trainer_id, endpoints, trainers=1, config=None):
    """GeoPrograms(trainer, {endpoint: (pserver main, pserver startup)}, plan) from
    ProgramDescs `main` and `startup`; neither is touched."""
    config, endpoints = checked_job(config, endpoints, trainer_id, trainers)
    if int(config.geo_sgd_need_push_nums) < 1:
        raise ValueError(f"geo_sgd_need_push_nums must be at least 1, got "
                         f"{config.geo_sgd_need_push_nums}")
    geo = plan(main, endpoints, trainers, trainer_id, config)
    pservers = {}
    for ep in endpoints:
        pmain, var_map = _pserver(main, geo, ep)
        pservers[ep] = (pmain, pserver_startup(startup, pmain, var_map))
    return GeoPrograms(rewrite.copy_program(main), pservers, geo)


class GeoSgdTranspiler:
    """Fluid 1.6's `GeoSgdTranspiler(config)`: `transpile(trainer_id, program, pservers,
    trainers, sync_mode=False, startup_program)`, then `get_trainer_program()` (the program
    as it is: train it locally, with a communicator started on `plan`) on trainers and
    `get_pserver_programs(endpoint)` on servers."""

    def __init__(self, config=None):
        self.config = config if config is not None else DistributeTranspilerConfig()
        self.config.geo_sgd_mode = True
        self._result = None

    def transpile(self, trainer_id, program=None, pservers="127.0.0.1:6174", trainers=1,
                  sync_mode=False, startup_program=None, current_endpoint="127.0.0.1:6174"):
        program, startup_program = given_or_default_programs(program, startup_program)
        if sync_mode:
            raise ValueError("GEO-SGD is asynchronous: transpile with sync_mode=False")
        eps = pservers.split(",") if isinstance(pservers, str) else list(pservers)
        self.trainer_id, self.trainer_num = int(trainer_id), int(trainers)
        self.origin_program, self.startup_program = program, startup_program
        self._result = transpile(program.desc, startup_program.desc, self.trainer_id, eps,
                                 self.trainer_num, self.config)
        self.pserver_endpoints = self._result.plan.endpoints

    def _check(self):
        if self._result is None:
            raise RuntimeError("call GeoSgdTranspiler.transpile(...) first")
        return self._result

    @property
    def plan(self):
        """The GeoPlan a trainer's communicator syncs (Paddle: `_get_vars_info()`)."""
        return self._check().plan

    def get_trainer_program(self, wait_port=True):
        trainer = self._check().trainer
        return wrap_program(self.origin_program, rewrite.copy_program(trainer))

    def _pserver(self, endpoint):
        pservers = self._check().pservers
        if endpoint not in pservers:
            raise ValueError(f"'{endpoint}' is not one of the pserver endpoints "
                             f"{sorted(pservers)}")
        return pservers[endpoint]

    def get_pserver_program(self, endpoint):
        return wrap_program(self.origin_program, rewrite.copy_program(self._pserver(endpoint)[0]))

    def get_startup_program(self, endpoint, pserver_program=None):
        """The startup program transpile wrote for `endpoint` (a `pserver_program` given
        as in Fluid's signature is not re-read: it is the one transpile wrote)."""
        return wrap_program(self.origin_program, rewrite.copy_program(self._pserver(endpoint)[1]))

    def get_pserver_programs(self, endpoint):
        """(pserver main program, pserver startup program) of `endpoint`."""
        return self.get_pserver_program(endpoint), self.get_startup_program(endpoint)


__all__ = ["GeoBlock", "GeoPlan", "GeoPrograms", "GeoSgdTranspiler", "GeoVar", "plan",
           "transpile", "trained_params", "id_slots"]
