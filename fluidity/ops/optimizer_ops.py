"""Optimizer update ops (sgd, momentum, adam, adamw, adagrad, rmsprop, ftrl) and the small ops
gradient clipping and regularization build on (squared_l2_norm, clip_by_norm,
merge_selected_rows, get_tensor_from_selected_rows, and three `selected_rows_*` helpers that
stand in for Paddle ops accepting SelectedRows where ours take arrays only).

Every update op takes a dense LoDTensor `Grad` or a SelectedRows one and updates `Param` and
its accumulators IN PLACE: the numpy arrays held by the input LoDTensors are overwritten and
the same LoDTensor objects are returned as `ParamOut`, `<Acc>Out`. ParamOut is meant to be
the Param variable itself (as Optimizer builds it), so threads sharing a scope (Hogwild) all
see one array.

With a SelectedRows `Grad` each op follows Paddle's CPU kernel:

* rows only (lazy): sgd, adagrad, ftrl, and adam/adamw with ``lazy_mode=True`` touch just
  the rows present in Grad;
* every row: momentum, rmsprop, and adam/adamw with ``lazy_mode=False`` (Paddle's default)
  update all rows, with g = 0 for rows absent from Grad (velocity and moments still decay),
  which gives exactly the result of the same step with the equivalent dense gradient.

Duplicate rows of a SelectedRows `Grad` are merged (summed) first, except by sgd, which adds
each row in place as Paddle's kernel does (the same result up to rounding, without a merge).
The hot loops — sgd's rows, adam's and adagrad's steps, the merge — run in C for float32
(`sparse_kernels`, bit-identical to the numpy rules here, which serve everything else).
"""
import math

import numpy as np

from ..core.dtypes import VarType
from ..core.tensor import LoDTensor, SelectedRows
from ..errors import ExecutionError, ProgramError, ShapeError
from . import sparse_kernels
from .registry import AttrType, In, OpDef, Out, Typed, long


# --- helpers -------------------------------------------------------------------------------
def _array(t, op, slot):
    a = t._array if isinstance(t, LoDTensor) else None
    if a is None:
        raise ExecutionError(f"{op}: input '{slot}' holds no data (run the startup program "
                             f"to initialize parameters and accumulators)")
    return a


def writable_array(t, op, slot):
    """The array of LoDTensor `t`, made writable (a private copy when it was read-only)."""
    a = _array(t, op, slot)
    if not a.flags.writeable:
        a = t._array = a.copy()
    return a


def one_value(t, op, slot):
    a = _array(t, op, slot)
    if a.size != 1:
        raise ShapeError(f"{op}: '{slot}' must hold one value, got shape {list(a.shape)}")
    return a.reshape(-1)[0].item()


def _sparse_rows(grad, p, op):
    """(unique rows, their summed values shaped like rows of p) of a SelectedRows grad."""
    merged = sparse_kernels.merge_rows(grad.rows, grad.value) if len(grad.rows) > 1 else None
    m = grad.merged() if merged is None else SelectedRows(merged[0], grad.height, merged[1])
    rows = m.rows
    bad = rows[(rows < 0) | (rows >= p.shape[0])]
    if bad.size:
        raise ExecutionError(f"{op}: Grad has row {int(bad[0])} but Param has "
                             f"{p.shape[0]} rows")
    return rows, m.value.reshape((len(rows),) + p.shape[1:])


