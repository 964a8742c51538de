"""A distributed training script as a Fluid user writes one: read the launcher's
environment, transpile, then run as a parameter server or as a trainer.

    python dist_mlp.py sync|async[-split] OUT_DIR STEPS [LR [sgd|momentum|adam]]

`-split`: Fluid 1.8's runtime_split_send_recv (the send op cuts each gradient into its
blocks, the recv op joins each parameter's).

A trainer saves its initial and final parameters and its losses to OUT_DIR/trainer_<id>.npz."""
import os
import sys

import numpy as np

import fluidity as fluid

BATCH = 16          # rows per trainer per step
DIN, HIDDEN = 64, 256


OPTIMIZERS = {"sgd": lambda lr: fluid.optimizer.SGD(lr),
              "momentum": lambda lr: fluid.optimizer.Momentum(lr, 0.9),
              "adam": lambda lr: fluid.optimizer.Adam(lr)}


def build(lr, opt="sgd", seed=3):
    main, start = fluid.Program(), fluid.Program()
    main.random_seed = start.random_seed = seed   # every run (every process) the same init
    with fluid.program_guard(main, start), fluid.unique_name.guard():
        x = fluid.layers.data("x", [DIN])
        y = fluid.layers.data("y", [1])
        h = fluid.layers.fc(x, HIDDEN, act="tanh")
        pred = fluid.layers.fc(h, 1)
        loss = fluid.layers.mean(fluid.layers.square_error_cost(pred, y))
        OPTIMIZERS[opt](lr).minimize(loss)
    return main, start, loss


def batch(step, trainers):
    """The step's batch of every trainer together (trainer k takes rows k*BATCH...)."""
    rng = np.random.RandomState(1000 + step)
    x = rng.uniform(-1, 1, (BATCH * trainers, DIN)).astype("float32")
    w = np.random.RandomState(7).uniform(-0.5, 0.5, (DIN, 1)).astype("float32")
    return x, np.tanh(x @ w).astype("float32")


def params(prog, scope):
    return {p.name: np.array(scope.find_var(p.name).get_tensor())
            for p in prog.global_block().all_parameters()}


def main():
    mode, out_dir, steps = sys.argv[1], sys.argv[2], int(sys.argv[3])
    lr = float(sys.argv[4]) if len(sys.argv) > 4 else 0.1
    opt = sys.argv[5] if len(sys.argv) > 5 else "sgd"
    role = os.environ["TRAINING_ROLE"]
    eps = os.environ["PADDLE_PSERVERS_IP_PORT_LIST"]
    trainers = int(os.environ["PADDLE_TRAINERS_NUM"])
    tid = int(os.environ["PADDLE_TRAINER_ID"])
    prog, start, loss = build(lr, opt)
    config = fluid.DistributeTranspilerConfig()
    if mode.endswith("-split"):
        mode = mode[:-len("-split")]
        config.sync_mode = False
        config.runtime_split_send_recv = True
    t = fluid.DistributeTranspiler(config)
    t.transpile(tid, program=prog, pservers=eps, trainers=trainers,
                sync_mode=(mode == "sync"), startup_program=start)
    exe = fluid.Executor(fluid.CPUPlace())
    if role == "PSERVER":
        ep = os.environ["POD_IP"] + ":" + os.environ["PADDLE_PORT"]
        pmain, pstart = t.get_pserver_programs(ep)
        exe.run(pstart)
        exe.run(pmain)            # serves until every trainer has said goodbye
        return
    trainer_prog = t.get_trainer_program()
    scope = fluid.global_scope()
    exe.run(start)                # initializers, then the servers' initial values
    init = params(prog, scope)
    losses = []
    for step in range(steps):
        x, y = batch(step, trainers)
        rows = slice(tid * BATCH, (tid + 1) * BATCH)
        (lv,) = exe.run(trainer_prog, feed={"x": x[rows], "y": y[rows]}, fetch_list=[loss])
        losses.append(float(lv))
    final = params(prog, scope)
    exe.close()                   # goodbye to the pservers
    np.savez(os.path.join(out_dir, f"trainer_{tid}.npz"), losses=np.array(losses),
             **{"init/" + k: v for k, v in init.items()},
             **{"final/" + k: v for k, v in final.items()})


if __name__ == "__main__":
    main()
