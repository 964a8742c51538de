"""The CUDA target on a GPU: training steps/s and inference latency of programs compiled to
CUDA (`Executor(fluid.CUDAPlace(0))`), against this project's CPU compiled path
(`CompiledProgram(...).with_native_code()` on `CPUPlace`) and against PyTorch running the same
model on the same GPU, as ratios.

  MLP  784-256-128-10 (relu, relu, logits), softmax_with_cross_entropy + mean, SGD lr 0.01
  CNN  1x28x28: conv 3x3x16 pad 1 + relu, max pool 2, conv 3x3x32 pad 1 + relu, avg pool 2,
       fc 10; softmax_with_cross_entropy + mean, SGD lr 0.01

  training   MLP at batch 512, CNN at batch 64: steps/s of a full
             `exe.run(main, feed={x, label}, fetch_list=[loss])` (the loss copied back each
             step, as a training loop does; PyTorch's step calls loss.item() likewise)
  inference  both at batch 1 and 64: the `clone(for_test=True)` program fetching the logits
             (PyTorch: the forward under no_grad, logits copied to the host)

Medians of many runs after warm-up. It needs a GPU: without one (or under the emulation hook
FLUIDITY_CUDA_EMULATE, which is not a GPU) it says so and exits with status 2.

    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE .venv/bin/python benchmarks/cuda.py
"""
import argparse
import os
import statistics
import sys
import time

import numpy as np


def median_rate(fn, steps, warmup=10):
    """Calls per second (the median call's)."""
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(steps):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return 1.0 / statistics.median(times)


# --- Fluidity -------------------------------------------------------------------------------
def build(model):
    import fluidity as fluid
    main, startup = fluid.Program(), fluid.Program()
    main.random_seed = startup.random_seed = 1
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        if model == "mlp":
            x = fluid.layers.data("x", [784])
            h = fluid.layers.fc(x, 256, act="relu")
            h = fluid.layers.fc(h, 128, act="relu")
            logits = fluid.layers.fc(h, 10)
        else:
            x = fluid.layers.data("x", [1, 28, 28])
            h = fluid.layers.conv2d(x, num_filters=16, filter_size=3, padding=1, act="relu")
            h = fluid.layers.pool2d(h, pool_size=2, pool_stride=2, pool_type="max")
            h = fluid.layers.conv2d(h, num_filters=32, filter_size=3, padding=1, act="relu")
            h = fluid.layers.pool2d(h, pool_size=2, pool_stride=2, pool_type="avg")
            logits = fluid.layers.fc(h, 10)
        label = fluid.layers.data("label", [1], dtype="int64")
        loss = fluid.layers.mean(fluid.layers.softmax_with_cross_entropy(logits, label))
        test = main.clone(for_test=True)
        fluid.optimizer.SGD(0.01).minimize(loss)
    return main, startup, test, loss, logits


def batch(model, n, rng):
    shape = (n, 784) if model == "mlp" else (n, 1, 28, 28)
    return (rng.random(shape, dtype=np.float32),
            rng.integers(0, 10, (n, 1)).astype(np.int64))


def fluidity_rates(model, place, n, steps, infer_sizes):
    """(train steps/s at batch n, {batch: inference calls/s}) on `place` ("gpu" or "cpu")."""
    import fluidity as fluid
    main, startup, test, loss, logits = build(model)
    scope = fluid.Scope()
    if place == "gpu":
        exe = fluid.Executor(fluid.CUDAPlace(0))
        train_prog, infer_prog = main, test
    else:
        exe = fluid.Executor(fluid.CPUPlace())
        train_prog = fluid.CompiledProgram(main).with_native_code()
        infer_prog = fluid.CompiledProgram(test).with_native_code()
    exe.run(startup, scope=scope)
    rng = np.random.default_rng(0)
    x, y = batch(model, n, rng)
    train = median_rate(lambda: exe.run(train_prog, feed={"x": x, "label": y},
                                        fetch_list=[loss], scope=scope), steps)
    infer = {}
    for b in infer_sizes:
        xb, yb = batch(model, b, rng)
        infer[b] = median_rate(lambda: exe.run(infer_prog, feed={"x": xb, "label": yb},
                                               fetch_list=[logits.name], scope=scope), steps)
    return train, infer


