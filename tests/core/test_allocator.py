"""The executor keeps freed tensor memory mapped between runs (no page faults per step)."""
import os
import subprocess
import sys

import pytest

CODE = r"""
import resource, sys
import numpy as np
import fluidity as fluid
main = fluid.Program()
with fluid.program_guard(main, fluid.Program()):
    x = fluid.layers.data("x", [256, 512], append_batch_size=False)
    h = x
    for _ in range(6):
        h = fluid.layers.relu(fluid.layers.scale(h, 1.01))
exe = fluid.Executor()
xv = np.random.rand(256, 512).astype("float32")
for _ in range(5):
    exe.run(main, feed={"x": xv}, fetch_list=[h])
r0 = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for _ in range(20):
    exe.run(main, feed={"x": xv}, fetch_list=[h])
print((resource.getrusage(resource.RUSAGE_SELF).ru_minflt - r0) / 20)
"""


def _faults(env):
    r = subprocess.run([sys.executable, "-c", CODE], capture_output=True, text=True,
                       env={**os.environ, **env})
    assert r.returncode == 0, r.stderr
    return float(r.stdout.strip().splitlines()[-1])


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc malloc tuning")
def test_temporaries_reuse_memory_across_runs():
    kept = _faults({})
    assert kept < 20, f"{kept} page faults per run with freed memory kept"
    plain = _faults({"FLUIDITY_KEEP_FREED_MEMORY": "0"})
    assert plain > 5 * max(kept, 1), (kept, plain)  # the switch really switches
