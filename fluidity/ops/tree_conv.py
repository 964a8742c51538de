"""tree_conv: Fluid 1.8's tree-based convolution (TBCNN, arXiv:1409.5718) over trees given as
edge sets, and its gradient.

Per sample, EdgeSet [E, 2] lists parent -> child edges between nodes numbered from 1 (node v
is row v - 1 of NodesVector [n, F]); an edge holding a 0 ends the list (padding). Fluid's
node count is the number of edges with no 0 in them, plus one. Each node u (1..count) gets
a patch: u itself and its descendants less than max_depth levels below it. A patch member
at depth d (u at 0), child number i (from 1) of a parent with c children, weighs the three
slices of Filter [F, 3, O, NF] by, as Fluid computes them,

    eta_t = (max_depth - d) / max_depth
    eta_l = (1 - eta_t) * ((i - 1) / (c - 1), or 1/2 when c = 1)   (u itself: 0)
    eta_r = (1 - eta_t) * (1 - eta_l)

and Out[u - 1] = sum over members v of sum_k eta_k(v) NodesVector[v - 1] @ Filter[:, k],
shaped [O, NF]; rows past the node count are zeros. Out is [N, n, O, NF].

Fluid's kernel builds the patches as matrices (tree2col) and multiplies; here each sample's
patches become three dense [count, n] coefficient matrices A_k, so Out = sum_k A_k X W_k and
both gradients are the transposed products. Fluid's NodesVector gradient reads its
column-major patch gradient against the filter's other layout, which is right only when
O * NF = 1; this one is the derivative of the forward above for every shape.
"""
import numpy as np

from ..errors import ExecutionError
from .common import grad_maker
from .registry import In, OpDef, Out


def tree_patches(edges, max_depth):
    """[(members of node u's patch) for u = 1..count], each member (node, index, siblings,
    depth) in the order Fluid's depth-first walk adds them, and the node count."""
    edges = np.asarray(edges).reshape(-1, 2)
    count = int(np.count_nonzero((edges[:, 0] != 0) & (edges[:, 1] != 0))) + 1
    children = [[] for _ in range(count + 1)]
    for u, v in edges.tolist():
        if u == 0 or v == 0:
            break
        if not (0 < u <= count and 0 < v <= count):
            raise ExecutionError(f"tree_conv: EdgeSet edge ({u}, {v}) names a node outside "
                                 f"1..{count} (the edges without a 0, plus one)")
        children[u].append(v)
    patches = []
    for root in range(1, count + 1):
        members, seen, stack = [(root, 1, 1, 0)], {root}, [(root, 0)]
        while stack:
            node, depth = stack[-1]
            kids, grew = children[node], False
            for i, v in enumerate(kids):
                if v not in seen and depth + 1 < max_depth:
                    seen.add(v)
                    stack.append((v, depth + 1))
                    members.append((v, i + 1, len(kids), depth + 1))
                    grew = True
            if not grew:
                stack.pop()
        patches.append(members)
    return patches, count


def patch_weights(edges, max_depth, n, dtype):
    """A [3, count, n]: A[k, u - 1, v - 1] = the sum of eta_k over v's places in u's patch
    (k: 0 = eta_l, 1 = eta_r, 2 = eta_t), in `dtype` as Fluid's kernel rounds them."""
    patches, count = tree_patches(edges, max_depth)
    if count > n:
        raise ExecutionError(f"tree_conv: EdgeSet holds a tree of {count} nodes but "
                             f"NodesVector has rows for {n}")
    t = np.dtype(dtype).type
    a = np.zeros((3, count, n), dtype)
    depth_t = t(max_depth)
    for p, members in enumerate(patches):
        for node, index, siblings, depth in members:
            if node > n:
                raise ExecutionError(f"tree_conv: node {node} has no row in NodesVector "
                                     f"({n} rows)")
            eta_t = (depth_t - t(depth)) / depth_t
            share = t(0.5) if siblings == 1 else (t(index) - t(1)) / (t(siblings) - t(1))
            eta_l = (t(1) - eta_t) * share
            eta_r = (t(1) - eta_t) * (t(1) - eta_l)
            a[:, p, node - 1] += (eta_l, eta_r, eta_t)
    return a


def _check_depth(max_depth):
    if max_depth <= 1:
        raise ExecutionError(f"tree_conv: max_depth must be greater than 1, got {max_depth}")


