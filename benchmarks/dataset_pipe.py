"""CTR-DNN from a data generator pipe through InMemoryDataset, vs. the same data read from
MultiSlot files.

Workload: synthetic CTR data (fluidity.datafeed.generate: `--sparse` sparse slots of Zipf
ids hashed into `--vocab` buckets, 13 dense features, clicks from a known logistic model),
`--lines` lines in `--files` files. The same data is also written as raw tab-separated
Criteo-style lines (label, 13 dense values, the sparse ids), which a
`MultiSlotDataGenerator` script (the 1.6-1.8 CTR scripts' reader, written below) turns back
into MultiSlot lines as the Dataset's pipe_command.

Per round, each from the same initial parameters, one epoch of examples/ctr_dnn.py's
CTR-DNN (sum-pooled embeddings, fc 400-400-400, softmax; SGD) with `--threads` workers:

  files   QueueDataset over the MultiSlot files (pipe "cat": the parser reads the files)
  pipe    InMemoryDataset over the raw files with the generator as pipe_command:
          load_into_memory() (the generator runs here: timed apart), local_shuffle(), then
          train_from_dataset over the records in memory

`--rounds` rounds in alternating order; the medians of train_from_dataset's examples/s and
the per-round ratio pipe / files (the target is >= 0.9), and the load time. The machine is
shared: the load average is printed with the results.

    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE .venv/bin/python benchmarks/dataset_pipe.py
"""
import argparse
import json
import os
import statistics
import sys
import tempfile
import textwrap
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "examples"))

import fluidity as fluid  # noqa: E402
from fluidity.datafeed.generate import generate_ctr  # noqa: E402
from ctr_dnn import build_ctr_dnn  # noqa: E402

GENERATOR = textwrap.dedent('''
    import sys
    import fluidity.incubate.data_generator as dg

    SPARSE = {sparse!r}

    class CriteoDataset(dg.MultiSlotDataGenerator):
        def generate_sample(self, line):
            def reader():
                f = line.rstrip("\\n").split("\\t")
                dense = [float(v) for v in f[1:14]]
                ids = [[int(v)] for v in f[14:]]
                yield [("dense_input", dense)] + list(zip(SPARSE, ids)) + \\
                    [("click", [int(f[0])])]
            return reader

    CriteoDataset().run_from_stdin()
''')


def raw_copy(multislot_files, out_dir, n_sparse):
    """The MultiSlot lines as Criteo-style raw TSV (label, dense..., ids...)."""
    out = []
    for path in multislot_files:
        dst = os.path.join(out_dir, "raw-" + os.path.basename(path))
        with open(path) as f, open(dst, "w") as g:
            for line in f:
                t = line.split()
                d = int(t[0])
                dense = t[1:1 + d]
                rest = t[1 + d:]
                ids = [rest[2 * k + 1] for k in range(n_sparse)]
                label = rest[2 * n_sparse + 1]
                g.write("\t".join([label] + dense + ids) + "\n")
        out.append(dst)
    return out


def load_average():
    try:
        return os.getloadavg()
    except OSError:
        return (float("nan"),) * 3


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--lines", type=int, default=60000)
    ap.add_argument("--files", type=int, default=4)
    ap.add_argument("--sparse", type=int, default=26)
    ap.add_argument("--vocab", type=int, default=100000)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--batch", type=int, default=128)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--json", default="", help="also write the numbers here")
    a = ap.parse_args()

    with tempfile.TemporaryDirectory() as d:
        info = generate_ctr(d, a.lines, files=a.files, seed=11, vocab=a.vocab,
                            sparse_slots=a.sparse, dense_slots=13)
        model = json.load(open(info["model"]))
        files = sorted(info["files"])
        raw = raw_copy(files, d, a.sparse)
        script = os.path.join(d, "criteo_reader.py")
        with open(script, "w") as f:
            f.write(GENERATOR.format(sparse=model["sparse_slots"]))
        main_prog, startup, _, v = build_ctr_dnn(model["sparse_slots"], dense_dim=13,
                                                 vocab=a.vocab, optimizer="sgd", lr=0.05,
                                                 with_auc=False)
        block = main_prog.global_block()
        use = [block.var("dense_input")] + [block.var(s) for s in model["sparse_slots"]] + \
            [block.var("click")]
        init = fluid.Scope()
        exe = fluid.Executor()
        exe.run(startup, scope=init)
        params = {p.name: np.array(init.find_var(p.name).get_tensor())
                  for p in main_prog.global_block().all_parameters()}

        def fresh_scope():
            s = fluid.Scope()
            exe.run(startup, scope=s)
            for name, value in params.items():
                s.find_var(name).get_tensor().set(value, fluid.CPUPlace())
            return s

        def dataset(kind, filelist, pipe):
            ds = getattr(fluid, kind)()
            ds.set_use_var(use)
            ds.set_batch_size(a.batch)
            ds.set_thread(a.threads)
            ds.set_filelist(filelist)
            ds.set_pipe_command(pipe)
            return ds

        def run_files():
            ds = dataset("QueueDataset", files, "cat")
            res = exe.train_from_dataset(main_prog, ds, scope=fresh_scope(),
                                         fetch_list=[v["loss"]])
            return res.examples_per_sec, res[0], 0.0

        def run_pipe():
            ds = dataset("InMemoryDataset", raw, f"{sys.executable} {script}")
            t0 = time.perf_counter()
            ds.load_into_memory()
            ds.local_shuffle()
            load = time.perf_counter() - t0
            res = exe.train_from_dataset(main_prog, ds, scope=fresh_scope(),
                                         fetch_list=[v["loss"]])
            return res.examples_per_sec, res[0], load

        run_files()            # warm: builds the compiled step once
        rows = {"files": [], "pipe": []}
        for r in range(a.rounds):
            order = ("files", "pipe") if r % 2 == 0 else ("pipe", "files")
            for kind in order:
                rows[kind].append({"files": run_files, "pipe": run_pipe}[kind]())
            print(f"round {r + 1}: files {rows['files'][-1][0]:,.0f} ex/s, pipe "
                  f"{rows['pipe'][-1][0]:,.0f} ex/s (load+shuffle "
                  f"{rows['pipe'][-1][2]:.2f} s), loss {rows['files'][-1][1]:.4f} / "
                  f"{rows['pipe'][-1][1]:.4f}", flush=True)
        ratios = [p[0] / f[0] for p, f in zip(rows["pipe"], rows["files"])]
        out = {"lines": a.lines, "threads": a.threads, "batch": a.batch,
               "files_ex_s": statistics.median(x[0] for x in rows["files"]),
               "pipe_ex_s": statistics.median(x[0] for x in rows["pipe"]),
               "ratio_median": statistics.median(ratios), "ratios": ratios,
               "load_s_median": statistics.median(x[2] for x in rows["pipe"]),
               "loadavg": load_average(), "cpus": os.cpu_count()}
        print(f"median examples/s: files {out['files_ex_s']:,.0f}, pipe+memory "
              f"{out['pipe_ex_s']:,.0f}; ratio pipe/files per round "
              f"{', '.join(f'{x:.3f}' for x in ratios)} (median {out['ratio_median']:.3f}); "
              f"load+shuffle through the generator {out['load_s_median']:.2f} s for "
              f"{a.lines} lines; load average {out['loadavg']}")
        if a.json:
            with open(a.json, "w") as f:
                json.dump(out, f, indent=1)


if __name__ == "__main__":
    main()