# --- the update ops --------------------------------------------------------------------------
class UpdateOp(OpDef):
    """Base of the update ops. A subclass names its accumulators (`states`: input slots read
    and written like Param, or `state_slots(attrs)`), whether a sparse Grad updates only its
    rows (`lazy(attrs)`), and `rule(attrs)` returning
    f(lr, g, p, *states, **extra) -> (new p, *new states) on numpy arrays (the rows being
    updated); `extra(ins, attrs)` supplies per-run scalars (Adam's beta powers) and
    `finish(ins, attrs)` updates anything else in place afterwards. The kernel writes the
    results back into the input arrays and returns the input holders as the outputs."""
    kind = "value"
    share_lod = None
    states = ()
    out_of = {}   # output slot -> the input slot whose holder it returns

    @classmethod
    def infer_shape(cls, ctx):
        for out, src in cls.out_of.items():
            if ctx.has_output(out) and ctx.has_input(src):
                ctx.share(src, out)

    @classmethod
    def state_slots(cls, attrs):
        return cls.states

    @staticmethod
    def lazy(attrs):
        return True

    @staticmethod
    def extra(ins, attrs):
        return {}

    @staticmethod
    def finish(ins, attrs):
        pass

    @classmethod
    def rows_written(cls, attrs, ins):
        """(rows, input slots) when the op writes only those rows of Param and its states
        (a lazy update from a SelectedRows Grad: its valid rows), else None (every row). The
        executor keeps the other rows of an output that names another variable than its
        input (executor/separate_outputs.py), as Paddle's kernels leave them."""
        grad = ins.get("Grad")
        if type(grad) is not SelectedRows or not cls.lazy(attrs):
            return None
        rows = np.unique(np.asarray(grad.rows, dtype=np.int64))
        p = ins.get("Param")
        if type(p) is LoDTensor and p._array is not None:
            rows = rows[(rows >= 0) & (rows < p._array.shape[0])]
        return rows, ("Param",) + tuple(cls.state_slots(attrs))

    @classmethod
    def prepare(cls, attrs, outputs):
        op, names, outs = cls.type, cls.input_names(), cls.output_names()
        rule, lazy, slots = cls.rule(attrs), cls.lazy(attrs), cls.state_slots(attrs)

        def results(ins):
            got = tuple(ins.get(cls.out_of.get(o)) for o in outs)
            return got[0] if len(got) == 1 else got

        def kernel(*args):
            ins = dict(zip(names, args))
            master = ins.get("MasterParam")
            p = writable_array(master if master is not None else ins["Param"], op, "Param")
            lr = (one_value(ins["LearningRate"], op, "LearningRate")
                  if ins.get("LearningRate") is not None else 1.0)
            for s in slots:
                if ins.get(s) is None:
                    raise ExecutionError(f"{op}: input '{s}' is needed with these attributes")
            states = [writable_array(ins[s], op, s) for s in slots]
            for s, a in zip(slots, states):
                if a.shape != p.shape:
                    raise ShapeError(f"{op}: '{s}' has shape {list(a.shape)} but Param has "
                                     f"{list(p.shape)}")
            grad = ins["Grad"]
            idx = Ellipsis
            if isinstance(grad, SelectedRows):
                rows, g = _sparse_rows(grad, p, op)
                if not rows.size and lazy:   # non-lazy rules still move every row (g = 0)
                    return results(ins)
                if lazy:
                    idx = rows
                else:
                    dense = np.zeros_like(p)
                    dense[rows] = g
                    g = dense
            else:
                g = _array(grad, op, "Grad")
                if g.shape != p.shape:
                    raise ShapeError(f"{op}: Grad has shape {list(g.shape)} but Param has "
                                     f"{list(p.shape)}")
            new = rule(lr, g, p[idx], *[a[idx] for a in states], **cls.extra(ins, attrs))
            for a, v in zip([p] + states, new):
                a[idx] = v
            if master is not None:
                np.copyto(writable_array(ins["Param"], op, "Param"), p, casting="unsafe")
            cls.finish(ins, attrs)
            return results(ins)
        return kernel


_MASTER_IN = In("MasterParam", dispensable=True)
_MASTER_OUT = Out("MasterParamOut", dispensable=True)


def _sgd_rows_of_rows(param, grad, lr, op):
    """Paddle's SGD of a SelectedRows Param by a SelectedRows Grad: each gradient row
    updates the Param's value row holding the same id (duplicates accumulate); a gradient
    row the Param does not hold is an error, as Paddle's (its index does not grow here)."""
    value = param.value
    if value is None or grad.value is None:
        raise ExecutionError(f"{op}: the SelectedRows Param and Grad must hold values")
    if not value.flags.writeable:
        value = param.value = value.copy()
    if grad.value.shape[1:] != value.shape[1:] or len(grad.rows) != grad.value.shape[0]:
        raise ShapeError(f"{op}: Grad rows of shape {list(grad.value.shape)} do not fit the "
                         f"Param's rows of shape {list(value.shape)}")
    index = {int(r): i for i, r in enumerate(param.rows)}
    missing = [int(r) for r in grad.rows if int(r) not in index]
    if missing:
        raise ExecutionError(f"{op}: Grad rows {missing[:5]} are not rows of the "
                             f"SelectedRows Param (it holds {len(index)} rows)")
    at = np.fromiter((index[int(r)] for r in grad.rows), np.int64, len(grad.rows))
    np.subtract.at(value, at, (lr * grad.value).astype(value.dtype, copy=False))


