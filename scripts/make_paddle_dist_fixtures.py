#!/usr/bin/env python
"""Save the programs PaddlePaddle's own DistributeTranspiler writes, under
tests/fixtures/paddle3_dist/ (never needed by Fluidity or its tests to run):

    .venv-paddle/bin/python scripts/make_paddle_dist_fixtures.py [--out DIR]

PaddlePaddle 3.3.1 still ships the Fluid transpiler as Python
(`paddle.distributed.transpiler.DistributeTranspiler`), in legacy static mode
(`FLAGS_enable_pir_api=0`), but three things stand between it and a program:

* its C++ no longer registers the RPC ops it writes (`send`, `recv`, `send_barrier`,
  `listen_and_serv`, `split_byref`, `split_ids`, `prefetch`, `merge_ids`,
  `split_selected_rows`, `lookup_sparse_table`, `fake_init`, ...): appending one raises
  'Operator "send" has not been registered'. `register_rpc_op_stubs()` lets the Operator
  constructor write such an op's desc as given (type, the transpiler's inputs, outputs and
  attributes, op_role from the program's guard) without the OpProto / attribute checker /
  shape inference a registered op gets. The descs are therefore exactly what the
  transpiler asked for, with none of the default attributes a registered op would add.
* its update ops gained optional slots Fluid 1.x's had not (sgd's MasterParam), which the
  transpiler indexes as `op.input(key)[0]`: `drop_empty_slots` removes the input slots no variable
  fills from the built program before it is transpiled.
* its `_replace_lookup_table_op_with_prefetch` compares `op.type == LOOKUP_TABLE_TYPE`
  where that constant became a list (["lookup_table", "lookup_table_v2"]), so no lookup ever
  matches and a distributed table fails with an IndexError. The script sets the module's
  constant back to Fluid 1.x's "lookup_table" (what `find_distributed_lookup_table` in
  `paddle/distributed/distribute_lookup_table.py` still uses).

The models are built with Fluid 1.x ops (`lookup_table`, `mul`, `elementwise_add`, SGD) so
the programs are those of a Fluid 1.x script:

    mlp       x[64] -> fc 256 tanh -> fc 1, square error, SGD(0.1): fc_0.w_0 (16384
              elements) is sliced over the 2 pservers
    ctr_dnn   two id slots looked up in one distributed table `dist_table` [10000, 8]
              (is_distributed, is_sparse), a dense input [13]; concat -> fc 32 relu -> fc 2
              softmax, cross entropy, SGD(0.05)

For each, with pservers 127.0.0.1:6170,127.0.0.1:6171 and 2 trainers in sync mode:
origin_main.pb (the program before transpiling, after trainer 1's transpile: Paddle
rewrites it in place), trainer_<id>.pb, trainer_startup_<id>.pb (trainers 0 and 1),
pserver_<k>.pb and pserver_startup_<k>.pb (the ProgramDesc bytes), and meta.json.
"""
import argparse
import json
import os
import sys

os.environ["FLAGS_enable_pir_api"] = "0"
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import paddle  # noqa: E402
from paddle.base import framework  # noqa: E402
from paddle.base.layer_helper import LayerHelper  # noqa: E402

import paddle3_legacy_shim  # noqa: E402

ENDPOINTS = ["127.0.0.1:6170", "127.0.0.1:6171"]
TRAINERS = 2


def register_rpc_op_stubs():
    """Let Operator(...) write the desc of an op type Paddle's C++ no longer registers."""
    holder = framework.OpProtoHolder.instance()
    original = framework.Operator.__init__

    def names(v):
        vs = v if isinstance(v, (list, tuple)) else [v]
        return [x if isinstance(x, str) else x.name for x in vs if x is not None]

    def init(self, block, desc, type=None, inputs=None, outputs=None, attrs=None):
        if type is not None and type not in holder.op_proto_map and not desc.type():
            desc.set_type(type)
            for slot, v in (inputs or {}).items():
                desc.set_input(slot, names(v))
            for slot, v in (outputs or {}).items():
                desc.set_output(slot, names(v))
            attrs = dict(attrs or {})
            role = framework.core.op_proto_and_checker_maker.kOpRoleAttrName()
            attrs.setdefault(role, int(block.program._op_role))
            for k, v in attrs.items():
                if isinstance(v, framework.Block):
                    desc.set_block_attr(k, v.desc)
                elif isinstance(v, (list, tuple)) and v and isinstance(v[0], framework.Block):
                    desc.set_blocks_attr(k, [b.desc for b in v])
                elif isinstance(v, (list, tuple)) and not v:
                    continue            # an empty list has no type to infer
                else:
                    desc._set_attr(k, v)
        original(self, block, desc, type, inputs, outputs, attrs)

    framework.Operator.__init__ = init
    framework.Operator.OP_WITHOUT_KERNEL_SET = set(framework.Operator.OP_WITHOUT_KERNEL_SET)


