"""Data-parallel training with Fluid 1.6's collective fleet: every process is a trainer,
trains on its share of each global batch, and the gradients are summed over the trainers
by the `c_allreduce_sum` ops the fleet puts in the program, so all trainers take the step
of the whole batch and keep one model.

    fluidity launch --collective --worker_num 2 examples/collective_mlp.py [--epochs 5]
    python examples/collective_mlp.py                      # one trainer, no extra library

Several trainers need the collective library: pip install 'fluidity[collective]'. The data
is generated (seeded, the same in every trainer): points around 4 centres in 16 dimensions
with label noise. Rank 0 prints the loss of each epoch and the held-out accuracy, and saves
the inference model to --model-dir.
"""
import argparse
import os
import time

import numpy as np

import fluidity as fluid
from fluidity.incubate.fleet.base import role_maker
from fluidity.incubate.fleet.collective import DistributedStrategy, fleet

DIM, CLASSES = 16, 4


def make_data(n, seed):
    rng = np.random.default_rng(seed)
    centres = np.random.default_rng(0).normal(0, 2.0, (CLASSES, DIM))
    y = rng.integers(0, CLASSES, n)
    x = centres[y] + rng.normal(0, 1.5, (n, DIM))
    return x.astype(np.float32), y.reshape(-1, 1).astype(np.int64)


def build(lr):
    main, startup = fluid.Program(), fluid.Program()
    main.random_seed = startup.random_seed = 1
    with fluid.program_guard(main, startup):
        x = fluid.layers.data("x", [DIM])
        y = fluid.layers.data("y", [1], dtype="int64")
        h = fluid.layers.fc(x, 32, act="relu")
        prob = fluid.layers.fc(h, CLASSES, act="softmax")
        loss = fluid.layers.mean(fluid.layers.cross_entropy(prob, y))
        acc = fluid.layers.accuracy(prob, y)
        test_program = main.clone(for_test=True)
        opt = fleet.distributed_optimizer(fluid.optimizer.Adam(lr), DistributedStrategy())
        opt.minimize(loss)
    return main, startup, test_program, x, prob, loss, acc


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                 formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    ap.add_argument("--epochs", type=int, default=5, help="passes over the training data")
    ap.add_argument("--batch", type=int, default=64, help="the global batch, all trainers")
    ap.add_argument("--lr", type=float, default=0.01, help="Adam's learning rate")
    ap.add_argument("--examples", type=int, default=4096, help="generated training examples")
    ap.add_argument("--model-dir", default="", help="save the trained model there (if set)")
    a = ap.parse_args()

    if "PADDLE_TRAINER_ENDPOINTS" in os.environ:    # started by a launcher
        fleet.init(role_maker.PaddleCloudRoleMaker(is_collective=True))
    else:                                           # one trainer on its own
        fleet.init(role_maker.UserDefinedCollectiveRoleMaker(0, ["127.0.0.1:6170"]))
    rank, n = fleet.worker_index(), fleet.worker_num()
    if a.batch % n:
        raise SystemExit(f"--batch {a.batch} does not split over {n} trainers")
    share = a.batch // n
    main_prog, startup, test_prog, x, prob, loss, acc = build(a.lr)
    exe = fluid.Executor(fluid.CPUPlace())
    exe.run(fleet.startup_program)
    train_x, train_y = make_data(a.examples, seed=1)
    test_x, test_y = make_data(1024, seed=2)
    start = time.time()
    for epoch in range(a.epochs):
        losses = []
        for b in range(0, len(train_x) - a.batch + 1, a.batch):
            mine = slice(b + rank * share, b + (rank + 1) * share)
            (lv,) = exe.run(fleet.main_program, feed={"x": train_x[mine], "y": train_y[mine]},
                            fetch_list=[loss])
            losses.append(float(lv))
        fleet_print(rank, f"epoch {epoch}: loss {np.mean(losses):.4f} (trainer 0's share)")
    (accuracy,) = exe.run(test_prog, feed={"x": test_x, "y": test_y}, fetch_list=[acc])
    fleet_print(rank, f"trainers: {n}; held-out accuracy {float(accuracy):.4f}; "
                      f"{time.time() - start:.1f} s")
    if a.model_dir and fleet.is_first_worker():
        fleet.save_inference_model(exe, a.model_dir, ["x"], [prob])
        print(f"saved the inference model to {a.model_dir}")


def fleet_print(rank, text):
    if rank == 0:
        print(text, flush=True)


if __name__ == "__main__":
    main()
