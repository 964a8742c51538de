"""The `fluidity` command.

    fluidity --version
    fluidity ops [PATTERN]        list the registered ops (type, inputs -> outputs, attrs);
                                  exit 1 when none matches PATTERN ('elementwise_*')
    fluidity show MODEL           print a saved program readably (feeds, fetches and the
                                  parameters' size first; variables in natural order,
                                  C2 before C10): a file (__model__,
                                  *.pdmodel), a model directory (DIR/__model__) or a
                                  prefix (PREFIX.pdmodel)
    fluidity run MODEL --input NAME=FILE.npy [...] [--lod NAME=LENGTHS.npy] [--output OUT.npz]
    fluidity run MODEL --input INPUTS.npz [--output OUT.npz]
                                  load an inference model (directory or prefix), run it on
                                  the inputs, print each output (and save them all); a
                                  sequence (LoD) input's lengths come from --lod (or its
                                  offsets: --lod NAME=0,2,5) or from NAME.lod in the .npz
    fluidity compile MODEL -o OUT/ [--portable] [--bundle-blas]
                                  build the model as native code with no Python at run
                                  time: OUT/libfluidity_model.so + fluidity_model.h, the
                                  executable OUT/model_run (.npz or .npy in, .npy out) and
                                  OUT/model.params
    fluidity compile MODEL --explain
                                  which ops would run as native code, which as Python
                                  steps, and why
    fluidity env                  what a bug report needs: versions, BLAS and its threads,
                                  compiler, CUDA, cache directory and size
    fluidity cache [--clear]      the build cache of compiled libraries: where, how many,
                                  how big, its cap; --clear empties it
    fluidity launch ...           start pservers and trainers (fluidity launch --help)

run, show and compile take Fluid's --model-filename / --params-filename for a model saved
with other file names than __model__ and one file per parameter; a directory holding
__model__ and __params__ (save_inference_model(..., params_filename='__params__')) is found
on its own. Bad input is one line on stderr starting `fluidity: error:` and exit status 2.
"""
import argparse
import fnmatch
import logging
import os
import re
import sys
import zipfile

from .errors import FluidityError

PARAMS_FILE = "__params__"   # the combined-parameters name Fluid programs use most


def program_path(path, model_filename=None):
    """The program file a `show` argument means: the file itself, DIR/__model__ (or DIR/
    `model_filename`, or the one *.pdmodel in DIR), or PREFIX.pdmodel."""
    if os.path.isdir(path):
        model = os.path.join(path, model_filename or "__model__")
        if os.path.isfile(model):
            return model
        if model_filename:
            raise FluidityError(f"{path}: no model file '{model_filename}' here"
                                f"{_holding(path)}")
        found = sorted(f for f in os.listdir(path) if f.endswith(".pdmodel"))
        if len(found) == 1:
            return os.path.join(path, found[0])
        raise FluidityError(f"{path}: a directory without __model__"
                            + (f" and with several .pdmodel files {found}" if found else
                               f"{_holding(path)}; name the program file with "
                               f"--model-filename"))
    if not os.path.exists(path) and os.path.isfile(path + ".pdmodel"):
        return path + ".pdmodel"
    return path


def _holding(path, n=6):
    """' (it holds: a, b, ...)' of a directory, for errors that say what was found."""
    try:
        names = sorted(os.listdir(path))
    except OSError:
        return ""
    if not names:
        return " (it is empty)"
    shown = ", ".join(printable(f) for f in names[:n])
    return f" (it holds: {shown}{', ...' if len(names) > n else ''})"


def model_files(model, model_filename=None, params_filename=None):
    """(model, model_filename, params_filename) to load an inference model with, as a user
    means them: a directory with `__model__` and `__params__` and no per-parameter files
    (Fluid's save_inference_model(..., params_filename='__params__')) loads its combined
    file without being told; a directory with neither `__model__` nor `model_filename` is
    an error that says what the directory holds."""
    if not os.path.exists(model) and not os.path.exists(model + ".pdmodel"):
        raise FluidityError(f"{model}: no inference model here: no such directory, nor "
                            f"{model}.pdmodel")
    if os.path.isdir(model):
        program = program_path(model, model_filename)
        if params_filename is None and os.path.isfile(os.path.join(model, PARAMS_FILE)):
            params_filename = PARAMS_FILE
        if model_filename is None and program.endswith(".pdmodel"):  # a prefix's files
            prefix = program[:-len(".pdmodel")]
            return prefix, None, params_filename
    elif model_filename or params_filename:
        if not os.path.isfile(model + ".pdmodel"):
            raise FluidityError(f"{model}: --model-filename / --params-filename name files "
                                f"in a model directory; this is not one")
    return model, model_filename, params_filename


