"""A sync parameter-server job replayed in one process with the job's own arithmetic, the
reference the distributed tests compare with bit for bit.

    replay(build, trainer_feeds, steps, init) -> (final params, mean losses per step)

Each step, every trainer's gradients come from its own rows (the program's forward and
backward ops, and a clip that combines several gradients (global norm): what a trainer
runs), are merged as a pserver merges them (`sum` in trainer order, then `scale` by
1/trainers: the same ops, so a SelectedRows gradient is concatenated in the same order),
and the clipping of one gradient, the optimize and LR-schedule ops run once on the merged
values (Fluid 1.6 clips on the servers). Same ops, same operands, same order: a correct job equals it exactly, and
any difference is a lost, doubled, stale or misrouted update.

Training on the whole batch instead is the same mathematics but not the same rounding: the
mean of per-trainer means sums in another order (about 1e-10 apart for these models), and
Adam's step lr * g / (|g| + eps) turns that into up to lr * dg / eps for a weight whose
gradient cancels to about eps, 1e-6 and more: no tolerance under ~lr bounds it."""
import numpy as np

import fluidity as fluid
from fluidity.core.names import OpRole

SERVER_ROLES = OpRole.Optimize | OpRole.LRSched
CLIP_SCOPE = "gradient_clip"        # Fluid's name scope of clipping ops


def _is_clip(op):
    scope = op.attr("op_namescope") if op.has_attr("op_namescope") else ""
    return CLIP_SCOPE in str(scope or "")


def _global_clips(ops):
    """Indices of the clipping ops that combine several gradients: grown from each clip op
    through the variables clip ops share, a group that reads more than one variable from
    outside itself (a global norm). These run on the trainers."""
    clips = [i for i, op in enumerate(ops) if bool(op.role & OpRole.Optimize) and
             _is_clip(op)]
    out, seen = set(), set()
    for start in clips:
        if start in seen:
            continue
        group, names, grew = {start}, set(), True
        while grew:
            grew = False
            names = {n for i in group for n in ops[i].input_arg_names + ops[i].output_arg_names}
            for i in clips:
                if i not in group and names & set(ops[i].input_arg_names +
                                                   ops[i].output_arg_names):
                    group.add(i)
                    grew = True
        seen |= group
        written = {n for i in group for n in ops[i].output_arg_names}
        outside = {n for i in group for n in ops[i].input_arg_names if n not in written}
        if len(outside) > 1:
            out |= group
    return out


def split_programs(main, trainers):
    """(trainer program, server program, names of the merged gradients) of `main`."""
    ops = main.global_block().ops
    on_trainer = _global_clips(ops)
    server = [i for i, op in enumerate(ops)
              if bool(op.role & SERVER_ROLES) and i not in on_trainer]
    written = {n for i, op in enumerate(ops) if i not in server for n in op.output_arg_names}
    merged = sorted({n for i in server for n in ops[i].input_arg_names if n in written})
    trainer_prog, server_prog = main.clone(), main.clone()
    for i in reversed(range(len(ops))):
        (trainer_prog if i in server else server_prog).global_block()._remove_op(i)
    block = server_prog.global_block()
    for at, g in enumerate(merged):
        var = block.var(g)
        parts = [block.create_var(name=f"{g}.trainer_{k}", shape=var.shape, dtype=var.dtype,
                                  type=var.type, lod_level=var.lod_level, persistable=True)
                 for k in range(trainers)]
        block._insert_op(2 * at, type="sum", inputs={"X": parts}, outputs={"Out": [var]})
        block._insert_op(2 * at + 1, type="scale", inputs={"X": [var]}, outputs={"Out": [var]},
                         attrs={"scale": 1.0 / trainers})
    return trainer_prog, server_prog, merged


def params(prog, scope):
    return {p.name: np.array(scope.find_var(p.name).get_tensor())
            for p in prog.global_block().all_parameters()
            if scope.find_var(p.name) is not None and scope.find_var(p.name).value is not None}


def replay(build, trainer_feeds, steps, init):
    main, start, loss = build()
    trainers = len(trainer_feeds(0))
    trainer_prog, server_prog, merged = split_programs(main, trainers)
    scope, exe = fluid.Scope(), fluid.Executor(fluid.CPUPlace())
    exe.run(start, scope=scope)
    for name, value in init.items():
        scope.find_var(name).get_tensor().set(value, fluid.CPUPlace())
    losses = []
    for step in range(steps):
        feeds, grads = trainer_feeds(step), {}
        step_losses = []
        for k, feed in enumerate(feeds):
            lv, *gs = exe.run(trainer_prog, feed=feed, fetch_list=[loss.name, *merged],
                              scope=scope, return_numpy=False)
            step_losses.append(float(np.asarray(lv.numpy() if hasattr(lv, "numpy") else lv)
                                     .reshape(-1)[0]))
            grads.update({f"{g}.trainer_{k}": v for g, v in zip(merged, gs)})
        for name, value in grads.items():   # set (persistable), not fed: a feed holds no
            # SelectedRows
            scope.var(name).set_value(value)
        exe.run(server_prog, scope=scope)
        losses.append(float(np.mean(step_losses)))
    return params(main, scope), losses
