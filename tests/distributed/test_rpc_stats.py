"""The client's per-variable counters (`RPCClient.of(exe).stats.snapshot()["variables"]`)
on a distributed-table job: a step's prefetch sends each touched id once as 4 bytes (int32
on the wire while the table has under 2^31 rows) and gets its row back; the table's
gradient goes up as the touched rows with their int64 ids. So the table's traffic both
ways is within 1.2x of the ideal (touched rows x width x 4 bytes each way) at width 10."""
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from sparse_job import run_job  # noqa: E402
from test_sparse_table import _feed, build_table, ids_of  # noqa: E402

WIDTH = 10


def test_table_traffic_per_variable_is_within_1_2x_of_ideal():
    seen = {}

    def on_step(tid, step, exe):
        client = exe.services.get("rpc")
        if step > 0:
            seen[(tid, step - 1)] = client.stats.snapshot()
        client.stats.reset()

    run_job(build_table(width=WIDTH, dense=False), lambda s, t: _feed(ids_of(s, t, 300)), 3,
            on_step=on_step)
    assert sorted(seen) == [(0, 0), (0, 1), (1, 0), (1, 1)]
    for (tid, step), snap in seen.items():
        rows = np.unique(ids_of(step, tid, 300))
        ideal = len(rows) * WIDTH * 4
        v = snap["variables"]
        pre = {n: r for n, r in v.items() if n.startswith("prefetch_compress_in_tmp")}
        grads = {n: r for n, r in v.items() if n.startswith("table@GRAD")}
        assert len(pre) == 2 and len(grads) == 2, sorted(v)
        ids_up = sum(r["bytes_sent"] for r in pre.values())
        rows_down = sum(r["bytes_received"] for r in pre.values())
        grad_up = sum(r["bytes_sent"] for r in grads.values())
        headers = 400 * 4                     # a JSON header and a tensor record header a call
        assert len(rows) * 4 <= ids_up <= len(rows) * 4 + 800            # int32 ids
        assert ideal <= rows_down <= ideal + 800
        assert ideal + len(rows) * 8 <= grad_up <= ideal + len(rows) * 8 + 800
        assert ids_up + rows_down + grad_up <= 1.2 * 2 * ideal + headers
        # the methods' totals are the variables' sums
        assert snap["methods"]["PrefetchVariable"]["bytes_sent"] == ids_up