def load_program_file(path, model_filename=None):
    """A Program from a serialized ProgramDesc file (or a model directory / prefix), checked
    before use, with errors that name the file."""
    from .framework import load_program_file as load
    return load(program_path(path, model_filename))


def printable(text):
    from .ir.format import printable as p
    return p(text)


def _cmd_ops(args):
    from .codegen import emit
    from .ops import all_ops
    from .ops.registry import COMMON_ATTRS
    n = 0
    for name, opdef in all_ops().items():
        if args.pattern and not fnmatch.fnmatch(name, args.pattern):
            continue
        n += 1
        ins = ", ".join(map(repr, opdef.inputs))
        outs = ", ".join(map(repr, opdef.outputs))
        attrs = ", ".join(f"{k}={v!r}" for k, v in opdef.defaults().items()
                          if k not in COMMON_ATTRS)
        grad = " [grad]" if opdef.grad is not None else ""
        print(f"{name}({ins}) -> ({outs}){grad}")
        if attrs and args.verbose:
            print(f"    attrs: {attrs}")
        if opdef.doc and args.verbose:
            print(f"    {opdef.doc}")
        if args.verbose:
            targets = emit.targets_of(name)
            print(f"    compiled for: {', '.join(targets) if targets else 'none (runs in Python)'}")
    if n == 0:
        print(f"fluidity: no op matches {args.pattern!r} (`fluidity ops` lists all "
              f"{len(all_ops())}; quote a pattern with * so the shell leaves it alone)",
              file=sys.stderr)
        return 1
    print(f"{n} ops", file=sys.stderr)
    return 0


def _size(nbytes):
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if nbytes >= scale:
            return f"{nbytes / scale:,.1f} {unit}"
    return f"{nbytes} B"


def natural_key(name):
    """Sort key that orders embedded numbers by value: C1, C2, C10 (not C1, C10, C2)."""
    return [(0, int(t), "") if t.isdigit() else (1, 0, t) for t in re.split(r"(\d+)", name)]


def program_summary(prog):
    """The lines `show` starts with: the feeds and fetches (in column order, as the
    program's feed/fetch ops give them) and the parameters' count and size."""
    import numpy as np
    from .core import dtypes
    from .ir.format import format_var
    block = prog.global_block()
    io = {"feed": [], "fetch": []}
    for op in block.ops:
        if op.type in io:
            names = op.output("Out") if op.type == "feed" else op.input("X")
            io[op.type] += [(op.attr("col"), n) for n in names]
    lines = []
    for kind, title in (("feed", "feeds"), ("fetch", "fetches")):
        names = [n for _, n in sorted(io[kind])]
        if kind == "feed" and not names:   # a program saved without feed ops: its data vars
            written = {n for op in block.ops for n in op.output_arg_names}
            read = {n for op in block.ops for n in op.input_arg_names}
            names = sorted((v.name for v in block.vars.values() if v.need_check_feed or (
                v.name in read and v.name not in written and not v.persistable and
                v.type == dtypes.VarType.LOD_TENSOR)), key=natural_key)
            title += " (no feed ops; the data variables)"
        lines.append(f"{title} ({len(names)}):" + ("" if names else " none"))
        lines += [f"    {format_var(block.var(n))}" for n in names]
    params = [v for b in prog.blocks for v in b.vars.values()
              if v.persistable and v.type == dtypes.VarType.LOD_TENSOR
              and v.name not in ("feed", "fetch")]
    values = sum(int(np.prod([max(d, 0) for d in v.shape])) for v in params)
    nbytes = sum(int(np.prod([max(d, 0) for d in v.shape])) *
                 np.dtype(dtypes.to_numpy(v.dtype)).itemsize for v in params)
    lines.append(f"parameters: {len(params)} tensors, {values:,} values ({_size(nbytes)})")
    return "\n".join(lines)


