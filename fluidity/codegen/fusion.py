"""Fusions the lowering applies, each a named pass over the block's desc: it finds what may
be fused, and the segmenter (segment.py) applies it while it emits; explain() names the pass
beside every op it fused.

* `sgd_into_gradient`: an sgd update whose gradient the segment makes is applied by the op
  that makes it, in the same arithmetic (Param -= LearningRate * gradient), so the gradient
  never reaches memory; the sgd op is then not emitted.
* `conv_epilogue`: in an inference program, the per-channel ops that only transform a
  conv's result (a bias add, a batch_norm over running statistics, a relu) are computed by
  the conv in the pass that writes its output (Fluid's conv + batch_norm folding, and the
  activation fused into the conv's epilogue); those ops are then not emitted.
* `conv_chain`: in an inference program, a run of two or more 1x1 and depthwise convs (with
  their epilogues), each reading only the one before it, runs as one op a sample at a time
  in channel-last layout (runtime/conv_chain.h): the values between them are never
  written in NCHW, nor to the variables the program names for them, which nobody else
  reads; the chain's later convs and their epilogues' ops are then not emitted.
* `relu_into_batch_norm`: a relu that is the only reader of a batch_norm's Y (training
  too: Y itself is read by nothing else, the gradient reads X, the saved statistics and
  relu's Out) is applied by the batch_norm as it writes, so Y never reaches memory; the
  relu op is then not emitted.
* `relu_grad_into_gradient`: a relu_grad whose Out@GRAD only it reads (made by one op
  before it, kept by nobody) is applied by the op that makes that gradient, as it writes:
  relu_grad's X@GRAD = the gradient * (relu's Out > 0), in the unfused arithmetic, so the
  gradient never reaches memory; the relu_grad op is then not emitted. The maker says
  whether it can (max pool2d_grad whose X is relu's Out: the window's maximum is the Out
  the relu_grad would read at the one position that gets a gradient).
"""
import math

from ..core.dtypes import VarType
from ..ir.analysis import sub_block_vars
from ..ops import registry
from ..ops.common import channel_last
from ..ops.norm import bn_global_stats


def _readers_writers(program, ops):
    readers, writers = {}, {}
    for i, op in enumerate(ops):
        for n in op.input_arg_names:
            readers.setdefault(n, []).append(i)
        for n in op.output_arg_names:
            writers.setdefault(n, []).append(i)
        for n in sub_block_vars(program, op):
            readers.setdefault(n, []).append(i)
    return readers, writers


def sgd_into_gradient(program, block, keep):
    """{gradient name: (sgd op index, Param, LearningRate)} of the sgd updates in `block`
    whose Grad (dense or SelectedRows) only that sgd reads, made by one op, where no op between
    that maker and the sgd touches Param or writes LearningRate, and nobody keeps the
    gradient (`keep`: fetched names): the maker may apply the update itself."""
    ops = block.ops
    readers, writers = _readers_writers(program, ops)
    out = {}
    for i, op in enumerate(ops):
        if op.type != "sgd" or op.input("MasterParam"):
            continue
        (g,), (p,), (lr,) = op.input("Grad"), op.input("Param"), op.input("LearningRate")
        v = block.find_var_recursive(g)
        makers = writers.get(g, [])
        if v is None or v.persistable or g in keep or \
                v.type not in (VarType.LOD_TENSOR, VarType.SELECTED_ROWS) \
                or readers.get(g) != [i] or len(makers) != 1 or op.output("ParamOut") != [p]:
            continue
        between = range(makers[0] + 1, i)
        touch_p = readers.get(p, []) + writers.get(p, [])
        if any(j in between for j in touch_p + writers.get(lr, [])):
            continue
        out[g] = (i, p, lr)
    return out


FUSIONS = {"sgd_into_gradient": sgd_into_gradient}


# --- conv_epilogue -------------------------------------------------------------------------
CONVS = ("conv2d", "depthwise_conv2d")


class Epilogue:
    """What a conv's compiled epilogue applies per output channel, in the fused ops' order:
    `steps` [(kind, op index, {role: variable})], kind "add" (Y: one value a channel),
    "bn" (Scale, Bias, Mean, Variance; epsilon) or "relu"; `out` the variable the last step
    writes, which the conv then writes itself."""
    __slots__ = ("conv", "steps", "out", "channels", "epsilon")

    def __init__(self, conv, steps, out, channels, epsilon):
        self.conv, self.steps, self.out = conv, steps, out
        self.channels, self.epsilon = channels, epsilon     # epsilon: batch_norm's, or None

    @property
    def ops(self):
        return [j for _, j, _ in self.steps]


def _attrs(op):
    opdef = registry.find(op.type)
    return registry.attrs_of(opdef, op.all_attrs()) if opdef is not None else {}


