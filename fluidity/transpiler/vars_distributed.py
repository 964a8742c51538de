"""Where the distribute transpiler put each variable (Fluid's `transpiler.details.
vars_distributed`): `program._parameters_on_pservers`, a `VarsDistributed` listing for each
parameter block and each optimizer accumulator the server holding it, its origin and slice
(name, shape, ...), whether it is a slice, its block id and its offset in elements. Fluid's
loaders read it to give a server its slices of a checkpoint; `overview()` prints it.

    dist = trainer_program._parameters_on_pservers
    for v in dist.get_distributed_vars_by_ep("127.0.0.1:6174"):
        v.origin.name, v.slice.name, v.slice.shape, v.is_slice, v.block_id, v.offset
"""
import math


class VarStruct:
    """A variable's description, detached from any program."""

    def __init__(self, name, shape, dtype, type, lod_level, persistable):
        self.name = name
        self.shape = tuple(shape)
        self.dtype = dtype
        self.type = type
        self.lod_level = lod_level
        self.persistable = persistable

    @classmethod
    def of(cls, var, name=None, shape=None):
        return cls(name or var.name, shape if shape is not None else var.shape, var.dtype,
                   var.type, var.lod_level, var.persistable)

    def __repr__(self):
        return f"VarStruct({self.name}, {list(self.shape)})"


class VarDistributed:
    """One slice (or whole copy) of an origin variable on a parameter server. `vtype`:
    "Param", "Optimizer" (an accumulator) or "RemotePrefetch" (the distributed table)."""

    def __init__(self, origin_var, slice_var, is_slice=None, block_id=None, offset=None,
                 vtype=None, endpoint=None):
        self.origin, self.slice = origin_var, slice_var
        same = self.equal(origin_var, slice_var)
        self.is_slice = (not same) if is_slice is None else is_slice
        self.block_id = 0 if block_id is None else block_id
        self.offset = 0 if offset is None else offset
        self.vtype = vtype
        self.endpoint = endpoint

    @staticmethod
    def equal(var1, var2):
        return (var1.name == var2.name and tuple(var1.shape) == tuple(var2.shape) and
                var1.dtype == var2.dtype and var1.type == var2.type and
                var1.lod_level == var2.lod_level and var1.persistable == var2.persistable)

    def __str__(self):
        return (f"{self.origin.name}:{list(self.origin.shape)} -> {self.slice.name}:"
                f"{list(self.slice.shape)} is_slice={self.is_slice} block_id="
                f"{self.block_id} offset={self.offset} vtype={self.vtype} endpoint="
                f"{self.endpoint}")


class VarsDistributed:
    """Every VarDistributed of one transpiled job."""

    def __init__(self):
        self.distributed_vars = []

    def add_distributed_var(self, origin_var, slice_var, is_slice=None, block_id=None,
                            offset=None, vtype=None, endpoint=None):
        self.distributed_vars.append(VarDistributed(origin_var, slice_var, is_slice,
                                                    block_id, offset, vtype, endpoint))

    def get_distributed_var_by_slice(self, var_name):
        for v in self.distributed_vars:
            if v.slice.name == var_name:
                return v
        return None

    def get_distributed_var_by_origin_and_ep(self, origin_var_name, endpoint):
        for v in self.distributed_vars:
            if v.origin.name == origin_var_name and v.endpoint == endpoint:
                return v
        return None

    def get_distributed_vars_by_vtypes(self, vtypes, groupby=False):
        found = [v for v in self.distributed_vars if v.vtype in vtypes]
        if not groupby:
            return found
        grouped = {}
        for v in found:
            grouped.setdefault(v.origin.name, []).append(v)
        return grouped

    def get_distributed_vars_by_ep(self, endpoint, vtype=None):
        return [v for v in self.distributed_vars
                if v.endpoint == endpoint and (not vtype or v.vtype == vtype)]

    def overview(self):
        return "\n".join(str(v) for v in self.distributed_vars)


def job_overview(src_block, plan, params_grads, pserver_blocks, table=None, endpoints=()):
    """The VarsDistributed of a transpiled job: `plan` ({param: [_Block]}, endpoints set),
    the optimize ops of each parameter (`params_grads`: [(param, grad, [op indices])]),
    `pserver_blocks` ({endpoint: BlockView of its program's block 0}) for the accumulators'
    names and shapes there, and the distributed table, sharded over `endpoints`."""
    out = VarsDistributed()
    ops_of = {p: ops for p, _g, ops in params_grads}
    for p, blocks in plan.items():
        var = src_block.find_var_recursive(p)
        origin = VarStruct.of(var)
        row = math.prod(var.shape[1:]) if len(var.shape) > 1 else 1
        for blk in blocks:
            sliced = VarStruct.of(var, blk.pname, blk.shape)
            out.add_distributed_var(origin, sliced, blk.sliced, blk.idx, blk.begin * row,
                                    "Param", blk.ep)
            held = pserver_blocks[blk.ep]
            for i in ops_of.get(p, ()):
                op = src_block.ops[i]
                if "Param" not in op.input_names:
                    continue
                for slot in op.input_names:
                    if slot in ("Param", "Grad", "LearningRate"):
                        continue
                    for n in op.input(slot):
                        acc = src_block.find_var_recursive(n)
                        if acc is None or not acc.persistable:
                            continue
                        name = blk.rename(n) if blk.rename(n) in held.vars else n
                        there = held.vars.get(name)
                        shape = list(there.shape) if there is not None else list(acc.shape)
                        is_slice = blk.sliced and shape == list(blk.shape)
                        out.add_distributed_var(VarStruct.of(acc),
                                                VarStruct.of(acc, name, shape), is_slice,
                                                blk.idx if is_slice else 0,
                                                blk.begin * row if is_slice else 0,
                                                "Optimizer", blk.ep)
    if table is not None:
        var = src_block.find_var_recursive(table.name)
        rows = -(-table.shape[0] // max(len(endpoints), 1))
        for k, ep in enumerate(endpoints):
            out.add_distributed_var(VarStruct.of(var), VarStruct.of(var, shape=[rows] +
                                                                    table.shape[1:]),
                                    True, k, 0, "RemotePrefetch", ep)
    return out