def _cmd_show(args):
    from .ir.format import format_program
    from .transpiler.compat_check import UnsupportedProgramError, check_program
    prog = load_program_file(args.file, args.model_filename)
    print(program_summary(prog))
    print(format_program(prog, var_key=natural_key))
    try:  # show what Fluidity cannot run, after the program itself
        check_program(prog, program_path(args.file, args.model_filename))
    except UnsupportedProgramError as e:
        sys.stdout.flush()
        print(f"fluidity: warning: {e}", file=sys.stderr)
    return 0


def _load_array(path, what):
    """The array (or NpzFile) in `path`, with every way a file can be wrong - missing, a
    directory, empty, cut short, not numpy's format, pickled objects - one error naming it."""
    import numpy as np
    if os.path.isdir(path):
        raise FluidityError(f"{path}: cannot read {what}: it is a directory")
    try:
        if os.path.getsize(path) == 0:
            raise FluidityError(f"{path}: cannot read {what}: the file is empty")
        return np.load(path, allow_pickle=False)
    except FluidityError:
        raise
    except (OSError, ValueError, EOFError, zipfile.BadZipFile) as e:
        raise FluidityError(f"{path}: cannot read {what}: "
                            f"{getattr(e, 'strerror', None) or e}") from None


def _npz_member(arrays, key, path):
    """One array of an .npz, read now (members are read lazily), errors naming it."""
    try:
        return arrays[key]
    except (OSError, ValueError, EOFError, KeyError, zipfile.BadZipFile,
            NotImplementedError) as e:
        raise FluidityError(f"{path}: member '{printable(key)}': cannot read it: "
                            f"{e}") from None


def _read_inputs(specs):
    """({name: array}, {name: sequence lengths}) from the --input options: NAME=FILE.npy,
    or FILE.npz whose arrays are inputs by name and NAME.lod the lengths of NAME's
    sequences (one level)."""
    import numpy as np
    inputs, lengths = {}, {}

    def add(table, name, value, where):
        if name in table:
            raise FluidityError(f"{where}: input '{name}' given twice")
        table[name] = value

    for spec in specs or []:
        name, sep, path = spec.partition("=")
        if not sep and spec.endswith(".npz"):
            arrays = _load_array(spec, "inputs (an .npz of NAME and NAME.lod arrays)")
            if isinstance(arrays, np.ndarray):
                raise FluidityError(f"{spec}: a single .npy array, not an .npz; give it as "
                                    f"--input NAME={spec}")
            with arrays:
                for key in arrays.files:
                    base, dot, tag = key.rpartition(".")
                    if dot and tag == "lod":
                        add(lengths, base, _npz_member(arrays, key, spec), spec)
                    else:
                        add(inputs, key, _npz_member(arrays, key, spec), spec)
            continue
        if not (sep and name and path):
            raise FluidityError(f"--input {spec!r}: expected NAME=FILE.npy or FILE.npz")
        array = _load_array(path, f"input '{name}' as a .npy array")
        if not isinstance(array, np.ndarray):   # an .npz: several arrays, named inside
            array.close()
            raise FluidityError(f"--input {spec}: {path} holds several arrays; give an .npz "
                                f"without NAME= (its arrays are named)")
        add(inputs, name, array, "--input")
    orphans = sorted(set(lengths) - set(inputs))
    if orphans:
        raise FluidityError(f"{orphans[0]}.lod: no input named '{orphans[0]}' beside it")
    return inputs, lengths


def _offsets_of_lengths(name, lengths):
    """Level-0 offsets [0, l0, l0+l1, ...] of sequence lengths (a 1-D integer array)."""
    import numpy as np
    lengths = np.asarray(lengths)
    if lengths.ndim != 1 or lengths.dtype.kind not in "iu" or (lengths < 0).any():
        raise FluidityError(f"lod of '{name}': sequence lengths must be a 1-D array of "
                            f"non-negative integers, got {lengths.dtype} "
                            f"{list(lengths.shape)}")
    return [0] + np.cumsum(lengths).tolist()


