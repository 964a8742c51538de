"""Runtime values held by variables: LoDTensor, SelectedRows, LoDTensorArray.

A LoDTensor is a numpy array plus level-of-detail (LoD): for each level a list of offsets
into the next level (the last level's offsets index rows of the array). A batch of
sequences of lengths [2, 3] has lod [[0, 2, 5]]. Kernels work on the array; LoD travels
with it.
"""
import numpy as np

from ..errors import FluidityError, ShapeError
from . import dtypes
from .lod import lod_problem
from .place import CPUPlace


def lengths_to_offsets(lengths):
    out = [0]
    for n in lengths:
        out.append(out[-1] + int(n))
    return out


def offsets_to_lengths(offsets):
    return [int(b - a) for a, b in zip(offsets[:-1], offsets[1:])]


def check_lod(lod, rows=None):
    """Raise a ShapeError saying what is wrong with `lod` (core/lod.py's rules: each level
    from 0, non-decreasing, ending where the next level's sequences do and the last at `rows`
    when given, int64 offsets), or return it as lists of ints."""
    problem = lod_problem(lod, rows)
    if problem is not None:
        raise ShapeError(problem)
    return [[int(o) for o in level] for level in lod]


class LoDTensor:
    """An ndarray with optional LoD. `np.array(t)` gives the data."""
    __slots__ = ("_array", "_lod")

    def __init__(self, array=None, lod=None):
        if isinstance(array, (list, tuple)) and lod is None:
            # Paddle's LoDTensor(recursive_sequence_lengths): no data yet, a LoD from lengths
            self._array, self._lod = None, []
            self.set_recursive_sequence_lengths(array)
            return
        self._array = array
        self._lod = lod if lod else []

    # --- data -------------------------------------------------------------------------
    def set(self, array, place=None):
        """Copy `array` in (as Paddle does): later in-place updates never reach the caller's."""
        self._array = np.array(array, copy=True, order="C")

    def numpy(self):
        return self._array

    def _set_dims(self, dims):
        """Give the tensor shape `dims` (Paddle's Resize): the data is kept when it has as
        many elements, else the tensor holds uninitialized memory of that shape (of its
        dtype, float32 when it had none) until `set` fills it."""
        dims = tuple(int(d) for d in dims)
        if any(d < 0 for d in dims):
            raise ShapeError(f"LoDTensor._set_dims: dims must be non-negative, got {list(dims)}")
        a = self._array
        if a is not None and a.size == int(np.prod(dims, dtype=np.int64)):
            self._array = a.reshape(dims)
        else:
            self._array = np.empty(dims, a.dtype if a is not None else np.float32)

    def _alloc(self, np_dtype):
        """Memory of the tensor's dims (set by `_set_dims`; none set: 0 elements) and of
        `np_dtype`: the data is kept when it already has that dtype, else zeros (Paddle's
        memory is uninitialized; zeros never show a caller stale bytes)."""
        a = self._array
        if a is None:
            self._array = np.zeros((0,), np_dtype)
        elif a.dtype != np_dtype:
            self._array = np.zeros(a.shape, np_dtype)
        return self._array

    def _alloc_float(self, place=None):
        """Paddle's `Tensor._alloc_float(place)`: float32 memory of the tensor's dims."""
        self._alloc(np.dtype(np.float32))

    def _alloc_int(self, place=None):
        """Paddle's `Tensor._alloc_int(place)`: int32 memory of the tensor's dims."""
        self._alloc(np.dtype(np.int32))

    def _alloc_double(self, place=None):
        self._alloc(np.dtype(np.float64))

    def _mutable_data(self, place, dtype):
        """Memory of the tensor's dims and `dtype` (a VarType code); returns its address,
        an int, as Paddle's does (for code that hands the buffer to C)."""
        return int(self._alloc(np.dtype(dtypes.to_numpy(dtype))).ctypes.data)

    def __getitem__(self, index):
        """A new tensor of `self[index]` (numpy's basic and advanced indexing), as Paddle's
        `Tensor.__getitem__` slices: a copy, without LoD."""
        if self._array is None:
            raise FluidityError("LoDTensor is not initialized (holds no data)")
        return LoDTensor(np.array(self._array[index], copy=True, order="C"))

    def _get_dims(self):
        """The dims (Paddle's `_get_dims`, the counterpart of `_set_dims`): [] when empty."""
        return self.shape()

    def _copy(self, place=None):
        """A copy (data and LoD) on `place` (host memory here, as every LoDTensor)."""
        return LoDTensor(None if self._array is None else self._array.copy(),
                         [list(level) for level in self._lod])

    def __array__(self, dtype=None, copy=None):
        if self._array is None:
            raise FluidityError("LoDTensor is not initialized (holds no data)")
        a = self._array if dtype is None else self._array.astype(dtype, copy=False)
        return a.copy() if copy and a is self._array else a

    @property
    def array(self):
        return self._array

    def shape(self):
        return list(self._array.shape) if self._array is not None else []

    def _dtype(self):
        return dtypes.to_code(self._array.dtype)

    def _place(self):
        """Where the data lives (Fluid's `LoDTensor._place()`): a host tensor's CPUPlace."""
        return CPUPlace()

    def _is_initialized(self):
        return self._array is not None

    def is_initialized(self):
        return self._array is not None

    # --- Paddle's element accessors (flat, C-order index), used by Fluid's tests and tools
    def _numel(self):
        return int(self._array.size) if self._array is not None else 0

    def _checked(self, i):
        """The array, after checking that flat index `i` is in it."""
        if self._array is None:
            raise FluidityError("LoDTensor is not initialized (holds no data)")
        n = self._array.size
        if not -n <= int(i) < n:
            raise IndexError(f"LoDTensor element {i} is out of range (it holds {n})")
        return self._array

    def _get_float_element(self, i):
        return float(self._checked(i).flat[int(i)])

    def _set_float_element(self, i, value):
        self._checked(i).flat[int(i)] = value     # .flat writes through any memory layout

    _get_double_element = _get_float_element
    _set_double_element = _set_float_element

    # --- LoD --------------------------------------------------------------------------
    def lod(self):
        return [list(level) for level in self._lod]

    def set_lod(self, lod):
        rows = self._array.shape[0] if self._array is not None and self._array.ndim else None
        self._lod = check_lod(lod, rows)

    def recursive_sequence_lengths(self):
        return [offsets_to_lengths(level) for level in self._lod]

    def set_recursive_sequence_lengths(self, recursive_sequence_lengths):
        """Set the LoD from lengths. As Paddle's, the lengths are checked among themselves
        but not against the rows (the data may be set after):
        `has_valid_recursive_sequence_lengths()` says whether they fit."""
        self._lod = check_lod([lengths_to_offsets(level)
                               for level in recursive_sequence_lengths])

    def has_valid_recursive_sequence_lengths(self):
        try:
            rows = self._array.shape[0] if self._array is not None else None
            check_lod(self._lod, rows)
            return True
        except FluidityError:
            return False

    def lod_level(self):
        return len(self._lod)

    def __repr__(self):
        if self._array is None:
            return "LoDTensor(uninitialized)"
        lod = f", lod={self._lod}" if self._lod else ""
        return f"LoDTensor(shape={list(self._array.shape)}, dtype={self._array.dtype}{lod})"