def _channel_add(op, cur, block, m):
    """{"Y": name} when `op` adds one value per channel of NCHW `cur` (M channels): Y of
    shape [M] at axis 1, or [1, M, 1, 1] at axis -1 or 0."""
    if op.input("X") != [cur] or len(op.input("Y")) != 1:
        return None
    y = block.find_var_recursive(op.input("Y")[0])
    shape, axis = list(y.shape) if y is not None else None, _attrs(op).get("axis", -1)
    if shape == [m] and axis == 1 or shape == [1, m, 1, 1] and axis in (-1, 0):
        return {"Y": op.input("Y")[0]}
    return None


def _frozen_bn(op, cur, block, m):
    """Scale, Bias, Mean, Variance when `op` normalizes `cur` with its running statistics
    (is_test or use_global_stats: an affine map per channel) in NCHW, and none of its other
    outputs is anything but the running statistics themselves."""
    a = _attrs(op)
    if op.input("X") != [cur] or op.input("MomentumTensor") or \
            channel_last(a.get("data_layout", "NCHW")) or not bn_global_stats(a):
        return None
    roles = {s: op.input(s) for s in ("Scale", "Bias", "Mean", "Variance")}
    if any(len(v) != 1 for v in roles.values()) or not math.isfinite(a["epsilon"]):
        return None
    return {s: v[0] for s, v in roles.items()}


# ops that only give a vector other dims: a bias reshaped to [1, M, 1, 1] after the conv
# (Paddle 2.x's saved convs) is read from the vector itself
_RESHAPES = ("reshape2", "reshape", "unsqueeze2", "unsqueeze")


def _ready(name, i, j, ops, writers, block):
    """The variable holding `name`'s values when conv i runs, for op j of its chain:
    `name` when it is written before i (or only by op j itself: batch_norm's running
    statistics), the input of the one reshape between i and j that makes it from such a
    variable, else None."""
    made = [k for k in writers.get(name, []) if k != j]
    if all(k < i for k in made):
        return name
    if len(made) != 1 or not i < made[0] < j or ops[made[0]].type not in _RESHAPES:
        return None
    src = ops[made[0]].input("X")
    v = block.find_var_recursive(src[0]) if len(src) == 1 else None
    if v is None or any(k >= i for k in writers.get(src[0], [])):
        return None
    return src[0]


_STEPS = {"elementwise_add": ("add", _channel_add), "batch_norm": ("bn", _frozen_bn),
          "relu": ("relu", lambda op, cur, block, m: {} if op.input("X") == [cur] else None)}
_ORDER = ("add", "bn", "relu")      # each at most once, in this order
_SIDE_OUTPUTS = {"batch_norm": {"MeanOut": "Mean", "VarianceOut": "Variance",
                                "SavedMean": None, "SavedVariance": None, "ReserveSpace": None}}


def conv_epilogue(program, block, keep):
    """{conv Output name: Epilogue} for each inference conv2d / depthwise_conv2d (NCHW, M
    output channels known) whose result only a chain of per-channel ops reads, in order a
    bias add, a frozen batch_norm (Fluid's conv + bn folding), a relu (each optional, at
    least one): the conv computes the chain's result in its own output pass, and the
    chain's ops are then not emitted. Each value in the chain has that one reader and one
    writer and nobody keeps it; what the chain's ops read besides (bias, scale, statistics)
    is written before the conv and not between; a side output of batch_norm is its running
    statistic itself or read by nobody."""
    ops = block.ops
    readers, writers = _readers_writers(program, ops)
    out = {}

    def private(name, reader):
        v = block.find_var_recursive(name)
        return (v is not None and not v.persistable and name not in keep and
                readers.get(name) == ([reader] if reader is not None else None) and
                len(writers.get(name, [])) == 1)

    for i, op in enumerate(ops):
        if op.type not in CONVS or len(op.output("Output")) != 1:
            continue
        w = block.find_var_recursive((op.input("Filter") or [""])[0])
        if w is None or len(w.shape) != 4 or w.shape[0] < 1:
            continue
        cur, steps, done = op.output("Output")[0], [], -1
        while cur is not None:
            nxt = readers.get(cur, [])
            if len(nxt) != 1 or not private(cur, nxt[0]):
                break
            j, nop = nxt[0], ops[nxt[0]]
            kind, match = _STEPS.get(nop.type, (None, None))
            roles = match(nop, cur, block, w.shape[0]) if match else None
            if roles is None or _ORDER.index(kind) <= done:
                break
            roles = {r: _ready(n, i, j, ops, writers, block) for r, n in roles.items()}
            if None in roles.values():
                break
            side = _SIDE_OUTPUTS.get(nop.type, {})
            if any(n != roles.get(side[s]) and not private(n, None)
                   for s in side for n in nop.output(s)):
                break
            outs = [n for s in nop.output_names if s not in side for n in nop.output(s)]
            if len(outs) != 1:
                break
            steps.append((kind, j, roles))
            done, cur = _ORDER.index(kind), outs[0]
        if steps:
            eps = [_attrs(ops[j])["epsilon"] for kind, j, _ in steps if kind == "bn"]
            out[op.output("Output")[0]] = Epilogue(i, steps, cur, w.shape[0],
                                                   eps[0] if eps else None)
    return out