def _read_lods(specs, inputs, lengths):
    """{name: level-0 offsets}: from --lod NAME=LENGTHS.npy (sequence lengths), --lod
    NAME=OFF,OFF,... (offsets, as the executable `fluidity compile` builds takes them) and
    the lengths an .npz input brought. Each must cover its input's rows."""
    lods = {n: _offsets_of_lengths(n, v) for n, v in lengths.items()}
    for spec in specs or []:
        name, sep, value = spec.partition("=")
        if not (sep and name and value):
            raise FluidityError(f"--lod {spec!r}: expected NAME=LENGTHS.npy or "
                                f"NAME=OFF,OFF,...")
        if name not in inputs:
            raise FluidityError(f"--lod {name}: no --input of that name")
        if name in lods:
            raise FluidityError(f"--lod {name}: its sequences are given twice")
        if value.endswith(".npy"):
            lods[name] = _offsets_of_lengths(name, _load_array(value, f"lod of '{name}'"))
            continue
        try:
            lods[name] = [int(v) for v in value.split(",")]
        except ValueError:
            raise FluidityError(f"--lod {spec!r}: offsets must be integers (or give "
                                f"sequence lengths as NAME=LENGTHS.npy)") from None
    for name, offs in lods.items():
        rows = len(inputs[name])
        if offs[0] != 0 or offs[-1] != rows or any(b < a for a, b in zip(offs, offs[1:])):
            raise FluidityError(f"lod of '{name}': sequences cover {offs[-1] - offs[0]} rows "
                                f"(offsets {_preview(offs)}) but the input has {rows}")
    return lods


def _fit_dtype(var, array):
    """Cast an input to its variable's dtype when that is a same-kind cast
    (float64 -> float32, int32 -> int64); otherwise the executor reports the mismatch."""
    import numpy as np
    from .core import dtypes
    if var.dtype is None:
        return array
    want = dtypes.to_numpy(var.dtype)
    if array.dtype != want and np.can_cast(array.dtype, want, "same_kind"):
        return array.astype(want)
    return array


def _preview(array, n=6, rows=10):
    """An output's values: up to `rows` rows of a narrow 2-D output one per line (a batch
    of predictions), else its first `n` values."""
    import numpy as np
    a = np.asarray(array)
    if a.ndim == 2 and 1 < a.shape[0] <= rows and a.shape[1] <= n:
        return "\n  ".join(np.array2string(r, precision=6, separator=", ") for r in a)
    flat = a.reshape(-1)
    vals = np.array2string(flat[:n], precision=6, separator=", ", max_line_width=1000)
    return vals + (f" ... ({flat.size} values)" if flat.size > n else "")


def _cmd_run(args):
    import numpy as np
    from . import io as fio
    from .core import serialization as ser
    from .core.scope import Scope, scope_guard
    from .executor import Executor
    from .core.tensor import LoDTensor
    if args.output:
        _writable(args.output)
    inputs, lengths = _read_inputs(args.input)
    lods = _read_lods(args.lod, inputs, lengths)
    model, model_filename, params_filename = model_files(args.model, args.model_filename,
                                                         args.params_filename)
    exe = Executor()
    with scope_guard(Scope()):
        prog, feeds, fetches = _load_model(fio.load_inference_model, model, model_filename,
                                           params_filename, exe)
        missing = [n for n in feeds if n not in inputs]
        extra = [n for n in inputs if n not in feeds]
        if missing or extra:
            what = (f"missing input(s) {missing}" if missing else "") + \
                   ("; " if missing and extra else "") + \
                   (f"unknown input(s) {extra}" if extra else "")
            raise FluidityError(f"{what}: the model's inputs are {feeds} "
                                f"(give each as --input NAME=FILE.npy, or all in an .npz)")
        block = prog.global_block()
        feed = {n: _fit_dtype(block.var(n), inputs[n]) for n in feeds}
        feed = {n: LoDTensor(a, [lods[n]]) if n in lods else a for n, a in feed.items()}
        outs = exe.run(prog, feed=feed, fetch_list=fetches)
    results = {}
    for var, val in zip(fetches, outs):
        val = np.asarray(val)
        results[var.name] = val
        print(f"{printable(var.name)}: {val.dtype} {list(val.shape)}")
        print(f"  {_preview(val)}")
    if args.output:
        ser.atomic_write(args.output, lambda f: np.savez(f, **results))
        print(f"saved {len(results)} output(s) to {args.output}", file=sys.stderr)
    return 0