class Sgd(UpdateOp):
    type = "sgd"
    inputs = (In("Param"), In("LearningRate"), In("Grad"), _MASTER_IN)
    outputs = (Out("ParamOut"), _MASTER_OUT)
    attrs = {"multi_precision": False}
    out_of = {"ParamOut": "Param", "MasterParamOut": "MasterParam"}
    doc = ("ParamOut = Param - LearningRate * Grad. SelectedRows Grad: only its rows "
           "(duplicates summed).")

    @staticmethod
    def rule(attrs):
        return lambda lr, g, p: (p - lr * g,)

    @classmethod
    def prepare(cls, attrs, outputs):
        generic, op = UpdateOp.prepare.__func__(cls, attrs, outputs), cls.type

        def kernel(param, lr, grad, master):
            # the hot case (dense grad, no master weights): one in-place update, no dict work
            if master is None and type(grad) is LoDTensor and type(param) is LoDTensor:
                p, g, r = param._array, grad._array, lr._array
                if p is not None and g is not None and r is not None and r.size == 1 and \
                        p.shape == g.shape and p.flags.writeable:
                    p -= r.item() * g
                    return param, None
            # a distributed table's shard (a SelectedRows Param, Paddle's pserver table):
            # it updates the rows of the gradient itself, creating those it has not seen
            if isinstance(param, SelectedRows):
                if type(grad) is not SelectedRows:
                    raise ExecutionError(f"{op}: a SelectedRows Param is updated by a "
                                         f"SelectedRows Grad, got {type(grad).__name__}")
                if hasattr(param, "apply_sgd"):
                    param.apply_sgd(one_value(lr, op, "LearningRate"), grad)
                else:
                    _sgd_rows_of_rows(param, grad, one_value(lr, op, "LearningRate"), op)
                return param, None
            # sparse grad: each row added in place, duplicates accumulating, no merge (as
            # Paddle's SelectedRows SGD kernel); same result as merging first up to rounding
            if master is None and type(grad) is SelectedRows and type(param) is LoDTensor:
                p = writable_array(param, op, "Param")
                if grad.value is not None and grad.value.shape[1:] == p.shape[1:] and \
                        len(grad.rows) == grad.value.shape[0]:
                    sparse_kernels.rows_axpy(p, grad.rows, grad.value,
                                             -one_value(lr, op, "LearningRate"), op)
                    return param, None
            return generic(param, lr, grad, master)
        return kernel


class Momentum(UpdateOp):
    type = "momentum"
    version = 1  # Paddle's checkpoint: MasterParam/MasterParamOut, regularization_method/_coeff,
    #              multi_precision, rescale_grad
    inputs = (In("Param"), In("Grad"), In("Velocity"), In("LearningRate"), _MASTER_IN)
    outputs = (Out("ParamOut"), Out("VelocityOut"), _MASTER_OUT)
    attrs = {"mu": 0.0, "use_nesterov": False, "regularization_method": "",
             "regularization_coeff": 0.0, "multi_precision": False, "rescale_grad": 1.0}
    states = ("Velocity",)
    out_of = {"ParamOut": "Param", "VelocityOut": "Velocity", "MasterParamOut": "MasterParam"}
    doc = ("g = rescale_grad * Grad (+ regularization_coeff * Param for 'l2_decay'); "
           "v = mu * v + g; Param -= lr * (g + mu * v) if use_nesterov else lr * v. "
           "SelectedRows Grad: every row is updated, g = 0 where absent (Paddle's kernel).")

    @staticmethod
    def lazy(attrs):
        return False

    @staticmethod
    def rule(attrs):
        mu, nesterov = attrs["mu"], attrs["use_nesterov"]
        rescale = attrs["rescale_grad"]
        l2 = attrs["regularization_coeff"] if attrs["regularization_method"] == "l2_decay" \
            else 0.0

        def f(lr, g, p, v):
            if rescale != 1.0:
                g = g * rescale
            if l2:
                g = g + l2 * p
            v = mu * v + g
            return (p - lr * (g + mu * v) if nesterov else p - lr * v), v
        return f


