"""A saved inference model as a standalone native library and executable, with no Python at
run time (`fluidity compile MODEL -o OUT/`).

OUT/ gets:

* `model.cc`: the program's block 0 lowered (lower.py) plus the tables the driver
  (runtime/model.h) runs it by: every variable, the segments in order with the variables
  each reads and writes, the feeds, fetches and parameters;
* `libfluidity_model.so` with the C API of `fluidity_model.h` (copied beside it);
* `model_run`, an executable over .npy files (runtime/model_main.cc);
* `model.params`: the parameters in Paddle's combined format, sorted by name (the order
  `save_inference_model(..., params_filename=...)` writes), which the library checks on
  load (dtype, dims, length);
* the OpenBLAS library the code calls, so that OUT/ runs where it is copied.

Every op but feed and fetch must compile: one that would run as a Python step is named
with its block and why (`compile_model` raises CompileError); `explain_model` lists where
each op would run without building anything. Loading a saved model is the caller's
(`fluidity.compiler.compile_inference_model`, the CLI): codegen reads descs and a scope.
"""
import os
import shutil

from ..core import serialization as ser
from ..core.dtypes import CODE_OF_C_TYPE, VarType
from ..core.tensor import LoDTensor
from . import abi
from .build import RUNTIME_DIR, CompileError, blas, compile_files
from .cir import c_string
from .explain import format_explain
from .lower import Lowering

KIND = {"feed": "fl::model::FEED", "param": "fl::model::PARAM", "value": "fl::model::VALUE"}
PASS_THROUGH = ("feed", "fetch")      # ops the driver does itself


def explain_model(program, fetches):
    """The explain() table of a program's block 0 (its fetch targets kept), as `fluidity
    compile --explain` prints it."""
    return format_explain(Lowering(program, 0, keep=fetches).explain())


def compile_model(program, feeds, fetches, scope, out_dir, name="model", portable=False):
    """Build the standalone model of an inference `program` (feed and fetch target names in
    order, parameters in `scope`) into `out_dir`; returns the paths written ({"library",
    "header", "executable", "params", "source"}). `name` is what errors call it."""
    low = Lowering(program, 0, keep=fetches)
    _require_all_native(low, name)
    table = _Tables(low, program.global_block(), feeds, fetches)
    os.makedirs(out_dir, exist_ok=True)
    paths = {k: os.path.join(out_dir, f) for k, f in (
        ("source", "model.cc"), ("header", "fluidity_model.h"), ("params", "model.params"),
        ("library", "libfluidity_model.so"), ("executable", "model_run"))}
    _write_params(paths["params"], [table.names[i] for i in table.params], scope)
    with open(paths["source"], "w") as f:
        f.write(low.source + "\n" + table.render())
    shutil.copyfile(os.path.join(RUNTIME_DIR, "fluidity_model.h"), paths["header"])
    _, libdir, lib = blas()
    blas_file = f"lib{lib}.so"
    shutil.copyfile(os.path.join(libdir, blas_file), os.path.join(out_dir, blas_file))
    origin = ["-Wl,-rpath,$ORIGIN", f"-L{out_dir}"]
    compile_files([paths["source"]], paths["library"], "shared", includes=[out_dir],
                  link=origin, portable=portable)
    compile_files([os.path.join(RUNTIME_DIR, "model_main.cc")], paths["executable"], "exe",
                  includes=[out_dir], link=origin + ["-lfluidity_model"], portable=portable)
    return paths


def _require_all_native(low, name):
    rows = [r for r in low.explain() if r[2] == "python" and r[1] not in PASS_THROUGH]
    if rows:
        listed = "\n".join(f"  op #{i} '{t}' in block 0: {why}" for i, t, _, why in rows)
        raise CompileError(f"{name}: {len(rows)} op(s) have no compiled form here, so "
                           f"the model cannot run without Python:\n{listed}")


def _write_params(path, names, scope):
    def write(f):
        for n in names:
            v = scope.find_var(n)
            t = v.value if v is not None else None
            if not isinstance(t, LoDTensor) or not t.is_initialized():
                raise CompileError(f"parameter '{n}' has no value in the saved model")
            ser.write_lod_tensor(f, t)
    ser.atomic_write(path, write)