def _load_model(load, model, model_filename, params_filename, *args, **kwargs):
    """`load(model, *args, model_filename=, params_filename=, **kwargs)`, with a parameter
    file that cannot be read explained: the model may have been saved with its parameters in
    one file, which --params-filename names."""
    try:
        return load(model, *args, model_filename=model_filename,
                    params_filename=params_filename, **kwargs)
    except FluidityError as e:
        if params_filename is None and "cannot read" in str(e) and os.path.isdir(model):
            raise FluidityError(f"{e} (if the model was saved with its parameters in one "
                                f"file, name it with --params-filename FILE"
                                f"{_holding(model)})") from None
        raise


def _writable(path):
    """An output file's directory exists and `path` is not a directory, checked before
    any work is done."""
    d = os.path.dirname(os.path.abspath(path))
    if os.path.isdir(path):
        raise FluidityError(f"{path}: is a directory; give a file name for the output")
    if not os.path.isdir(d):
        raise FluidityError(f"{path}: cannot write: no directory {d}")


def _cmd_compile(args):
    from .compiler import compile_inference_model, explain_inference_model
    model, model_filename, params_filename = model_files(args.model, args.model_filename,
                                                         args.params_filename)
    if args.explain:
        print(_load_model(explain_inference_model, model, model_filename, params_filename))
        if not args.output:
            return 0
    if not args.output:
        raise FluidityError("compile: give the output directory (-o OUT/) or --explain")
    paths = _load_model(compile_inference_model, model, model_filename, params_filename,
                        args.output, portable=args.portable, bundle_blas=args.bundle_blas)
    for what in ("library", "header", "executable", "params"):
        print(f"{what:10s} {paths[what]}")
    blas = paths.get("blas")
    if blas is None:
        print(f"{'blas':10s} none (the model calls no BLAS routine)")
    elif args.bundle_blas:
        print(f"{'blas':10s} {blas} (in the output directory: it runs where it is copied)")
    else:
        print(f"{'blas':10s} {blas} (linked where installed; --bundle-blas puts it beside "
              f"the library to run elsewhere)")
    return 0


def _cmd_cache(args):
    """Show (or clear) the one build cache of compiled libraries (core/build_cache.py)."""
    try:
        from .core import build_cache
    except ImportError:               # a build from before the verified cache
        build_cache = None
    if build_cache is None:
        from .collect_env import _size_of
        from .core import native
        path = native.cache_dir()
        if args.clear:
            raise FluidityError(f"cache --clear: this Fluidity keeps no record of its cache "
                                f"entries; remove {path} by hand (nothing there is needed: "
                                f"what is missing is built again)")
        size, files = _size_of(path) if os.path.isdir(path) else (0, 0)
        print(f"{path}: {files} files, {_size(size)}")
        return 0
    if args.clear:
        n = build_cache.clear()
        print(f"removed {n} compiled libraries and executables from {build_cache.root()}")
        return 0
    info = build_cache.info()
    cap = f"{info['max_bytes'] / (1 << 20):,.0f} MB" if info["max_bytes"] > 0 else "none"
    print(f"{info['path']}{' (shared, trusted)' if info['trusted'] else ''}: "
          f"{info['entries']} compiled libraries and executables, {_size(info['bytes'])} "
          f"(cap {cap}: the least recently used go first; FLUIDITY_CACHE_MAX_MB sets it)")
    return 0


def _cmd_env(args):
    from .collect_env import report
    print(report())
    return 0


def _version():
    """The running package's __version__: the package is initialized before any module of
    it (this one too), so it is read from there rather than imported (the layers forbid a
    module importing the package that contains it)."""
    return sys.modules[__package__].__version__


