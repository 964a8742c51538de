"""Compiled programs (`CompiledProgram(...).with_native_code()`) vs the interpreter, a numpy
floor, PaddlePaddle's inference predictor and single-core sgemm. Five workloads, each run in
its own process (`--mode` runs one), and a per-layer view of the conv models:

  train-mlp  MLP 784-256-128-10 (relu, relu, logits), softmax_with_cross_entropy + mean, SGD
             lr 0.01 (benchmarks/train_mlp.py's workload and numpy floor), batch 1 and 64:
             median time of a full `exe.run(program, feed={x, label}, fetch_list=[loss])`,
             compiled vs interpreted vs PyTorch eager (the same net and SGD, one thread,
             when torch imports) vs the same step as one plain numpy function, in
             alternating rounds; and the compiled segment call timed alone, so that the
             per-run cost of exe.run outside the native call is printed ("outside": each
             run's time minus its own native call, the median over the runs).
  infer      the Paddle-saved inference models of tests/fixtures/paddle_zoo (mlp, cnn,
             ctr_dnn, lstm, gru) at batch 1 and 64 (the fixture's input rows drawn with
             replacement): median `exe.run` latency compiled vs interpreted, and vs Paddle's
             `paddle.inference` predictor on the same .pdmodel/.pdiparams (IR optimization on;
             with and without oneDNN, the faster taken) when `--paddle-python` exists
             (default .venv-paddle/bin/python: `pip install paddlepaddle==3.3.1`). One thread
             everywhere (OPENBLAS_NUM_THREADS=1, Paddle's default of 1 math thread).
  ctr-train  the CTR-DNN training step of examples/ctr_dnn.py as benchmarks/async_ctr.py trains
             it (26 sparse slots of 1-3 ids each over a 100,000 x 10 table, 13 dense
             features, fc 400-400-400-2, SGD, no AUC) at batch 128, one thread: compiled vs
             interpreted steps/s, and GFLOP/s of its 12 matmuls (4 forward, 8 backward)
             against the same 12 sgemm calls timed alone (numpy, one thread).
  conv       inference CNNs (3x3 conv + bias -> batch_norm over running statistics -> relu
             blocks): an MNIST-style CNN (1x28x28, conv 16, pool, conv 32, pool, fc 10) at
             batch 1, 64, 256, a ResNet-style 3x3 stack (64 channels at 56x56 twice, a
             stride-2 conv to 128 at 28x28, 128 at 28x28) at batch 1 and 8, and a
             MobileNet-style depthwise-separable stack (MobileNet v1's first 13 layers at
             3x224x224, to 512 channels at 14x14, pooled, fc 10) at batch 1 and 32: compiled vs
             interpreter vs PyTorch eager (one thread, when torch imports) vs Paddle's
             predictor on the same saved program (in a long-lived process of its own that
             times one round per request, when --paddle-python exists) and one sgemm per
             non-depthwise conv of its im2col gemm's shape, all of them taking turns round by
             round (thread CPU time, medians of the rounds).
  conv-layers (not in the default run) each conv layer of a conv model (conv -> batch_norm
             -> relu, over the input it gets in the whole model) as a model of its own:
             compiled vs Paddle's predictor taking turns round by round, thread CPU
             time. Paddle's one-layer models pay oneDNN's layout reorders every run, so its
             column overstates the layer's share of Paddle's whole model (ONEDNN_VERBOSE=1
             shows those).
  conv-per-sample (not in the default run) each conv layer as conv-layers builds it, at
             batch 1 and at the model's largest inference batch, the time a sample, the two
             alternating in one process: whether batching makes a layer cheaper or dearer
             a sample.
  conv-train the same three models as training steps (batch statistics, softmax
             cross-entropy, SGD 0.01): compiled vs interpreter vs PyTorch eager (the same net,
             torch.optim.SGD, one thread) at MNIST batch 1 and 64, ResNet and MobileNet batch
             1 and 8.

    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE .venv/bin/python benchmarks/compiled.py
    PYTHONPATH=. <a python with torch> benchmarks/compiled.py --mode conv [--models mnist-cnn]
        [--batches 256]
    PYTHONPATH=. <a python with torch> benchmarks/compiled.py --mode conv-layers
        --models mobilenet-dw --batches 1 --paddle-python <venv with paddle>/bin/python
    PYTHONPATH=. .venv/bin/python benchmarks/compiled.py --mode conv-per-sample
        --models mobilenet-dw
    PYTHONPATH=. <a python with torch> benchmarks/compiled.py --mode conv-train
    PYTHONPATH=. <a python with torch> benchmarks/compiled.py --mode train-mlp
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
ZOO = os.path.join(ROOT, "tests", "fixtures", "paddle_zoo")
INFER_MODELS = ("mlp", "cnn", "ctr_dnn", "lstm", "gru")


def median_time(fn, steps, warmup=20):
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(steps):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


# --- train-mlp ---------------------------------------------------------------------------
TRAIN_BATCHES = (1, 64)


class NativeClock:
    """Times the native segment call of each run: direct_call.c times every segment call it
    makes (a prepared run's whole-run C path, or its packing helper) with the GIL released
    and `direct.last_native_seconds()` reads this thread's last one, so a run's cost outside
    the native call is the run's time minus this. Without direct_call.c (no Python
    headers), the segment calls made from Python are timed by a wrapper instead."""

    def __init__(self):
        from fluidity.executor import direct
        from fluidity.executor.native import SegmentStep
        self.times, self.on = [], False
        self.direct = direct
        self.step_cls, self.step_call = SegmentStep, SegmentStep.call
        self.c_timed = direct.call_helper() is not None
        if not self.c_timed:
            clock, perf = self, time.perf_counter

            def call(*args):
                if not clock.on:
                    return self.step_call(*args)
                t = perf()
                rc = self.step_call(*args)
                clock.times.append(perf() - t)
                return rc
            SegmentStep.call = call

    def close(self):
        self.step_cls.call = self.step_call

    def timed(self, fn, steps):
        """(the median native call, the median of each run's time minus its own native
        calls) over `steps` calls of `fn` (one run each)."""
        self.times.clear()
        self.on = True
        native, outside, perf = [], [], time.perf_counter
        try:
            for _ in range(steps):
                before = len(self.times)
                t = perf()
                fn()
                t = perf() - t
                if self.c_timed:
                    self.times.append(self.direct.last_native_seconds())
                inside = sum(self.times[before:])
                native.append(inside)
                outside.append(t - inside)
        finally:
            self.on = False
        return statistics.median(native), statistics.median(outside)


def torch_mlp_step(batches):
    """The same MLP and SGD step in PyTorch eager (one thread), or None without torch."""
    try:
        import torch
    except ImportError:
        return None
    from train_mlp import LR, SIZES
    torch.set_num_threads(1)
    torch.manual_seed(1)
    layers = []
    for a, b in zip(SIZES, SIZES[1:]):
        layers += [torch.nn.Linear(a, b), torch.nn.ReLU()]
    net = torch.nn.Sequential(*layers[:-1])
    opt = torch.optim.SGD(net.parameters(), lr=LR)
    data = [(torch.from_numpy(x), torch.from_numpy(y[:, 0])) for x, y in batches]
    it = iter(range(1 << 62))

    def step():
        x, y = data[next(it) % len(data)]
        opt.zero_grad(set_to_none=True)
        loss = torch.nn.functional.cross_entropy(net(x), y)
        loss.backward()
        opt.step()
        return loss.detach().numpy()       # fetched as Fluidity's exe.run returns it
    return step


def train_mlp(steps, rounds=5):
    """Medians over `rounds` alternating rounds (interpreter, compiled, compiled with the
    native call timed, torch) of each round's median step time."""
    import fluidity as fluid
    sys.path.insert(0, HERE)
    from train_mlp import bench_numpy, build, data
    print(f"train-mlp: MLP 784-256-128-10 SGD step, full exe.run calls; median of {rounds} "
          f"alternating rounds' medians; native = the compiled segment call alone, outside ="
          f" a run's time minus its own native call, the median over the runs (the per-run"
          f" cost of exe.run around the native call)")
    print(f"{'batch':>5} {'compiled':>10} {'native':>9} {'outside':>9} {'interp':>10} "
          f"{'torch':>10} {'numpy':>9} {'vs interp':>10} {'vs torch':>9}")
    for batch in TRAIN_BATCHES:
        n = max(30, steps // max(1, batch // 32))
        batches = data(batch)
        runs, clock = {}, NativeClock()
        for kind in ("interpreter", "compiled"):
            main, startup, loss = build()
            exe, scope = fluid.Executor(fluid.CPUPlace()), fluid.Scope()
            exe.run(startup, scope=scope)
            prog = main if kind == "interpreter" else fluid.CompiledProgram(main) \
                .with_native_code(feed=["x", "label"], fetch_list=[loss])
            it = iter(range(1 << 62))

            def step(exe=exe, prog=prog, loss=loss, scope=scope, it=it):
                x, y = batches[next(it) % len(batches)]
                exe.run(prog, feed={"x": x, "label": y}, fetch_list=[loss], scope=scope)
            runs[kind] = step
        runs["torch"] = torch_mlp_step(batches)
        t = {k: [] for k in ("interpreter", "compiled", "native", "outside", "torch", "numpy")}
        for _ in range(rounds):
            t["interpreter"].append(median_time(runs["interpreter"], n))
            t["compiled"].append(median_time(runs["compiled"], n))
            native, outside = clock.timed(runs["compiled"], n)
            t["native"].append(native)
            t["outside"].append(outside)
            if runs["torch"] is not None:
                t["torch"].append(median_time(runs["torch"], n))
            t["numpy"].append(bench_numpy(batches, n))
        clock.close()
        m = {k: statistics.median(v) if v else None for k, v in t.items()}
        tt = m["torch"]
        vs_torch = f"{tt / m['compiled']:.2f}x" if tt else "n/a"
        print(f"{batch:>5} {m['compiled'] * 1e6:>8.1f}us {m['native'] * 1e6:>7.1f}us "
              f"{m['outside'] * 1e6:>7.1f}us "
              f"{m['interpreter'] * 1e6:>8.1f}us "
              f"{(f'{tt * 1e6:.1f}us') if tt else 'n/a':>10} {m['numpy'] * 1e6:>7.1f}us "
              f"{m['interpreter'] / m['compiled']:>9.2f}x {vs_torch:>9}")
        sys.stdout.flush()
    print(f"(vs X: X's time / compiled time; native: the median segment call; load average "
          f"{os.getloadavg()[0]:.2f}; one thread: OPENBLAS_NUM_THREADS=1, torch "
          f"set_num_threads(1))")


# --- infer -------------------------------------------------------------------------------
def zoo_feed(name, batch, seed=0):
    """{feed name: array} of `batch` rows drawn (with replacement) from the fixture's input:
    ids stay in the model's vocabulary."""
    import numpy as np
    data = np.load(os.path.join(ZOO, name, "input.npz"))
    rng = np.random.default_rng(seed)
    keys = [k for k in data.files if not k.endswith("@lod")]
    if any(k + "@lod" in data.files for k in keys):
        raise SystemExit(f"{name}: LoD inputs are not sampled by this benchmark")
    rows = rng.integers(0, data[keys[0]].shape[0], batch)
    return {k: np.ascontiguousarray(data[k][rows]) for k in keys}


def infer_fluidity(name, batch, steps):
    import fluidity as fluid
    from fluidity import io as fio
    feed = zoo_feed(name, batch)
    exe = fluid.Executor(fluid.CPUPlace())
    out = {}
    with fluid.scope_guard(fluid.Scope()):
        prog, feeds, fetches = fio.load_inference_model(os.path.join(ZOO, name, "model"), exe)
        compiled = fluid.CompiledProgram(prog).with_native_code()
        for kind, p in (("interpreter", prog), ("compiled", compiled)):
            out[kind] = median_time(lambda: exe.run(p, feed=feed, fetch_list=fetches), steps)
    return out


# Paddle's predictor over d["model"] (.pdmodel/.pdiparams), IR optimization on, one math
# thread, its native kernels and then oneDNN's: the start of both scripts below.
PADDLE_PREDICTORS = r"""
import json, os, statistics, sys, time
import numpy as np
import paddle.inference as pi
d = json.loads(sys.argv[1])


def predictors():
    for onednn in (False, True):
        cfg = pi.Config(d["model"] + ".pdmodel", d["model"] + ".pdiparams")
        cfg.disable_gpu()
        cfg.switch_ir_optim(True)
        cfg.set_cpu_math_library_num_threads(1)
        cfg.disable_glog_info()
        if onednn:
            cfg.enable_mkldnn()
        else:
            cfg.disable_mkldnn()
        yield onednn, pi.create_predictor(cfg)
"""

PADDLE_INFER = PADDLE_PREDICTORS + r"""
feed = dict(np.load(d["feed"]))
best = None
for onednn, p in predictors():
    ins = [(p.get_input_handle(n), feed[n]) for n in p.get_input_names()]
    outs = [p.get_output_handle(n) for n in p.get_output_names()]
    def run():
        for h, v in ins:
            h.copy_from_cpu(v)
        p.run()
        return [o.copy_to_cpu() for o in outs]
    for _ in range(20):
        run()
    ts = []
    for _ in range(d["steps"]):
        t = time.perf_counter(); run(); ts.append(time.perf_counter() - t)
    m = statistics.median(ts)
    if best is None or m < best[0]:
        best = (m, "oneDNN" if onednn else "native CPU")
import paddle
print(json.dumps({"time": best[0], "kernels": best[1], "version": paddle.__version__}))
"""


def infer_paddle(python, name, batch, steps, tmp):
    import numpy as np
    if not python or not os.path.exists(python):
        return None, "no paddle python"
    path = os.path.join(tmp, f"{name}-{batch}.npz")
    np.savez(path, **zoo_feed(name, batch))
    arg = json.dumps({"model": os.path.join(ZOO, name, "model"), "feed": path, "steps": steps})
    r = subprocess.run([python, "-c", PADDLE_INFER, arg], capture_output=True, text=True,
                       env={**os.environ, "GLOG_minloglevel": "3", "OMP_NUM_THREADS": "1"})
    if r.returncode != 0:
        return None, (r.stderr.strip().splitlines() or ["failed"])[-1]
    res = json.loads(r.stdout.strip().splitlines()[-1])
    return res["time"], f"paddle {res['version']} ({res['kernels']})"


def infer(steps, paddle_python):
    import tempfile
    print("infer: median exe.run latency (one thread); paddle: paddle.inference predictor, "
          "copy in + run + copy out")
    print(f"{'model':>8} {'batch':>5} {'compiled':>10} {'interp':>10} {'paddle':>10} "
          f"{'vs interp':>10} {'vs paddle':>10}  paddle kernels")
    with tempfile.TemporaryDirectory() as tmp:
        for name in INFER_MODELS:
            for batch in (1, 64):
                t = infer_fluidity(name, batch, steps)
                tp, info = infer_paddle(paddle_python, name, batch, steps, tmp)
                vs_p = f"{tp / t['compiled']:.2f}x" if tp else "n/a"
                print(f"{name:>8} {batch:>5} {t['compiled'] * 1e6:>8.0f}us "
                      f"{t['interpreter'] * 1e6:>8.0f}us "
                      f"{(f'{tp * 1e6:.0f}us') if tp else 'n/a':>10} "
                      f"{t['interpreter'] / t['compiled']:>9.2f}x {vs_p:>10}  {info}")
                sys.stdout.flush()
    print("(vs X: X's time / compiled time; above 1 means compiled is faster)")


# --- ctr-train ---------------------------------------------------------------------------
SLOTS, DENSE, VOCAB, EMB, HIDDEN, BATCH = 26, 13, 100_000, 10, (400, 400, 400), 128


def ctr_batches(n, seed=0):
    import numpy as np
    from fluidity.core.tensor import LoDTensor
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n):
        feed = {"dense_input": rng.random((BATCH, DENSE), dtype=np.float32),
                "click": rng.integers(0, 2, (BATCH, 1)).astype(np.int64)}
        for s in range(SLOTS):
            lens = rng.integers(1, 4, BATCH)
            ids = rng.integers(0, VOCAB, (int(lens.sum()), 1)).astype(np.int64)
            t = LoDTensor(ids)
            t.set_recursive_sequence_lengths([lens.tolist()])
            feed[f"slot_{s}"] = t
        out.append(feed)
    return out


