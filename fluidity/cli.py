"""The `fluidity` command.

    fluidity ops [PATTERN]        list the registered ops (type, inputs -> outputs, attrs)
    fluidity show MODEL           print a saved program readably: a file (__model__,
                                  *.pdmodel), a model directory (DIR/__model__) or a
                                  prefix (PREFIX.pdmodel)
    fluidity run MODEL --input NAME=FILE.npy [...] [--lod NAME=OFF,...] [--output OUT.npz]
                                  load an inference model (directory or prefix), run it on
                                  the inputs (--lod: an input's sequence offsets), print
                                  each output (and save them all)
    fluidity compile MODEL -o OUT/ [--portable]
                                  build the model as native code with no Python at run
                                  time: OUT/libfluidity_model.so + fluidity_model.h, the
                                  executable OUT/model_run (.npy in, .npy out) and
                                  OUT/model.params
    fluidity compile MODEL --explain
                                  which ops would run as native code, which as Python
                                  steps, and why
"""
import argparse
import fnmatch
import os
import sys

from .errors import FluidityError


def program_path(path):
    """The program file a `show` argument means: the file itself, DIR/__model__ (or the one
    *.pdmodel in DIR), or PREFIX.pdmodel."""
    if os.path.isdir(path):
        model = os.path.join(path, "__model__")
        if os.path.exists(model):
            return model
        found = sorted(f for f in os.listdir(path) if f.endswith(".pdmodel"))
        if len(found) == 1:
            return os.path.join(path, found[0])
        raise FluidityError(f"{path}: a directory without __model__"
                            + (f" and with several .pdmodel files {found}" if found else ""))
    if not os.path.exists(path) and os.path.isfile(path + ".pdmodel"):
        return path + ".pdmodel"
    return path


def load_program_file(path):
    """A Program from a serialized ProgramDesc file, with errors that name the file."""
    from .framework import Program
    from .errors import ProgramError
    path = program_path(path)
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as e:
        raise FluidityError(f"{path}: cannot read: {e.strerror}") from None
    if not data:
        raise ProgramError(f"{path}: empty file, not a program")
    try:
        return Program.parse_from_string(data)
    except ProgramError as e:
        raise ProgramError(f"{path}: {e}") from None


def _cmd_ops(args):
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
    print(f"{n} ops", file=sys.stderr)
    return 0


def _cmd_show(args):
    from .ir.format import format_program
    from .transpiler.compat_check import UnsupportedProgramError, check_program
    prog = load_program_file(args.file)
    print(format_program(prog))
    try:  # show what Fluidity cannot run, after the program itself
        check_program(prog, program_path(args.file))
    except UnsupportedProgramError as e:
        sys.stdout.flush()
        print(f"fluidity: warning: {e}", file=sys.stderr)
    return 0


def _read_inputs(specs):
    import numpy as np
    inputs = {}
    for spec in specs or []:
        name, sep, path = spec.partition("=")
        if not (sep and name and path):
            raise FluidityError(f"--input {spec!r}: expected NAME=FILE.npy")
        if name in inputs:
            raise FluidityError(f"--input {name} given twice")
        try:
            inputs[name] = np.load(path, allow_pickle=False)
        except (OSError, ValueError) as e:
            raise FluidityError(f"{path}: cannot read input '{name}' as a .npy array: "
                                f"{getattr(e, 'strerror', None) or e}") from None
    return inputs


def _read_lods(specs, inputs):
    """{name: level-0 offsets} from --lod NAME=OFF,OFF,... (the executable `fluidity compile`
    builds takes the same option)."""
    lods = {}
    for spec in specs or []:
        name, sep, offs = spec.partition("=")
        if not (sep and name and offs):
            raise FluidityError(f"--lod {spec!r}: expected NAME=OFF,OFF,...")
        if name not in inputs:
            raise FluidityError(f"--lod {name}: no --input of that name")
        try:
            lods[name] = [int(v) for v in offs.split(",")]
        except ValueError:
            raise FluidityError(f"--lod {spec!r}: offsets must be integers") from None
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


def _preview(array, n=6):
    import numpy as np
    flat = np.asarray(array).reshape(-1)
    vals = np.array2string(flat[:n], precision=6, separator=", ", max_line_width=1000)
    return vals + (f" ... ({flat.size} values)" if flat.size > n else "")


