"""The data-parallel pass: a training program made into what each of N replicas runs, as
Fluid 1.x's multi-device graph pass builds it (`CompiledProgram.with_data_parallel`).

    data_parallel(desc, num_places, loss_name, gradient_scale, reduce_strategy) -> desc

is a pure function of ProgramDescs (the input is never touched). With one place the
program is returned unchanged (a copy), as Fluid does with one device. With N > 1:

* The loss gradient (the op of role Backward|Loss that starts the backward pass, when a
  loss is named) is `1/N` instead of 1 under `GradientScaleStrategy.CoeffNumDevice` (the
  default: each replica's gradient is 1/N of its batch's, so their sum is the mean), stays
  1 under `One` (the sum), and is left to the user to feed (`<loss>@GRAD`, one value per
  replica) under `Customized`: the op making it is removed.
* After the last backward op that writes each parameter gradient (the (param, grad) pairs
  of the backward ops' `op_role_var`) comes `c_allreduce_sum` (ReduceStrategy.AllReduce:
  every replica gets the sum) or `c_reduce_sum` with root 0 (ReduceStrategy.Reduce: replica
  0 gets it). With parameters shared by the replicas, the optimizer runs once, on replica
  0's gradients, so both give the same numbers; AllReduce leaves every replica's gradient
  the sum, as Fluid's replicas hold it.

What runs once and what runs on every replica is the executor's plan
(executor/data_parallel.py), read from the ops' roles; nothing else of the program changes.
"""
from ..core.names import GRAD_SUFFIX, OpRole
from ..errors import ProgramError
from ..ir import rewrite
from ..ir.views import ProgramView

# BuildStrategy.GradientScaleStrategy and ReduceStrategy values (Fluid's)
COEFF_NUM_DEVICE, ONE, CUSTOMIZED = 0, 1, 2
ALL_REDUCE, REDUCE = 0, 1
_LOSS_GRAD_ROLE = OpRole.Backward | OpRole.Loss


def _is_backward(op):
    role = op.role
    return bool(role & OpRole.Backward) and not role & OpRole.Optimize


def _grad_pairs(block):
    """[(param, grad, index of the last backward op writing grad)] in the order the grads
    are finished, from the backward ops' `op_role_var`."""
    pairs = {}
    for op in block.ops:
        if not _is_backward(op) or not op.has_attr("op_role_var"):
            continue
        rv = list(op.attr("op_role_var") or [])
        for p, g in zip(rv[0::2], rv[1::2]):
            pairs.setdefault(g, p)
    out = []
    for g, p in pairs.items():
        writers = [i for i, op in enumerate(block.ops)
                   if _is_backward(op) and g in op.output_arg_names]
        if writers:
            out.append((p, g, writers[-1]))
    return sorted(out, key=lambda t: t[2])


def _scale_loss_grad(block, loss_name, num_places, gradient_scale):
    """Make the loss-gradient op(s) write 1/N (CoeffNumDevice), 1 (One), or remove them
    (Customized: the user feeds the loss gradient)."""
    want = loss_name + GRAD_SUFFIX
    ops = [op for op in block.ops if op.role == _LOSS_GRAD_ROLE and
           want in op.output_arg_names]
    for op in reversed(ops):
        if gradient_scale == CUSTOMIZED:
            rewrite.remove_op(block, op)
            continue
        coeff = 1.0 / num_places if gradient_scale == COEFF_NUM_DEVICE else 1.0
        if op.type == "fill_constant":
            rewrite.set_attr(op, "value", coeff)
            continue
        # any other op that starts the backward pass: Fluid replaces it by its own fill
        var = block.find_var_recursive(want)
        at = op.idx
        rewrite.remove_op(block, op)
        rewrite.insert_op(block, at, "fill_constant", {}, {"Out": [want]},
                          {"shape": [d if d > 0 else 1 for d in var.shape] or [1],
                           "dtype": var.dtype, "value": coeff, "op_role": _LOSS_GRAD_ROLE})


def data_parallel(desc, num_places, loss_name=None, gradient_scale=COEFF_NUM_DEVICE,
                  reduce_strategy=ALL_REDUCE):
    """The program each of `num_places` replicas runs (a new ProgramDesc; see the module
    docstring). `loss_name` names the loss whose gradient starts the backward pass (None:
    no loss gradient is scaled, as in Fluid)."""
    if isinstance(num_places, bool) or not isinstance(num_places, int) or num_places < 1:
        raise ValueError(f"data_parallel: num_places must be a positive int, got "
                         f"{num_places!r}")
    if gradient_scale not in (COEFF_NUM_DEVICE, ONE, CUSTOMIZED):
        raise ValueError(f"data_parallel: unknown gradient_scale_strategy {gradient_scale!r}")
    if reduce_strategy not in (ALL_REDUCE, REDUCE):
        raise ValueError(f"data_parallel: unknown reduce_strategy {reduce_strategy!r}")
    prog = ProgramView(rewrite.copy_program(desc))
    if num_places == 1:
        return prog.desc
    block = prog.global_block()
    if loss_name is not None:
        if block.find_var_recursive(loss_name) is None:
            raise ProgramError(f"data_parallel: the loss '{loss_name}' is not a variable of "
                               f"the program")
        _scale_loss_grad(block, loss_name, num_places, gradient_scale)
    for p, g, last in reversed(_grad_pairs(block)):
        attrs = {"ring_id": 0, "use_calc_stream": False, "op_role": OpRole.Backward,
                 "op_role_var": [p, g]}
        if reduce_strategy == REDUCE:
            rewrite.insert_op(block, last + 1, "c_reduce_sum", {"X": [g]}, {"Out": [g]},
                              {**attrs, "root_id": 0})
        else:
            rewrite.insert_op(block, last + 1, "c_allreduce_sum", {"X": [g]}, {"Out": [g]},
                              attrs)
    return prog.desc


def has_backward(desc):
    """Whether block 0 of `desc` has backward ops (Fluid then requires a loss name)."""
    return any(_is_backward(op) for op in ProgramView(desc).global_block().ops)


def is_training(desc):
    """Whether block 0 of `desc` has backward or optimize ops (a replica may not be left
    without a batch: Fluid's partial feed is for inference programs only)."""
    return any(op.role & (OpRole.Backward | OpRole.Optimize)
               for op in ProgramView(desc).global_block().ops)