def ctr_gemm_shapes():
    """(m, k, n) of the step's 12 matmuls: per fc layer X[B,k] W[k,n] forward, dW = X^T dY
    and dX = dY W^T backward (dX of the first layer feeds the embeddings' gradient)."""
    widths = [SLOTS * EMB + DENSE, *HIDDEN, 2]
    shapes = []
    for k, n in zip(widths, widths[1:]):
        shapes += [(BATCH, k, n), (k, BATCH, n), (BATCH, n, k)]
    return shapes


def sgemm_floor(steps):
    """Median time of the step's 12 float32 matmuls alone (numpy's BLAS, one thread)."""
    import numpy as np
    rng = np.random.default_rng(0)
    ops = [(rng.random((m, k), dtype=np.float32), rng.random((k, n), dtype=np.float32),
            np.empty((m, n), np.float32)) for m, k, n in ctr_gemm_shapes()]

    def run():
        for a, b, c in ops:
            np.matmul(a, b, out=c)
    return median_time(run, steps)


def ctr_train(steps):
    import fluidity as fluid
    sys.path.insert(0, os.path.join(ROOT, "examples"))
    from ctr_dnn import build_ctr_dnn
    slots = [f"slot_{s}" for s in range(SLOTS)]
    batches = ctr_batches(8)
    flops = sum(2 * m * k * n for m, k, n in ctr_gemm_shapes())
    print(f"ctr-train: CTR-DNN batch {BATCH}, {SLOTS} slots, table {VOCAB}x{EMB}, fc "
          f"{'-'.join(map(str, HIDDEN))}-2, SGD; {flops / 1e6:.1f} MFLOP of matmul a step; "
          f"one thread")
    t = {}
    for kind in ("interpreter", "compiled"):
        main, startup, _, v = build_ctr_dnn(slots, dense_dim=DENSE, vocab=VOCAB, emb_dim=EMB,
                                            hidden=HIDDEN, optimizer="sgd", with_auc=False)
        exe, scope = fluid.Executor(fluid.CPUPlace()), fluid.Scope()
        exe.run(startup, scope=scope)
        loss = v["loss"]
        prog = main
        if kind == "compiled":
            prog = fluid.CompiledProgram(main).with_native_code(fetch_list=[loss])
        it = iter(range(1 << 62))
        t[kind] = median_time(lambda: exe.run(prog, feed=batches[next(it) % 8],
                                              fetch_list=[loss], scope=scope), steps)
    t["sgemm"] = sgemm_floor(steps)
    for kind in ("compiled", "interpreter"):
        print(f"  {kind:>11}: {1 / t[kind]:>7.1f} steps/s  {t[kind] * 1e3:6.2f} ms  "
              f"{flops / t[kind] / 1e9:6.1f} GFLOP/s  {t['sgemm'] / t[kind]:5.1%} of sgemm")
    print(f"  {'sgemm':>11}: the 12 matmuls alone {t['sgemm'] * 1e3:.2f} ms, "
          f"{flops / t['sgemm'] / 1e9:.1f} GFLOP/s")
    print(f"  compiled vs interpreter: {t['interpreter'] / t['compiled']:.2f}x steps/s")