def _cmd_run(args):
    import numpy as np
    from . import io as fio
    from .core import serialization as ser
    from .core.scope import Scope, scope_guard
    from .executor import Executor
    from .core.tensor import LoDTensor
    inputs = _read_inputs(args.input)
    lods = _read_lods(args.lod, inputs)
    exe = Executor()
    with scope_guard(Scope()):
        prog, feeds, fetches = fio.load_inference_model(args.model, exe)
        missing = [n for n in feeds if n not in inputs]
        extra = [n for n in inputs if n not in feeds]
        if missing or extra:
            what = (f"missing input(s) {missing}" if missing else "") + \
                   ("; " if missing and extra else "") + \
                   (f"unknown input(s) {extra}" if extra else "")
            raise FluidityError(f"{what}: the model's inputs are {feeds} "
                                f"(give each as --input NAME=FILE.npy)")
        block = prog.global_block()
        feed = {n: _fit_dtype(block.var(n), inputs[n]) for n in feeds}
        feed = {n: LoDTensor(a, [lods[n]]) if n in lods else a for n, a in feed.items()}
        outs = exe.run(prog, feed=feed, fetch_list=fetches)
    results = {}
    for var, val in zip(fetches, outs):
        val = np.asarray(val)
        results[var.name] = val
        print(f"{var.name}: {val.dtype} {list(val.shape)}")
        print(f"  {_preview(val)}")
    if args.output:
        ser.atomic_write(args.output, lambda f: np.savez(f, **results))
        print(f"saved {len(results)} output(s) to {args.output}", file=sys.stderr)
    return 0


def _cmd_compile(args):
    from .compiler import compile_inference_model, explain_inference_model
    if args.explain:
        print(explain_inference_model(args.model))
        if not args.output:
            return 0
    if not args.output:
        raise FluidityError("compile: give the output directory (-o OUT/) or --explain")
    paths = compile_inference_model(args.model, args.output, portable=args.portable)
    for what in ("library", "header", "executable", "params"):
        print(f"{what:10s} {paths[what]}")
    return 0


def main(argv=None):
    ap = argparse.ArgumentParser(prog="fluidity", description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("ops", help="list registered ops")
    p.add_argument("pattern", nargs="?", help="glob on op type, e.g. 'elementwise_*'")
    p.add_argument("-v", "--verbose", action="store_true", help="show attributes and docs")
    p.set_defaults(fn=_cmd_ops)
    p = sub.add_parser("show", help="print a saved program")
    p.add_argument("file", help="program file, model directory or PREFIX of PREFIX.pdmodel")
    p.set_defaults(fn=_cmd_show)
    p = sub.add_parser("run", help="run an inference model on .npy inputs")
    p.add_argument("model", help="model directory (__model__ + parameters) or path prefix "
                                 "(PREFIX.pdmodel + PREFIX.pdiparams)")
    p.add_argument("--input", "-i", action="append", metavar="NAME=FILE.npy",
                   help="an input of the model (repeat for each)")
    p.add_argument("--lod", action="append", metavar="NAME=OFF,OFF,...",
                   help="level-0 sequence offsets of an input (one sequence per row: "
                        "0,1,2,...)")
    p.add_argument("--output", "-o", metavar="OUT.npz", help="save every output here")
    p.set_defaults(fn=_cmd_run)
    p = sub.add_parser("compile", help="build an inference model as a native library and "
                                       "executable")
    p.add_argument("model", help="model directory or path prefix, as for `run`")
    p.add_argument("--output", "-o", metavar="OUT", help="directory to write the build to")
    p.add_argument("--explain", action="store_true",
                   help="list where each op runs (native segment or Python) and why")
    p.add_argument("--portable", action="store_true",
                   help="build for any x86-64/arm64 of the kind, not -march=native")
    p.set_defaults(fn=_cmd_compile)
    args = ap.parse_args(argv)
    try:
        return args.fn(args)
    except FluidityError as e:
        print(f"fluidity: error: {e}", file=sys.stderr)
        return 2
    except BrokenPipeError:
        return 0


if __name__ == "__main__":
    sys.exit(main())