def paddle2_epsilon(attrs):
    """Whether an adam op takes Paddle 2.1+'s epsilon, scaled by sqrt(1 - beta2^t), rather than
    Fluid 1.x's, added as it is. The op's own attributes say which Paddle wrote it: Paddle 2.1
    added the attribute `use_global_beta_pow` (its op version checkpoint 3) and writes it on
    every adam op it builds, and Paddle's kernels scale epsilon from that line on; Fluid 1.x's
    adam has no such attribute, and Fluidity builds adam as Fluid 1.8 does, without it. No
    op version checkpoint records the change of formula itself, so nothing else in a file
    tells the two apart. `attrs`: the kernel's attributes (absent ones hold their default,
    None for this one)."""
    return attrs.get("use_global_beta_pow") is not None


def adam_eps_t(eps, b2p, scaled):
    """The epsilon a step adds to sqrt(Moment2): Fluid 1.8's `eps`, or Paddle 2.1+'s
    `eps * sqrt(1 - beta2^t)` when `scaled` (paddle2_epsilon). A float64 scalar, so that
    numpy adds it to sqrt(Moment2) in double, as the C kernels do."""
    return np.float64(eps * math.sqrt(1.0 - b2p) if scaled else eps)


def _adam(lr, g, p, m1, m2, *, beta1, beta2, eps, b1p, b2p, scaled=False):
    """One Adam step: lr_t = lr sqrt(1 - beta2^t) / (1 - beta1^t), then
    p -= lr_t m1 / (sqrt(m2) + eps_t), eps_t from adam_eps_t."""
    lr_t = lr * np.sqrt(1.0 - b2p) / (1.0 - b1p)
    m1 = beta1 * m1 + (1.0 - beta1) * g
    m2 = beta2 * m2 + (1.0 - beta2) * g * g
    # the quotient in double, as the C kernel takes it, on numpy 1 too (whose value-based
    # casting would keep a float32 moment + a double scalar in float32)
    denom = np.add(np.sqrt(m2), adam_eps_t(eps, b2p, scaled), dtype=np.float64)
    return p - lr_t * (m1 / denom), m1, m2


class Adam(UpdateOp):
    type = "adam"
    inputs = (In("Param"), In("Grad"), In("LearningRate"), In("Moment1"), In("Moment2"),
              In("Beta1Pow"), In("Beta2Pow"), In("Beta1Tensor", dispensable=True),
              In("Beta2Tensor", dispensable=True), In("EpsilonTensor", dispensable=True),
              _MASTER_IN)
    outputs = (Out("ParamOut"), Out("Moment1Out"), Out("Moment2Out"), Out("Beta1PowOut"),
               Out("Beta2PowOut"), _MASTER_OUT)
    attrs = {"beta1": 0.9, "beta2": 0.999, "epsilon": 1e-8, "lazy_mode": False,
             "min_row_size_to_use_multithread": long(1000), "multi_precision": False,
             "use_global_beta_pow": Typed(AttrType.BOOLEAN, None), "amsgrad": False}
    # use_global_beta_pow: absent from Fluid 1.x's adam (None here), written by Paddle >= 2.1;
    # whether an op carries it picks the epsilon form (paddle2_epsilon)
    states = ("Moment1", "Moment2")
    out_of = {"ParamOut": "Param", "Moment1Out": "Moment1", "Moment2Out": "Moment2",
              "Beta1PowOut": "Beta1Pow", "Beta2PowOut": "Beta2Pow",
              "MasterParamOut": "MasterParam"}
    doc = ("Adam (Kingma & Ba) as Fluid 1.8 computes it: m1 = b1 m1 + (1-b1) g, "
           "m2 = b2 m2 + (1-b2) g^2, lr_t = lr sqrt(1-b2^t)/(1-b1^t), "
           "Param -= lr_t m1 / (sqrt(m2) + eps); an op written by Paddle >= 2.1 (one carrying "
           "use_global_beta_pow) adds eps sqrt(1-b2^t) instead, as Paddle 2.1+ does. Then "
           "Beta{1,2}Pow *= beta{1,2} (unless use_global_beta_pow). SelectedRows Grad: lazy_mode=True updates only its "
           "rows; lazy_mode=False (default) updates every row with g = 0 where absent, so "
           "moments of absent rows still decay -- the same result as the dense gradient.")

    @staticmethod
    def lazy(attrs):
        return attrs["lazy_mode"]

    @staticmethod
    def extra(ins, attrs):
        def pick(slot, name):
            t = ins.get(slot)
            return one_value(t, "adam", slot) if t is not None else attrs[name]
        return {"beta1": pick("Beta1Tensor", "beta1"), "beta2": pick("Beta2Tensor", "beta2"),
                "eps": pick("EpsilonTensor", "epsilon"),
                "b1p": one_value(ins["Beta1Pow"], "adam", "Beta1Pow"),
                "b2p": one_value(ins["Beta2Pow"], "adam", "Beta2Pow"),
                "scaled": paddle2_epsilon(attrs)}

    @classmethod
    def finish(cls, ins, attrs):
        if attrs["use_global_beta_pow"]:
            return
        e = cls.extra(ins, attrs)
        writable_array(ins["Beta1Pow"], cls.type, "Beta1Pow")[...] *= e["beta1"]
        writable_array(ins["Beta2Pow"], cls.type, "Beta2Pow")[...] *= e["beta2"]

    @staticmethod
    def rule(attrs):
        return _adam

    @classmethod
    def prepare(cls, attrs, outputs):
        if attrs["amsgrad"]:    # Paddle 3.x: the max of Moment2 kept in Moment2Max
            raise ProgramError(f"{cls.type}: attribute amsgrad=True (AMSGrad) is not "
                               f"supported")
        if cls.type != "adam":  # adamw's rule differs
            return UpdateOp.prepare.__func__(cls, attrs, outputs)

        def step(ins, p, states, g, rows, op):
            e = cls.extra(ins, attrs)
            lr = one_value(ins["LearningRate"], op, "LearningRate")
            lr_t = lr * math.sqrt(1.0 - e["b2p"]) / (1.0 - e["b1p"])
            eps_t = adam_eps_t(e["eps"], e["b2p"], e["scaled"])
            return sparse_kernels.adam(p, *states, g, rows, lr_t, e["beta1"], e["beta2"],
                                       eps_t, op)
        return _with_native_step(cls, attrs, outputs, step)