# --- conv --------------------------------------------------------------------------------
# (name, input [C, H, W], layers, inference batches, training batches): ("conv", out
# channels, stride) is a 3x3 conv (padding 1, bias) -> batch_norm -> relu; ("dw", stride) a
# depthwise 3x3 conv (groups = channels) -> batch_norm -> relu; ("pw", out channels) a 1x1
# conv -> batch_norm -> relu; ("pool",) a 2x2 max pool; ("gap",) a global average pool;
# ("fc", n) a softmax fc.
CONV_MODELS = {
    "mnist-cnn": ((1, 28, 28), [("conv", 16, 1), ("pool",), ("conv", 32, 1), ("pool",),
                                ("fc", 10)], (1, 64, 256), (1, 64)),
    "resnet-3x3": ((64, 56, 56), [("conv", 64, 1), ("conv", 64, 1), ("conv", 128, 2),
                                  ("conv", 128, 1)], (1, 8), (1, 8)),
    # MobileNet v1's first 13 layers (to 512 channels at 14x14), pooled, a 10-way fc
    "mobilenet-dw": ((3, 224, 224), [("conv", 32, 2), ("dw", 1), ("pw", 64), ("dw", 2),
                                     ("pw", 128), ("dw", 1), ("pw", 128), ("dw", 2),
                                     ("pw", 256), ("dw", 1), ("pw", 256), ("dw", 2),
                                     ("pw", 512), ("gap",), ("fc", 10)], (1, 32), (1, 8)),
}


