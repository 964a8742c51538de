"""lookup_table with remote_prefetch: the rows of the ids come from the parameter servers
that hold the table's sections (Fluid's prefetch by table name), in the ids' order."""
import numpy as np
import pytest

import fluidity as fluid
from fluidity.distributed import RPCClient
from fluidity.errors import FluidityError
from fluidity.op import Operator

from pserver_fixture import serve_table as _serve


@pytest.fixture(scope="module")
def servers():
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    b = -np.arange(8, dtype=np.float32).reshape(2, 4) - 1
    (ep0, t0), (ep1, t1) = _serve(a), _serve(b)
    yield [ep0, ep1], np.concatenate([a, b])
    client = RPCClient()
    for ep in (ep0, ep1):        # the one trainer's goodbye: the servers stop
        client.call(ep, "Goodbye", {"trainer_id": 0})
    t0.join(10)
    t1.join(10)


def _lookup(ids, eps, sections, lod=None, **attrs):
    scope = fluid.Scope()
    scope.var("W").get_tensor().set(np.zeros((sum(sections), 4), np.float32),
                                    fluid.CPUPlace())
    t = scope.var("Ids").get_tensor()
    t.set(np.asarray(ids, np.int64).reshape(-1, 1), fluid.CPUPlace())
    if lod:
        t.set_lod(lod)
    op = Operator("lookup_table", W="W", Ids="Ids", Out="Out", remote_prefetch=True,
                  epmap=eps, table_names=["table"] * len(eps), height_sections=sections,
                  **attrs)
    op.run(scope, fluid.CPUPlace())
    return scope.find_var("Out").get_tensor()


def test_rows_come_from_each_section_in_the_ids_order(servers):
    eps, whole = servers
    ids = [4, 0, 2, 3, 0, 4]
    out = _lookup(ids, eps, [3, 2], lod=[[0, 2, 6]])
    np.testing.assert_array_equal(np.array(out), whole[ids])
    assert out.lod() == [[0, 2, 6]]


def test_one_section_and_padding(servers):
    eps, whole = servers
    out = np.array(_lookup([2, 1, 1], eps[:1], [3], padding_idx=1))
    np.testing.assert_array_equal(out, np.stack([whole[2], 0 * whole[1], 0 * whole[1]]))


def test_an_id_past_the_sections_is_refused_before_asking(servers):
    eps, _ = servers
    with pytest.raises(FluidityError, match="id 5 of 'Ids' is out of range.*5 rows"):
        _lookup([1, 5], eps, [3, 2])


def test_sections_must_match_the_endpoints(servers):
    eps, _ = servers
    with pytest.raises(FluidityError, match="height_sections"):
        _lookup([1], eps, [5])


def test_a_server_refuses_ids_past_its_table(servers):
    eps, _ = servers
    # the trainer believes the first section has 4 rows; the server holds 3
    with pytest.raises(FluidityError, match=r"id 3, outside \[0, 3\)"):
        _lookup([3], eps, [4, 2])


def test_a_remote_lookup_is_never_compiled():
    """The code generator leaves a remote_prefetch lookup to its Python step (the rows are
    the servers'), and compiles what follows it."""
    main, start = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, start):
        ids = fluid.layers.data("ids", [1], dtype="int64")
        w = main.global_block().create_parameter(name="W", shape=[10, 4], dtype="float32")
        out = main.global_block().create_var(name="out", dtype="float32")
        main.global_block().append_op(
            type="lookup_table", inputs={"W": [w], "Ids": [ids]}, outputs={"Out": [out]},
            attrs={"remote_prefetch": True, "epmap": ["127.0.0.1:1"], "table_names": ["t"],
                   "height_sections": [10]})
        y = fluid.layers.scale(out, 2.0)
    rows = fluid.CompiledProgram(main).with_native_code(feed=["ids"], fetch_list=[y]).explain()
    (line,) = [r for r in rows.splitlines() if "lookup_table" in r]
    assert "python" in line and "remote_prefetch" in line
    (line,) = [r for r in rows.splitlines() if " scale " in r]
    assert "segment" in line