Tensor = LoDTensor


class RowIds(np.ndarray):
    """A SelectedRows' row ids: an int64 array (what kernels use), which Paddle's API also
    calls: `sr.rows()` gives them as a list."""

    def __call__(self):
        return [int(r) for r in self]


class Height(int):
    """A SelectedRows' height: an int, which Paddle's API also calls (`sr.height()`)."""

    def __call__(self):
        return int(self)


class _RowsValue(LoDTensor):
    """`SelectedRows.get_tensor()`: the rows' value tensor by reference, as Paddle's, so
    `sr.get_tensor().set(array, place)` fills the SelectedRows."""
    __slots__ = ("_owner",)

    def __init__(self, owner):
        self._owner = owner
        self._lod = []

    @property
    def _array(self):
        return self._owner.value

    @_array.setter
    def _array(self, value):
        self._owner.value = value


class FetchedArray(np.ndarray):
    """What `Executor.run` returns for a fetched value of one element in one or more dims:
    an ndarray (a view of the same data, `isinstance(v, np.ndarray)`, numpy arithmetic,
    `v[0]`, `v.shape == (1,)`, `v.tolist()`) that also converts to a Python number.

    Why: Fluid 1.x gives a loss, an accuracy and every full reduction shape `[1]`, and its
    programs both index them (`loss[0]`) and convert them (`float(loss)`, `"%.3f" % acc`),
    which numpy 1.x allowed for any one-element array. numpy 2 refuses `float()` of an
    array that is not 0-D, so a plain `[1]` ndarray would break the second idiom and a 0-D
    one the first; this subclass keeps both. Only `float()`, `int()`, `complex()` and
    formatting with a spec (`f"{loss:.4f}"`) differ
    from ndarray. It pickles as a plain ndarray, so a pickle of results needs no Fluidity
    to read. A value of several elements is a plain ndarray, and `float()` of it is numpy's
    TypeError, as it was in numpy 1.x."""

    def __float__(self):
        return float(self.reshape(-1)[0]) if self.size == 1 else float(self.view(np.ndarray))

    def __int__(self):
        return int(self.reshape(-1)[0]) if self.size == 1 else int(self.view(np.ndarray))

    def __complex__(self):
        return (complex(self.reshape(-1)[0]) if self.size == 1
                else complex(self.view(np.ndarray)))

    def __format__(self, spec):
        # f"{loss:.4f}", "{:.3f}".format(acc): numpy 2 formats no one-element array with a spec
        if spec and self.size == 1:
            return format(self.reshape(-1)[0].item(), spec)
        return super().__format__(spec)

    def __reduce__(self):
        return self.view(np.ndarray).__reduce__()

    def __reduce_ex__(self, protocol):
        return self.view(np.ndarray).__reduce_ex__(protocol)


