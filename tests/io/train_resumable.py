"""A training script that resumes from its last checkpoint, as a Fluid user writes one;
tests/io/test_io_checkpoint.py runs it in a subprocess, kills it mid-run and runs it again.

    python train_resumable.py executor|async CHECKPOINT_DIR OUT.npz [DATA_DIR]

executor: 6 epochs of Adam (decayed learning rate) over data drawn per epoch, a checkpoint
(trainer_args epoch_id) after each. async: AsyncExecutor.run over a list of MultiSlot files,
one file per run, a checkpoint (trainer_args file_pos) after each. Prints one line per
checkpoint; FLUIDITY_TEST_EPOCH_SLEEP seconds of sleep after each widens the window in
which a kill lands mid-run. The final persistables go to OUT.npz.
"""
import os
import sys
import time

import numpy as np

import fluidity as fluid

EPOCHS = 6


def executor_model():
    main, startup = fluid.Program(), fluid.Program()
    main.random_seed = startup.random_seed = 7
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        x = fluid.layers.data("x", [4])
        label = fluid.layers.data("label", [1])
        h = fluid.layers.fc(x, 8, act="tanh")
        y = fluid.layers.fc(h, 1)
        loss = fluid.layers.mean(fluid.layers.square_error_cost(y, label))
        lr = fluid.layers.exponential_decay(0.05, decay_steps=4, decay_rate=0.8)
        fluid.optimizer.Adam(lr).minimize(loss)
    return main, startup


def async_model(model):
    main, startup = fluid.Program(), fluid.Program()
    main.random_seed = startup.random_seed = 7
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        dense = fluid.layers.data(model["dense_slot"], [len(model["dense_weights"])])
        ids = [fluid.layers.data(s, [1], dtype="int64", lod_level=1)
               for s in model["sparse_slots"]]
        label = fluid.layers.data(model["label_slot"], [1], dtype="int64")
        emb = [fluid.layers.sequence_pool(fluid.layers.embedding(
            i, [model["vocab"], 2], param_attr=fluid.ParamAttr(name="emb")), "sum")
            for i in ids]
        logit = fluid.layers.fc(fluid.layers.concat(emb + [dense], axis=1), 1)
        loss = fluid.layers.mean(fluid.layers.sigmoid_cross_entropy_with_logits(
            logit, fluid.layers.cast(label, "float32")))
        fluid.optimizer.Adam(0.01).minimize(loss)
    return main, startup


def pause():
    time.sleep(float(os.environ.get("FLUIDITY_TEST_EPOCH_SLEEP", "0")))


def train_executor(exe, ckpt):
    main, startup = executor_model()
    exe.run(startup)
    start = 0
    if fluid.io.get_latest_checkpoint_serial(ckpt) >= 0:
        start = fluid.io.load_checkpoint(exe, ckpt, main_program=main)["epoch_id"] + 1
        print("resumed at epoch", start, flush=True)
    for epoch in range(start, EPOCHS):
        rng = np.random.default_rng(epoch)
        for _ in range(4):
            x = rng.normal(size=(16, 4)).astype("float32")
            y = (x.sum(1, keepdims=True) * 0.5).astype("float32")
            exe.run(main, feed={"x": x, "label": y})
        fluid.io.save_checkpoint(exe, ckpt, trainer_args={"epoch_id": epoch},
                                 main_program=main, max_num_checkpoints=2)
        print("checkpoint epoch", epoch, flush=True)
        pause()
    return main


def train_async(exe, ckpt, data_dir):
    import json
    model = json.load(open(os.path.join(data_dir, "model.json")))
    files = sorted(os.path.join(data_dir, f) for f in os.listdir(data_dir)
                   if f.startswith("train-"))
    desc = fluid.DataFeedDesc(os.path.join(data_dir, "data_feed.prototxt"))
    desc.set_batch_size(16)
    main, startup = async_model(model)
    exe.run(startup)
    pos = 0
    if fluid.io.get_latest_checkpoint_serial(ckpt) >= 0:
        pos = fluid.io.load_checkpoint(exe, ckpt, main_program=main)["file_pos"]
        print("resumed at file", pos, flush=True)
    ae = fluid.AsyncExecutor(fluid.CPUPlace())
    while pos < len(files):
        ae.run(main, desc, files[pos:pos + 1], thread_num=1, workers="processes",
               progress=False)
        pos += 1
        fluid.io.save_checkpoint(exe, ckpt, trainer_args={"file_pos": pos},
                                 main_program=main, max_num_checkpoints=2)
        print("checkpoint file", pos, flush=True)
        pause()
    return main


def main():
    mode, ckpt, out = sys.argv[1:4]
    exe = fluid.Executor(fluid.CPUPlace())
    prog = train_executor(exe, ckpt) if mode == "executor" else \
        train_async(exe, ckpt, sys.argv[4])
    np.savez(out, **{v.name: np.array(fluid.global_scope().find_var(v.name).get_tensor())
                     for v in prog.list_vars() if fluid.io.is_persistable(v)})
    print("done", flush=True)


if __name__ == "__main__":
    main()
