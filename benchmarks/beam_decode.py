"""machine_translation's beam-search decoder (tests/fluid_book/test_machine_translation.py's
`decoder_decode`: a While over tensor arrays, beam_search, beam_search_decode), one exe.run
per batch interpreted and compiled (one native call), in one process: medians of
alternating rounds of the calling thread's CPU time, and their ratio.

    PYTHONPATH=. .venv/bin/python benchmarks/beam_decode.py --batch 1 8 --rounds 15
"""
import argparse
import importlib.util
import os
import statistics
import sys
import time

import fluidity
import fluidity as fluid

BOOK = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tests",
                    "fluid_book")


def chapter():
    sys.path.insert(0, BOOK)                      # its book_util
    spec = importlib.util.spec_from_file_location(
        "machine_translation_chapter", os.path.join(BOOK, "test_machine_translation.py"))
    mt = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mt)
    return mt


def measure(mt, n, rounds):
    main, start = fluid.Program(), fluid.Program()
    start.random_seed = main.random_seed = 7
    with fluid.program_guard(main, start), fluid.unique_name.guard():
        ids, scores = mt.decoder_decode(mt.encoder(False), False)
    place = fluid.CPUPlace()
    exe, scope = fluid.Executor(), fluid.Scope()
    exe.run(start, scope=scope)
    feeder = fluid.DataFeeder([main.global_block().var("src_word_id")], place)
    data = next(fluidity.batch(mt.wmt14(n, 3), batch_size=n)())
    feed = feeder.feed([[x[0]] for x in data])
    feed["init_ids"], feed["init_scores"] = mt.init_beams(n, place)
    progs = {"interpreted": main, "compiled": fluid.CompiledProgram(main).with_native_code()}
    times = {k: [] for k in progs}
    for p in progs.values():                      # builds and warms up
        exe.run(p, feed=feed, fetch_list=[ids, scores], scope=scope, return_numpy=False)
    for _ in range(rounds):
        for k, p in progs.items():
            t = time.thread_time()
            exe.run(p, feed=feed, fetch_list=[ids, scores], scope=scope, return_numpy=False)
            times[k].append(time.thread_time() - t)
    return {k: statistics.median(v) for k, v in times.items()}


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--batch", type=int, nargs="+", default=[1, 8])
    p.add_argument("--rounds", type=int, default=15)
    args = p.parse_args()
    mt = chapter()
    for n in args.batch:
        m = measure(mt, n, args.rounds)
        print(f"beam decode batch {n}: interpreted {m['interpreted'] * 1e3:.2f} ms, compiled "
              f"{m['compiled'] * 1e3:.2f} ms per exe.run (thread CPU time, medians of "
              f"{args.rounds} alternating rounds): {m['interpreted'] / m['compiled']:.1f}x")


if __name__ == "__main__":
    main()