def conv_layers(spec):
    """[(kind, {shape facts})] of a CONV_MODELS entry: each conv's (M, C, k, oh, ow), the
    gemm it is ([M, C*k*k] @ [C*k*k, N*oh*ow]; a depthwise conv is C gemms of [1, 9])."""
    (c, h, w), layers = spec[0], spec[1]
    out = []
    for layer in layers:
        kind = layer[0]
        if kind in ("conv", "dw", "pw"):
            m = {"conv": lambda: layer[1], "dw": lambda: c, "pw": lambda: layer[1]}[kind]()
            s = {"conv": lambda: layer[2], "dw": lambda: layer[1], "pw": lambda: 1}[kind]()
            k = 1 if kind == "pw" else 3
            oh, ow = (h - 1) // s + 1, (w - 1) // s + 1
            out.append((kind, {"m": m, "c": c, "k": k, "oh": oh, "ow": ow, "stride": s}))
            c, h, w = m, oh, ow
        elif kind == "pool":
            out.append(("pool", {}))
            h, w = h // 2, w // 2
        elif kind == "gap":
            out.append(("gap", {}))
            h = w = 1
        else:
            out.append(("fc", {"k": c * h * w, "n": layer[1]}))
    return out


def conv_flops(spec, batch):
    """Multiply-adds x 2 of the model's convs and fc at `batch` (pools, BN: not counted)."""
    total = 0
    for kind, f in conv_layers(spec):
        if kind == "dw":
            total += 2 * batch * f["m"] * 9 * f["oh"] * f["ow"]
        elif kind in ("conv", "pw"):
            total += 2 * batch * f["m"] * f["c"] * f["k"] ** 2 * f["oh"] * f["ow"]
        elif kind == "fc":
            total += 2 * batch * f["k"] * f["n"]
    return total


def train_layers(spec):
    """The layers of a CONV_MODELS entry as trained: a model that ends without an fc (the
    ResNet stack) gets a classifier head, a global average pool and a 10-way fc."""
    layers = list(spec[1])
    return layers if layers[-1][0] == "fc" else layers + [("gap",), ("fc", 10)]


