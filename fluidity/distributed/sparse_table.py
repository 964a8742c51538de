"""The shard of a distributed lookup table a parameter server holds (Paddle's auto-grown
SelectedRows table behind `lookup_sparse_table`).

A `SparseTable` is a SelectedRows (rows = the ids this shard has seen, value = their rows,
height = the whole table's rows), so it is an ordinary persistable scope variable: a pserver
checkpoint saves it as Paddle's SelectedRows record, and a loaded SelectedRows is adopted
back (`adopt`). Rows exist only once touched: a shard of a 1e8-row table holds the rows its
trainers used, created on first touch with the table's initializer.

The initial value of row `id` is a function of (seed, id, column) alone (a counter-based
hash, `initial_rows`), not of the order rows are touched in nor of which server holds them,
so every run of a job starts every row alike, and a test can give a one-process model the
same initial table.

Each table has its own lock (no global lock): lookups from several trainers and the update
of the optimize block take it only while they touch the index and the arrays."""
import threading

import numpy as np

from ..core import dtypes
from ..core.tensor import SelectedRows
from ..errors import ExecutionError

_GROW = 1.5
_M1, _M2 = np.uint64(0xBF58476D1CE4E5B9), np.uint64(0x94D049BB133111EB)


def _mix(x):
    """splitmix64's finalizer over a uint64 array (wrapping arithmetic)."""
    with np.errstate(over="ignore"):
        x = (x ^ (x >> np.uint64(30))) * _M1
        x = (x ^ (x >> np.uint64(27))) * _M2
        return x ^ (x >> np.uint64(31))


def _uniform01(seed, ids, width, stream):
    """[len(ids), width] floats in [0, 1), one per (seed, id, column, stream)."""
    ids = np.asarray(ids, dtype=np.int64).astype(np.uint64)
    col = np.arange(width, dtype=np.uint64)
    with np.errstate(over="ignore"):
        key = _mix(np.uint64(seed & 0xFFFFFFFFFFFFFFFF) * np.uint64(0x9E3779B97F4A7C15) +
                   np.uint64(stream))
        x = _mix(key ^ _mix(ids[:, None] * np.uint64(0x632BE59BD9B4E019) + col[None, :]))
    return (x >> np.uint64(11)).astype(np.float64) * (1.0 / (1 << 53))


# initializer op type -> rows of the given ids, from its attributes
def _uniform(a, ids, width):
    u = _uniform01(a["seed"], ids, width, 0)
    return a["min"] + (a["max"] - a["min"]) * u


def _gaussian(a, ids, width):
    u1 = np.maximum(_uniform01(a["seed"], ids, width, 1), 1e-300)
    u2 = _uniform01(a["seed"], ids, width, 2)
    return a["mean"] + a["std"] * np.sqrt(-2.0 * np.log(u1)) * np.cos(2 * np.pi * u2)


def _constant(a, ids, width):
    return np.full((len(ids), width), a["value"])


INITIALIZERS = {"uniform_random": _uniform, "gaussian_random": _gaussian,
                "fill_constant": _constant}


def initial_rows(init, ids, width, dtype="float32"):
    """The initial rows of `ids` for initializer `init` (a dict: "type" one of INITIALIZERS,
    and its attributes min/max, mean/std, value, seed)."""
    fn = INITIALIZERS.get(init.get("type"))
    if fn is None:
        raise ExecutionError(f"a distributed table's rows cannot be initialized by "
                             f"'{init.get('type')}' (built: {sorted(INITIALIZERS)})")
    return fn(init, ids, width).astype(dtype)


