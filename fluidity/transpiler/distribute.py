"""The distribute transpiler (Paddle's `DistributeTranspiler`, pserver mode): one training
program in, a trainer program and one program per parameter server out.

    transpile(main, startup, trainer_id, endpoints, trainers, sync_mode, config)
        -> DistPrograms(trainer, trainer_startup, {endpoint: (pserver_main, pserver_startup)})

is a pure function of ProgramDescs: the inputs are never touched.

* Each (parameter, gradient) pair is read from the optimizer ops' `op_role_var`. With
  `slice_var_up` a parameter is cut into row blocks (`slice_variable`, Paddle's rule: at most
  one block per server, no block under `min_block_size` elements, whole rows); its gradient
  is cut the same way. The dispatcher (`RoundRobin` or `HashName`) gives each gradient block
  (and so its parameter block) an endpoint.
* Trainer: the optimizer and LR-schedule ops are dropped; after the op that makes each
  gradient come `split_byref` (into `<grad>.block<i>`, when sliced) and `send` (attr `epmap`;
  its `sync_mode` is "wait for the RPC", so on in async training); at the end `send_barrier`
  (sync), one `recv` per parameter (its blocks), `fetch_barrier` (sync) and a `concat` of the
  blocks back into the parameter. In sync training with several trainers each trainer's
  gradient blocks carry `.trainer_<id>`. The trainer startup program gets the same recv /
  fetch_barrier / concat, so every trainer starts from the servers' initial values.
* Parameter server: block 0 declares its parameter blocks, their accumulators (sliced the
  same way when they have the parameter's shape, one copy per block otherwise) and the
  gradients it receives, and holds one `listen_and_serv`; block 1.. are the optimize blocks,
  one per parameter block: in sync training with N trainers `sum` of the N gradients then
  `scale(1/N)` (Fluid averages on the server), then the optimizer op(s) renamed to the
  block's variables. Its startup program runs the original initializers, reshaped to the
  blocks.
"""
import math
import warnings
from collections import namedtuple

from ..core.dtypes import VarType
from ..core.names import EMPTY_VAR_NAME, OpRole
from ..errors import ProgramError
from . import async_lr
from ..ir import rewrite
from ..ir.views import ProgramView
from ..proto import framework_pb2 as pb
from .ps_dispatcher import HashName, PSDispatcher, RoundRobin  # noqa: F401
from .vars_distributed import job_overview

# plan: the parameter blocks and their endpoints the programs were written from
# table: the DistTable (None without a distributed lookup table)
# overview: the VarsDistributed of the job (vars_distributed.py: where each block went)
# counter: the async_lr.AsyncCounter of an async job's learning-rate schedule, or None
DistPrograms = namedtuple("DistPrograms",
                          "trainer trainer_startup pservers plan table overview counter",
                          defaults=(None, None, None))

# Paddle's control-variable names for the RPC ops' dependencies
_SEND_CTRL = "@SEND_CTRL@"
_BARRIER_CTRL = "@BARRIER_CTRL@"


class DistributeTranspilerConfig:
    """Fluid's `DistributeTranspilerConfig`: `slice_var_up` (cut parameters into blocks
    across servers), `split_method` (a dispatcher class: RoundRobin or HashName),
    `min_block_size` (elements; at least 8192 as in Fluid)."""

    def __init__(self):
        self.slice_var_up = True
        self.split_method = RoundRobin
        self.min_block_size = 8192
        self.enable_dc_asgd = False
        self.mode = "pserver"
        self.print_log = False
        self.wait_port = True
        # GEO-SGD (Paddle 1.6; transpiler/geo_sgd_transpiler.py): local training, deltas
        # pushed to the pservers every geo_sgd_need_push_nums batches
        self.geo_sgd_mode = False
        self.geo_sgd_need_push_nums = 100
        # Fluid 1.8's communicator modes (fleet's strategies set them): sync_mode and
        # runtime_split_send_recv exclude each other, as in Fluid
        self._sync_mode = True
        self._runtime_split_send_recv = False
        self.half_async = False
        self.completely_not_async = False
        # collective (nccl2) fields Fluid 1.8 carries; only "pserver" mode is built here
        self.nccl_comm_num = 1
        self.use_hierarchical_allreduce = False
        self.hierarchical_allreduce_inter_nranks = 0
        self.collective_mode = None

    @property
    def sync_mode(self):
        return self._sync_mode

    @sync_mode.setter
    def sync_mode(self, value):
        if value is None:
            raise ValueError("DistributeTranspilerConfig.sync_mode can't be None")
        if value and self._runtime_split_send_recv:
            raise ValueError("DistributeTranspilerConfig: set runtime_split_send_recv to "
                             "False before setting sync_mode to True")
        self._sync_mode = bool(value)

    @property
    def runtime_split_send_recv(self):
        return self._runtime_split_send_recv

    @runtime_split_send_recv.setter
    def runtime_split_send_recv(self, value):
        if value is None:
            raise ValueError("DistributeTranspilerConfig.runtime_split_send_recv can't be None")
        if value and self._sync_mode:
            raise ValueError("DistributeTranspilerConfig: set sync_mode to False before "
                             "setting runtime_split_send_recv to True")
        self._runtime_split_send_recv = bool(value)

    def check(self):
        if self.min_block_size < 8192:
            raise ValueError(f"min_block_size must be at least 8192 (Fluid's rule), got "
                             f"{self.min_block_size}")
        if not (isinstance(self.split_method, type) and
                issubclass(self.split_method, PSDispatcher)):
            raise ValueError("split_method must be fluid.transpiler.RoundRobin or HashName")
        if self.mode != "pserver":
            raise NotImplementedError(f"DistributeTranspilerConfig.mode={self.mode!r}: only "
                                      f"'pserver' is built (nccl2/collective are not)")
        if self.enable_dc_asgd:
            raise NotImplementedError("enable_dc_asgd (DC-ASGD) is not built")