# --- PyTorch ----------------------------------------------------------------------------------
def torch_rates(model, n, steps, infer_sizes):
    """The same model and step in PyTorch on the GPU, or None without torch/CUDA."""
    try:
        import torch
    except ImportError:
        return None
    if not torch.cuda.is_available():
        return None
    nn = torch.nn
    dev = torch.device("cuda:0")
    if model == "mlp":
        net = nn.Sequential(nn.Linear(784, 256), nn.ReLU(), nn.Linear(256, 128), nn.ReLU(),
                            nn.Linear(128, 10))
    else:
        net = nn.Sequential(nn.Conv2d(1, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                            nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(), nn.AvgPool2d(2),
                            nn.Flatten(), nn.Linear(32 * 7 * 7, 10))
    net = net.to(dev)
    opt = torch.optim.SGD(net.parameters(), lr=0.01)
    lossf = nn.CrossEntropyLoss()
    rng = np.random.default_rng(0)
    x, y = batch(model, n, rng)

    def step():      # the host batch copied in and the loss out, as the Fluidity run does
        xt, yt = torch.from_numpy(x).to(dev), torch.from_numpy(y[:, 0]).to(dev)
        opt.zero_grad()
        loss = lossf(net(xt), yt)
        loss.backward()
        opt.step()
        return loss.item()
    train = median_rate(step, steps)
    infer = {}
    for b in infer_sizes:
        xb, _ = batch(model, b, rng)

        def forward(xb=xb):
            with torch.no_grad():
                return net(torch.from_numpy(xb).to(dev)).cpu().numpy()
        infer[b] = median_rate(forward, steps)
    return train, infer


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--steps", type=int, default=200)
    args = ap.parse_args()
    import fluidity as fluid
    if os.environ.get("FLUIDITY_CUDA_EMULATE"):
        sys.exit("benchmarks/cuda.py: FLUIDITY_CUDA_EMULATE is set; the emulated device is a "
                 "test hook, not a GPU: unset it and run on a machine with an NVIDIA GPU")
    if fluid.core.get_cuda_device_count() == 0:
        print("benchmarks/cuda.py: no NVIDIA GPU here (fluid.core.get_cuda_device_count() is "
              "0): the CUDA benchmark needs one", file=sys.stderr)
        sys.exit(2)
    sizes = (1, 64)
    print(f"{'model':<5} {'what':<12} {'GPU/s':>10} {'CPU/s':>10} {'torch/s':>10} "
          f"{'GPU/CPU':>8} {'GPU/torch':>9}")
    for model, n in (("mlp", 512), ("cnn", 64)):
        g_train, g_inf = fluidity_rates(model, "gpu", n, args.steps, sizes)
        c_train, c_inf = fluidity_rates(model, "cpu", n, max(20, args.steps // 10), sizes)
        t = torch_rates(model, n, args.steps, sizes)
        rows = [(f"train bs{n}", g_train, c_train, t[0] if t else None)]
        rows += [(f"infer bs{b}", g_inf[b], c_inf[b], t[1][b] if t else None) for b in sizes]
        for what, g, c, tt in rows:
            tcol = f"{tt:10.1f}" if tt else f"{'n/a':>10}"
            ratio = f"{g / tt:9.2f}" if tt else f"{'n/a':>9}"
            print(f"{model:<5} {what:<12} {g:10.1f} {c:10.1f} {tcol} {g / c:8.2f} {ratio}")
    try:
        import torch
        print(f"GPU: {torch.cuda.get_device_name(0)}; PyTorch {torch.__version__}")
    except Exception:
        print("PyTorch with CUDA is not installed here: its columns are n/a")


if __name__ == "__main__":
    main()