class SparseTable(SelectedRows):
    """One pserver's shard: `positions(ids)` (rows created on first touch), `lookup(ids)`,
    `apply_sgd(lr, grad)` (the touched rows only)."""
    __slots__ = ("name", "init", "width", "dtype", "_index", "_ids", "_data", "_n", "_lock",
                 "auto_grown", "capacity")

    def __init__(self, name, height, width, init, dtype="float32", auto_grown=True):
        self.name, self.init, self.width = name, dict(init), int(width)
        self.dtype, self.auto_grown = np.dtype(dtype), auto_grown
        self.height = int(height)
        self._index = {}
        self._ids = np.zeros(0, np.int64)
        self._data = np.zeros((0, self.width), self.dtype)
        self._n = 0
        self._lock = threading.Lock()
        # None: rows made on first touch by the initializer, ids checked against height.
        # An int: Paddle's preallocated table (a SelectedRows whose value has more rows than
        # ids): a new id takes the next row as it stands, until `capacity` rows are used.
        self.capacity = None

    # SelectedRows' view: the rows in use (what a checkpoint saves)
    @property
    def rows(self):
        return self._ids[:self._n]

    @rows.setter
    def rows(self, _value):
        raise ExecutionError(f"distributed table '{self.name}': rows are set by lookups only")

    @property
    def value(self):
        return self._data[:self._n]

    @value.setter
    def value(self, _value):
        raise ExecutionError(f"distributed table '{self.name}': values change by its "
                             f"optimizer only")

    def __len__(self):
        return self._n

    def _check(self, ids):
        if self.capacity is not None:   # Paddle's preallocated table takes any id
            return
        if ids.size and (ids.min() < 0 or ids.max() >= self.height):
            bad = ids[(ids < 0) | (ids >= self.height)][0]
            raise ExecutionError(f"distributed table '{self.name}': id {int(bad)} is out of "
                                 f"range for a table of {self.height} rows")

    def _reserve(self, n):
        if n <= len(self._ids):
            return
        cap = max(n, int(len(self._ids) * _GROW) + 16)
        ids = np.zeros(cap, np.int64)
        ids[:self._n] = self._ids[:self._n]
        data = np.zeros((cap, self.width), self.dtype)
        data[:self._n] = self._data[:self._n]
        self._ids, self._data = ids, data

    def _positions(self, ids, grow):
        """(lock held) positions of `ids` in the data; unseen ids get new rows (grow) or -1."""
        index = self._index
        pos = np.fromiter((index.get(i, -1) for i in ids.tolist()), np.int64, len(ids))
        new = ids[pos < 0]
        if grow and new.size:
            new, first = np.unique(new, return_index=True)
            start = self._n
            if self.capacity is not None:   # spare rows in the order ids first appear
                new = new[np.argsort(first)]
                if start + len(new) > self.capacity:
                    raise ExecutionError(f"distributed table '{self.name}' is full: "
                                         f"{len(new)} new ids do not fit the "
                                         f"{self.capacity - start} rows left of its "
                                         f"{self.capacity}")
            else:
                self._reserve(start + len(new))
                self._data[start:start + len(new)] = initial_rows(self.init, new,
                                                                  self.width, self.dtype)
            self._ids[start:start + len(new)] = new
            for k, i in enumerate(new.tolist()):
                index[i] = start + k
            self._n = start + len(new)
            pos = np.fromiter((index[i] for i in ids.tolist()), np.int64, len(ids))
        return pos

    def lookup(self, ids, grow=True):
        """[len(ids), width] rows of `ids` (copies); an unseen id gets a new initialized row
        when `grow`, else zeros (Paddle's is_test lookup)."""
        ids = np.asarray(ids, dtype=np.int64).reshape(-1)
        self._check(ids)
        with self._lock:
            pos = self._positions(ids, grow)
            out = self._data[np.maximum(pos, 0)]
        if not grow:
            out[pos < 0] = 0
        return out

    def apply_sgd(self, lr, grad):
        """Param -= lr * Grad over the rows of SelectedRows `grad` (ids of this table,
        duplicates accumulating, as Paddle's sparse SGD)."""
        rows = np.asarray(grad.rows, dtype=np.int64)
        if not rows.size:
            return
        self._check(rows)
        value = np.asarray(grad.value).reshape(len(rows), self.width)
        with self._lock:
            pos = self._positions(rows, True)
            np.subtract.at(self._data, pos, (lr * value).astype(self.dtype, copy=False))

    @classmethod
    def adopt(cls, value, name, height, width, init, dtype="float32"):
        """A SparseTable for a scope variable's value: itself if it is one, a new empty one
        for None, the rows of a loaded SelectedRows (a checkpoint) otherwise. A
        SelectedRows whose value has more rows than ids is Paddle's preallocated table: its
        spare rows are the values the next new ids take (`capacity`)."""
        if isinstance(value, cls):
            return value
        table = cls(name, height, width, init, dtype)
        if value is None or (not isinstance(value, SelectedRows) and
                             getattr(value, "_array", None) is None):
            return table
        if not isinstance(value, SelectedRows):
            raise ExecutionError(f"distributed table '{name}' holds a "
                                 f"{type(value).__name__}, not the SelectedRows of a shard")
        rows = np.asarray(value.rows, dtype=np.int64)
        data = np.asarray(value.value) if value.value is not None else np.zeros((0, width))
        if data.ndim != 2 or data.shape[1] != table.width or data.shape[0] < len(rows):
            raise ExecutionError(f"distributed table '{name}': a SelectedRows of "
                                 f"{len(rows)} ids and a value of shape {list(data.shape)} "
                                 f"is not a table of width {table.width}")
        if data.shape[0] > len(rows):
            table.capacity = data.shape[0]
        table._check(rows)
        with table._lock:
            table._reserve(data.shape[0])
            table._ids[:len(rows)] = rows
            table._data[:data.shape[0]] = data
            table._n = len(rows)
            table._index = {int(i): k for k, i in enumerate(rows.tolist())}
        return table

    def __repr__(self):
        return f"SparseTable({self.name!r}, rows={self._n}, height={self.height})"


