"""save / load / save_combine / load_combine: variables to and from Paddle's tensor files.

Slots and attributes are Paddle's. Files are written atomically (temporary file in the same
directory, fsync, rename), so an interrupted save never leaves half a file where a good one
was. Loads check every record and that it fits the variable the program declares (dtype,
shape with -1 as a wildcard); errors name the file and the variable. A combined file is
read completely before any variable is assigned.
"""
import io
import os

import numpy as np

from ..core import dtypes
from ..core import serialization as ser
from ..core.dtypes import VarType
from ..core.tensor import LoDTensor, SelectedRows
from ..errors import FluidityError, ShapeError
from .registry import In, OpDef, Out, long, longs

_FLOATS = (np.float32, np.float64)


def _path(p):
    path = p.attrs["file_path"]
    if not path:
        raise FluidityError(f"op '{p.op.type}': attribute file_path is empty")
    return path


def _value(name, holder, path):
    v = holder.value
    if isinstance(v, SelectedRows) and v.value is not None:
        return v
    if isinstance(v, LoDTensor) and v._array is not None:
        return v
    what = "holds no value" if v is None or isinstance(v, (LoDTensor, SelectedRows)) else \
        f"holds a {type(v).__name__}, which cannot be saved"
    raise FluidityError(f"cannot save variable '{name}' to {path}: it {what} (run the startup "
                        f"program, or load the parameters, first)")


def _fp16(array, on):
    return array.astype(np.float16) if on and array.dtype.type in _FLOATS else array


def _write_value(f, value, as_fp16):
    if isinstance(value, SelectedRows):
        ser.write_selected_rows(f, SelectedRows(value.rows, value.height,
                                                _fp16(np.asarray(value.value), as_fp16)))
    else:
        ser.write_lod_tensor(f, _fp16(value._array, as_fp16), value._lod)


def _check_overwrite(path, overwrite):
    if not overwrite and os.path.exists(path):
        raise FluidityError(f"{path}: file exists and overwrite is false")


def _describe(dtype_code, shape):
    return f"{dtypes.name(dtype_code)}{list(shape)}"


def _as_declared_integer(var, value):
    """Integer ids saved as one integer dtype and declared as another (PaddleRec's TDM saves
    its tree as int32 from the train network and declares it int64 in the infer network):
    Fluid 1.8's load keeps whatever the file holds; here the value takes the declared dtype,
    so the program's desc stays true, when every id fits it. Floats stay checked strictly."""
    is_sr = isinstance(value, SelectedRows)
    array = value.value if is_sr else value._array
    if var is None or var.dtype is None or array is None:
        return
    want = dtypes.to_numpy(var.dtype)
    if want == array.dtype or not (np.issubdtype(want, np.integer)
                                   and np.issubdtype(array.dtype, np.integer)):
        return
    info = np.iinfo(want)
    if array.size and (array.min() < info.min or array.max() > info.max):
        return                  # does not fit: _check_fits reports the mismatch
    if is_sr:
        value.value = array.astype(want)
    else:
        value._array = array.astype(want)


def _check_fits(path, name, var, value, check_dtype=True, check_shape=True):
    """Raise ShapeError naming the file when a loaded value does not fit VarDesc `var`."""
    if var is None:
        return
    _as_declared_integer(var, value)
    is_sr = isinstance(value, SelectedRows)
    array = value.value if is_sr else value._array
    got_dtype = dtypes.to_code(array.dtype)
    want, got = list(var.shape), list(array.shape)
    if is_sr:  # the value holds some rows of a [height, ...] table
        want, got = want[1:], got[1:]
    fits = not check_shape or (len(want) == len(got) and
                               all(w < 0 or w == g for w, g in zip(want, got)))
    if not fits or (check_dtype and var.dtype is not None and var.dtype != got_dtype):
        kind = "SelectedRows rows of " if is_sr else ""
        raise ShapeError(f"{path}: variable '{name}' is {_describe(var.dtype, var.shape)} in "
                         f"the program, but the file holds {kind}"
                         f"{_describe(got_dtype, array.shape)}")


class Save(OpDef):
    type = "save"
    inputs = (In("X"),)
    outputs = (Out("kLookupTablePath", dispensable=True),)
    attrs = {"overwrite": True, "save_as_fp16": False, "file_path": ""}
    kind = "ctx"
    infer_shape = None
    share_lod = None
    doc = ("Write X (LoDTensor or SelectedRows) to file_path as one Paddle tensor record; "
           "save_as_fp16 stores float tensors as float16.")

    @staticmethod
    def make_step(p):
        i, name = p.in_one("X"), p.op.input("X")[0]
        path, overwrite, fp16 = _path(p), p.attrs["overwrite"], p.attrs["save_as_fp16"]

        def step(frame, env):
            value = _value(name, frame[i], path)
            _check_overwrite(path, overwrite)
            ser.atomic_write(path, lambda f: _write_value(f, value, fp16))
        return step


