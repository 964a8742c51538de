"""Fluid's `DistributeTranspiler` API over the pure pass `distribute.transpile`.

As in Fluid, `transpile` also appends the trainer's initial parameter fetch (recv,
fetch_barrier, concat) to the startup program it is given (the default one when None), so a
trainer script that runs `fluid.default_startup_program()` starts from the servers' values.
`get_trainer_program` makes the main program the trainer program in place and returns it,
as Fluid's does (a trainer script may run `fluid.default_main_program()` after it, e.g.
through a ParallelExecutor given no program); until then the main program is untouched.
Everything is computed once, by `transpile`, from a copy of the programs as they were: the
pserver programs, and the pserver startup programs from the startup program taken before
its recv ops were appended."""
import os

from ..core.dtypes import VarType
from ..ir.views import ProgramView, copy_data_marks
from . import async_lr
from . import distribute as _d
from .distribute import DistributeTranspilerConfig  # noqa: F401
from .ps_dispatcher import HashName, RoundRobin  # noqa: F401

# () -> (default main Program, default startup Program); set by the builder (fluidity/__init__)
default_programs = None


class DistributedMode:
    """The training modes Fluid 1.8 names (fleet's parameter-server strategies use them)."""
    SYNC = 0
    ASYNC = 1
    HALF_ASYNC = 2
    GEO = 3


class ServerRuntimeConfig:
    """A parameter server's RPC thread counts, from the FLAGS_rpc_*_thread_num variables
    (12 each by default, as in Fluid 1.8)."""

    def __init__(self):
        self._rpc_send_thread_num = int(os.getenv("FLAGS_rpc_send_thread_num", "12"))
        self._rpc_get_thread_num = int(os.getenv("FLAGS_rpc_get_thread_num", "12"))
        self._rpc_prefetch_thread_num = int(os.getenv("FLAGS_rpc_prefetch_thread_num", "12"))


class VarBlock:
    """One block of a sliced variable, written `name:block_id:size` (size in elements), as
    Fluid's transpiler names blocks in its logs and `slice_variable` results."""

    def __init__(self, varname, offset, size):
        self.varname, self.offset, self.size = varname, int(offset), int(size)

    def __str__(self):
        return "%s:%d:%d" % (self.varname, self.offset, self.size)


def slice_variable(var_list, slice_count, min_block_size):
    """Fluid's `slice_variable`: the blocks the transpiler cuts each variable of `var_list`
    into for `slice_count` servers, as `name:block_id:size` strings (blocks of at least
    `min_block_size` elements, rounded up to whole rows; distribute.slice_variable says how)."""
    if int(slice_count) < 1:
        raise ValueError(f"slice_variable: slice_count must be at least 1, got {slice_count}")
    if int(min_block_size) < 1:
        raise ValueError(f"slice_variable: min_block_size must be positive, got "
                         f"{min_block_size}")
    blocks = []
    for var in var_list:
        shape = list(var.shape)
        row = 1
        for d in shape[1:]:
            row *= int(d)
        for i, (_, rows) in enumerate(_d.slice_variable(shape, int(slice_count),
                                                        int(min_block_size))):
            blocks.append(str(VarBlock(var.name, i, rows * row)))
    return blocks


def given_or_default_programs(program, startup_program):
    """(program, startup_program), each None replaced by the default main or startup
    Program, as Fluid's transpilers take them."""
    if program is None or startup_program is None:
        if default_programs is None:
            raise ValueError("transpile: pass program and startup_program")
        dm, ds = default_programs()
        program = program if program is not None else dm
        startup_program = startup_program if startup_program is not None else ds
    return program, startup_program


def become(program, desc):
    """In place: make Program `program` hold `desc`'s blocks (its ops and variables),
    keeping its Python objects (a Parameter keeps its trainable flag, regularizer...), as
    Fluid's transpiler rewrites the program it is given."""
    for i, bd in enumerate(desc.blocks):
        if i == len(program.desc.blocks):
            program.desc.blocks.add()
        own = program.desc.blocks[i]
        own.idx, own.parent_idx = bd.idx, bd.parent_idx
        del own.ops[:]
        own.ops.extend(bd.ops)
        del own.vars[:]
        own.vars.extend(bd.vars)
    if len(program.desc.blocks) > len(desc.blocks):
        raise ValueError("become: the new program has fewer blocks than the program")
    program._sync_with_cpp()
    return program


def wrap_program(like, desc):
    """A Program (the class of `like`) over `desc`, its global block's data variables
    marked as `like`'s are (`is_data`: the transpiled programs keep the feeds the original
    declares, as Fluid's, which transpiles the original in place)."""
    program = type(like)._construct_from_desc(desc)
    if hasattr(like, "blocks") and hasattr(program, "blocks"):
        copy_data_marks(program, like, {0: 0})
    return program


def _mark(program, info):
    """Set Fluid's distributed attributes (`_is_distributed`, `_endpoints`, `_ps_endpoint`,
    `_is_chief`, `_distributed_lookup_table`, `_parameters_on_pservers`) on a Program object,
    as Fluid's transpiler sets them on the programs it hands out; returns it."""
    for k, v in info.items():
        setattr(program, k, v)
    return program


