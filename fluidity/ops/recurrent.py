"""StaticRNN's ops (Paddle's names, slots and attributes; the other block-running ops are in
control_flow.py):

* ``recurrent`` (`kind = "ctx"`) runs `sub_block` once per time step of its time-major
  `inputs`, linking each step's `ex_states` to the previous step's `states`;
  ``recurrent_grad`` runs the gradient block in the same step scopes, last step first, and
  moves gradients across the scope boundary.
* ``rnn_memory_helper`` hands a step's output or new state on.
"""
import numpy as np

from ..core.dtypes import VarType
from ..core.names import EMPTY_VAR_NAME, GRAD_SUFFIX, grad_var_name
from ..core.tensor import LoDTensor
from ..errors import ExecutionError
from .common import (add_grads, aligned_outputs, dense, drop_scopes, is_empty,
                     zeros_like_value)
from .registry import In, OpDef, Out, block, strings


_RECURRENT_ATTRS = {"has_states": False, "ex_states": strings(), "states": strings(),
                    "sub_block": block(), "reverse": False, "is_train": True,
                    "skip_eager_deletion_vars": strings()}


class RNNMemoryHelper(OpDef):
    type = "rnn_memory_helper"
    inputs = (In("X"),)
    outputs = (Out("Out"),)
    attrs = {"dtype": VarType.FP32}
    kind = "value"
    doc = "Out = X (StaticRNN's hand-off of a step output or new state)."

    @staticmethod
    def kernel(x):
        return x

    grad = staticmethod(lambda g: g.op(
        "rnn_memory_helper_grad",
        {"Out@GRAD": g.output_grad("Out"), "X": g.input("X"), "Out": g.output("Out")},
        {"X@GRAD": g.input_grad("X")}, g.attrs()))


class RNNMemoryHelperGrad(OpDef):
    type = "rnn_memory_helper_grad"
    inputs = (In("Out@GRAD", dispensable=True), In("X"), In("Out", dispensable=True))
    outputs = (Out("X@GRAD"),)
    attrs = {"dtype": VarType.FP32}
    kind = "value"
    infer_shape = None
    doc = "X@GRAD = Out@GRAD, or zeros shaped like X where no gradient reached Out."

    @staticmethod
    def kernel(dout, x, out):
        return dense(dout) if not is_empty(dout) else zeros_like_value(x)


class Recurrent(OpDef):
    type = "recurrent"
    inputs = (In("inputs", duplicable=True, dispensable=True),
              In("initial_states", duplicable=True, dispensable=True),
              In("parameters", duplicable=True, dispensable=True))
    outputs = (Out("outputs", duplicable=True, dispensable=True), Out("step_scopes"))
    attrs = _RECURRENT_ATTRS
    kind = "ctx"
    infer_shape = None
    doc = ("StaticRNN: run sub_block once per step t of the time-major `inputs` (each linked "
           "as its slice t under its own name), `ex_states` linked to the previous step's "
           "`states` (initial_states at the first step); `outputs` stack the steps' values.")

    @staticmethod
    def grad_targets(op):
        ex, st = op.attr("ex_states"), op.attr("states")
        links = list(zip(op.input("initial_states"), ex)) + list(zip(st, ex))
        return op.output("outputs") + st, links

    @staticmethod
    def make_step(p):
        a = p.attrs
        sub, reverse, keep = a["sub_block"], a["reverse"], a["is_train"]
        ex, st = a["ex_states"], a["states"]
        ins, in_ids = p.op.input("inputs"), p.in_idx("inputs")
        init_ids = p.in_idx("initial_states")
        outs, out_ids = p.op.output("outputs"), p.out_idx("outputs")
        scopes_i = p.out_one("step_scopes")

        def step(frame, env):
            scope = env.scope
            seqs = [frame[i].value._array for i in in_ids]
            if not seqs:
                raise ExecutionError("recurrent: needs at least one input sequence")
            n_steps = seqs[0].shape[0]
            holder = frame[scopes_i]
            drop_scopes(scope, holder.value)
            scopes = holder.value = []
            steps = [[None] * n_steps for _ in outs]
            prev = None
            for k in range(n_steps):
                t = n_steps - 1 - k if reverse else k
                s = scope.new_scope()
                for name, seq in zip(ins, seqs):
                    s.var(name).value = LoDTensor(seq[t])
                for e, src in zip(ex, [frame[i].value for i in init_ids] if prev is None
                                  else [prev.find_local_var(n).value for n in st]):
                    s.var(e).value = src
                env.run_block(sub, s)
                for j, name in enumerate(outs):
                    steps[j][t] = s.find_local_var(name).value._array
                if keep:
                    scopes.append(s)
                elif prev is not None:
                    scope.delete_scope(prev)
                prev = s
            if not keep and prev is not None:
                scope.delete_scope(prev)
            for j, o in enumerate(out_ids):
                frame[o].value = LoDTensor(np.stack(steps[j]))
        return step

    grad = staticmethod(lambda g: g.op(
        "recurrent_grad",
        {"inputs": g.input("inputs"), "initial_states": g.input("initial_states"),
         "parameters": g.input("parameters"), "outputs": g.output("outputs"),
         "outputs@GRAD": g.output_grad("outputs"), "step_scopes": g.output("step_scopes")},
        {"inputs@GRAD": g.block_input_grad("inputs"),
         "initial_states@GRAD": g.block_input_grad("initial_states", g.attr("ex_states")),
         "parameters@GRAD": g.block_input_grad("parameters")},
        {**g.attrs(), "sub_block": g.grad_block.idx}))