class Load(OpDef):
    type = "load"
    inputs = ()
    outputs = (Out("Out"),)
    attrs = {"file_path": "", "load_as_fp16": False, "seek": long(-1), "shape": longs()}
    kind = "ctx"
    infer_shape = None
    share_lod = None
    doc = ("Read Out from the tensor record in file_path (a SelectedRows record when Out is "
           "SELECTED_ROWS); seek/shape read only `shape` elements starting at element `seek`.")

    @staticmethod
    def make_step(p):
        o, name = p.out_one("Out"), p.op.output("Out")[0]
        var = p.find_var(name)
        path, fp16 = _path(p), p.attrs["load_as_fp16"]
        seek, shape = p.attrs["seek"], list(p.attrs["shape"])
        is_sr = var is not None and var.type == VarType.SELECTED_ROWS
        # a variable declared without dims (`layers.create_tensor`) takes whatever shape the
        # file holds, as in Fluid; one declared with dims must match them
        takes_file_shape = var is not None and not list(var.shape)

        def step(frame, env):
            value = ser.load_tensor_file(path, is_sr, (seek, shape) if seek >= 0 else None,
                                         name)
            if takes_file_shape:      # Fluid's load: the variable takes the file's shape
                _check_fits(path, name, var, value, check_dtype=not fp16, check_shape=False)
            else:
                _check_fits(path, name, var, value, check_dtype=not fp16)
            if fp16:
                if is_sr:
                    value.value = _fp16(value.value, True)
                else:
                    value._array = _fp16(value._array, True)
            frame[o].value = value
        return step


class SaveCombine(OpDef):
    type = "save_combine"
    inputs = (In("X", duplicable=True),)
    outputs = (Out("Y", dispensable=True),)
    attrs = {"overwrite": True, "save_as_fp16": False, "file_path": "", "save_to_memory": False}
    kind = "ctx"
    infer_shape = None
    share_lod = None
    doc = ("Write the X tensors, in slot order, as back-to-back LoDTensor records into one file "
           "(or, save_to_memory, into Y as bytes).")

    @staticmethod
    def make_step(p):
        ids, names = p.in_idx("X"), p.op.input("X")
        to_memory, y = p.attrs["save_to_memory"], p.out_one("Y")
        path = p.attrs["file_path"] if to_memory else _path(p)
        where = path or "memory"
        overwrite, fp16 = p.attrs["overwrite"], p.attrs["save_as_fp16"]

        def step(frame, env):
            values = [_value(n, frame[i], where) for i, n in zip(ids, names)]
            for n, v in zip(names, values):
                if not isinstance(v, LoDTensor):
                    raise FluidityError(f"save_combine {where}: variable '{n}' is a "
                                        f"{type(v).__name__}; only LoDTensors can be combined "
                                        f"(save it to a separate file)")

            def write(f):
                for v in values:
                    _write_value(f, v, fp16)
            if to_memory:
                if y is None:
                    raise FluidityError("save_combine with save_to_memory needs output Y")
                buf = io.BytesIO()
                write(buf)
                frame[y].value = buf.getvalue()
                return
            _check_overwrite(path, overwrite)
            ser.atomic_write(path, write)
        return step


class LoadCombine(OpDef):
    type = "load_combine"
    inputs = ()
    outputs = (Out("Out", duplicable=True),)
    attrs = {"file_path": "", "load_as_fp16": False, "model_from_memory": False}
    kind = "ctx"
    infer_shape = None
    share_lod = None
    doc = ("Read the Out variables, in slot order, from back-to-back LoDTensor records in "
           "file_path; the file must hold exactly that many records.")

    @staticmethod
    def make_step(p):
        ids, names = p.out_idx("Out"), p.op.output("Out")
        vars_ = [p.find_var(n) for n in names]
        if p.attrs["model_from_memory"]:
            raise FluidityError("load_combine: model_from_memory is not supported (a binary "
                                "string attribute cannot be stored in a program); load from a "
                                "file")
        path, fp16 = _path(p), p.attrs["load_as_fp16"]

        def step(frame, env):
            values = ser.load_combined_file(path, names)
            for n, var, v in zip(names, vars_, values):
                _check_fits(path, n, var, v, check_dtype=not fp16)
            for i, v in zip(ids, values):
                v._array = _fp16(v._array, fp16)
                frame[i].value = v
        return step