class DistributeTranspiler:
    """`t = fluid.DistributeTranspiler(config)`; `t.transpile(trainer_id, program=None,
    pservers="127.0.0.1:6174", trainers=1, sync_mode=True, startup_program=None,
    current_endpoint="127.0.0.1:6174")`; then `get_trainer_program()` on trainers and
    `get_pserver_programs(endpoint)` on servers."""

    def __init__(self, config=None):
        self.config = config if config is not None else DistributeTranspilerConfig()
        self._result = None

    def transpile(self, trainer_id, program=None, pservers="127.0.0.1:6174", trainers=1,
                  sync_mode=True, startup_program=None, current_endpoint="127.0.0.1:6174"):
        program, startup_program = given_or_default_programs(program, startup_program)
        if isinstance(trainers, str):
            raise NotImplementedError("trainers as an endpoint list (nccl2 mode) is not built")
        eps = pservers.split(",") if isinstance(pservers, str) else list(pservers)
        self.trainer_id, self.trainer_num = int(trainer_id), int(trainers)
        self.sync_mode, self.current_endpoint = bool(sync_mode), current_endpoint
        self.origin_program, self.startup_program = program, startup_program
        self._origin_main = _d.rewrite.copy_program(program.desc)
        self._origin_startup = _d.rewrite.copy_program(startup_program.desc)
        self._result = _d.transpile(program.desc, self._origin_startup, self.trainer_id, eps,
                                    self.trainer_num, self.sync_mode, self.config)
        self.pserver_endpoints = [e.strip() for e in eps if e.strip()]
        table = self._result.table
        self.table_name = table.name if table is not None else None
        self.has_distributed_lookup_table = table is not None
        counter = self._result.counter
        if counter is not None:   # async schedule: the trainers' and servers' step counters
            async_lr.add_counter_inits(startup_program.global_block(), counter, False)
            async_lr.add_counter_inits(ProgramView(self._origin_startup).global_block(),
                                       counter, True)
        # Fluid: the trainer's startup program fetches the initial parameters
        _d.append_trainer_recv(startup_program.global_block(), program.desc, self._result.plan,
                               self.trainer_id, self.pserver_endpoints, self.sync_mode)
        if table is not None:     # a trainer holds no distributed table
            _d.fake_init_table(startup_program.global_block(), table)
        # Fluid's distributed attributes of the programs (the program's desc is untouched)
        self._dist_info = {
            "_is_distributed": True, "_endpoints": list(self.pserver_endpoints),
            "_ps_endpoint": current_endpoint, "_is_chief": self.trainer_id == 0,
            "_distributed_lookup_table": self.table_name,
            "_parameters_on_pservers": self._result.overview}
        _mark(program, self._dist_info)
        self.vars_overview = self._result.overview

    def _check(self):
        if self._result is None:
            raise RuntimeError("call DistributeTranspiler.transpile(...) first")
        return self._result

    def get_trainer_program(self, wait_port=True):
        """The trainer program; as in Fluid, this also turns the startup program's
        initializers of sparsely updated tables into `fake_init` (distribute.
        fake_init_sparse_tables)."""
        self._check()
        _d.fake_init_sparse_tables(self.startup_program.global_block(),
                                   ProgramView(self._origin_main).global_block())
        become(self.origin_program, self._check().trainer)
        return _mark(self.origin_program, self._dist_info)

    def _pserver(self, endpoint):
        pservers = self._check().pservers
        if endpoint not in pservers:
            raise ValueError(f"'{endpoint}' is not one of the pserver endpoints "
                             f"{sorted(pservers)}")
        return pservers[endpoint]

    def get_pserver_program(self, endpoint):
        prog = wrap_program(self.origin_program, _d.rewrite.copy_program(self._pserver(endpoint)[0]))
        if self._result.table is not None:
            prog._distributed_lookup_table = self.table_name
        return _mark(prog, self._dist_info)

    def get_pserver_programs(self, endpoint):
        """(pserver main program, pserver startup program) of `endpoint`."""
        return (self.get_pserver_program(endpoint),
                self.get_startup_program(endpoint))

    def get_startup_program(self, endpoint, pserver_program=None, startup_program=None):
        if pserver_program is None and startup_program is None:   # written by transpile
            return wrap_program(self.origin_program,
                         _d.rewrite.copy_program(self._pserver(endpoint)[1]))
        main = self._pserver(endpoint)[0] if pserver_program is None else pserver_program.desc
        src = self._origin_startup if startup_program is None else startup_program.desc
        var_map = _var_map(main, ProgramView(self._origin_main).global_block())
        return wrap_program(self.origin_program, _d.pserver_startup(src, main, var_map))


def _var_map(pserver_main, origin_block):
    """{pserver var: (original var, shape)} of a pserver program's persistable variables
    (block names `<var>.block<i>` map back to `<var>`)."""
    out = {}
    for v in ProgramView(pserver_main).global_block().vars.values():
        if not v.persistable or v.type == VarType.SELECTED_ROWS:
            continue        # (a distributed table's shard grows on its server, no initializer)
        orig = v.name
        if origin_block.find_var_recursive(orig) is None and ".block" in orig:
            orig = orig.rsplit(".block", 1)[0]
        out[v.name] = (orig, list(v.shape))
    return out