def _with_native_step(cls, attrs, outputs, step):
    """The update op's kernel: `step(ins, p, states, g, rows, op)` (a C kernel; returns False
    if it cannot take these arrays) when Param, its states and Grad are float32 without
    master weights, the numpy rule otherwise. `rows`: the unique rows of a SelectedRows Grad
    in lazy mode (g their summed values), None for a dense step (a SelectedRows Grad made
    dense with g = 0 where absent, when the op is not lazy)."""
    generic = UpdateOp.prepare.__func__(cls, attrs, outputs)
    names, outs, op = cls.input_names(), cls.output_names(), cls.type
    slots, lazy = cls.state_slots(attrs), cls.lazy(attrs)

    def native(ins):
        p_t, g_t = ins["Param"], ins["Grad"]
        if ins.get("MasterParam") is not None or type(p_t) is not LoDTensor or \
                p_t._array is None or p_t._array.dtype != np.float32 or \
                any(ins.get(s) is None for s in slots):
            return False
        p = writable_array(p_t, op, "Param")
        states = [writable_array(ins[s], op, s) for s in slots]
        if any(a.shape != p.shape for a in states):
            return False  # numpy's path says what is wrong
        if type(g_t) is LoDTensor:
            g, rows = g_t._array, None
            if g is None or g.shape != p.shape:
                return False
        elif type(g_t) is SelectedRows and g_t.value is not None:
            rows, g = _sparse_rows(g_t, p, op)
            if not rows.size:
                return False
            if not lazy:  # every row, g = 0 where absent
                dense = np.zeros_like(p)
                dense[rows] = g
                g, rows = dense, None
        else:
            return False
        return step(ins, p, states, np.ascontiguousarray(g), rows, op)

    def kernel(*args):
        ins = dict(zip(names, args))
        if native(ins):
            cls.finish(ins, attrs)
            return tuple(ins.get(cls.out_of.get(o)) for o in outs)
        return generic(*args)
    return kernel