# lookup_sparse_table's attributes that make a table's initializer, with the op's defaults
_INIT_ATTRS = {"init_type": "uniform_random", "min": -1.0, "max": 1.0, "mean": 0.0, "std": 1.0,
               "value": 0.0, "seed": 0}


def adopt_tables(program, scope):
    """Make each distributed table that `program`'s lookup_sparse_table ops read (a pserver
    program's prefetch blocks) a SparseTable in `scope`: a new empty shard, or the rows of a
    SelectedRows a checkpoint loaded. Done once when a pserver starts, before it serves, so
    a snapshot always holds the shard, the optimize blocks (sgd on the table, also when
    replaying a round log) find one, and concurrent first prefetches never race to create
    it. Returns the tables, by name."""
    out = {}
    for block in program.blocks:
        for op in block.ops:
            if op.type != "lookup_sparse_table" or op.input("W")[0] in out:
                continue
            name = op.input("W")[0]
            desc = block.find_var_recursive(name)
            if desc is None or len(desc.shape) != 2:
                raise ExecutionError(f"lookup_sparse_table: table '{name}' must be declared "
                                     f"[height, width]")
            height, width = int(desc.shape[0]), int(desc.shape[1])
            if op.has_attr("table_height") and op.attr("table_height") > 0:
                height = int(op.attr("table_height"))   # W declares the shard's rows
            a = {k: (op.attr(k) if op.has_attr(k) else d) for k, d in _INIT_ATTRS.items()}
            init = {"type": a["init_type"], "min": a["min"], "max": a["max"],
                    "mean": a["mean"], "std": a["std"], "value": a["value"], "seed": a["seed"]}
            var = scope.find_var(name) or scope.var(name)
            var.value = out[name] = SparseTable.adopt(var.value, name, height, width, init,
                                                      dtypes.to_numpy(desc.dtype))
    return out


class TableService:
    """The `sparse_table` run-time service: how `lookup_sparse_table` (an op, which may not
    import this package) turns a scope variable into a shard."""

    def adopt(self, value, name, height, width, init, dtype="float32"):
        return SparseTable.adopt(value, name, height, width, init, dtype)

    def close(self):
        pass