FUSIONS["conv_epilogue"] = conv_epilogue


# --- conv_chain ----------------------------------------------------------------------------
CHAIN_CHANNELS = 8        # every channel count of a chain a multiple of this (one vector)


class ChainLink:
    """One conv of a Chain: its op index, "pw" (1x1) or "dw" (depthwise), its Epilogue (or
    None) and the variable holding its result (the epilogue's, else the conv's Output)."""
    __slots__ = ("conv", "kind", "epilogue", "out")

    def __init__(self, conv, kind, epilogue, out):
        self.conv, self.kind, self.epilogue, self.out = conv, kind, epilogue, out


class Chain:
    """A run of 1x1 / depthwise convs each reading only the result of the one before:
    `links` [ChainLink] in program order; `out` the last link's result."""
    __slots__ = ("links",)

    def __init__(self, links):
        self.links = links

    @property
    def out(self):
        return self.links[-1].out

    @property
    def ops(self):
        """The op indices the chain's first conv computes besides its own: the later convs
        and every link's epilogue ops, as (index, the pass that fused it)."""
        later = [(link.conv, "conv_chain") for link in self.links[1:]]
        epis = [(j, "conv_epilogue") for link in self.links if link.epilogue
                for j in link.epilogue.ops]
        return later + epis


def chain_kind(op, block):
    """"pw" when `op` is a 1x1 conv (stride 1, no padding, one group), "dw" when a
    depthwise conv (one input channel a group, as many outputs, dilation 1), both NCHW with
    channel counts a multiple of CHAIN_CHANNELS and the filter's dims known; "head" when
    another conv of one group whose output channels are (it may start a chain: its emitter
    says whether it can write channel-last); else None. The emitter checks the geometry
    again on the literal dims it compiles."""
    a = _attrs(op)
    if op.type not in CONVS or op.input("ResidualData") or len(op.input("Input")) != 1 or \
            len(op.output("Output")) != 1 or channel_last(a.get("data_format", "NCHW")):
        return None
    w = block.find_var_recursive((op.input("Filter") or [""])[0])
    x = block.find_var_recursive(op.input("Input")[0])
    if w is None or x is None or len(w.shape) != 4 or len(x.shape) != 4 or \
            any(d < 1 for d in w.shape):
        return None
    m, cg, kh, kw = (int(d) for d in w.shape)
    c, groups = int(x.shape[1]), a.get("groups", 1)
    if c < 1 or m % CHAIN_CHANNELS:
        return None
    strides, dil = list(a.get("strides", [1, 1])), list(a.get("dilations", [1, 1]))
    if c % CHAIN_CHANNELS == 0 and groups == 1 and cg == c and kh == kw == 1 and \
            strides == [1, 1] and not any(a.get("paddings", [0, 0])):
        return "pw"
    if c % CHAIN_CHANNELS == 0 and groups == c == m and cg == 1 and dil == [1, 1]:
        return "dw"
    return "head" if groups == 1 and cg == c else None


class _ChainScan:
    """What conv_chain reads of a block: its ops, each conv's Epilogue, who reads and
    writes each name."""

    def __init__(self, program, block, keep):
        self.block, self.keep, self.ops = block, keep, block.ops
        self.epis = {e.conv: e for e in conv_epilogue(program, block, keep).values()}
        self.readers, self.writers = _readers_writers(program, self.ops)

    def link(self, j, kind):
        """Conv j as a ChainLink of `kind`: its result is its epilogue's, else its Output."""
        epi = self.epis.get(j)
        return ChainLink(j, kind, epi, epi.out if epi else self.ops[j].output("Output")[0])

    def next_link(self, link, start):
        """The 1x1 / depthwise conv that alone reads `link`'s result as its Input, as a
        ChainLink, when that result is private (one writer, one reader, not kept, not
        persistable) and what the conv reads besides is ready before op `start`; else
        None."""
        name = link.out
        v, nxt = self.block.find_var_recursive(name), self.readers.get(name, [])
        if v is None or v.persistable or name in self.keep or len(nxt) != 1 or \
                len(self.writers.get(name, [])) != 1:
            return None
        k = nxt[0]
        kind = chain_kind(self.ops[k], self.block)
        if kind not in ("pw", "dw") or self.ops[k].input("Input") != [name] or \
                not self.ready(k, start):
            return None
        return self.link(k, kind)

    def ready(self, j, start):
        """Whether everything conv j and its epilogue read besides its Input is written
        before op `start` (by ops other than the epilogue's own)."""
        op, epi = self.ops[j], self.epis.get(j)
        names = [n for s in ("Filter", "Bias") for n in op.input(s)]
        own = set(epi.ops) if epi else set()
        names += [n for _, _, roles in (epi.steps if epi else []) for n in roles.values()]
        return all(k < start for n in names for k in self.writers.get(n, []) if k not in own)


