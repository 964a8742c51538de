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
  load (dtype, dims, length).

The BLAS: the library and the executable are linked `--as-needed`, so a model whose code
calls no BLAS routine does not depend on it at all. One that does finds the OpenBLAS of the
scipy-openblas32 package where it is installed (an rpath to its directory, after
`$ORIGIN`): no 25 MB copy per model. `bundle_blas=True` (`fluidity compile --bundle-blas`)
puts the library itself in OUT/ (a hard link where the file system allows, else a copy) so
OUT/ runs on a machine without that package: the one case where a copy is the right trade,
since the library cannot be cut down to the routines a model calls.

The build happens in a staging directory beside OUT/ and is moved into place only when
everything built: a failed compile leaves no partial OUT/ (nor the parents it made).

Every op but feed and fetch must compile: one that would run as a Python step is named
with its block and why (`compile_model` raises CompileError); `explain_model` lists where
each op would run without building anything. Loading a saved model is the caller's
(`fluidity.compiler.compile_inference_model`, the CLI): codegen reads descs and a scope.
"""
import contextlib
import os
import shutil
import struct
import tempfile

from ..core import serialization as ser
from ..core.dtypes import CODE_OF_C_TYPE, VarType
from ..core.tensor import LoDTensor
from . import abi
from .build import RUNTIME_DIR, CompileError, blas, compile_files
from .cir import ArrayBuf, c_string, checked_source
from .explain import format_explain
from .lower import Lowering

KIND = {"feed": "fl::model::FEED", "param": "fl::model::PARAM", "value": "fl::model::VALUE"}
PASS_THROUGH = ("feed", "fetch")      # ops the driver does itself


def explain_model(program, fetches):
    """The explain() table of a program's block 0 (its fetch targets kept), as `fluidity
    compile --explain` prints it."""
    return format_explain(Lowering(program, 0, keep=fetches).explain())


def compile_model(program, feeds, fetches, scope, out_dir, name="model", portable=False,
                  bundle_blas=False):
    """Build the standalone model of an inference `program` (feed and fetch target names in
    order, parameters in `scope`) into `out_dir`; returns the paths written ({"library",
    "header", "executable", "params", "source", "blas"}: "blas" is the BLAS library the
    build loads, None when it calls none). `name` is what errors call it."""
    low = Lowering(program, 0, keep=fetches)
    _require_all_native(low, name)
    table = _Tables(low, program.global_block(), feeds, fetches)
    files = {k: f for k, f in (
        ("source", "model.cc"), ("header", "fluidity_model.h"), ("params", "model.params"),
        ("library", "libfluidity_model.so"), ("executable", "model_run"))}
    _, libdir, lib = blas()
    blas_file = f"lib{lib}.so"
    with _staged(out_dir) as stage:
        paths = {k: os.path.join(stage, f) for k, f in files.items()}
        _write_params(paths["params"], [table.names[i] for i in table.params], scope)
        with open(paths["source"], "w") as f:
            f.write(checked_source(low.source + "\n" + table.render()))
        shutil.copyfile(os.path.join(RUNTIME_DIR, "fluidity_model.h"), paths["header"])
        origin = ["-Wl,-rpath,$ORIGIN", f"-Wl,-rpath,{libdir}", f"-L{stage}",
                  "-Wl,--as-needed"]
        compile_files([paths["source"]], paths["library"], "shared", includes=[stage],
                      link=origin, portable=portable)
        compile_files([os.path.join(RUNTIME_DIR, "model_main.cc")], paths["executable"], "exe",
                      includes=[stage], link=origin + ["-lfluidity_model"], portable=portable)
        uses_blas = any(blas_file in needed_libraries(paths[k])
                        for k in ("library", "executable"))
        if uses_blas and bundle_blas:
            _link_or_copy(os.path.join(libdir, blas_file), os.path.join(stage, blas_file))
    out = {k: os.path.join(out_dir, f) for k, f in files.items()}
    out["blas"] = (os.path.join(out_dir if bundle_blas else libdir, blas_file)
                   if uses_blas else None)
    return out


def needed_libraries(path):
    """The DT_NEEDED entries of an ELF64 little-endian binary (the shared libraries the
    loader will look for), from its dynamic section; [] for anything else."""
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError:
        return []
    if data[:4] != b"\x7fELF" or data[4] != 2 or data[5] != 1:
        return []
    shoff, = struct.unpack_from("<Q", data, 0x28)
    shentsize, shnum = struct.unpack_from("<HH", data, 0x3A)
    sections = [struct.unpack_from("<IIQQQQIIQQ", data, shoff + i * shentsize)
                for i in range(shnum) if shoff + (i + 1) * shentsize <= len(data)]
    out = []
    for _, stype, _, _, off, size, link, _, _, entsize in sections:
        if stype != 6 or link >= len(sections):          # SHT_DYNAMIC
            continue
        stroff = sections[link][4]
        for k in range(0, size, entsize or 16):
            tag, val = struct.unpack_from("<qQ", data, off + k)
            if tag == 0:
                break
            if tag == 1:                                  # DT_NEEDED
                end = data.find(b"\0", stroff + val)
                out.append(data[stroff + val:end].decode(errors="replace"))
    return out


def _link_or_copy(src, dst):
    try:
        os.link(src, dst)
    except OSError:
        shutil.copyfile(src, dst)
        shutil.copymode(src, dst)


@contextlib.contextmanager
def _staged(out_dir):
    """A fresh directory beside `out_dir` to build in; on success its files move into
    `out_dir` (the directory itself is renamed into place when `out_dir` did not exist),
    on failure it is removed with any parent directories made for it."""
    out_dir = os.path.abspath(out_dir)
    parent = os.path.dirname(out_dir)
    made = []
    d = parent
    while not os.path.exists(d):
        made.append(d)
        d = os.path.dirname(d)
    for what in (d, out_dir):
        if os.path.exists(what) and not os.path.isdir(what):
            raise CompileError(f"{out_dir}: cannot make the output directory: {what} is "
                               f"not a directory")
    try:
        os.makedirs(parent, exist_ok=True)
        stage = tempfile.mkdtemp(prefix=f".{os.path.basename(out_dir)}.", dir=parent)
    except OSError as e:
        _remove_dirs(made)
        raise CompileError(f"{out_dir}: cannot make the output directory: "
                           f"{e.strerror or e}") from None
    try:
        yield stage
        os.chmod(stage, 0o755)
        if not os.path.exists(out_dir):
            os.rename(stage, out_dir)
        else:
            for f in os.listdir(stage):
                os.replace(os.path.join(stage, f), os.path.join(out_dir, f))
            os.rmdir(stage)
    except BaseException:
        shutil.rmtree(stage, ignore_errors=True)
        _remove_dirs(made)
        raise


def _remove_dirs(dirs):
    for d in dirs:                     # deepest first; only what is still empty
        try:
            os.rmdir(d)
        except OSError:
            break


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
                if len(b.levels) > 1:
                    raise CompileError(f"'{b.var}' has {len(b.levels)} LoD levels: a "
                                       f"standalone model takes one")
                if b.var not in made:
                    if not self._persistable(b.var):
                        raise CompileError(f"'{b.var}' is read by the model but neither fed, "
                                           f"a parameter, nor computed before")
                    self._add(b.var, "param", b.ctype)
                    made.add(b.var)
                self.ctype.setdefault(b.var, b.ctype)
            for b in seg.outputs:
                if isinstance(b, ArrayBuf):
                    raise CompileError(f"'{b.var}' is a tensor array: a standalone model "
                                       f"hands back tensors")
                if b.kind == "held":
                    raise CompileError(f"'{b.var}' has a size known only when it is made: "
                                       f"a standalone model hands back arena tensors")
                if b.rows is not None:
                    raise CompileError(f"'{b.var}' is SelectedRows: a standalone model "
                                       f"makes dense tensors")
                if b.computed_lod:
                    raise CompileError(f"'{b.var}' carries a LoD the model computes: a "
                                       f"standalone model hands back its inputs' LoD")
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
            in_lod = [int(b.has_lod) for b in seg.inputs]   # one level (model.h)
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
