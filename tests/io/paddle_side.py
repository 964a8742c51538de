"""The PaddlePaddle side of tests/io/test_io_paddle.py, run by Paddle's own Python
(legacy ProgramDesc mode):

    python paddle_side.py WORKDIR

In WORKDIR: values.npz and lods.json (the variables' values and LoD), save_*.prog (save
programs built by fluidity: run here, in Paddle, with those values in the scope) and
load_*.prog (load programs built by fluidity: run in a fresh scope, the loaded values and
LoD written to paddle_loaded_<name>.npz / .json). protos.json: Paddle's schema of the four
ops. Then Paddle builds and runs its own save
programs (paddle.static.io.save_vars, separate files into paddle_sep/, combined into
paddle_comb/comb) and writes each program it ran to paddle_save_<i>.prog.
"""
import glob
import json
import os
import sys

os.environ["FLAGS_enable_pir_api"] = "0"

import numpy as np  # noqa: E402
import paddle  # noqa: E402


def fill(scope, values, lods):
    for name in values.files:
        t = scope.var(name).get_tensor()
        t.set(values[name], paddle.CPUPlace())
        if name in lods:
            t.set_lod(lods[name])


def dump_protos(path, types):
    """{op type: {"inputs"/"outputs": [[name, duplicable, dispensable]], "attrs": {name:
    AttrType name}}} of Paddle's registered ops `types` (their non-extra attributes)."""
    from paddle.base import core
    from paddle.base.proto import framework_pb2 as pb
    out = {}
    for blob in core.get_all_op_protos():
        p = pb.OpProto.FromString(blob)
        if p.type in types:
            out[p.type] = {
                "inputs": [[v.name, v.duplicable, v.dispensable] for v in p.inputs],
                "outputs": [[v.name, v.duplicable, v.dispensable] for v in p.outputs],
                "attrs": {a.name: pb.AttrType.Name(a.type) for a in p.attrs if not a.extra}}
    json.dump(out, open(path, "w"), indent=1)


def main():
    work = sys.argv[1]
    paddle.enable_static()
    dump_protos(os.path.join(work, "protos.json"),
                {"save", "load", "save_combine", "load_combine"})
    values = np.load(os.path.join(work, "values.npz"))
    lods = json.load(open(os.path.join(work, "lods.json")))
    exe = paddle.static.Executor(paddle.CPUPlace())
    for path in sorted(glob.glob(os.path.join(work, "save_*.prog"))):
        scope = paddle.static.Scope()
        fill(scope, values, lods)
        exe.run(paddle.static.Program.parse_from_string(open(path, "rb").read()), scope=scope)
    for path in sorted(glob.glob(os.path.join(work, "load_*.prog"))):
        prog = paddle.static.Program.parse_from_string(open(path, "rb").read())
        scope = paddle.static.Scope()
        exe.run(prog, scope=scope)
        tag = os.path.basename(path)[len("load_"):-len(".prog")]
        names = [n for n in values.files if scope.find_var(n) is not None]
        np.savez(os.path.join(work, f"paddle_loaded_{tag}.npz"),
                 **{n: np.array(scope.find_var(n).get_tensor()) for n in names})
        json.dump({n: scope.find_var(n).get_tensor().lod() for n in names},
                  open(os.path.join(work, f"paddle_loaded_{tag}.json"), "w"))
    # Paddle's own save programs, captured as its io module runs them
    main_prog = paddle.static.Program()
    block = main_prog.global_block()
    variables = [block.create_var(name=n, shape=values[n].shape, dtype=values[n].dtype,
                                  persistable=True, lod_level=len(lods.get(n, [])))
                 for n in values.files]
    ran, real_run = [], paddle.static.Executor.run

    def capture(self, program=None, *a, **k):
        ran.append(program)
        return real_run(self, program, *a, **k)
    paddle.static.Executor.run = capture
    scope = paddle.static.global_scope()
    fill(scope, values, lods)
    paddle.static.io.save_vars(exe, os.path.join(work, "paddle_sep"), main_prog,
                               vars=variables)
    dense = [v for v in variables if v.name not in lods]
    paddle.static.io.save_vars(exe, os.path.join(work, "paddle_comb"), main_prog,
                               vars=dense, filename="comb")
    for i, prog in enumerate(ran):
        open(os.path.join(work, f"paddle_save_{i}.prog"), "wb").write(
            prog.desc.serialize_to_string())


if __name__ == "__main__":
    main()