class Adamw(Adam):
    type = "adamw"
    attrs = {**Adam.attrs, "lr_ratio": 1.0, "coeff": 0.01, "with_decay": False}
    doc = ("AdamW (Loshchilov & Hutter): with lr' = lr * lr_ratio, first "
           "Param *= 1 - lr' * coeff (when with_decay), then the Adam step with lr' and Paddle "
           "2.1+'s epsilon (eps sqrt(1-b2^t)): no Fluid 1.x program has this op. "
           "SelectedRows Grad as in adam (the decay follows the rows that are updated).")

    @staticmethod
    def rule(attrs):
        ratio = attrs["lr_ratio"]
        coeff = attrs["coeff"] if attrs["with_decay"] else 0.0

        def f(lr, g, p, m1, m2, **kw):
            lr = lr * ratio
            if coeff:
                p = p * (1.0 - lr * coeff)
            # the adamw op exists only in Paddle >= 2.2, whose kernels scale epsilon
            return _adam(lr, g, p, m1, m2, **dict(kw, scaled=True))
        return f


class Adagrad(UpdateOp):
    type = "adagrad"
    inputs = (In("Param"), In("Grad"), In("Moment"), In("LearningRate"), _MASTER_IN)
    outputs = (Out("ParamOut"), Out("MomentOut"), _MASTER_OUT)
    attrs = {"epsilon": 1e-6, "multi_precision": False}
    states = ("Moment",)
    out_of = {"ParamOut": "Param", "MomentOut": "Moment", "MasterParamOut": "MasterParam"}
    doc = ("Moment += g^2; Param -= lr * g / (sqrt(Moment) + epsilon). SelectedRows Grad: "
           "only its rows.")

    @staticmethod
    def rule(attrs):
        eps = attrs["epsilon"]

        def f(lr, g, p, m):
            m = m + g * g
            return p - lr * g / (np.sqrt(m) + eps), m
        return f

    @classmethod
    def prepare(cls, attrs, outputs):
        eps = attrs["epsilon"]
        return _with_native_step(cls, attrs, outputs, lambda ins, p, states, g, rows, op: (
            sparse_kernels.adagrad(p, states[0], g, rows,
                                   one_value(ins["LearningRate"], op, "LearningRate"), eps, op)))


class Rmsprop(UpdateOp):
    type = "rmsprop"
    inputs = (In("Param"), In("MeanSquare"), In("Grad"), In("Moment"), In("LearningRate"),
              In("MeanGrad", dispensable=True))
    outputs = (Out("ParamOut"), Out("MomentOut"), Out("MeanSquareOut"),
               Out("MeanGradOut", dispensable=True))
    # multi_precision (Paddle 3.x writes it) matters only with a MasterParam, which this
    # op does not take (a program wiring one is refused for the slot)
    attrs = {"epsilon": 1e-10, "decay": 0.9, "momentum": 0.0, "centered": False,
             "multi_precision": False}
    out_of = {"ParamOut": "Param", "MomentOut": "Moment", "MeanSquareOut": "MeanSquare",
              "MeanGradOut": "MeanGrad"}
    doc = ("ms = decay ms + (1-decay) g^2; (centered: mg = decay mg + (1-decay) g, "
           "denominator ms - mg^2); mom = momentum mom + lr g / sqrt(denominator + epsilon); "
           "Param -= mom. SelectedRows Grad: every row, g = 0 where absent (Paddle's kernel).")

    @classmethod
    def state_slots(cls, attrs):
        return ("MeanSquare", "Moment") + (("MeanGrad",) if attrs["centered"] else ())

    @staticmethod
    def lazy(attrs):
        return False

    @staticmethod
    def rule(attrs):
        rho, eps, mom_ = attrs["decay"], attrs["epsilon"], attrs["momentum"]

        def f(lr, g, p, ms, mom, mg=None):
            ms = rho * ms + (1.0 - rho) * g * g
            if mg is None:
                denom = ms
            else:
                mg = rho * mg + (1.0 - rho) * g
                denom = ms - mg * mg
            mom = mom_ * mom + lr * g / np.sqrt(denom + eps)
            return (p - mom, ms, mom) + (() if mg is None else (mg,))
        return f