def _per_sample(nodes, edges, what):
    if edges.dtype.kind not in "iu":
        raise ExecutionError(f"tree_conv: EdgeSet must hold integer node numbers (int32), "
                             f"got {edges.dtype}")
    if nodes.ndim != 3 or edges.ndim != 3 or edges.shape[2] != 2 or \
            edges.shape[0] != nodes.shape[0]:
        raise ExecutionError(f"tree_conv: {what} NodesVector {list(nodes.shape)} must be "
                             f"[N, n, F] and EdgeSet {list(edges.shape)} [N, E, 2]")


class TreeConv(OpDef):
    type = "tree_conv"
    inputs = (In("NodesVector"), In("EdgeSet", no_grad=True), In("Filter"))
    outputs = (Out("Out"),)
    attrs = {"max_depth": 2}
    share_lod = None
    doc = ("Tree-based convolution: Out[b, u-1] = sum over u's patch (u and its descendants "
           "less than max_depth levels down) of sum_k eta_k NodesVector[b, v-1] @ "
           "Filter[:, k] (k: left, right, top); Out [N, n, output_size, num_filters].")

    @staticmethod
    def infer_shape(ctx):
        x, e, w = (ctx.input_shape(s) for s in ("NodesVector", "EdgeSet", "Filter"))
        if len(e) != 3 or len(x) != 3 or len(w) != 4:
            ctx.fail(f"NodesVector {list(x)} must be 3-D [N, n, F], EdgeSet {list(e)} 3-D "
                     f"[N, E, 2] and Filter {list(w)} 4-D [F, 3, output_size, num_filters]",
                     error=ValueError)
        if e[2] not in (-1, 2) or w[1] not in (-1, 3):
            ctx.fail(f"EdgeSet {list(e)} must end in 2 and Filter {list(w)} have 3 as its "
                     f"second dim", error=ValueError)
        if w[0] != -1 and x[2] != -1 and w[0] != x[2]:
            ctx.fail(f"Filter {list(w)}'s first dim must equal NodesVector {list(x)}'s "
                     f"feature size", error=ValueError)
        ctx.set_output("Out", [x[0], x[1], w[2], w[3]], ctx.input_dtype("NodesVector"))

    @staticmethod
    def kernel(nodes, edges, filt, *, max_depth):
        _check_depth(max_depth)
        _per_sample(nodes, edges, "forward:")
        f, _, o, nf = filt.shape
        w = filt.reshape(f, 3, o * nf)
        out = np.zeros((nodes.shape[0], nodes.shape[1], o * nf), nodes.dtype)
        for b in range(nodes.shape[0]):
            a = patch_weights(edges[b], max_depth, nodes.shape[1], nodes.dtype)
            for k in range(3):
                out[b, :a.shape[1]] += (a[k] @ nodes[b]) @ w[:, k]
        return out.reshape(nodes.shape[:2] + (o, nf))

    grad = grad_maker("tree_conv_grad", ["Out@GRAD", "Filter", "EdgeSet", "NodesVector"],
                      ("NodesVector", "Filter"))


class TreeConvGrad(OpDef):
    type = "tree_conv_grad"
    inputs = (In("Out@GRAD"), In("Filter"), In("EdgeSet"), In("NodesVector"))
    outputs = (Out("NodesVector@GRAD", dispensable=True), Out("Filter@GRAD", dispensable=True))
    attrs = TreeConv.attrs
    infer_shape = None
    share_lod = None
    doc = ("Filter@GRAD = sum over samples and k of (A_k NodesVector)^T Out@GRAD; "
           "NodesVector@GRAD = sum over k of A_k^T Out@GRAD Filter[:, k]^T (A_k: the patch "
           "weights eta_k of tree_conv).")

    @staticmethod
    def kernel(dout, filt, edges, nodes, *, max_depth):
        _check_depth(max_depth)
        _per_sample(nodes, edges, "gradient:")
        f, _, o, nf = filt.shape
        w = filt.reshape(f, 3, o * nf)
        d = dout.reshape(nodes.shape[:2] + (o * nf,))
        dx, dw = np.zeros_like(nodes), np.zeros((f, 3, o * nf), filt.dtype)
        for b in range(nodes.shape[0]):
            a = patch_weights(edges[b], max_depth, nodes.shape[1], nodes.dtype)
            db = d[b, :a.shape[1]]
            for k in range(3):
                dw[:, k] += (a[k] @ nodes[b]).T @ db
                dx[b] += a[k].T @ (db @ w[:, k].T)
        return dx, dw.reshape(filt.shape)