def conv_chain(program, block, keep):
    """{first conv's Output name: Chain} for each run of at least two inference 1x1 /
    depthwise convs (chain_kind) where each conv's result (after its conv_epilogue, if
    any) is read only by the next conv, as its Input, written once, kept by nobody and not
    persistable; what each later conv and its epilogue read besides (filter, bias,
    statistics) is written before the chain's first conv and not after it. A "head" conv
    before such a run (or before one 1x1 / depthwise conv) gets the run with itself first,
    under its own Output; the run's own entry stays (when the head's emitter cannot start
    the chain, the run after it still can)."""
    scan = _ChainScan(program, block, keep)
    out, taken = {}, set()
    for i, op in enumerate(scan.ops):
        kind = chain_kind(op, block) if i not in taken else None
        if kind not in ("pw", "dw"):
            continue
        links = [scan.link(i, kind)]
        while (nxt := scan.next_link(links[-1], i)) is not None:
            links.append(nxt)
        if len(links) >= 2:
            out[op.output("Output")[0]] = Chain(links)
            taken.update(link.conv for link in links)
    starts = {c.links[0].conv: c for c in out.values()}
    for i, op in enumerate(scan.ops):
        if i in taken or chain_kind(op, block) != "head":
            continue
        head = scan.link(i, "head")
        first = scan.next_link(head, i)
        if first is not None:
            rest = starts[first.conv].links if first.conv in starts else [first]
            if all(scan.ready(link.conv, i) for link in rest):
                out[op.output("Output")[0]] = Chain([head, *rest])
    return out


FUSIONS["conv_chain"] = conv_chain


# --- relu_into_batch_norm ------------------------------------------------------------------
def relu_into_batch_norm(program, block, keep):
    """{batch_norm Y name: (relu op index, relu Out name)} where Y is read only by that relu,
    written only by the batch_norm, kept by nobody and not persistable, and relu's Out is
    written only by the relu: the batch_norm may write relu(Y) as relu's Out itself."""
    ops = block.ops
    readers, writers = _readers_writers(program, ops)
    out = {}
    for i, op in enumerate(ops):
        if op.type != "batch_norm" or len(op.output("Y")) != 1:
            continue
        y = op.output("Y")[0]
        v = block.find_var_recursive(y)
        if v is None or v.persistable or y in keep or writers.get(y) != [i] or \
                len(readers.get(y, [])) != 1:
            continue
        j = readers[y][0]
        relu = ops[j]
        if j <= i or relu.type != "relu" or relu.input("X") != [y] or \
                len(relu.output("Out")) != 1:
            continue
        r = relu.output("Out")[0]
        rv = block.find_var_recursive(r)
        if rv is None or rv.persistable or writers.get(r) != [j]:
            continue
        out[y] = (j, r)
    return out


FUSIONS["relu_into_batch_norm"] = relu_into_batch_norm


# --- relu_grad_into_gradient ---------------------------------------------------------------
def relu_grad_into_gradient(program, block, keep):
    """{gradient name: (relu_grad op index, relu's Out name, relu_grad's X@GRAD name)} where
    the gradient is a relu_grad's Out@GRAD written by one op before it, read only by that
    relu_grad, kept by nobody and not persistable, no op between them writes relu's Out,
    and X@GRAD is written only by the relu_grad: the gradient's maker may write X@GRAD
    itself."""
    ops = block.ops
    readers, writers = _readers_writers(program, ops)
    out = {}
    for j, op in enumerate(ops):
        if op.type != "relu_grad" or len(op.input("Out@GRAD")) != 1 or \
                len(op.input("Out")) != 1 or len(op.output("X@GRAD")) != 1:
            continue
        (g,), (o,), (dx,) = op.input("Out@GRAD"), op.input("Out"), op.output("X@GRAD")
        v, dv = block.find_var_recursive(g), block.find_var_recursive(dx)
        makers = writers.get(g, [])
        if v is None or dv is None or v.persistable or dv.persistable or g in keep or \
                readers.get(g) != [j] or len(makers) != 1 or makers[0] >= j or \
                writers.get(dx) != [j] or g == dx or o in (g, dx):
            continue
        if any(makers[0] < w < j for w in writers.get(o, [])):
            continue
        out[g] = (j, o, dx)
    return out


FUSIONS["relu_grad_into_gradient"] = relu_grad_into_gradient