class Ftrl(UpdateOp):
    type = "ftrl"
    inputs = (In("Param"), In("SquaredAccumulator"), In("LinearAccumulator"), In("Grad"),
              In("LearningRate"))
    outputs = (Out("ParamOut"), Out("SquaredAccumOut"), Out("LinearAccumOut"))
    attrs = {"l1": 0.0, "l2": 0.0, "lr_power": -0.5}
    states = ("SquaredAccumulator", "LinearAccumulator")
    out_of = {"ParamOut": "Param", "SquaredAccumOut": "SquaredAccumulator",
              "LinearAccumOut": "LinearAccumulator"}
    doc = ("FTRL-Proximal (McMahan et al.) as Paddle computes it (l1, l2 each + 1e-10). "
           "SelectedRows Grad: only its rows.")

    @staticmethod
    def rule(attrs):
        l1, l2, power = attrs["l1"] + 1e-10, attrs["l2"] + 1e-10, attrs["lr_power"]

        def acc_pow(a):
            return np.sqrt(a) if power == -0.5 else np.power(a, -power)

        def f(lr, g, p, sq, lin):
            new_sq = sq + g * g
            lin = lin + g - (acc_pow(new_sq) - acc_pow(sq)) / lr * p
            x = l1 * np.sign(lin) - lin
            y = acc_pow(new_sq) / lr + 2.0 * l2
            p = np.where(np.abs(lin) > l1, x / y, 0.0).astype(p.dtype, copy=False)
            return p, new_sq, lin
        return f


# --- ops for clipping and regularization ------------------------------------------------------
def _dense_or_merged(x):
    """(array of values, SelectedRows or None) with SelectedRows rows merged."""
    if isinstance(x, SelectedRows):
        m = x.merged()
        return m.value, m
    return x._array, None


class SquaredL2Norm(OpDef):
    type = "squared_l2_norm"
    inputs = (In("X"),)
    outputs = (Out("Out"),)
    kind = "value"
    share_lod = None
    doc = "Out = sum(X^2), shape [1] (a SelectedRows X: over its merged rows)."

    @staticmethod
    def infer_shape(ctx):
        ctx.set_output("Out", [1], ctx.input_dtype("X"))

    @staticmethod
    def kernel(x):
        a, _ = _dense_or_merged(x)
        return LoDTensor(np.asarray([np.sum(np.square(a))], dtype=a.dtype))

    grad = staticmethod(lambda g: g.op(
        "squared_l2_norm_grad", {"X": g.input("X"), "Out@GRAD": g.output_grad("Out")},
        {"X@GRAD": g.input_grad("X")}))


class SquaredL2NormGrad(OpDef):
    type = "squared_l2_norm_grad"
    inputs = (In("X"), In("Out@GRAD"))
    outputs = (Out("X@GRAD"),)
    infer_shape = None

    @staticmethod
    def kernel(x, dout):
        return (2.0 * dout.reshape(-1)[0] * x).astype(x.dtype, copy=False)


class ClipByNorm(OpDef):
    type = "clip_by_norm"
    inputs = (In("X"),)
    outputs = (Out("Out"),)
    attrs = {"max_norm": 1.0}
    kind = "value"
    lod_outputs = ("Out",)
    doc = ("Out = X * max_norm / max(||X||_2, max_norm) (X unchanged when its norm is at "
           "most max_norm). A SelectedRows X gives a SelectedRows of its merged rows.")

    @staticmethod
    def infer_shape(ctx):
        ctx.set_output("Out", ctx.input_shape("X"), ctx.input_dtype("X"),
                       type=ctx.input_type("X"))

    @staticmethod
    def kernel(x, *, max_norm):
        a, sr = _dense_or_merged(x)
        norm = float(np.sqrt(np.sum(np.square(a, dtype=np.float64))))
        out = a * (max_norm / norm) if norm > max_norm else a.copy()
        out = out.astype(a.dtype, copy=False)
        if sr is not None:
            return SelectedRows(sr.rows.copy(), sr.height, out)
        return LoDTensor(out, x._lod)


class MergeSelectedRows(OpDef):
    type = "merge_selected_rows"
    inputs = (In("X"),)
    outputs = (Out("Out"),)
    kind = "value"
    doc = "Out = X with duplicate rows summed (SelectedRows -> SelectedRows)."

    @staticmethod
    def infer_shape(ctx):
        ctx.set_output("Out", ctx.input_shape("X"), ctx.input_dtype("X"),
                       type=ctx.input_type("X"))

    @staticmethod
    def kernel(x):
        if not isinstance(x, SelectedRows):
            raise ExecutionError(f"merge_selected_rows needs a SelectedRows, got "
                                 f"{type(x).__name__}")
        return x.merged()


