"""The calling convention of a compiled segment is written once: runtime/segment_args.h, with
codegen/abi.py its Python twin. The twin is checked against the header as C sees it (the
header parsed, and a program built against it printing its layout); no other file knows a
numeric offset into the arguments."""
import ctypes
import os
import re
import subprocess

import numpy as np
import pytest
from paths import ROOT

from fluidity.codegen import abi
from fluidity.codegen.build import RUNTIME_DIR

HEADER = os.path.join(RUNTIME_DIR, abi.HEADER)


def _header():
    with open(HEADER) as f:
        return f.read()


def _defines(text):
    return {m.group(1): m.group(2) for m in re.finditer(r"^#define (\w+) (\S+)", text, re.M)}


def test_the_header_and_the_twin_declare_the_same_constants():
    d = _defines(_header())
    assert int(d["FL_MAX_DIMS"]) == abi.MAX_DIMS
    assert int(d["FL_ARGS_HEAD"]) == abi.ARGS_HEAD
    assert int(d["FL_ARG_NEED"]) == abi.ARG_NEED
    with open(os.path.join(RUNTIME_DIR, "fluidity_model.h")) as f:
        assert int(_defines(f.read())["FLUIDITY_MAX_DIMS"]) == abi.MAX_DIMS


def test_the_header_and_the_twin_declare_the_same_record():
    body = re.search(r"typedef struct %s \{(.*?)\} %s;" % (abi.C_STRUCT, abi.C_STRUCT),
                     _header(), re.S).group(1)
    fields = [(m.group(1), m.group(2)) for m in
              re.finditer(r"int64_t (\w+)(?:\[(\w+)\])?;", body)]
    sizes = {"FL_MAX_DIMS": abi.MAX_DIMS, None: 1}
    want = [(name, getattr(abi.TensorArg, name).size // 8) for name, _ in abi.TensorArg._fields_]
    assert [(n, sizes[k]) for n, k in fields] == want
    assert abi.SLOTS == sum(n for _, n in want)


def test_c_lays_the_record_out_as_the_twin_says(tmp_path):
    """offsetof of every field, as the C compiler lays the header out."""
    names = [n for n, _ in abi.TensorArg._fields_]
    prints = " ".join(f'printf("%zu ", offsetof(fl_tensor_arg, {n}));' for n in names)
    src = tmp_path / "layout.c"
    src.write_text('#include <stddef.h>\n#include <stdio.h>\n#include "segment_args.h"\n'
                   f'int main(void) {{ {prints} printf("%lld", (long long)FL_ARG_SLOTS); '
                   'return 0; }\n')
    exe = tmp_path / "layout"
    cc = os.environ.get("CC") or "cc"
    r = subprocess.run([cc, f"-I{RUNTIME_DIR}", "-o", str(exe), str(src)], capture_output=True,
                       text=True)
    assert r.returncode == 0, r.stderr
    *offsets, slots = map(int, subprocess.run([str(exe)], capture_output=True,
                                              text=True).stdout.split())
    assert offsets == [getattr(abi.TensorArg, n).offset for n in names]
    assert slots == abi.SLOTS


def test_packing_writes_the_fields_where_the_header_puts_them():
    args = abi.Args(2, 1)
    assert args.vector.shape == (abi.args_len(2, 1),)
    abi.put_tensor(args.inputs[1], 1234, (3, 4))
    abi.put_aux(args.inputs[1], 99, 5)
    rec = abi.TensorArg.from_address(args.address + 8 * (abi.ARGS_HEAD + abi.SLOTS))
    assert (rec.data, rec.ndim, list(rec.dims)[:2], rec.aux, rec.aux_len) == \
        (1234, 2, [3, 4], 99, 5)
    out = abi.TensorArg.from_address(args.address + 8 * (abi.ARGS_HEAD + 2 * abi.SLOTS))
    out.data, out.ndim, out.dims[0], out.aux, out.aux_len = 64, 1, 7, 128, 10
    assert abi.output_shape(args.outputs[0], 1) == (7,)
    assert abi.output_offset(args.outputs[0]) == 64
    assert abi.output_aux(args.outputs[0]) == (128, 10)
    out.ndim = abi.NOT_WRITTEN
    assert abi.output_shape(args.outputs[0], 1) is None
    args.vector[abi.ARG_NEED] = 4096
    assert args.need == 4096
    with pytest.raises(ValueError, match="no field"):
        abi.c_field("ins", 0, "rows")


# files that pack or unpack segment arguments: none may know a numeric offset
CALLERS = ["fluidity/executor/native.py", "fluidity/executor/cuda.py",
           "fluidity/executor/native_loop.py", "fluidity/executor/native_loop.c",
           "fluidity/codegen/runtime/model.h", "fluidity/codegen/standalone.py"]


@pytest.mark.parametrize("path", CALLERS)
def test_no_caller_knows_an_offset_into_the_arguments(path):
    with open(os.path.join(ROOT, path)) as f:
        text = f.read()
    for bad in (r"ARGS_PER_TENSOR", r"\bS\s*=\s*12\b", r"\b(?:P|args|a|o)\[\s*(?:base|o|out_base)?"
                r"\s*\+?\s*\d+\s*\]", r"out_base"):
        assert not re.search(bad, text), f"{path}: {bad}"


def test_generated_code_reads_its_arguments_by_field():
    import fluidity as fluid
    from fluidity.codegen.lower import Lowering
    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()):
        x = fluid.layers.data("x", [3], lod_level=1)
        fluid.layers.sequence_pool(fluid.layers.relu(x), "sum")
    src = Lowering(main, 0).source
    assert "fl_inputs(args)" in src and ".dims[0]" in src and ".aux" in src
    assert re.findall(r"args\[[^\]]*\]", src) == ["args[FL_ARG_NEED]"]
    assert np.int64(0).itemsize == ctypes.sizeof(ctypes.c_int64) == 8
