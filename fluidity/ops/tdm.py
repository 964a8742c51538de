"""Tree-based deep model (TDM, Zhu et al. 2018) ops of Fluid 1.8: tdm_child (the children of
tree nodes, and which of them are leaves, i.e. items) and tdm_sampler (for each leaf, its
path's node at every layer as the positive, plus negatives drawn uniformly without
replacement from the rest of that layer). Neither has a gradient (Fluid has none).

The tree is data: TreeInfo [node_nums, 3 + child_nums] rows of (item_id, layer_id,
parent_id, children...), node 0 the padding node; Travel [leaves, layers] each leaf's path
from the top layer down (0: no node there); Layer [nodes, 1] the node ids layer after layer,
layer_offset_lod the layers' starts in it. Outputs are int32 or int64 by the `dtype`
attribute (a VarType code, INT32 by default).

tdm_sampler's negatives are drawn by numpy (a generator seeded by `seed` on each run, or a
fresh one when seed is 0), not by Paddle's sampler: the same distribution and the same
checks, not Paddle's very numbers."""
import numpy as np

from ..core import dtypes
from ..errors import ExecutionError, ShapeError
from .registry import In, OpDef, Out, ints

INT32 = int(dtypes.VarType.INT32)


def _out_dtype(code):
    if code not in (int(dtypes.VarType.INT32), int(dtypes.VarType.INT64)):
        raise ShapeError(f"the output dtype must be INT32 or INT64, got VarType {code}")
    return dtypes.numpy_of_code(code)


def _ids(a, what, limit, op):
    ids = a.reshape(-1).astype(np.int64)
    bad = ids[(ids < 0) | (ids >= limit)]
    if bad.size:
        raise ExecutionError(f"{op}: {what} id {bad[0]} is out of range [0, {limit})")
    return ids


class TdmChild(OpDef):
    type = "tdm_child"
    inputs = (In("X", no_grad=True), In("TreeInfo", no_grad=True))
    outputs = (Out("Child"), Out("LeafMask"))
    attrs = {"child_nums": 0, "dtype": INT32}
    doc = ("Child[..., k] = TreeInfo[X[...], 3 + k] (0 for node 0 or a node without "
           "children); LeafMask = 1 where that child is an item (TreeInfo[child, 0] != 0).")

    @staticmethod
    def infer_shape(ctx):
        if ctx.attr("child_nums") <= 0:
            ctx.fail(f"child_nums must be greater than 0, got {ctx.attr('child_nums')}")
        info = list(ctx.input_shape("TreeInfo"))
        if len(info) != 2:
            ctx.fail(f"TreeInfo must be 2-D, got {info}")
        shape = list(ctx.input_shape("X")) + [ctx.attr("child_nums")]
        dt = ctx.attr("dtype")
        ctx.set_output("Child", shape, dt)
        ctx.set_output("LeafMask", shape, dt)

    @staticmethod
    def kernel(x, info, *, child_nums, dtype):
        if x.dtype not in (np.int32, np.int64) or info.dtype not in (np.int32, np.int64):
            raise ExecutionError(f"tdm_child: X and TreeInfo must be int32 or int64, got "
                                 f"{x.dtype} and {info.dtype}")
        if info.ndim != 2 or info.shape[1] < 3 + child_nums:
            raise ShapeError(f"tdm_child: TreeInfo{list(info.shape)} must have 3 + "
                             f"child_nums = {3 + child_nums} columns")
        ids = _ids(x, "input node", info.shape[0], "tdm_child")
        children = info[ids, 3:3 + child_nums].astype(np.int64)
        has = (ids != 0) & (info[ids, 3] != 0)
        children[~has] = 0
        _ids(children, "child node", info.shape[0], "tdm_child")
        leaf = (info[children, 0] != 0) & has[:, None]
        dt = _out_dtype(dtype)
        shape = x.shape + (child_nums,)
        return children.astype(dt).reshape(shape), leaf.astype(dt).reshape(shape)


class TdmSampler(OpDef):
    type = "tdm_sampler"
    inputs = (In("X", no_grad=True), In("Travel", no_grad=True), In("Layer", no_grad=True))
    outputs = (Out("Out"), Out("Labels", dispensable=True), Out("Mask"))
    attrs = {"output_positive": True, "neg_samples_num_list": ints(),
             "layer_offset_lod": ints(), "seed": 0, "dtype": INT32}
    share_lod = None
    doc = ("Out [N, sum over layers of (neg + output_positive)]: per layer, the leaf X's "
           "path node (when output_positive) then neg_samples_num_list[l] other nodes of "
           "that layer; Labels 1 for the positive, Mask 0 where the path has no node "
           "(padding, all zeros).")

    @staticmethod
    def _width(ctx_or_attrs):
        negs, pos = ctx_or_attrs("neg_samples_num_list"), ctx_or_attrs("output_positive")
        return sum(n + int(bool(pos)) for n in negs)

    @staticmethod
    def infer_shape(ctx):
        width = TdmSampler._width(ctx.attr)
        dt = ctx.attr("dtype")
        for slot in ("Out", "Labels", "Mask"):
            if ctx.has_output(slot):
                ctx.set_output(slot, [-1, width], dt)

    @staticmethod
    def kernel(x, travel, layer, *, output_positive, neg_samples_num_list, layer_offset_lod,
               seed, dtype):
        negs, lod = list(neg_samples_num_list), list(layer_offset_lod)
        if len(lod) != len(negs) + 1:
            raise ShapeError(f"tdm_sampler: layer_offset_lod {lod} must have one more entry "
                             f"than neg_samples_num_list {negs}")
        if travel.ndim != 2 or travel.shape[1] < len(negs):
            raise ShapeError(f"tdm_sampler: Travel{list(travel.shape)} must be [leaves, "
                             f"{len(negs)} layers]")
        nodes = layer.reshape(-1)
        if lod[-1] > nodes.size:
            raise ShapeError(f"tdm_sampler: layer_offset_lod ends at {lod[-1]} but Layer "
                             f"holds {nodes.size} nodes")
        for l, n in enumerate(negs):
            if n > lod[l + 1] - lod[l] - 1:
                raise ExecutionError(f"tdm_sampler: {n} negatives asked at layer {l}, which "
                                     f"has {lod[l + 1] - lod[l]} nodes (positive included)")
        leaves = _ids(x, "leaf", travel.shape[0], "tdm_sampler")
        pos = int(bool(output_positive))
        width = sum(n + pos for n in negs)
        out = np.zeros((leaves.size, width), np.int64)
        label = np.zeros_like(out)
        mask = np.ones_like(out)
        gen = np.random.default_rng(seed if seed != 0 else None)
        for i, leaf in enumerate(leaves):
            at = 0
            for l, n in enumerate(negs):
                positive = int(travel[leaf, l])
                span = n + pos
                if positive == 0:            # the path has no node at this layer
                    mask[i, at:at + span] = 0
                    at += span
                    continue
                if pos:
                    out[i, at], label[i, at] = positive, 1
                    at += 1
                cand = nodes[lod[l]:lod[l + 1]]
                cand = cand[cand != positive]
                out[i, at:at + n] = gen.choice(cand, size=n, replace=False)
                at += n
        dt = _out_dtype(dtype)
        return out.astype(dt), label.astype(dt), mask.astype(dt)