class GetTensorFromSelectedRows(OpDef):
    type = "get_tensor_from_selected_rows"
    inputs = (In("X"),)
    outputs = (Out("Out"),)
    kind = "value"
    share_lod = None
    doc = "Out = the value tensor of SelectedRows X ([len(rows), ...])."

    @staticmethod
    def infer_shape(ctx):
        ctx.set_output("Out", ctx.input_shape("X"), ctx.input_dtype("X"),
                       type=VarType.LOD_TENSOR)

    @staticmethod
    def kernel(x):
        if not isinstance(x, SelectedRows):
            raise ExecutionError(f"get_tensor_from_selected_rows needs a SelectedRows, got "
                                 f"{type(x).__name__}")
        return LoDTensor(x.value)


class SelectedRowsScale(OpDef):
    """Paddle's elementwise_mul/scale accept a SelectedRows X with a one-element Y; ours are
    array kernels, so gradient clipping scales sparse gradients with this op."""
    type = "selected_rows_scale"
    inputs = (In("X"), In("Scale"))
    outputs = (Out("Out"),)
    kind = "value"
    doc = "Out = X * Scale (Scale holds one value; X a SelectedRows or a LoDTensor)."

    @staticmethod
    def infer_shape(ctx):
        ctx.set_output("Out", ctx.input_shape("X"), ctx.input_dtype("X"),
                       type=ctx.input_type("X"))

    @staticmethod
    def kernel(x, scale):
        k = one_value(scale, "selected_rows_scale", "Scale")
        if isinstance(x, SelectedRows):
            return SelectedRows(x.rows.copy(), x.height,
                                (x.value * k).astype(x.value.dtype, copy=False))
        return LoDTensor((x._array * k).astype(x._array.dtype, copy=False), x._lod)


class SelectedRowsClip(OpDef):
    """Paddle's clip op accepts a SelectedRows X; ours is an array kernel, so clipping by value
    uses this op for sparse gradients."""
    type = "selected_rows_clip"
    inputs = (In("X"),)
    outputs = (Out("Out"),)
    attrs = {"min": 0.0, "max": 0.0}
    kind = "value"
    doc = "Out = X (rows merged) with values clipped to [min, max], a SelectedRows."

    @staticmethod
    def infer_shape(ctx):
        ctx.set_output("Out", ctx.input_shape("X"), ctx.input_dtype("X"),
                       type=ctx.input_type("X"))

    @staticmethod
    def kernel(x, *, min, max):
        if not isinstance(x, SelectedRows):
            raise ExecutionError(f"selected_rows_clip needs a SelectedRows, got "
                                 f"{type(x).__name__}")
        m = x.merged()
        return SelectedRows(m.rows.copy(), m.height,
                            np.clip(m.value, min, max).astype(m.value.dtype, copy=False))


class SelectedRowsWeightDecay(OpDef):
    """Regularization of a sparse gradient: Paddle's regularizer turns it dense (sum with a
    dense decay term); we keep it sparse and decay only the rows the gradient touches."""
    type = "selected_rows_weight_decay"
    inputs = (In("Param"), In("Grad"))
    outputs = (Out("Out"),)
    attrs = {"regularization_method": "l2_decay", "regularization_coeff": 0.0}
    kind = "value"
    doc = ("Out = Grad (rows merged) + coeff * Param[rows] ('l2_decay') or "
           "coeff * sign(Param[rows]) ('l1_decay'), a SelectedRows.")

    @staticmethod
    def infer_shape(ctx):
        ctx.set_output("Out", ctx.input_shape("Param"), ctx.input_dtype("Param"),
                       type=ctx.input_type("Grad"))

    @classmethod
    def prepare(cls, attrs, outputs):
        method, coeff = attrs["regularization_method"], attrs["regularization_coeff"]
        if method not in ("l1_decay", "l2_decay"):
            raise ExecutionError(f"{cls.type}: regularization_method must be 'l1_decay' or "
                                 f"'l2_decay', got {method!r}")

        def kernel(param, grad):
            p = _array(param, cls.type, "Param")
            if not isinstance(grad, SelectedRows):
                raise ExecutionError(f"{cls.type}: Grad must be a SelectedRows")
            rows, g = _sparse_rows(grad, p, cls.type)
            pr = p[rows]
            decay = coeff * (np.sign(pr) if method == "l1_decay" else pr)
            return SelectedRows(rows.copy(), grad.height,
                                (g + decay).astype(g.dtype, copy=False))
        return kernel