def as_fetched(array):
    """`array` as `Executor.run` returns it: a FetchedArray view when it holds one element
    in one or more dims (so `float()` works under numpy 2), else `array` itself."""
    if type(array) is np.ndarray and array.ndim and array.size == 1:
        return array.view(FetchedArray)
    return array


class SelectedRows:
    """Rows `rows` of a tall [height, ...] tensor; `value` holds them, one row per id.
    Ids may repeat (a gradient of an embedding over a batch with duplicate ids); consumers
    that need unique rows call `merged()`. Paddle's accessors work too: `rows()`,
    `height()`, `set_rows`, `set_height`, `get_tensor()` (the value, by reference)."""
    __slots__ = ("_rows", "_height", "value")

    def __init__(self, rows=None, height=0, value=None):
        self.rows = rows if rows is not None else []
        self.height = height
        self.value = value

    @property
    def rows(self):
        return self._rows

    @rows.setter
    def rows(self, rows):
        self._rows = np.asarray(rows, dtype=np.int64).view(RowIds)

    @property
    def height(self):
        return self._height

    @height.setter
    def height(self, h):
        self._height = Height(h)

    def get_tensor(self):
        return _RowsValue(self)

    def set_height(self, h):
        self.height = h

    def set_rows(self, rows):
        self.rows = rows

    def sync_index(self):
        """Paddle's `SelectedRows.sync_index()` rebuilds its C++ map from row id to the
        index of its value row after `set_rows`. Here the row ids are the one array every
        kernel searches, so there is no second index to fall out of step: nothing to do."""

    def numel(self):
        """The number of elements of the value (Paddle's `SelectedRows.numel()`); 0 when
        it holds none."""
        return 0 if self.value is None else int(np.asarray(self.value).size)

    def merged(self):
        """Same content with unique, sorted rows (duplicates summed). A stable sort and one
        np.add.reduceat over the runs of equal rows (np.add.at is ~3x slower)."""
        rows = self.rows
        if len(rows) < 2:
            return self
        order = np.argsort(rows, kind="stable")
        srows = rows[order]
        starts = np.flatnonzero(np.concatenate(([True], srows[1:] != srows[:-1])))
        if len(starts) == len(rows):
            if (order == np.arange(len(rows))).all():
                return self
            return SelectedRows(srows, self.height, self.value[order])
        val = np.add.reduceat(self.value[order], starts, axis=0)
        return SelectedRows(srows[starts], self.height, val)

    def to_dense(self):
        out = np.zeros((self.height,) + self.value.shape[1:], dtype=self.value.dtype)
        np.add.at(out, self.rows, self.value)
        return out

    def __repr__(self):
        return f"SelectedRows(rows={len(self.rows)}, height={self.height})"


class LoDTensorArray(list):
    """A list of LoDTensors (tensor arrays of while loops and dynamic RNNs)."""

    def append(self, tensor):
        super().append(tensor if isinstance(tensor, LoDTensor) else LoDTensor(np.asarray(tensor)))


def as_lod_tensor(value, name="value"):
    """A fed value (LoDTensor, ndarray, list, scalar) -> LoDTensor."""
    if isinstance(value, LoDTensor):
        return value
    if isinstance(value, SelectedRows):
        raise FluidityError(f"{name}: a SelectedRows cannot be used where a LoDTensor is needed")
    arr = np.asarray(value)
    if arr.dtype == object:
        raise FluidityError(f"{name}: cannot make a tensor of ragged or object data; "
                            f"use fluid.create_lod_tensor for variable-length sequences")
    return LoDTensor(arr)


def create_lod_tensor(data, recursive_seq_lens, place=None):
    """Fluid's helper: data (ndarray or list of sequences) + lengths -> LoDTensor."""
    if isinstance(data, LoDTensor):
        data = np.asarray(data)
    if isinstance(data, list):
        flat = [np.asarray(seq).reshape(len(seq), -1) for seq in data]
        data = np.concatenate(flat, axis=0)
        if data.dtype.kind == "i":
            data = data.astype(np.int64)
    t = LoDTensor(np.asarray(data))
    t.set_lod([lengths_to_offsets(level) for level in recursive_seq_lens])  # rows checked
    return t


def create_random_int_lodtensor(recursive_seq_lens, base_shape, place=None, low=0, high=1):
    """Fluid's test helper: a LoDTensor of random int64s in [low, high] whose rows are the
    sequences of `recursive_seq_lens` (the last level's lengths sum to the row count), each
    row of shape `base_shape`."""
    if not isinstance(base_shape, (list, tuple)):
        raise TypeError(f"create_random_int_lodtensor: base_shape must be a list, got "
                        f"{type(base_shape).__name__}")
    rows = sum(int(n) for n in recursive_seq_lens[-1]) if recursive_seq_lens else 0
    data = np.random.randint(low, high + 1, size=[rows] + list(base_shape)).astype(np.int64)
    return create_lod_tensor(data, recursive_seq_lens, place)
