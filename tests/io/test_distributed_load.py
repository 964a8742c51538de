"""load_persistables of a transpiled pserver program (Fluid's
`_load_distributed_persistables`): each server reads its own slices, and its whole copies,
out of the whole variables an undistributed program saved."""
import numpy as np
import pytest

import fluidity as fluid

EPS = ["127.0.0.1:6170", "127.0.0.1:6171"]


def _build():
    main, start = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, start), fluid.unique_name.guard():
        x = fluid.layers.data("x", [64])
        h = fluid.layers.fc(x, 256, act="relu")        # w: 16384 elements, sliced in two
        loss = fluid.layers.mean(fluid.layers.fc(h, 1))
        fluid.optimizer.Adam(0.01).minimize(loss)
    return main, start


def test_each_server_loads_its_slices_of_the_saved_variables(tmp_path):
    main, start = _build()
    exe = fluid.Executor(fluid.CPUPlace())
    rng = np.random.RandomState(0)
    saved = {}
    with fluid.scope_guard(fluid.Scope()):
        exe.run(start)
        for v in main.list_vars():
            if v.persistable and v.name not in ("feed", "fetch"):
                t = fluid.global_scope().find_var(v.name).get_tensor()
                value = rng.rand(*np.array(t).shape).astype("float32")
                t.set(value, fluid.CPUPlace())
                saved[v.name] = value
        fluid.io.save_persistables(exe, str(tmp_path), main)

    t = fluid.DistributeTranspiler()
    checked = sliced = 0
    for ep in EPS:
        t.transpile(0, program=main.clone(), startup_program=start.clone(),
                    pservers=",".join(EPS), trainers=2, current_endpoint=ep)
        pmain = t.get_pserver_program(ep)
        pstart = t.get_startup_program(ep, pmain)
        with fluid.scope_guard(fluid.Scope()):
            exe.run(pstart)
            fluid.io.load_persistables(exe, str(tmp_path), pmain)
            for part in pmain._parameters_on_pservers.get_distributed_vars_by_ep(ep):
                got = np.array(fluid.global_scope().find_var(part.slice.name).get_tensor())
                whole = saved[part.origin.name].reshape(-1)
                want = whole[part.offset:part.offset + got.size] if part.is_slice else whole
                np.testing.assert_array_equal(got.reshape(-1), want, err_msg=part.slice.name)
                checked += 1
                sliced += part.is_slice
    assert checked > 4 and sliced >= 2      # the weight and its moments come in slices


def test_a_pserver_program_needs_its_endpoint(tmp_path):
    main, start = _build()
    t = fluid.DistributeTranspiler()
    t.transpile(0, program=main, startup_program=start, pservers=",".join(EPS), trainers=1,
                current_endpoint=EPS[0])
    pmain = t.get_pserver_program(EPS[0])
    pmain._ps_endpoint = ""
    with pytest.raises(ValueError, match="current_endpoint"):
        fluid.io.load_persistables(fluid.Executor(), str(tmp_path), pmain)


def test_a_missing_file_names_it(tmp_path):
    main, start = _build()
    t = fluid.DistributeTranspiler()
    t.transpile(0, program=main, startup_program=start, pservers=",".join(EPS), trainers=1,
                current_endpoint=EPS[1])
    pmain = t.get_pserver_program(EPS[1])
    with fluid.scope_guard(fluid.Scope()):
        with pytest.raises(fluid.errors.FluidityError, match="cannot read"):
            fluid.io.load_persistables(fluid.Executor(), str(tmp_path), pmain)
