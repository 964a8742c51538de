"""dist_mlp.py's model and data, with what fault tests need: each trainer prints
"trainer <id> step <k>" as it finishes a step and sleeps FLUIDITY_TEST_STEP_SLEEP seconds
after it (so a test can kill a process mid-run), and trainer 0 can ask the pservers for a
checkpoint (FLUIDITY_TEST_NOTIFY_DIR, relative to the servers'
FLAGS_pserver_checkpoint_notify_root) after its last step.

    python dist_steps.py sync|async OUT_DIR STEPS [LR]

A trainer saves its initial and final parameters and its losses to OUT_DIR/trainer_<id>.npz."""
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import dist_mlp  # noqa: E402

import fluidity as fluid  # noqa: E402


def main():
    mode, out_dir, steps = sys.argv[1], sys.argv[2], int(sys.argv[3])
    lr = float(sys.argv[4]) if len(sys.argv) > 4 else 0.1
    sleep = float(os.environ.get("FLUIDITY_TEST_STEP_SLEEP", "0"))
    role = os.environ["TRAINING_ROLE"]
    eps = os.environ["PADDLE_PSERVERS_IP_PORT_LIST"]
    trainers = int(os.environ["PADDLE_TRAINERS_NUM"])
    tid = int(os.environ["PADDLE_TRAINER_ID"])
    prog, start, loss = dist_mlp.build(lr)
    t = fluid.DistributeTranspiler()
    t.transpile(tid, program=prog, pservers=eps, trainers=trainers,
                sync_mode=(mode == "sync"), startup_program=start)
    exe = fluid.Executor(fluid.CPUPlace())
    if role == "PSERVER":
        ep = os.environ["POD_IP"] + ":" + os.environ["PADDLE_PORT"]
        pmain, pstart = t.get_pserver_programs(ep)
        exe.run(pstart)
        exe.run(pmain)
        return
    trainer_prog = t.get_trainer_program()
    scope = fluid.global_scope()
    exe.run(start)
    init = dist_mlp.params(prog, scope)
    losses = []
    for step in range(steps):
        x, y = dist_mlp.batch(step, trainers)
        rows = slice(tid * dist_mlp.BATCH, (tid + 1) * dist_mlp.BATCH)
        (lv,) = exe.run(trainer_prog, feed={"x": x[rows], "y": y[rows]}, fetch_list=[loss])
        losses.append(float(lv))
        print(f"trainer {tid} step {step}", flush=True)
        time.sleep(sleep)
    final = dist_mlp.params(prog, scope)
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