def build_conv_model(spec, training=False):
    """The model as a Fluid program: inference (batch_norm over running statistics) or a
    training step (batch statistics; softmax cross-entropy on a fed label, mean, SGD 0.01)."""
    import fluidity as fluid
    (c, h, w), layers = spec[0], (train_layers(spec) if training else spec[1])
    main, startup = fluid.Program(), fluid.Program()
    startup.random_seed = 1
    with fluid.program_guard(main, startup):
        x = fluid.data("img", [None, c, h, w], "float32")
        for layer in layers:
            kind = layer[0]
            if kind in ("conv", "dw", "pw"):
                ch = x.shape[1]
                m, k, s, groups = {"conv": lambda: (layer[1], 3, layer[2], 1),
                                   "dw": lambda: (ch, 3, layer[1], ch),
                                   "pw": lambda: (layer[1], 1, 1, 1)}[kind]()
                x = fluid.layers.conv2d(x, m, k, stride=s, padding=k // 2, groups=groups,
                                        use_cudnn=False)
                x = fluid.layers.batch_norm(x, act="relu", is_test=not training)
            elif kind == "pool":
                x = fluid.layers.pool2d(x, 2, pool_stride=2)
            elif kind == "gap":
                x = fluid.layers.pool2d(x, pool_type="avg", global_pooling=True)
            else:
                x = fluid.layers.fc(x, layer[1], act=None if training else "softmax")
        if not training:
            return main, startup, x
        label = fluid.data("label", [None, 1], "int64")
        loss = fluid.layers.mean(fluid.layers.softmax_with_cross_entropy(x, label))
        fluid.optimizer.SGD(0.01).minimize(loss)
    return main, startup, loss


