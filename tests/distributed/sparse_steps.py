"""A job with a sparse embedding for the pserver restart tests: a distributed lookup table
(`embedding(is_distributed=True)`, sharded by id over the pservers as SparseTables) or an
`is_sparse` table (sliced like a dense parameter, SelectedRows gradients), then fc layers.
Each trainer prints "trainer <id> step <k>" after a step and sleeps
FLUIDITY_TEST_STEP_SLEEP seconds; trainer 0 asks the pservers for a checkpoint into
FLUIDITY_TEST_NOTIFY_DIR (relative to the servers' FLAGS_pserver_checkpoint_notify_root)
after its last step (the final shards, for the test to read).

    python sparse_steps.py distributed|is_sparse OUT_DIR STEPS

A trainer saves its initial and final dense parameters and its losses to
OUT_DIR/trainer_<id>.npz (an is_sparse table is a dense parameter on the trainer: saved too)."""
import os
import sys
import time

import numpy as np

import fluidity as fluid

VOCAB, WIDTH, BATCH, LR = 4000, 8, 16, 0.5
INIT = {"type": "uniform_random", "min": -0.1, "max": 0.1, "seed": 5}


def build(kind, table_lr=1.0):
    """(main, startup, loss); kind "distributed", "is_sparse" or "local" (the one-process
    model of either: with table_lr=2 for a distributed table, whose gradient the servers
    sum over the two trainers as Fluid does, where the dense ones are averaged)."""
    main, start = fluid.Program(), fluid.Program()
    main.random_seed = start.random_seed = 9
    with fluid.program_guard(main, start), fluid.unique_name.guard():
        ids = fluid.layers.data("ids", [1], dtype="int64", lod_level=1)
        y = fluid.layers.data("y", [1])
        emb = fluid.layers.embedding(
            ids, [VOCAB, WIDTH], is_sparse=(kind != "local"),
            is_distributed=(kind == "distributed"),
            param_attr=fluid.ParamAttr(
                name="table", initializer=fluid.initializer.Uniform(-0.1, 0.1, seed=5),
                learning_rate=table_lr))
        h = fluid.layers.fc(emb, 8, act="tanh")
        pred = fluid.layers.fc(h, 1)
        loss = fluid.layers.mean(fluid.layers.square_error_cost(pred, y))
        fluid.optimizer.SGD(LR).minimize(loss)
    return main, start, loss


def ids_of(step, tid):
    rng = np.random.RandomState(10 * step + tid)
    hot = rng.randint(0, 30, BATCH)
    cold = rng.randint(0, VOCAB, BATCH)
    return np.where(rng.rand(BATCH) < 0.6, hot, cold).astype("int64")


def feed(ids):
    y = np.cos(ids * 0.05).astype("float32").reshape(-1, 1)
    return {"ids": fluid.create_lod_tensor(ids.reshape(-1, 1), [[1] * len(ids)],
                                           fluid.CPUPlace()), "y": y}


def params(prog, scope):
    out = {}
    for p in prog.global_block().all_parameters():
        var = scope.find_var(p.name)
        if var is not None and var.value is not None and \
                np.asarray(var.get_tensor()).strides != (0, 0):      # not fake_init's stand-in
            out[p.name] = np.array(var.get_tensor())
    return out


def main():
    kind, out_dir, steps = sys.argv[1], sys.argv[2], int(sys.argv[3])
    sleep = float(os.environ.get("FLUIDITY_TEST_STEP_SLEEP", "0"))
    eps = os.environ["PADDLE_PSERVERS_IP_PORT_LIST"]
    trainers = int(os.environ["PADDLE_TRAINERS_NUM"])
    tid = int(os.environ["PADDLE_TRAINER_ID"])
    prog, start, loss = build(kind)
    t = fluid.DistributeTranspiler()
    t.transpile(tid, program=prog, pservers=eps, trainers=trainers, sync_mode=True,
                startup_program=start)
    exe = fluid.Executor(fluid.CPUPlace())
    if os.environ["TRAINING_ROLE"] == "PSERVER":
        pmain, pstart = t.get_pserver_programs(os.environ["POD_IP"] + ":" +
                                               os.environ["PADDLE_PORT"])
        exe.run(pstart)
        exe.run(pmain)
        return
    trainer_prog = t.get_trainer_program()
    scope = fluid.global_scope()
    exe.run(start)
    init = params(prog, scope)
    losses = []
    for step in range(steps):
        (lv,) = exe.run(trainer_prog, feed=feed(ids_of(step, tid)), fetch_list=[loss])
        losses.append(float(np.asarray(lv).reshape(-1)[0]))
        print(f"trainer {tid} step {step}", flush=True)
        time.sleep(sleep)
    final = params(prog, scope)
    notify = os.environ.get("FLUIDITY_TEST_NOTIFY_DIR")
    if notify and tid == 0:
        block = fluid.default_main_program().global_block()
        block.append_op(type="checkpoint_notify", attrs={"epmap": eps.split(","),
                                                        "dir": notify})
        exe.run(fluid.default_main_program())
    exe.close()
    np.savez(os.path.join(out_dir, f"trainer_{tid}.npz"), losses=np.array(losses),
             **{"init/" + k: v for k, v in init.items()},
             **{"final/" + k: v for k, v in final.items()})


if __name__ == "__main__":
    main()