def main(argv=None):
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv[:1] == ["launch"]:   # everything after it is the launcher's (and the script's)
        from .distributed.launch import launch
        return launch(argv[1:])
    ap = argparse.ArgumentParser(prog="fluidity", description=__doc__.split("\n")[0])
    ap.add_argument("--version", action="version", version=f"fluidity {_version()}")
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("ops", help="list registered ops")
    p.add_argument("pattern", nargs="?", help="glob on op type, e.g. 'elementwise_*'")
    p.add_argument("-v", "--verbose", action="store_true",
                   help="show attributes, docs and the code generator targets each op has")
    p.set_defaults(fn=_cmd_ops)
    p = sub.add_parser("show", help="print a saved program")
    p.add_argument("file", help="program file, model directory or PREFIX of PREFIX.pdmodel")
    _model_file_options(p, params=False)
    p.set_defaults(fn=_cmd_show)
    p = sub.add_parser("run", help="run an inference model on .npy inputs")
    p.add_argument("model", help="model directory (__model__ + parameters) or path prefix "
                                 "(PREFIX.pdmodel + PREFIX.pdiparams)")
    p.add_argument("--input", "-i", action="append", metavar="NAME=FILE.npy|FILE.npz",
                   help="an input of the model (repeat for each), or an .npz holding inputs "
                        "by name and, for a sequence input NAME, its lengths as NAME.lod")
    p.add_argument("--lod", action="append", metavar="NAME=LENGTHS.npy|NAME=OFF,OFF,...",
                   help="the sequences of a LoD input: their lengths in a .npy file, or "
                        "level-0 offsets (0,2,5: two sequences of 2 and 3 rows)")
    p.add_argument("--output", "-o", metavar="OUT.npz", help="save every output here")
    _model_file_options(p)
    p.set_defaults(fn=_cmd_run)
    p = sub.add_parser("compile", help="build an inference model as a native library and "
                                       "executable")
    p.add_argument("model", help="model directory or path prefix, as for `run`")
    p.add_argument("--output", "-o", metavar="OUT", help="directory to write the build to")
    p.add_argument("--explain", action="store_true",
                   help="list where each op runs (native segment or Python) and why")
    p.add_argument("--portable", action="store_true",
                   help="build for any x86-64/arm64 of the kind, not -march=native")
    p.add_argument("--bundle-blas", action="store_true",
                   help="put the BLAS library in OUT/ so it runs on a machine without "
                        "fluidity's scipy-openblas32 (25 MB; default: linked where installed)")
    _model_file_options(p)
    p.set_defaults(fn=_cmd_compile)
    p = sub.add_parser("env", help="print versions, BLAS, compiler, CUDA and cache: what a "
                                   "bug report needs")
    p.set_defaults(fn=_cmd_env)
    p = sub.add_parser("cache", help="show the build cache of compiled libraries, or clear it")
    p.add_argument("--clear", action="store_true", help="remove every compiled library")
    p.set_defaults(fn=_cmd_cache)
    sub.add_parser("launch", help="start local pservers and trainers running a training "
                                  "script (fluidity launch --help)")
    args = ap.parse_args(argv)
    try:
        return args.fn(args)
    except BrokenPipeError:
        return 0
    except KeyboardInterrupt:
        print("fluidity: interrupted", file=sys.stderr)
        return 130
    except Exception as e:  # noqa: BLE001 - one line for the user, the traceback in the log
        print(f"fluidity: error: {_one_line(e)}", file=sys.stderr)
        if not isinstance(e, (FluidityError, OSError)):
            logging.getLogger("fluidity").debug("fluidity %s failed", args.cmd, exc_info=True)
        return 2


def _one_line(e):
    """What the user is told of an error: Fluidity's own message as written; an OSError as
    'path: reason'; anything else with its type, since its message may not say what it is.
    Control characters (from hostile names) are escaped; a multi-line message stays so."""
    if isinstance(e, FluidityError):
        text = str(e)
    elif isinstance(e, OSError) and e.strerror:
        text = f"{e.filename}: {e.strerror}" if e.filename else e.strerror
    else:
        text = f"{type(e).__name__}: {e} (FLUIDITY_LOG_LEVEL=DEBUG shows where)"
    return "\n".join(printable(line) for line in text.split("\n"))


def _model_file_options(p, params=True):
    p.add_argument("--model-filename", metavar="FILE",
                   help="the program's file name in the model directory (default: "
                        "__model__), as save_inference_model's model_filename")
    if params:
        p.add_argument("--params-filename", metavar="FILE",
                       help="the file holding all parameters, as save_inference_model's "
                            "params_filename (default: one file per parameter, or "
                            "__params__ when the directory has it)")


if __name__ == "__main__":
    sys.exit(main())