def lookup_table_v1(ids, size, name, is_distributed):
    """Fluid 1.x's `layers.embedding`: one `lookup_table` op (is_sparse)."""
    helper = LayerHelper("embedding")
    w = helper.create_parameter(
        attr=paddle.ParamAttr(name=name,
                              initializer=paddle.nn.initializer.Uniform(-0.1, 0.1)),
        shape=size, dtype="float32")
    out = helper.create_variable_for_type_inference("float32")
    helper.append_op(type="lookup_table", inputs={"Ids": ids, "W": w}, outputs={"Out": out},
                     attrs={"is_sparse": True, "is_distributed": is_distributed,
                            "padding_idx": -1})
    return out


def fc(x, size, act=None):
    return paddle.static.nn.fc(x, size, activation=act)


def mlp():
    x = paddle.static.data("x", [-1, 64], "float32")
    y = paddle.static.data("y", [-1, 1], "float32")
    pred = fc(fc(x, 256, "tanh"), 1)
    return paddle.mean(paddle.nn.functional.square_error_cost(pred, y)), 0.1


def ctr_dnn():
    dense = paddle.static.data("dense_input", [-1, 13], "float32")
    slots = [paddle.static.data(f"C{i}", [-1, 1], "int64", lod_level=1) for i in (1, 2)]
    label = paddle.static.data("label", [-1, 1], "int64")
    embs = [lookup_table_v1(s, [10000, 8], "dist_table", True) for s in slots]
    h = fc(paddle.concat(embs + [dense], axis=1), 32, "relu")
    pred = fc(h, 2, "softmax")
    return paddle.mean(paddle.nn.functional.cross_entropy(pred, label, use_softmax=False)), 0.05


MODELS = {"mlp": mlp, "ctr_dnn": ctr_dnn}


def build(model):
    main, start = paddle.static.Program(), paddle.static.Program()
    main.random_seed = start.random_seed = 1
    with paddle.static.program_guard(main, start), paddle.utils.unique_name.guard():
        loss, lr = MODELS[model]()
        paddle.optimizer.SGD(lr).minimize(loss)
    drop_empty_slots(main)
    return main, start


def drop_empty_slots(program):
    """Remove the input slots no variable fills (Paddle 3.x's sgd declares
    MasterParam / MasterParamOut, which Fluid 1.x's did not have and its transpiler reads as
    `op.input(key)[0]`)."""
    for block in program.blocks:
        for op in block.ops:
            for slot in list(op.desc.input_names()):
                if not op.desc.input(slot):
                    op.desc.remove_input(slot)


def transpile(dt, model, trainer_id):
    main_p, start = build(model)
    t = dt.DistributeTranspiler(dt.DistributeTranspilerConfig())
    t.transpile(trainer_id, program=main_p, pservers=",".join(ENDPOINTS), trainers=TRAINERS,
                sync_mode=True, startup_program=start)
    return t, main_p, start


def save(path, program):
    """The ProgramDesc bytes, without the Python call stacks Paddle records on every op
    (`op_callstack`: paths of this machine, most of a desc's bytes)."""
    program = program.clone()
    for block in program.blocks:
        for op in block.ops:
            if op.desc.has_attr("op_callstack"):
                op.desc.remove_attr("op_callstack")
    with open(path, "wb") as f:
        f.write(program.desc.serialize_to_string())


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "..", "tests",
                                                   "fixtures", "paddle3_dist"))
    a = ap.parse_args()
    paddle3_legacy_shim.install()
    register_rpc_op_stubs()
    paddle.enable_static()
    from paddle.distributed.transpiler import distribute_transpiler as dt
    dt.LOOKUP_TABLE_TYPE = "lookup_table"     # see the docstring
    for model in MODELS:
        out = os.path.join(a.out, model)
        os.makedirs(out, exist_ok=True)
        # one transpile per program taken, as each process of a job does its own (Paddle's
        # get_trainer_program deletes ops of the origin program that get_pserver_program
        # reads afterwards)
        for tid in range(TRAINERS):
            t, main_p, start = transpile(dt, model, tid)
            save(os.path.join(out, "origin_main.pb"), main_p)
            save(os.path.join(out, f"trainer_{tid}.pb"), t.get_trainer_program())
            save(os.path.join(out, f"trainer_startup_{tid}.pb"), start)
        for k, ep in enumerate(ENDPOINTS):
            t, _main, _start = transpile(dt, model, 0)
            pmain, pstart = t.get_pserver_programs(ep)
            save(os.path.join(out, f"pserver_{k}.pb"), pmain)
            save(os.path.join(out, f"pserver_startup_{k}.pb"), pstart)
        with open(os.path.join(out, "meta.json"), "w") as f:
            json.dump({"paddle": paddle.__version__, "endpoints": ENDPOINTS,
                       "trainers": TRAINERS, "sync_mode": True, "model": model}, f, indent=1)
        print("wrote", out)


if __name__ == "__main__":
    main()
