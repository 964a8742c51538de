"""Handwritten digits: an MLP and a small CNN trained with Fluidity.

Data: scikit-learn's bundled 8x8 digits (1797 images, shipped inside the package, no
download), split 75/25 with a fixed seed. Each model is trained with Adam on mini-batches and
evaluated on the held-out quarter with the `clone(for_test=True)` program (dropout and
batch_norm in inference mode, no backward or optimizer ops).

    .venv/bin/python examples/digits.py [--epochs 20] [--model mlp|cnn|both]
"""
import argparse
import os
import time

import numpy as np

import fluidity as fluid
from fluidity.executor.scalars import ScalarWriter


def load_digits(seed=0):
    from sklearn.datasets import load_digits as sk_load
    d = sk_load()
    x = (d.images / 16.0).astype("float32")            # [N, 8, 8] in [0, 1]
    y = d.target.astype("int64").reshape(-1, 1)
    idx = np.random.default_rng(seed).permutation(len(x))
    cut = int(0.75 * len(x))
    return (x[idx[:cut]], y[idx[:cut]]), (x[idx[cut:]], y[idx[cut:]])


def mlp(img):
    h = fluid.layers.fc(img, 128, act="relu")
    h = fluid.layers.dropout(h, 0.2, dropout_implementation="upscale_in_train")
    h = fluid.layers.fc(h, 64, act="relu")
    return fluid.layers.fc(h, 10)


def cnn(img):
    x = fluid.layers.reshape(img, [-1, 1, 8, 8])
    x = fluid.layers.conv2d(x, num_filters=16, filter_size=3, padding=1)
    x = fluid.layers.batch_norm(x, act="relu")
    x = fluid.layers.pool2d(x, pool_size=2, pool_stride=2, pool_type="max")   # 16x4x4
    x = fluid.layers.conv2d(x, num_filters=32, filter_size=3, padding=1, act="relu")
    x = fluid.layers.pool2d(x, pool_size=2, pool_stride=2, pool_type="avg")   # 32x2x2
    return fluid.layers.fc(x, 10)


def build(net, lr=0.01, seed=1):
    main, startup = fluid.Program(), fluid.Program()
    # the startup program seeded (the same initial parameters every run); the main program
    # not: Fluid 1.8 gives a seeded program's dropout ops its seed, one fixed mask for every
    # step, which regularizes nothing
    startup.random_seed = seed
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        img = fluid.layers.data("img", [8, 8])
        label = fluid.layers.data("label", [1], dtype="int64")
        logits = net(img)
        loss = fluid.layers.mean(fluid.layers.softmax_with_cross_entropy(logits, label))
        acc = fluid.layers.accuracy(fluid.layers.softmax(logits), label)
        test = main.clone(for_test=True)
        fluid.optimizer.Adam(learning_rate=lr).minimize(loss)
    return main, startup, test, loss, acc


def evaluate(exe, test, acc, x, y, scope):
    (a,) = exe.run(test, feed={"img": x, "label": y}, fetch_list=[acc], scope=scope)
    return float(np.asarray(a).reshape(-1)[0])


def train(name, net, epochs=20, batch=32, seed=0, verbose=True, tensorboard=""):
    (xtr, ytr), (xte, yte) = load_digits(seed)
    main, startup, test, loss, acc = build(net)
    exe, scope = fluid.Executor(fluid.CPUPlace()), fluid.Scope()
    exe.run(startup, scope=scope)
    rng = np.random.default_rng(seed)
    writer = ScalarWriter(os.path.join(tensorboard, name)) if tensorboard else None
    t0 = time.perf_counter()
    steps = 0
    for epoch in range(epochs):
        order = rng.permutation(len(xtr))
        losses = []
        for i in range(0, len(order), batch):
            b = order[i:i + batch]
            (l,) = exe.run(main, feed={"img": xtr[b], "label": ytr[b]}, fetch_list=[loss],
                           scope=scope)
            losses.append(float(np.asarray(l).reshape(-1)[0]))
            steps += 1
            if writer:
                writer.add_scalar("loss", losses[-1], steps)
        if verbose and (epoch % 5 == 4 or epoch == epochs - 1):
            print(f"[{name}] epoch {epoch + 1:3d}  train loss {np.mean(losses):.4f}  "
                  f"held-out accuracy {evaluate(exe, test, acc, xte, yte, scope):.4f}")
    elapsed = time.perf_counter() - t0
    final = evaluate(exe, test, acc, xte, yte, scope)
    if writer:
        writer.add_scalar("held_out_accuracy", final, steps)
        writer.close()
    if verbose:
        print(f"[{name}] {steps} steps in {elapsed:.1f}s ({steps / elapsed:.0f} steps/s); "
              f"held-out accuracy {final:.4f} on {len(xte)} images")
    return final


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                 formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    ap.add_argument("--epochs", type=int, default=20, help="passes over the training images")
    ap.add_argument("--model", choices=["mlp", "cnn", "both"], default="both",
                    help="which network to train")
    ap.add_argument("--tensorboard", default="", metavar="DIR",
                    help="write TensorBoard scalars (loss) to DIR (pip install 'fluidity[tensorboard]')")
    a = ap.parse_args()
    if a.model in ("mlp", "both"):
        train("mlp", mlp, a.epochs, tensorboard=a.tensorboard)
    if a.model in ("cnn", "both"):
        train("cnn", cnn, a.epochs, tensorboard=a.tensorboard)


if __name__ == "__main__":
    main()