class _Tables:
    """The driver's tables of one lowering: variables (by index), per segment its inputs
    and outputs, and the feeds, fetches and parameters."""

    def __init__(self, low, block, feeds, fetches):
        self.low, self.block = low, block
        self.names, self.index, self.kind, self.ctype = [], {}, {}, {}
        for n in feeds:
            self._add(n, "feed", None)
        made = set(feeds)
        for seg in low.segments:
            for b in seg.inputs:
                if b.rows is not None:
                    raise CompileError(f"'{b.var}' is a SelectedRows input: a standalone model "
                                       f"takes dense tensors")
                if b.var not in made:
                    if not self._persistable(b.var):
                        raise CompileError(f"'{b.var}' is read by the model but neither fed, "
                                           f"a parameter, nor computed before")
                    self._add(b.var, "param", b.ctype)
                    made.add(b.var)
                self.ctype.setdefault(b.var, b.ctype)
            for b in seg.outputs:
                if b.rows is not None:
                    raise CompileError(f"'{b.var}' is SelectedRows: a standalone model "
                                       f"makes dense tensors")
                self._add(b.var, "value", b.ctype)
                made.add(b.var)
        for n in fetches:
            if n not in made:
                if not self._persistable(n):
                    raise CompileError(f"fetch target '{n}' is not computed by the model")
                self._add(n, "param", None)
        self.params = sorted((self.index[n] for n in self.names if self.kind[n] == "param"),
                             key=lambda i: self.names[i])
        self.feeds = [self.index[n] for n in feeds]
        self.fetches = [self.index[n] for n in fetches]

    def _persistable(self, name):
        v = self.block.find_var_recursive(name)
        return v is not None and v.persistable

    def _add(self, name, kind, ctype):
        if name not in self.index:
            self.index[name] = len(self.names)
            self.names.append(name)
            self.kind[name] = kind
        if ctype is not None:
            self.ctype.setdefault(name, ctype)

    def _var_info(self, name):
        v = self.block.find_var_recursive(name)
        shape = list(v.shape) if v is not None and v.shape is not None else None
        ct = self.ctype.get(name)
        code = CODE_OF_C_TYPE[ct] if ct else (int(v.dtype) if v is not None and v.dtype is not None
                                          else VarType.FP32)
        ndim = len(shape) if shape is not None and len(shape) <= abi.MAX_DIMS else -1
        dims = ", ".join(str(int(d)) for d in shape) if ndim >= 0 else ""
        return f"{{{c_string(name)}, {code}, {ndim}, {{{dims}}}, {KIND[self.kind[name]]}}}"

    def render(self):
        L = ["// the model's tables for runtime/model.h (fluidity/codegen/standalone.py)",
             '#include "model.h"', "", "static const fl::model::VarInfo VARS[] = {"]
        L += [f"    {self._var_info(n)}," for n in self.names]
        L.append("};")
        segs = []
        for s, seg in enumerate(self.low.segments):
            ins = [self.index[b.var] for b in seg.inputs]
            in_lod = [int(b.lod is not None) for b in seg.inputs]
            outs = [self.index[b.var] for b in seg.outputs]
            out_lod = [self.index.get(b.lod_src, -1) if b.lod_src else -1 for b in seg.outputs]
            inplace = [int(b.slot is None) for b in seg.outputs]
            sites = [c_string(f"op #{i} '{op.type}' in block {bi}") for bi, i, op in seg.sites]
            for what, vals in (("in", ins), ("in_lod", in_lod), ("out", outs),
                               ("out_lod", out_lod), ("inplace", inplace)):
                L.append(f"static const int S{s}_{what.upper()}[] = {{{_ints(vals)}}};")
            L.append(f"static const char* const S{s}_SITES[] = {{{', '.join(sites) or '0'}}};")
            segs.append(f"    {{{seg.name}, {len(ins)}, S{s}_IN, S{s}_IN_LOD, {len(outs)}, "
                        f"S{s}_OUT, S{s}_OUT_LOD, S{s}_INPLACE, {len(sites)}, S{s}_SITES}},")
        L += ["static const fl::model::SegInfo SEGS[] = {"] + (segs or ["    {}"]) + ["};"]
        for what, vals in (("FEEDS", self.feeds), ("FETCHES", self.fetches),
                           ("PARAMS", self.params)):
            L.append(f"static const int {what}[] = {{{_ints(vals)}}};")
        L.append(f"const fl::model::ModelDef fl_model_def = {{{len(self.names)}, VARS, "
                 f"{len(self.low.segments)}, SEGS, {len(self.feeds)}, FEEDS, "
                 f"{len(self.fetches)}, FETCHES, {len(self.params)}, PARAMS}};")
        return "\n".join(L) + "\n"


def _ints(vals):
    return ", ".join(map(str, vals)) if vals else "-1"   # C has no empty arrays