class RecurrentGrad(OpDef):
    type = "recurrent_grad"
    inputs = (In("inputs", duplicable=True, dispensable=True),
              In("initial_states", duplicable=True, dispensable=True),
              In("parameters", duplicable=True, dispensable=True),
              In("outputs", duplicable=True, dispensable=True),
              In("outputs@GRAD", duplicable=True, dispensable=True), In("step_scopes"))
    outputs = (Out("inputs@GRAD", duplicable=True, dispensable=True),
               Out("initial_states@GRAD", duplicable=True, dispensable=True),
               Out("parameters@GRAD", duplicable=True, dispensable=True))
    attrs = _RECURRENT_ATTRS
    kind = "ctx"
    infer_shape = None
    doc = ("Run the gradient block in the step scopes, last step first: output gradients "
           "linked as slices, each step's state gradients from the later step's ex_states "
           "gradients; parameter gradients summed over steps.")

    @staticmethod
    def make_step(p):
        a = p.attrs
        sub, reverse = a["sub_block"], a["reverse"]
        ex, st = a["ex_states"], a["states"]
        outs = p.op.input("outputs")
        og_ids = p.in_idx("outputs@GRAD")
        scopes_i = p.in_one("step_scopes")

        def wanted(slot, inner_names):
            names = p.op.input(slot)
            return [(x, grad_var_name(i), o) for x, i, g, o in
                    zip(names, inner_names or names, p.op.output(slot + GRAD_SUFFIX),
                        aligned_outputs(p, slot + GRAD_SUFFIX)) if g != EMPTY_VAR_NAME]
        w_in, w_par = wanted("inputs", None), wanted("parameters", None)
        w_init = wanted("initial_states", ex)

        def step(frame, env):
            scope = env.scope
            scopes = frame[scopes_i].value or []
            n = len(scopes)
            ogs = []
            for name, i in zip(outs, og_ids):
                g = frame[i].value
                ogs.append(dense(g)._array if not is_empty(g) else
                           np.zeros_like(scope.find_var(name).value._array))
            in_grads = {x: np.zeros_like(scope.find_var(x).value._array) for x, _, _ in w_in}
            par_grads = {}
            later = None
            for k in range(n - 1, -1, -1):
                s, t = scopes[k], n - 1 - k if reverse else k
                for _, inner, _ in w_in + w_par + w_init:
                    s.var(inner).value = None
                for name, g in zip(outs, ogs):
                    s.var(grad_var_name(name)).value = LoDTensor(g[t])
                for e, name in zip(ex, st):
                    v = later.find_local_var(grad_var_name(e)) if later is not None else None
                    s.var(grad_var_name(name)).value = v.value if v is not None else None
                env.run_block(sub, s)
                for x, inner, _ in w_par:
                    par_grads[x] = add_grads(par_grads.get(x), s.find_local_var(inner).value)
                for x, inner, _ in w_in:
                    v = s.find_local_var(inner).value
                    if not is_empty(v):
                        in_grads[x][t] = dense(v)._array
                later = s
            for x, inner, slot in w_init:
                v = later.find_local_var(inner).value if later is not None else None
                frame[slot].value = (v if not is_empty(v)
                                     else zeros_like_value(scope.find_var(x).value))
            for x, _, slot in w_in:
                frame[slot].value = LoDTensor(in_grads[x])
            for x, _, slot in w_par:
                v = par_grads.get(x)
                frame[slot].value = (v if not is_empty(v)
                                     else zeros_like_value(scope.find_var(x).value))
            drop_scopes(scope, scopes)
            frame[scopes_i].value = []
        return step