def slice_variable(shape, slice_count, min_block_size):
    """[(first row, rows)] of the blocks a variable of `shape` is cut into (Paddle's
    `slice_variable`: split_count = min(slice_count, numel // min_block_size) at least 1,
    block size rounded up to whole rows)."""
    shape = [int(d) for d in shape]
    if not shape or any(d < 0 for d in shape):
        raise ProgramError(f"cannot slice a variable of shape {shape}")
    numel = math.prod(shape)
    split_count = max(1, min(slice_count, numel // min_block_size))
    block_size = math.ceil(numel / split_count)
    row = math.prod(shape[1:]) if len(shape) > 1 else 1
    if block_size % row:
        block_size += row - block_size % row
    rows_per = block_size // row
    out, begin = [], 0
    while begin < shape[0]:
        rows = min(rows_per, shape[0] - begin)
        out.append((begin, rows))
        begin += rows
    return out


class _Block:
    """One block of a parameter and its gradient, and the server that holds it."""
    __slots__ = ("param", "grad", "idx", "begin", "rows", "shape", "pname", "gname", "ep",
                 "sliced")

    def __init__(self, param, grad, idx, begin, rows, shape, sliced):
        self.param, self.grad, self.idx = param, grad, idx
        self.begin, self.rows, self.sliced = begin, rows, sliced
        self.shape = [rows] + list(shape[1:])
        self.pname = f"{param}.block{idx}" if sliced else param
        self.gname = f"{grad}.block{idx}" if sliced else grad
        self.ep = None

    def rename(self, name):
        """The block's name for a variable of the parameter (accumulators)."""
        return f"{name}.block{self.idx}" if self.sliced else name


def _attr(op, name, default=None):
    return op.attr(name) if op.has_attr(name) else default


_CLIP_SCOPE = "gradient_clip"


def _is_clip(op):
    """Gradient-clipping ops (Fluid names them under the `gradient_clip` scope)."""
    return op.role & OpRole.Optimize and _CLIP_SCOPE in str(_attr(op, "op_namescope", ""))


def _group_inputs(ops):
    """The names `ops` (in order) read before any of them writes them."""
    written, inputs = set(), []
    for op in ops:
        for n in op.input_arg_names:
            if n not in written and n not in inputs:
                inputs.append(n)
        written.update(op.output_arg_names)
    return inputs


def _trainer_clips(b0):
    """Indices of the clipping ops that stay on the trainer: those of a group (clipping ops
    linked by the variables they share) that combines several gradients, as global-norm
    clipping does. A group that clips one gradient goes to the parameter's server, after
    the trainers' gradients are merged, as Fluid 1.6 places clipping; a global norm there
    would see one server's gradients only, so it is computed where every gradient is."""
    clips = [i for i, op in enumerate(b0.ops) if _is_clip(op)]
    root = {i: i for i in clips}

    def find(i):
        while root[i] != i:
            root[i] = root[root[i]]
            i = root[i]
        return i
    first = {}
    for i in clips:
        op = b0.ops[i]
        for n in op.input_arg_names + op.output_arg_names:
            if n in first:
                root[find(i)] = find(first[n])
            else:
                first[n] = i
    groups = {}
    for i in clips:
        groups.setdefault(find(i), []).append(i)
    out = set()
    for members in groups.values():
        if len(_group_inputs([b0.ops[i] for i in sorted(members)])) > 1:
            out.update(members)
    return out


def _params_grads(b0):
    """[(param, sent gradient, [optimize op indices])] in the order the optimizer ops come.
    The ops of a parameter are its optimizer op(s) (`op_role_var` names the pair) and the
    optimize-role ops without one that touch it or its gradient, or what those wrote
    (regularization, and clipping of its gradient alone: `_trainer_clips`), or that make
    what they read (the `scale` of a parameter's own learning rate, as Fluid places it). The sent
    gradient is what the trainer computes and these ops start from: the gradient of the
    backward pass (or of a global-norm clip), which the optimizer op may know by another
    name (clipped, decayed)."""
    trainer_clips = _trainer_clips(b0)
    lr_made = {n for op in b0.ops if op.role & OpRole.LRSched for n in op.output_arg_names}
    out, by_param, loose = [], {}, []
    for i, op in enumerate(b0.ops):
        if not op.role & OpRole.Optimize or i in trainer_clips:
            continue
        rv = list(_attr(op, "op_role_var", []) or [])
        if len(rv) < 2:
            loose.append(i)
            continue
        p, g = rv[0], rv[1]
        if p not in by_param:
            by_param[p] = (p, g, [])
            out.append(by_param[p])
        by_param[p][2].append(i)
    for p, g, ops in out:
        touched, reads = {p, g}, set()
        for i in ops:
            touched.update(b0.ops[i].output_arg_names)
            reads.update(b0.ops[i].input_arg_names)
        for i in reversed(loose):   # regularization and clipping come before the update
            op = b0.ops[i]
            if i in ops:
                continue
            names = set(op.input_arg_names) | set(op.output_arg_names)
            if names & touched:     # an op touching the parameter, its gradient or theirs
                ops.append(i)
                touched.update(names)
                reads.update(op.input_arg_names)
            elif set(op.output_arg_names) & reads:
                # making what its update reads: the `scale` of a parameter's own learning
                # rate; what it reads (the global learning rate) is not this parameter's,
                # so the other parameters' scales of it stay theirs
                ops.append(i)
                touched.update(op.output_arg_names)
        ops.sort()
    owned = {i for _p, _g, ops in out for i in ops}
    stray = sorted({b0.ops[i].type for i in loose if i not in owned})
    if stray:
        raise NotImplementedError(
            f"distribute transpiler: optimize-role ops {stray} belong to no parameter's "
            f"update (neither clipping nor its regularization); they cannot be placed on a "
            f"parameter server")
    result = []
    for p, g, ops in out:
        sent = [n for n in _group_inputs([b0.ops[i] for i in ops])
                if n not in lr_made and not _persistable(b0, n)]
        # the parameter's gradients of later backward passes (a second minimize): as Fluid
        # 1.8, the first optimizer op's gradient is sent and every update of the parameter
        # on the server reads it (_renames_for)
        later = set(_later_grads(p, g, [b0.ops[i] for i in ops]))
        sent = [n for n in sent if n not in later]
        if len(sent) > 1:
            raise NotImplementedError(
                f"distribute transpiler: the update of '{p}' starts from several computed "
                f"variables {sent}; one gradient is sent per parameter")
        result.append((p, sent[0] if sent else g, ops))
    return result


def _later_grads(param, grad, ops):
    """The gradients other than `grad` that `param`'s optimizer ops among `ops` name in their
    op_role_var: those of further backward passes over the same parameter."""
    out = []
    for op in ops:
        rv = list(_attr(op, "op_role_var", []) or [])
        if len(rv) >= 2 and rv[0] == param and rv[1] != grad and rv[1] not in out:
            out.append(rv[1])
    return out


def _persistable(b0, name):
    v = b0.find_var_recursive(name)
    return v is not None and v.persistable


def _lr_ops(b0):
    """Indices of the learning-rate schedule ops (role LRSched): they move to the pservers'
    LR-decay block, run once per step before the optimize blocks. The `scale` of a
    parameter's own learning rate (role LRSched | Optimize) is not among them: it goes with
    that parameter's update (`_params_grads`), so it runs in async mode too."""
    return [i for i, op in enumerate(b0.ops)
            if op.role & OpRole.LRSched and not op.role & OpRole.Optimize]


def _plan(b0, endpoints, config, table=None):
    """{param: [_Block]} with endpoints assigned, in optimizer order (the distributed table,
    sharded by id instead, is not among them)."""
    dispatcher = config.split_method(endpoints)
    plan = {}
    for p, g, _ops in _params_grads(b0):
        if table is not None and p == table.name:
            continue
        var = b0.find_var_recursive(p)
        if var is None:
            raise ProgramError(f"the optimizer updates '{p}', which the program does not declare")
        shape = list(var.shape)
        slices = (slice_variable(shape, len(endpoints), config.min_block_size)
                  if config.slice_var_up else [(0, shape[0] if shape else 1)])
        sliced = len(slices) > 1
        plan[p] = [_Block(p, g, i, b, r, shape, sliced) for i, (b, r) in enumerate(slices)]
    blocks = [b for bs in plan.values() for b in bs]
    for b, ep in zip(blocks, dispatcher.dispatch([b.gname for b in blocks])):
        b.ep = ep
    return plan


def _declare_like(block, src, name, shape=None, persistable=None):
    """Declare `name` in `block` as a copy of VarView `src` (another shape if given)."""
    if name in block.vars:
        return block.vars[name]
    v = rewrite.add_var(block, name, src.type, shape if shape is not None else src.shape,
                        src.dtype, src.lod_level,
                        persistable=src.persistable if persistable is None else persistable)
    return v


def _ctrl(block, name):
    if name not in block.vars:
        rewrite.add_var(block, name, VarType.RAW)
    return name


def _suffix(name, trainer_id, sync_mode, trainers):
    return f"{name}.trainer_{trainer_id}" if sync_mode and trainers > 1 else name


# --- the distributed lookup table ----------------------------------------------------------
class DistTable:
    """The program's distributed lookup table (`embedding(is_distributed=True)`; Paddle 1.x
    allows one): its name, gradient (as the optimizer names it), shape, the lookups, the
    learning rate and optimizer of its update, and its startup initializer."""

    def __init__(self, b0, name, grad, opt_op, lr_ops=()):
        var = b0.find_var_recursive(name)
        self.name, self.grad = name, grad
        self.shape = [int(d) for d in var.shape]
        if len(self.shape) != 2:
            raise ProgramError(f"distributed table '{name}' must be [rows, width], is "
                               f"{self.shape}")
        self.lr = opt_op.input("LearningRate")[0]
        self.opt_type = opt_op.type
        # the ops making the table's own learning rate (the `scale` of ParamAttr's
        # learning_rate), which run on the pservers before its sgd
        self.lr_ops = list(lr_ops)

    def lookup_ops(self, block):
        """The lookup_table ops of `block` that read the table."""
        return [op for op in block.ops
                if op.type == "lookup_table" and op.input("W") == [self.name]]

    def grad_names(self, trainer_id, n_eps, sync_mode):
        """The gradient shards a trainer sends (Paddle's names)."""
        tag = f".trainer_{trainer_id}" if sync_mode else ""
        return [f"{self.grad}{tag}.pserver_{k}" for k in range(n_eps)]

    @staticmethod
    def ids_name(k):
        return f"prefetch_compress_in_tmp_{k}"

    @staticmethod
    def rows_name(k):
        return f"prefetch_compress_out_tmp_{k}"


def _dist_table(b0, params_grads):
    """The DistTable of the program, or None."""
    names = sorted({op.input("W")[0] for op in b0.ops
                    if op.type in ("lookup_table", "lookup_table_v2") and
                    _attr(op, "is_distributed", False)})
    if not names:
        return None
    if len(names) > 1:
        raise NotImplementedError(f"distribute transpiler: one distributed lookup table per "
                                  f"program (Paddle 1.x), this one has {names}")
    (name,) = names
    if any(op.type == "lookup_table_v2" and op.input("W") == [name] for op in b0.ops):
        raise NotImplementedError(f"distributed table '{name}': lookup_table_v2 lookups "
                                  f"(ids of any shape) are not built; Fluid 1.x's "
                                  f"embedding writes lookup_table")
    for p, g, ops in params_grads:
        if p == name:
            opt = [b0.ops[i] for i in ops if b0.ops[i].has_attr("op_role_var") and
                   "LearningRate" in b0.ops[i].input_names]
            lr_ops = _table_lr_ops(b0, ops, opt)
            if len(opt) != 1 or len(ops) != 1 + len(lr_ops):
                raise NotImplementedError(f"distributed table '{name}': regularization of "
                                          f"the table on the pservers is not built")
            if opt[0].type != "sgd":
                warnings.warn(f"distributed table '{name}' is updated by sgd on the "
                              f"pservers, not '{opt[0].type}' (as in Paddle)")
            return DistTable(b0, name, g, opt[0], lr_ops)
    raise ProgramError(f"distributed table '{name}' has no optimizer op (is it trainable?)")


def _table_initializer(startup, table):
    """lookup_sparse_table's initializer attributes from the startup op that initializes
    the table (uniform_random, gaussian_random or fill_constant)."""
    for op in ProgramView(startup).global_block().ops:
        if op.output_arg_names == [table.name]:
            kinds = {"uniform_random": ("min", "max", "seed"),
                     "gaussian_random": ("mean", "std", "seed"),
                     "fill_constant": ("value",)}
            if op.type not in kinds:
                raise NotImplementedError(f"distributed table '{table.name}' is initialized "
                                          f"by '{op.type}'; its rows can be made by "
                                          f"{sorted(kinds)}")
            attrs = {"init_type": op.type}
            for a in kinds[op.type]:
                attrs[a] = _attr(op, a, 0)
            return attrs
    raise ProgramError(f"the startup program does not initialize distributed table "
                       f"'{table.name}'")


def fake_init_table(startup_block, table):
    """In place: remove the startup op initializing the table and append `fake_init` (a
    trainer holds no table: its lookup_table_grad reads the table's shape only), at the end
    as Fluid 1.6 appends it. Done already: nothing changes."""
    inits = [op for op in startup_block.ops
             if op.output_arg_names == [table.name] and op.type != "fake_init"]
    if not inits and any(op.type == "fake_init" and op.output_arg_names == [table.name]
                         for op in startup_block.ops):
        return
    rewrite.append_op(startup_block, "fake_init", {}, {"Out": [table.name]},
                      {"shape": table.shape, "op_role": OpRole.Forward})
    for op in inits:
        rewrite.remove_op(startup_block, op)


_SPARSE_UPDATE_OPS = ("lookup_table", "nce")


def sparse_table_names(main_block):
    """The tables a trainer updates sparsely (W of an `is_sparse` lookup_table or nce, and
    of distributed_lookup_table), in program order: the servers hold them, and the
    trainer's startup needs no initializer for them (Fluid 1.8's rule)."""
    out = []
    for op in main_block.ops:
        sparse = op.type in _SPARSE_UPDATE_OPS and bool(_attr(op, "is_sparse", False))
        if sparse or op.type == "distributed_lookup_table":
            for n in op.input("W"):
                if n not in out:
                    out.append(n)
    return out


def fake_init_sparse_tables(startup_block, main_block):
    """In place, as Fluid 1.8's get_trainer_program: the one startup op initializing each
    sparsely updated table is replaced by a `fake_init` of its shape (appended at the end:
    the trainer's startup receives the servers' values before it, and it keeps them). A
    table initialized by no op or by several is refused with a ValueError naming it."""
    for name in sparse_table_names(main_block):
        if any(op.type == "fake_init" and op.output_arg_names == [name]
               for op in startup_block.ops):
            continue
        inits = [op for op in startup_block.ops if name in op.output_arg_names
                 and op.type not in ("recv", "concat", "fetch_barrier")]
        if len(inits) != 1:
            raise ValueError(f"table init op num should be 1, now is {len(inits)} (table "
                             f"'{name}': {[op.type for op in inits]})")
        shape = [int(d) for d in _attr(inits[0], "shape", [])]
        rewrite.append_op(startup_block, "fake_init", {}, {"Out": [name]},
                          {"shape": shape, "op_role": OpRole.Forward})
        rewrite.remove_op(startup_block, inits[0])


def _trainer_table(b0, table, trainer_id, endpoints, sync_mode):
    """Lookups -> split_ids, prefetch, merge_ids; gradient -> split_ids, send. Returns the
    send's control variable."""
    lookups = table.lookup_ops(b0)
    ids = [op.input("Ids")[0] for op in lookups]
    outs = [op.output("Out")[0] for op in lookups]
    at = lookups[0].idx
    for op in reversed(lookups):
        rewrite.remove_op(b0, op)
    ids_var, out_var = b0.find_var_recursive(ids[0]), b0.find_var_recursive(outs[0])
    n = len(endpoints)
    ins = [table.ids_name(k) for k in range(n)]
    rows = [table.rows_name(k) for k in range(n)]
    for a, b in zip(ins, rows):
        rewrite.add_var(b0, a, VarType.LOD_TENSOR, [-1, 1], ids_var.dtype, 0)
        rewrite.add_var(b0, b, VarType.LOD_TENSOR, [-1, table.shape[1]], out_var.dtype, 0)
    rewrite.insert_op(b0, at, "split_ids", {"Ids": ids}, {"Out": ins},
                      {"op_role": OpRole.Forward})
    rewrite.insert_op(b0, at + 1, "prefetch", {"X": ins}, {"Out": rows},
                      {"epmap": list(endpoints), "table_names": [table.name] * n,
                       "trainer_id": trainer_id, "op_role": OpRole.Forward})
    rewrite.insert_op(b0, at + 2, "merge_ids", {"Ids": ids, "Rows": ins, "X": rows},
                      {"Out": outs}, {"op_role": OpRole.Forward})
    writers = [i for i, op in enumerate(b0.ops) if table.grad in op.output_arg_names]
    if not writers:
        raise ProgramError(f"no op of the program computes gradient '{table.grad}'")
    gvar = b0.find_var_recursive(table.grad)
    sends = table.grad_names(trainer_id, n, sync_mode)
    for name in sends:
        _declare_like(b0, gvar, name, persistable=False)
    at = writers[-1] + 1
    rewrite.insert_op(b0, at, "split_ids", {"Ids": [table.grad]}, {"Out": sends},
                      {"op_role": OpRole.Dist})
    ctrl = _ctrl(b0, f"{_SEND_CTRL}{table.grad}")
    rewrite.insert_op(b0, at + 1, "send", {"X": sends}, {"Out": [ctrl]},
                      {"epmap": list(endpoints), "sync_mode": not sync_mode,
                       "trainer_id": trainer_id, "op_role": OpRole.RPC,
                       "op_role_var": [table.name, table.grad]})
    return ctrl


def _table_lr_ops(b0, ops, opt):
    """The ops among the table's update `ops` that make its optimizer's learning rate alone
    (role LRSched: the `scale` of its own ParamAttr learning_rate), in program order."""
    if len(opt) != 1:
        return []
    made = {opt[0].input("LearningRate")[0]}
    out = []
    for i in reversed(ops):
        op = b0.ops[i]
        if op is not opt[0] and op.role & OpRole.LRSched and \
                set(op.output_arg_names) <= made:
            out.append(op)
            made.update(op.input_arg_names)
    return out[::-1]


def table_shard_rows(table, n_endpoints):
    """The rows a pserver's shard of the distributed table declares: ceil(rows / servers),
    as Fluid 1.6 declares it (the shard itself grows with the ids it is sent)."""
    return -(-table.shape[0] // n_endpoints)


def _pserver_table(prog, src, table, init, endpoint, endpoints, trainers, sync_mode,
                   var_map, parent):
    """The table's optimize, prefetch and checkpoint-save blocks on `endpoint`, as Fluid
    1.6 writes them: `sum` of the trainers' shards then `sgd` (sync; the gradient is summed,
    not averaged, as in Fluid), `lookup_sparse_table`, `save`. Returns (received variables,
    optimize block, "grad:block", "ids:prefetch block", save block)."""
    b0 = prog.global_block()
    k = endpoints.index(endpoint)
    rewrite.add_var(b0, table.name, VarType.SELECTED_ROWS,
                    [table_shard_rows(table, len(endpoints))] + table.shape[1:],
                    src.find_var_recursive(table.name).dtype, persistable=True)
    gvar = src.find_var_recursive(table.grad)
    lr = src.find_var_recursive(table.lr)
    if not table.lr_ops:
        _declare_like(b0, lr, table.lr)
        var_map[table.lr] = (table.lr, list(lr.shape))
    opt = rewrite.add_block(prog, parent)
    if sync_mode:
        per = [f"{table.grad}.trainer_{t}.pserver_{k}" for t in range(trainers)]
        grad = table.grad
        for n in per + [grad]:
            _declare_like(b0, gvar, n, persistable=False)
        rewrite.append_op(opt, "sum", {"X": per}, {"Out": [grad]},
                          {"op_role": OpRole.Optimize})
    else:
        grad = f"{table.grad}.pserver_{k}"
        per = [grad]
        _declare_like(b0, gvar, grad, persistable=False)
    for op in table.lr_ops:     # the table's own learning rate, made before its update
        _clone_op(prog, src.program, op, src, opt, var_map)
    rewrite.append_op(opt, "sgd", {"Param": [table.name], "Grad": [grad],
                                   "LearningRate": [table.lr]},
                      {"ParamOut": [table.name]},
                      {"op_role": OpRole.Optimize, "op_role_var": [table.name, grad]})
    pre = rewrite.add_block(prog, opt.idx)
    ids, rows = table.ids_name(k), table.rows_name(k)
    rewrite.add_var(b0, ids, VarType.LOD_TENSOR, [-1, 1], VarType.INT64, 0)
    rewrite.add_var(b0, rows, VarType.LOD_TENSOR, [-1, table.shape[1]],
                    src.find_var_recursive(table.name).dtype, 0)
    padding = [_attr(op, "padding_idx", -1) for op in table.lookup_ops(src)]
    rewrite.append_op(pre, "lookup_sparse_table", {"Ids": [ids], "W": [table.name]},
                      {"Out": [rows]},
                      {**init, "is_sparse": True, "is_distributed": True,
                       "padding_idx": padding[0], "auto_grown_table": True,
                       "table_height": table.shape[0], "op_role": OpRole.Forward})
    # the block a checkpoint notification runs to save the shard (Fluid's; file_path unused)
    if _TABLE_PATH not in b0.vars:
        rewrite.add_var(b0, _TABLE_PATH, VarType.RAW, persistable=True)
    save = rewrite.add_block(prog, opt.idx)
    rewrite.append_op(save, "save", {"X": [table.name]}, {}, {"file_path": "none"})
    return per, opt.idx, f"{grad}:{opt.idx}", f"{ids}:{pre.idx}", save.idx


_TABLE_PATH = "kLookupTablePath"


# --- the trainer ---------------------------------------------------------------------------
def _append_recv(block, plan, trainer_id, sync_mode, endpoints, src_block,
                 runtime_split=False, fetch_barrier=None):
    """recv each parameter's blocks, fetch_barrier (sync), concat the blocks (in place).
    `runtime_split` (Fluid 1.8's runtime_split_send_recv): one recv per parameter joins its
    blocks itself (`recv_varnames`), no concat."""
    rpc = {"op_role": OpRole.RPC, "trainer_id": trainer_id}
    outs = []
    for p, blocks in plan.items():
        src = src_block.find_var_recursive(p)
        names = [b.pname for b in blocks]
        if runtime_split and blocks[0].sliced:
            if p not in block.vars:
                _declare_like(block, src, p)
            rewrite.append_op(block, "recv", {}, {"Out": [p]},
                              {**rpc, "epmap": [b.ep for b in blocks], "recv_varnames": names,
                               "sync_mode": sync_mode, "op_role_var": [p, blocks[0].grad]})
            outs.append(p)
            continue
        for b in blocks:
            if b.sliced:
                _declare_like(block, src, b.pname, b.shape, persistable=False)
        if p not in block.vars:
            _declare_like(block, src, p)
        rewrite.append_op(block, "recv", {}, {"Out": names},
                          {**rpc, "epmap": [b.ep for b in blocks], "varnames": names,
                           "sync_mode": sync_mode, "op_role_var": [p, blocks[0].grad]})
        outs += names
    if sync_mode if fetch_barrier is None else fetch_barrier:
        rewrite.append_op(block, "fetch_barrier", {}, {"Out": [_ctrl(block, _BARRIER_CTRL)]},
                          {**rpc, "endpoints": list(endpoints), "sync_mode": sync_mode})
    for p, blocks in plan.items():
        if blocks[0].sliced and not runtime_split:
            rewrite.append_op(block, "concat", {"X": [b.pname for b in blocks]}, {"Out": [p]},
                              {"axis": 0, "op_role": OpRole.Dist})


def _trainer(main, plan, trainer_id, endpoints, trainers, sync_mode, table=None,
             runtime_split=False, counter=None):
    prog = ProgramView(rewrite.copy_program(main))
    b0 = prog.global_block()
    kept_clips = _trainer_clips(b0)
    for i in kept_clips:      # as Fluid makes the clipping it leaves on the trainer
        rewrite.set_attr(b0.ops[i], "op_role", OpRole.Backward)
    drop = [i for i, op in enumerate(b0.ops)
            if op.role & (OpRole.Optimize | OpRole.LRSched) and i not in kept_clips]
    for i in reversed(drop):
        rewrite.remove_op(b0, b0.ops[i])
    ctrls = []
    if table is not None:
        ctrls.append(_trainer_table(b0, table, trainer_id, endpoints, sync_mode))
    for p, blocks in plan.items():
        g = blocks[0].grad
        gvar = b0.find_var_recursive(g)
        if gvar is None:
            raise ProgramError(f"gradient '{g}' of '{p}' is not declared in the program")
        sends = [_suffix(b.gname, trainer_id, sync_mode, trainers) for b in blocks]
        if not blocks[0].sliced and sends[0] != g:
            rewrite.rename_var(b0, g, sends[0])
            g = sends[0]
        writers = [i for i, op in enumerate(b0.ops) if g in op.output_arg_names]
        if not writers:
            raise ProgramError(f"no op of the program computes gradient '{g}'")
        at = writers[-1] + 1
        split_attrs = {}
        if blocks[0].sliced and runtime_split:
            # Fluid 1.8's runtime_split_send_recv: the send op cuts the whole gradient
            split_attrs = {"sections": [b.rows for b in blocks], "send_varnames": sends}
            sends = [g]
        elif blocks[0].sliced:
            for b, n in zip(blocks, sends):
                _declare_like(b0, gvar, n, b.shape, persistable=False)
            if gvar.type == VarType.SELECTED_ROWS:   # rows renumbered within each block
                rewrite.insert_op(b0, at, "split_selected_rows", {"X": [g]}, {"Out": sends},
                                  {"height_sections": [b.rows for b in blocks],
                                   "op_role": OpRole.Dist})
            else:
                rewrite.insert_op(b0, at, "split_byref", {"X": [g]}, {"Out": sends},
                                  {"sections": [b.rows for b in blocks],
                                   "op_role": OpRole.Dist})
            at += 1
        ctrl = _ctrl(b0, f"{_SEND_CTRL}{blocks[0].grad}")
        ctrls.append(ctrl)
        rewrite.insert_op(b0, at, "send", {"X": sends}, {"Out": [ctrl]},
                          {"epmap": [b.ep for b in blocks], "sync_mode": not sync_mode,
                           "trainer_id": trainer_id, "op_role": OpRole.RPC,
                           "op_role_var": [p, blocks[0].grad], **split_attrs})
    if sync_mode:
        rewrite.append_op(b0, "send_barrier", {"X": ctrls}, {"Out": [_ctrl(b0, _BARRIER_CTRL)]},
                          {"endpoints": list(endpoints), "sync_mode": True,
                           "trainer_id": trainer_id, "op_role": OpRole.RPC})
    if counter is not None:       # async schedule: this trainer's step count to the servers
        async_lr.declare_counters(b0, counter)
        async_lr.append_trainer_send(b0, counter, trainer_id, endpoints,
                                     _ctrl(b0, f"{_SEND_CTRL}{counter.name}"))
    src = ProgramView(main).global_block()
    _append_recv(b0, plan, trainer_id, sync_mode, endpoints, src, runtime_split)
    return prog.desc


def append_trainer_recv(startup_block, main, plan, trainer_id, endpoints, sync_mode):
    """Append the trainer startup's recv / fetch_barrier / concat to `startup_block` (a
    BlockView) in place: what Fluid's `transpile` does to the user's startup program (with
    a fetch_barrier in async mode too, as Fluid's; an async server answers it at once)."""
    _append_recv(startup_block, plan, trainer_id, sync_mode, endpoints,
                 ProgramView(main).global_block(), fetch_barrier=True)


def _trainer_startup(startup, main, plan, trainer_id, endpoints, sync_mode, table=None,
                     counter=None):
    prog = ProgramView(rewrite.copy_program(startup))
    if counter is not None:
        async_lr.add_counter_inits(prog.global_block(), counter, False)
    _append_recv(prog.global_block(), plan, trainer_id, sync_mode, endpoints,
                 ProgramView(main).global_block(), fetch_barrier=True)
    if table is not None:
        fake_init_table(prog.global_block(), table)
    return prog.desc


# --- the parameter servers -----------------------------------------------------------------
def _renames_for(b0, block, opt_ops, own_names):
    """{original name: pserver name} for the variables of a block's optimizer ops. As in
    Fluid 1.6 only the parameter and its gradient take the block's names (`w.block1`); the
    other variables (accumulators, clipped and decayed gradients) keep theirs, holding the
    block's rows, except when this server holds several blocks of one parameter
    (`own_names`: HashName can send them to one server), where Fluid's names would collide
    and each block's get its `.block<i>` suffix."""
    pshape = list(b0.find_var_recursive(block.param).shape)
    ren = {block.param: block.pname, block.grad: block.gname}
    for g in _later_grads(block.param, block.grad, opt_ops):
        ren[g] = block.gname   # a later pass's gradient: its update reads the sent one
    for op in opt_ops:
        written = set(op.output_arg_names)
        for n in op.input_arg_names + op.output_arg_names:
            if n in ren:
                continue
            v = b0.find_var_recursive(n)
            if v is None:
                continue
            if own_names and (list(v.shape) == pshape or (n in written and v.persistable)):
                ren[n] = block.rename(n)  # sliced with the parameter, or one copy a block
            else:
                ren[n] = n
    return ren


def distributed_mode(sync_mode, config):
    """listen_and_serv's `distributed_mode`, as Fluid 1.8 names the mode: 0 sync; 1 async
    (runtime_split_send_recv); 2 half async (async without it)."""
    if sync_mode:
        return 0
    return 1 if config is not None and config.runtime_split_send_recv else 2


def _pserver(main, plan, endpoint, trainers, sync_mode, table=None, init=None,
             endpoints=(), mode=None, counter=None):
    """The main program of the parameter server at `endpoint`, laid out as Fluid 1.6 lays
    it: block 0 holds the variables and `listen_and_serv`; then the learning-rate block
    (with the blocks of its control flow right after it), one optimize block per parameter
    block held here, and the distributed table's optimize, prefetch and save blocks (an
    empty optimize block when the server holds nothing). Returns (desc, var_map)."""
    src = ProgramView(main).global_block()
    opt_ops = {p: [src.ops[i] for i in ops] for p, _g, ops in _params_grads(src)}
    desc = pb.ProgramDesc()
    desc.version.CopyFrom(main.version)
    desc.blocks.add(idx=0, parent_idx=-1)
    prog = ProgramView(desc)
    b0 = prog.global_block()
    received, opt_blocks, grad_to_block, sparse_to_param = [], [], [], []
    var_map = {}  # pserver name -> (original name, block) for the startup program
    lr_block = _lr_decay_block(prog, ProgramView(main), var_map)
    if lr_block is not None:
        opt_blocks.append(lr_block)
        if counter is not None:   # async: the schedule steps by the trainers' counters
            async_lr.step_the_lr_block(prog.block(lr_block), counter)
            for n in async_lr.declare_counters(b0, counter):
                received.append(n)
                grad_to_block.append(f"{n}:{lr_block}")
                var_map[n] = (n, [1])
    parent = len(prog.blocks) - 1        # Fluid's optimize blocks hang off the last block
    for p, blocks in plan.items():
        here = [blk for blk in blocks if blk.ep == endpoint]
        for blk in here:
            ren = _renames_for(src, blk, opt_ops[p], own_names=len(here) > 1)
            pshape = list(src.find_var_recursive(p).shape)
            for orig, new in ren.items():
                v = src.find_var_recursive(orig)
                shape = blk.shape if list(v.shape) == pshape else list(v.shape)
                _declare_like(b0, v, new, shape,
                              persistable=False if orig == blk.grad else None)
                var_map[new] = (orig, shape)
            sub = rewrite.add_block(prog, parent)
            gvar = src.find_var_recursive(blk.grad)
            if sync_mode and trainers > 1:
                per = [f"{blk.gname}.trainer_{k}" for k in range(trainers)]
                for n in per:
                    _declare_like(b0, gvar, n, blk.shape, persistable=False)
                received += per
                rewrite.append_op(sub, "sum", {"X": per}, {"Out": [blk.gname]},
                                  {"op_role": OpRole.Optimize})
                rewrite.append_op(sub, "scale", {"X": [blk.gname]}, {"Out": [blk.gname]},
                                  {"scale": 1.0 / trainers, "op_role": OpRole.Optimize})
            else:
                received.append(blk.gname)
            for op in opt_ops[p]:
                od = pb.OpDesc()
                od.CopyFrom(op.desc)
                nop = rewrite.insert_op_desc(sub, len(sub.ops), od)
                for old, new in ren.items():
                    if old != new:
                        rewrite.rename_arg(nop, old, new)
                if nop.has_attr("op_role_var"):
                    rewrite.set_attr(nop, "op_role_var", [blk.pname, blk.gname])
            opt_blocks.append(sub.idx)
            grad_to_block.append(f"{blk.gname}:{sub.idx}")
            if gvar.type == VarType.SELECTED_ROWS:
                sparse_to_param.append(f"{blk.gname}:{blk.pname}")
    prefetch, save_block = [], -1
    if table is not None:
        per, blk, g2b, pre, save_block = _pserver_table(
            prog, src, table, init, endpoint, list(endpoints), trainers, sync_mode, var_map,
            parent)
        received += per
        opt_blocks.append(blk)
        grad_to_block.append(g2b)
        prefetch.append(pre)
    if not opt_blocks:     # Fluid gives a server that holds nothing an empty block
        opt_blocks.append(rewrite.add_block(prog, len(prog.blocks) - 1).idx)
    attrs = {"endpoint": endpoint, "pserver_id": list(endpoints).index(endpoint),
             "optimize_blocks": opt_blocks, "Fanin": trainers, "sync_mode": sync_mode,
             "grad_to_block_id": grad_to_block, "sparse_grad_to_param": sparse_to_param,
             "distributed_mode": (0 if sync_mode else 1) if mode is None else mode,
             "lr_decay_block_id": -1 if lr_block is None else lr_block,
             "prefetch_var_name_to_block_id": prefetch, "op_role": OpRole.RPC}
    if table is not None:
        attrs["checkpint_block_id"] = save_block     # (sic: Fluid's attribute name)
    rewrite.append_op(b0, "listen_and_serv", {"X": received}, {}, attrs)
    return desc, var_map


def _lr_decay_block(prog, src, var_map):
    """Block 1 of a pserver program when the training program has a learning-rate schedule:
    its LRSched ops, and the blocks of their control flow (a piecewise decay's Switch)
    cloned right after it, depth first, as Fluid 1.6 clones them; their variables are
    declared where the training program declares them (the counter persistable, so the
    pserver startup initializes it and a checkpoint keeps it). None without a schedule."""
    sb = src.global_block()
    lr = _lr_ops(sb)
    if not lr:
        return None
    sub = rewrite.add_block(prog, 0)
    for i in lr:
        _clone_op(prog, src, sb.ops[i], sb, sub, var_map)
    return sub.idx


def _clone_op(prog, src, op, src_block, block, var_map):
    """Copy `op` of `src_block` (a block of program view `src`) to the end of pserver block
    `block`, declaring its variables (in the pserver's block 0 when the training program
    has them there, else in `block`) and cloning each block it runs as a new block under
    `block`, its attribute pointed at the clone."""
    b0 = prog.global_block()
    for n in op.input_arg_names + op.output_arg_names:
        if n == EMPTY_VAR_NAME:
            continue
        owner = block if n in src_block.vars and src_block.idx != 0 else b0
        if n in owner.vars or (owner is not b0 and n in b0.vars):
            continue
        v = src_block.find_var_recursive(n)
        if v is None:
            raise ProgramError(f"distribute transpiler: learning-rate op '{op.type}' uses "
                               f"'{n}', which the program does not declare")
        _declare_like(owner, v, n)
        if owner is b0:
            var_map[n] = (n, list(v.shape))
    od = pb.OpDesc()
    od.CopyFrom(op.desc)
    nop = rewrite.insert_op_desc(block, len(block.ops), od)
    for a in nop.desc.attrs:
        if a.type == pb.BLOCK:
            a.block_idx = _clone_block(prog, src, a.block_idx, block, var_map)
        elif a.type == pb.BLOCKS:
            new = [_clone_block(prog, src, i, block, var_map) for i in a.blocks_idx]
            del a.blocks_idx[:]
            a.blocks_idx.extend(new)
    return nop


def _clone_block(prog, src, idx, parent, var_map):
    """A new pserver block under `parent` holding a copy of the training program's block
    `idx` (its own variables and ops, sub-blocks cloned in turn); returns its index."""
    origin = src.block(idx)
    new = rewrite.add_block(prog, parent.idx)
    for n, v in origin.vars.items():
        _declare_like(new, v, n)
    for op in origin.ops:
        _clone_op(prog, src, op, origin, new, var_map)
    return new.idx


def pserver_startup(startup, pserver_main, var_map):
    """The startup program of a pserver: the original initializers of the variables its
    program holds, writing the block variables (their `shape` attr set to the block's)."""
    src = ProgramView(startup).global_block()
    pmain = ProgramView(pserver_main).global_block()
    by_orig = {}
    for new, (orig, shape) in var_map.items():
        by_orig.setdefault(orig, []).append((new, shape))
    prog = ProgramView(rewrite.copy_program(startup))
    b0 = prog.global_block()
    rewrite.remove_ops(b0, 0, len(b0.ops))
    rewrite.remove_vars(b0, list(b0.vars))
    for op in src.ops:
        outs = op.output_arg_names
        if len(outs) != 1 or outs[0] not in by_orig:
            continue
        for new, shape in by_orig[outs[0]]:
            od = pb.OpDesc()
            od.CopyFrom(op.desc)
            nop = rewrite.insert_op_desc(b0, len(b0.ops), od)
            rewrite.rename_arg(nop, outs[0], new)
            if nop.has_attr("shape"):
                rewrite.set_attr(nop, "shape", [int(d) for d in shape])
            _declare_like(b0, pmain.vars[new], new)
    return prog.desc


def checked_job(config, endpoints, trainer_id, trainers):
    """(config, or a default one, checked; the endpoints stripped of blanks) for a transpiler
    of a job of `trainers` trainers and servers at `endpoints`: refused with the value at
    fault when there is no endpoint, one is listed twice or trainer_id is out of range."""
    config = config or DistributeTranspilerConfig()
    config.check()
    endpoints = [e.strip() for e in endpoints if e.strip()]
    if not endpoints:
        raise ValueError("transpile: no parameter-server endpoints given")
    if len(set(endpoints)) != len(endpoints):
        raise ValueError(f"transpile: an endpoint is listed twice in {endpoints}")
    if not 0 <= trainer_id < trainers:
        raise ValueError(f"transpile: trainer_id {trainer_id} is not in [0, {trainers})")
    return config, endpoints


def async_counter(main, startup, trainers, sync_mode):
    """The step counter of the learning-rate schedule of an async job (async_lr.py), or
    None (sync mode, or no schedule)."""
    src = ProgramView(main).global_block()
    lr = _lr_ops(src)
    if sync_mode or not lr:
        return None
    return async_lr.plan(src, ProgramView(startup).global_block(), lr, trainers)


def transpile(main, startup, trainer_id, endpoints, trainers=1, sync_mode=True, config=None):
    """DistPrograms(trainer, trainer_startup, {endpoint: (pserver main, pserver startup)})
    from ProgramDescs `main` and `startup`; neither is touched."""
    config, endpoints = checked_job(config, endpoints, trainer_id, trainers)
    src = ProgramView(main).global_block()
    table = _dist_table(src, _params_grads(src))
    plan = _plan(src, endpoints, config, table)
    init = _table_initializer(startup, table) if table is not None else None
    counter = async_counter(main, startup, trainers, sync_mode)
    if not plan and table is None:
        raise ProgramError("transpile: the program has no optimizer ops (call "
                           "optimizer.minimize(loss) before transpiling)")
    trainer = _trainer(main, plan, trainer_id, endpoints, trainers, sync_mode, table,
                       runtime_split=bool(config.runtime_split_send_recv), counter=counter)
    tstart = _trainer_startup(startup, main, plan, trainer_id, endpoints, sync_mode, table,
                              counter)
    pstart = startup
    if counter is not None:
        pstart = rewrite.copy_program(startup)
        async_lr.add_counter_inits(ProgramView(pstart).global_block(), counter, True)
    pservers = {}
    for ep in endpoints:
        pmain, var_map = _pserver(main, plan, ep, trainers, sync_mode, table, init, endpoints,
                                  mode=distributed_mode(sync_mode, config), counter=counter)
        pservers[ep] = (pmain, pserver_startup(pstart, pmain, var_map))
    overview = job_overview(src, plan, _params_grads(src),
                            {ep: ProgramView(pm).global_block()
                             for ep, (pm, _s) in pservers.items()}, table, endpoints)
    return DistPrograms(trainer, tstart, pservers, plan, table, overview, counter)


__all__ = ["DistPrograms", "DistributeTranspilerConfig", "HashName", "RoundRobin",
           "slice_variable", "transpile", "pserver_startup", "append_trainer_recv"]
