"""pslib's embedding hooks: Fluid's argument checks and table registration; the pull itself
needs pslib, which Fluidity does not carry (ImportError, as a Paddle built without it)."""
import numpy as np
import pytest

import fluidity as fluid
from fluidity.incubate.fleet.parameter_server import pslib
from fluidity.incubate.fleet.parameter_server.pslib import (FLEET_GLOBAL_DICT,
                                                            _prepare_params, fleet_embedding)


@pytest.fixture(autouse=True)
def fresh_registry():
    saved = {k: (dict(v) if isinstance(v, dict) else v) for k, v in FLEET_GLOBAL_DICT.items()}
    FLEET_GLOBAL_DICT.update(enable=False, emb_to_table={}, emb_to_accessor={},
                             emb_to_size={}, cur_sparse_id=0)
    yield
    FLEET_GLOBAL_DICT.clear()
    FLEET_GLOBAL_DICT.update(saved)


def test_the_block_routes_embeddings_and_restores_them():
    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()):
        _build_and_run(main)


def _build_and_run(main):
    layers_emb, emb = fluid.layers.embedding, fluid.embedding
    ids = fluid.layers.data(name="ids", shape=[1], dtype="int64", lod_level=1)
    with fleet_embedding(click_name="click"):
        assert fluid.layers.embedding is pslib._fleet_embedding
        assert FLEET_GLOBAL_DICT["click_name"] == "click"
        out = fluid.layers.embedding(input=ids, size=[-1, 8], is_sparse=True,
                                     is_distributed=True, param_attr=fluid.ParamAttr("emb_a"))
        out2 = fluid.embedding(input=ids, size=[-1, 8], is_sparse=True, is_distributed=True,
                               param_attr=fluid.ParamAttr("emb_a"))
    assert fluid.layers.embedding is layers_emb and fluid.embedding is emb
    ops = main.global_block().ops
    pull = [op for op in ops if op.type == "pull_sparse"][0]
    assert pull.attr("TableId") == 0 and pull.attr("EmbeddingDim") == 8
    assert pull.attr("CtrLabelName") == "click" and pull.input("W") == ["emb_a"]
    assert list(out.shape) == [-1, 8] and list(out2.shape) == [-1, 1, 8]
    exe = fluid.Executor()
    with pytest.raises(Exception, match="pslib"):       # the table lives in pslib
        exe.run(main, feed={"ids": fluid.create_lod_tensor(
            np.array([[1], [2]], "int64"), [[2]], fluid.CPUPlace())}, fetch_list=[out])
    assert FLEET_GLOBAL_DICT["click_name"] == "" and FLEET_GLOBAL_DICT["enable"]
    assert FLEET_GLOBAL_DICT["emb_to_table"] == {"emb_a": 0}


def test_registration_and_checks():
    FLEET_GLOBAL_DICT["cur_accessor"] = "DownpourCtrAccessor"
    ok = dict(is_sparse=True, is_distributed=True)
    _prepare_params(None, [-1, 4], param_attr=fluid.ParamAttr("a"), **ok)
    _prepare_params(None, (9, 4), param_attr=fluid.ParamAttr("a"), **ok)     # again: same id
    _prepare_params(None, [-1, 2], param_attr=fluid.ParamAttr("b"), **ok)
    assert FLEET_GLOBAL_DICT["emb_to_table"] == {"a": 0, "b": 1}
    assert FLEET_GLOBAL_DICT["emb_to_size"] == {"a": 4, "b": 2}
    cases = [((None, [-1, 4]), {}, "param_attr"),
             ((None, [-1, 4]), {"param_attr": fluid.ParamAttr()}, "name"),
             ((None, 4), {"param_attr": fluid.ParamAttr("a")}, "list or tuple"),
             ((None, [-1, 5]), {"param_attr": fluid.ParamAttr("a"), **ok}, "size error"),
             ((None, [-1, 1]), {"param_attr": fluid.ParamAttr("c")}, "is_sparse"),
             ((None, [-1, 1]), {"param_attr": fluid.ParamAttr("c"), "is_sparse": True},
              "is_distributed"),
             ((None, [-1, 1]), {"param_attr": fluid.ParamAttr("c"), "dtype": "abc", **ok},
              "float32")]
    for args, kwargs, msg in cases:
        with pytest.raises(ValueError, match=msg):
            _prepare_params(*args, **kwargs)
    FLEET_GLOBAL_DICT["cur_accessor"] = "DownpourSparseValueAccessor"
    with pytest.raises(ValueError, match="accessor"):
        _prepare_params(None, [-1, 4], param_attr=fluid.ParamAttr("a"), **ok)