def build_torch_model(spec, training=False):
    import torch
    (c, _, _), layers = spec[0], (train_layers(spec) if training else spec[1])
    mods = []
    for layer in layers:
        kind = layer[0]
        if kind in ("conv", "dw", "pw"):
            m, k, s, groups = {"conv": lambda: (layer[1], 3, layer[2], 1),
                               "dw": lambda: (c, 3, layer[1], c),
                               "pw": lambda: (layer[1], 1, 1, 1)}[kind]()
            mods += [torch.nn.Conv2d(c, m, k, s, k // 2, groups=groups),
                     torch.nn.BatchNorm2d(m), torch.nn.ReLU()]
            c = m
        elif kind == "pool":
            mods.append(torch.nn.MaxPool2d(2, 2))
        elif kind == "gap":
            mods.append(torch.nn.AdaptiveAvgPool2d(1))
        else:
            mods += [torch.nn.Flatten(), torch.nn.LazyLinear(layer[1])]
            if not training:
                mods.append(torch.nn.Softmax(1))
    net = torch.nn.Sequential(*mods)
    return net.train() if training else net.eval()


def alternating(fns, rounds, per_round, clock=time.thread_time, remote=None):
    """{name: median over rounds of each round's median time by `clock`}, the candidates
    taking turns round by round so that a change in the machine's load falls on all of them.
    The default clock is the thread's CPU time: everything measured runs on the calling
    thread (one BLAS and one torch thread), and on a machine shared with other work it
    leaves out the time the thread waited for a core. `remote` {name: fn(per_round) ->
    {label: that round's median}} takes its turn in each round too, timed where it runs
    (another process: PaddleRounds.round); its entries come back as "name label"."""
    import numpy as np
    meds = {k: [] for k in fns}
    for _ in range(rounds):
        for k, fn in fns.items():
            ts = []
            for _ in range(per_round):
                t = clock()
                fn()
                ts.append(clock() - t)
            meds[k].append(statistics.median(ts))
        for k, fn in (remote or {}).items():
            for label, t in fn(per_round).items():
                meds.setdefault(f"{k} {label}", []).append(t)
    return {k: float(np.median(v)) for k, v in meds.items()}


def fastest(times, name):
    """(time, label) of the fastest of `alternating`'s "name label" entries, or (None,
    None) when there are none."""
    found = [(t, k[len(name) + 1:]) for k, t in times.items() if k.startswith(name + " ")]
    return min(found) if found else (None, None)


def sgemm_equivalent(spec, batch, rng):
    """A function running one sgemm per conv of the model's gemm shape ([M, C*k*k] @
    [C*k*k, N*oh*ow], numpy's OpenBLAS) and the fc's [N, k] @ [k, n]; depthwise convs (no
    gemm of their shape worth the name: C gemms of [1, 9]) are left out, so a model with
    them is compared on its other layers' flops."""
    import numpy as np
    ops = []
    for kind, f in conv_layers(spec):
        if kind in ("conv", "pw"):
            m, k, n = f["m"], f["c"] * f["k"] ** 2, batch * f["oh"] * f["ow"]
        elif kind == "fc":
            m, k, n = batch, f["k"], f["n"]
        else:
            continue
        ops.append((rng.random((m, k), dtype=np.float32), rng.random((k, n), dtype=np.float32),
                    np.empty((m, n), np.float32)))

    def run():
        for a, b, c in ops:
            np.matmul(a, b, out=c)
    return run


def gemm_flops(spec, batch):
    """conv_flops without the depthwise convs: the flops sgemm_equivalent runs."""
    dw = sum(2 * batch * f["m"] * 9 * f["oh"] * f["ow"]
             for kind, f in conv_layers(spec) if kind == "dw")
    return conv_flops(spec, batch) - dw


# Paddle's predictors on one model, kept alive between rounds: after warming both up it
# answers each line on stdin (a number of runs) with one JSON line, each predictor's median
# thread CPU time over that many runs, so that Paddle's rounds take turns with the others'.
PADDLE_ROUNDS = PADDLE_PREDICTORS + r"""
x = np.load(d["feed"])["img"]
runs = []
for onednn, p in predictors():
    h = p.get_input_handle(p.get_input_names()[0])
    o = p.get_output_handle(p.get_output_names()[0])
    def run(h=h, o=o, p=p):
        h.copy_from_cpu(x)
        p.run()
        return o.copy_to_cpu()
    for _ in range(3):
        run()
    runs.append(("oneDNN" if onednn else "native", run))
print(json.dumps({"ready": True}), flush=True)
for line in sys.stdin:
    per = int(line)
    res = {}
    for name, run in runs:
        ts = []
        for _ in range(per):
            t = time.thread_time(); run(); ts.append(time.thread_time() - t)
        res[name] = statistics.median(ts)
    print(json.dumps(res), flush=True)
"""


class PaddleRounds:
    """Paddle's predictor (native and oneDNN kernels, one math thread) on the same program
    and parameters (saved as .pdmodel/.pdiparams) in a process of its own that stays up:
    `round(per)` times one round there ({kernels: median thread CPU time}), so it can
    take its turn in `alternating` between ours. `why` says why not when it cannot start
    (then `round` is None)."""

    def __init__(self, python, main, out, exe, scope, x, tmp):
        import numpy as np
        import fluidity as fluid
        self.proc, self.why, self.round = None, None, None
        if not python or not os.path.exists(python):
            self.why = "no paddle python"
            return
        prefix = os.path.join(tmp, "model")
        if not os.path.exists(prefix + ".pdmodel"):
            from fluidity.io.inference import save_inference_model_v2
            with fluid.scope_guard(scope):
                save_inference_model_v2(prefix, [main.global_block().var("img")], [out], exe,
                                        program=main)
        feed = os.path.join(tmp, f"x{x.shape[0]}.npz")
        np.savez(feed, img=x)
        arg = json.dumps({"model": prefix, "feed": feed})
        self.err = open(os.path.join(tmp, "paddle.err"), "w+")
        self.proc = subprocess.Popen(
            [python, "-c", PADDLE_ROUNDS, arg], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=self.err, text=True,
            env={**os.environ, "GLOG_minloglevel": "3", "OMP_NUM_THREADS": "1"})
        if self._answer() is None:
            return
        self.round = self._round

    def _answer(self):
        line = self.proc.stdout.readline()
        if not line:
            self.err.seek(0)
            self.why = (self.err.read().strip().splitlines() or ["failed"])[-1][:60]
            self.close()
            return None
        return json.loads(line)

    def _round(self, per):
        self.proc.stdin.write(f"{per}\n")
        self.proc.stdin.flush()
        res = self._answer()
        if res is None:
            raise RuntimeError(f"paddle: {self.why}")
        return res

    def close(self):
        if self.proc is not None:
            self.proc.stdin.close()
            self.proc.wait()
            self.proc = None
            self.err.close()


def conv_setup(spec, training, rng):
    """(exe, scope, main, compiled, output) of a CONV_MODELS entry, its parameters and
    batch-norm statistics drawn from U(0.5, 1.5) (so that no statistic is 0 or 1)."""
    import numpy as np
    import fluidity as fluid
    main, startup, out = build_conv_model(spec, training)
    exe, scope = fluid.Executor(fluid.CPUPlace()), fluid.Scope()
    exe.run(startup, scope=scope)
    for v in main.global_block().all_parameters() + [
            v for v in main.list_vars() if v.persistable and
            ("mean" in v.name or "variance" in v.name)]:
        t = scope.find_var(v.name).get_tensor()
        shape = np.asarray(t).shape
        scale = 0.1 if training and len(shape) > 1 else 1.0
        t.set((scale * rng.uniform(0.5, 1.5, shape)).astype(np.float32), fluid.CPUPlace())
    feeds = ["img", "label"] if training else ["img"]
    compiled = fluid.CompiledProgram(main).with_native_code(feed=feeds, fetch_list=[out])
    return exe, scope, main, compiled, out


def _batches(sizes, only):
    """A model's batch sizes, those in `only` when given."""
    return [b for b in sizes if not only or b in only]


def conv_bench(steps, models, paddle_python, only_batches=None):
    """Inference: compiled vs interpreter vs PyTorch eager vs Paddle's predictor vs sgemm."""
    import tempfile
    import numpy as np
    try:
        import torch
        torch.set_num_threads(1)
    except ImportError:
        torch = None
    rng = np.random.default_rng(0)
    print(f"conv: inference (batch_norm over running statistics), one thread; thread CPU "
          f"time, medians of alternating rounds (wall: compiled's wall-clock time; paddle: "
          f"its predictor in a process of its own taking its turn in each round, its thread "
          f"CPU time there, the faster of native and oneDNN); load "
          f"average at start {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores")
    print(f"{'model':>12} {'batch':>5} {'compiled':>10} {'interp':>10} {'torch':>10} "
          f"{'paddle':>10} {'sgemm':>10} {'GFLOP/s':>8} {'of sgemm':>9} {'vs interp':>9} "
          f"{'vs torch':>8} {'vs paddle':>9} {'wall':>9}")
    for name in models:
        spec = CONV_MODELS[name]
        exe, scope, main, compiled, out = conv_setup(spec, False, rng)
        net = build_torch_model(spec) if torch is not None else None
        with tempfile.TemporaryDirectory() as tmp:
            for batch in _batches(spec[2], only_batches):
                x = rng.random((batch, *spec[0]), dtype=np.float32)
                fns = {"compiled": lambda: exe.run(compiled, feed={"img": x},
                                                   fetch_list=[out], scope=scope),
                       "interp": lambda: exe.run(main, feed={"img": x}, fetch_list=[out],
                                                 scope=scope),
                       "sgemm": sgemm_equivalent(spec, batch, rng)}
                if net is not None:
                    tx = torch.from_numpy(x)

                    def run_torch():
                        with torch.no_grad():
                            net(tx)
                    fns["torch"] = run_torch
                for fn in fns.values():           # build, warm up
                    for _ in range(3):
                        fn()
                flops = conv_flops(spec, batch)
                per = max(3, min(50, int(steps * 2e7 / max(flops, 1)) // 10))
                paddle = PaddleRounds(paddle_python, main, out, exe, scope, x, tmp)
                try:
                    t = alternating(fns, rounds=5, per_round=per,
                                    remote={"paddle": paddle.round} if paddle.round else None)
                finally:
                    paddle.close()
                wall = alternating({"compiled": fns["compiled"]}, 3, per, time.perf_counter)
                tp, kernels = fastest(t, "paddle")
                gemm_part = gemm_flops(spec, batch) / flops    # compiled's time on it: pro rata
                cells = {k: (f"{t[k] * 1e3:.3f}ms" if t.get(k) else "n/a")
                         for k in ("compiled", "interp", "torch", "sgemm")}
                ptxt = f"{tp * 1e3:.3f}ms" if tp else "n/a"
                vs_t = f"{t['torch'] / t['compiled']:.2f}x" if t.get("torch") else "n/a"
                vs_p = f"{tp / t['compiled']:.2f}x" if tp else "n/a"
                print(f"{name:>12} {batch:>5} {cells['compiled']:>10} {cells['interp']:>10} "
                      f"{cells['torch']:>10} {ptxt:>10} {cells['sgemm']:>10} "
                      f"{flops / t['compiled'] / 1e9:>8.1f} "
                      f"{t['sgemm'] / (t['compiled'] * gemm_part):>9.1%} "
                      f"{t['interp'] / t['compiled']:>8.2f}x {vs_t:>8} {vs_p:>9} "
                      f"{wall['compiled'] * 1e3:>7.3f}ms  {kernels if tp else paddle.why}")
                sys.stdout.flush()
    print(f"(GFLOP/s: the convs' and fc's multiply-adds x 2 / time; sgemm: one sgemm per "
          f"non-depthwise conv of its gemm shape [M, C*k*k] @ [C*k*k, N*oh*ow] and the fc's, "
          f"numpy's OpenBLAS; of sgemm: sgemm time / the compiled time's share of those "
          f"layers' flops (pro rata); vs X: X's time / compiled time; load average at end "
          f"{os.getloadavg()[0]:.2f})")


def conv_per_layer(steps, models, paddle_python, only_batches=None):
    """Inference a layer at a time: each conv layer of the model (conv -> batch_norm ->
    relu) as a model of its own over the input it gets in the whole model, compiled vs
    Paddle's predictor (the faster of native and oneDNN), thread CPU time: where the
    model's time goes on both sides."""
    import tempfile
    import numpy as np
    rng = np.random.default_rng(0)
    print(f"conv per layer: inference, one thread, thread CPU time, medians of alternating "
          f"rounds (paddle: its predictor in a process of its own taking its turn in each "
          f"round); load average at start "
          f"{os.getloadavg()[0]:.2f} on {os.cpu_count()} cores")
    print(f"{'model':>12} {'batch':>5} {'layer':>18} {'MFLOP':>8} {'compiled':>10} "
          f"{'GFLOP/s':>8} {'paddle':>10} {'GFLOP/s':>8} {'vs paddle':>9}")
    for name in models:
        spec = CONV_MODELS[name]
        layers = spec[1]
        for batch in _batches(spec[2], only_batches):
            (c, h, w) = spec[0]              # each batch walks the model from its input
            tot = {"compiled": 0.0, "paddle": 0.0}
            for (kind, f), layer in zip(conv_layers(spec), layers):
                one = ((f.get("c", c), h, w), [layer], spec[2], spec[3])
                if kind in ("conv", "dw", "pw"):
                    exe, scope, main, compiled, out = conv_setup(one, False, rng)
                    x = rng.random((batch, *one[0]), dtype=np.float32)

                    def run():
                        exe.run(compiled, feed={"img": x}, fetch_list=[out], scope=scope)
                    for _ in range(3):
                        run()
                    flops = conv_flops(one, batch)
                    per = max(3, min(50, int(steps * 2e7 / max(flops, 1)) // 10))
                    with tempfile.TemporaryDirectory() as tmp:
                        paddle = PaddleRounds(paddle_python, main, out, exe, scope, x, tmp)
                        try:
                            ts = alternating({"compiled": run}, rounds=3, per_round=per,
                                             remote={"paddle": paddle.round}
                                             if paddle.round else None)
                        finally:
                            paddle.close()
                    t = ts["compiled"]
                    tp, kernels = fastest(ts, "paddle")
                    tot["compiled"] += t
                    tot["paddle"] += tp or 0.0
                    label = f"{kind} {f['c']}->{f['m']} s{f['stride']} {h}"
                    ptxt = f"{tp * 1e3:.3f}ms" if tp else "n/a"
                    pg = f"{flops / tp / 1e9:.1f}" if tp else "n/a"
                    vs = f"{tp / t:.2f}x" if tp else "n/a"
                    print(f"{name:>12} {batch:>5} {label:>18} {flops / 1e6:>8.1f} "
                          f"{t * 1e3:>8.3f}ms {flops / t / 1e9:>8.1f} {ptxt:>10} {pg:>8} "
                          f"{vs:>9}  {kernels if tp else paddle.why}")
                    sys.stdout.flush()
                    c, h, w = f["m"], f["oh"], f["ow"]
                elif kind == "pool":
                    h, w = h // 2, w // 2
            print(f"{name:>12} {batch:>5} {'sum of convs':>18} {'':>8} "
                  f"{tot['compiled'] * 1e3:>8.3f}ms {'':>8} {tot['paddle'] * 1e3:>8.3f}ms")
    print(f"(load average at end {os.getloadavg()[0]:.2f})")


def conv_per_sample(steps, models, only_batches=None):
    """Each conv layer of a model (as conv-layers builds it) at batch 1 and at the model's
    largest inference batch (or the largest of --batches), the time per sample, the two
    batches alternating in one process: whether a layer costs more or less a sample when
    batched."""
    import numpy as np
    rng = np.random.default_rng(0)
    print(f"conv per sample: inference, one thread, thread CPU time, medians of alternating "
          f"rounds of batch 1 and batch B; load average at start {os.getloadavg()[0]:.2f} "
          f"on {os.cpu_count()} cores")
    print(f"{'model':>12} {'layer':>18} {'batch 1':>10} {'B':>4} {'B / sample':>10} "
          f"{'ratio':>6}")
    for name in models:
        spec = CONV_MODELS[name]
        big = max(only_batches or spec[2])
        (c, h, w), tot = spec[0], {"b1": 0.0, "bB": 0.0}
        for (kind, f), layer in zip(conv_layers(spec), spec[1]):
            if kind in ("conv", "dw", "pw"):
                one = ((f["c"], h, w), [layer], spec[2], spec[3])
                exe, scope, _, compiled, out = conv_setup(one, False, rng)
                fns = {}
                for key, batch in (("b1", 1), ("bB", big)):
                    x = rng.random((batch, *one[0]), dtype=np.float32)
                    fns[key] = (lambda x=x: exe.run(compiled, feed={"img": x},
                                                    fetch_list=[out], scope=scope))
                    for _ in range(3):
                        fns[key]()
                per = max(3, min(20, int(steps * 2e7 / max(conv_flops(one, big), 1)) // 10))
                t = alternating(fns, rounds=3, per_round=per)
                tot["b1"] += t["b1"]
                tot["bB"] += t["bB"] / big
                label = f"{kind} {f['c']}->{f['m']} s{f['stride']} {h}"
                print(f"{name:>12} {label:>18} {t['b1'] * 1e3:>8.3f}ms {big:>4} "
                      f"{t['bB'] / big * 1e3:>8.3f}ms {t['bB'] / big / t['b1']:>5.2f}x")
                sys.stdout.flush()
                c, h, w = f["m"], f["oh"], f["ow"]
            elif kind == "pool":
                h, w = h // 2, w // 2
        print(f"{name:>12} {'sum of convs':>18} {tot['b1'] * 1e3:>8.3f}ms {big:>4} "
              f"{tot['bB'] * 1e3:>8.3f}ms {tot['bB'] / tot['b1']:>5.2f}x")
    print(f"(ratio: batch B's time a sample / batch 1's; load average at end "
          f"{os.getloadavg()[0]:.2f})")


def conv_train(steps, models, only_batches=None):
    """Training steps: compiled vs interpreter vs PyTorch eager (the same net, batch
    statistics, softmax cross-entropy, SGD 0.01; one thread)."""
    import numpy as np
    try:
        import torch
        torch.set_num_threads(1)
    except ImportError:
        torch = None
    rng = np.random.default_rng(0)
    print(f"conv-train: one SGD step (forward, backward, update), one thread; thread CPU "
          f"time, medians of alternating rounds; load average at start "
          f"{os.getloadavg()[0]:.2f} on {os.cpu_count()} cores")
    print(f"{'model':>12} {'batch':>5} {'compiled':>10} {'interp':>10} {'torch':>10} "
          f"{'GFLOP/s':>8} {'vs interp':>9} {'vs torch':>8}")
    for name in models:
        spec = CONV_MODELS[name]
        exe, scope, main, compiled, loss = conv_setup(spec, True, rng)
        for batch in _batches(spec[3], only_batches):
            x = rng.random((batch, *spec[0]), dtype=np.float32)
            y = rng.integers(0, train_layers(spec)[-1][1], (batch, 1)).astype(np.int64)
            feed = {"img": x, "label": y}
            fns = {"compiled": lambda: exe.run(compiled, feed=feed, fetch_list=[loss],
                                               scope=scope),
                   "interp": lambda: exe.run(main, feed=feed, fetch_list=[loss],
                                             scope=scope)}
            if torch is not None:
                net = build_torch_model(spec, training=True)
                tx, ty = torch.from_numpy(x), torch.from_numpy(y[:, 0])
                net(tx)                                   # materializes the lazy fc
                opt = torch.optim.SGD(net.parameters(), 0.01)

                def run_torch():
                    opt.zero_grad()
                    torch.nn.functional.cross_entropy(net(tx), ty).backward()
                    opt.step()
                fns["torch"] = run_torch
            for fn in fns.values():
                for _ in range(3):
                    fn()
            flops = 3 * conv_flops((spec[0], train_layers(spec)), batch)  # fwd, 2 bwd
            per = max(3, min(30, int(steps * 2e7 / max(flops, 1)) // 10))
            t = alternating(fns, rounds=5, per_round=per)
            vs_t = f"{t['torch'] / t['compiled']:.2f}x" if t.get("torch") else "n/a"
            torch_txt = f"{t['torch'] * 1e3:.3f}ms" if t.get("torch") else "n/a"
            print(f"{name:>12} {batch:>5} {t['compiled'] * 1e3:>8.3f}ms "
                  f"{t['interp'] * 1e3:>8.3f}ms {torch_txt:>10} "
                  f"{flops / t['compiled'] / 1e9:>8.1f} {t['interp'] / t['compiled']:>8.2f}x "
                  f"{vs_t:>8}")
            sys.stdout.flush()
    print(f"(GFLOP/s: 3 x the forward's multiply-adds x 2 / time; vs X: X's time / compiled "
          f"time; load average at end {os.getloadavg()[0]:.2f})")


MODES = {"train-mlp": lambda a: train_mlp(a.steps),
         "infer": lambda a: infer(a.steps, a.paddle_python),
         "ctr-train": lambda a: ctr_train(max(30, a.steps // 10)),
         "conv": lambda a: conv_bench(a.steps, a.models or list(CONV_MODELS),
                                      a.paddle_python, a.batches),
         "conv-layers": lambda a: conv_per_layer(a.steps, a.models or list(CONV_MODELS),
                                                 a.paddle_python, a.batches),
         "conv-per-sample": lambda a: conv_per_sample(a.steps, a.models or list(CONV_MODELS),
                                                     a.batches),
         "conv-train": lambda a: conv_train(a.steps, a.models or list(CONV_MODELS),
                                            a.batches)}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--mode", choices=sorted(MODES), help="run one workload (default: each "
                    "in its own process)")
    ap.add_argument("--steps", type=int, default=300, help="timed steps (fewer at large "
                    "batches)")
    ap.add_argument("--models", nargs="*", choices=sorted(CONV_MODELS),
                    help="conv modes: which models (default all)")
    ap.add_argument("--batches", nargs="*", type=int,
                    help="conv modes: only these of each model's batch sizes (default all)")
    ap.add_argument("--paddle-python", default=os.path.join(ROOT, ".venv-paddle", "bin",
                                                            "python"))
    a = ap.parse_args()
    if a.mode:
        os.environ["OPENBLAS_NUM_THREADS"] = "1"    # before numpy loads OpenBLAS
        MODES[a.mode](a)
        return
    for mode in ("train-mlp", "infer", "ctr-train", "conv", "conv-train"):
        subprocess.run([sys.executable, __file__, "--mode", mode, "--steps", str(a.steps),
                        "--paddle-python", a.paddle_python], check=True)
        print()


if __name__ == "__main__":
    main()
