"""The sparse embedding kernels (fluidity/ops/sparse_kernels.py): C and numpy give the same
results and the same errors, nothing is written when the input is bad; the op
fused_embedding_seq_pool_concat built on them; sgd's row-scatter path; and the fallback when
the C library cannot be built."""
import warnings

import numpy as np
import pytest

from fluidity.core import native
from fluidity.core.tensor import LoDTensor, SelectedRows
from fluidity.errors import ExecutionError
from fluidity.ops import sparse_kernels as K
from op_test import check_grad, check_output, run_op

rng = np.random.default_rng(3)


@pytest.fixture(params=["c", "numpy"])
def backend(request):
    old = K.set_native(request.param == "c")
    if request.param == "c":
        assert K._native(), "the C kernels should build on the test machine"
    yield request.param
    K.set_native(old)


def _ids(lens, vocab, shared_lod=None):
    t = LoDTensor(rng.integers(0, vocab, size=(sum(lens), 1)).astype(np.int64))
    t.set_recursive_sequence_lengths([lens])
    if shared_lod is not None:
        t._lod = shared_lod
    return t


def _reference_pool(w, tensors, pad=-1):
    cols = []
    for t in tensors:
        a, off = np.asarray(t).reshape(-1), t._lod[-1]
        rows = []
        for i in range(len(off) - 1):
            seq = [x for x in a[off[i]:off[i + 1]] if x != pad]
            rows.append(w[seq].sum(0) if seq else np.zeros(w.shape[1], w.dtype))
        cols.append(np.stack(rows))
    return np.concatenate(cols, axis=1)


def _reference_rows(dout, tensors, D, pad=-1):
    out = []
    for s, t in enumerate(tensors):
        a, off = np.asarray(t).reshape(-1), t._lod[-1]
        for i in range(len(off) - 1):
            for j in range(off[i], off[i + 1]):
                out.append(np.zeros(D) if a[j] == pad else dout[i, s * D:(s + 1) * D])
    return np.array(out, dtype=dout.dtype).reshape(-1, D)


@pytest.mark.parametrize("pad", [-1, 2])
def test_pool_and_grad_match_the_reference(backend, pad):
    w = rng.normal(size=(7, 3)).astype(np.float32)
    tensors = [_ids([2, 0, 3, 1], 7), _ids([1, 1, 1, 1], 7), _ids([0, 0, 4, 0], 7)]
    slots = K.Slots(tensors, "t")
    assert slots.stride == 5 and slots.S == 3 and slots.B == 4
    out = K.pool(w, slots, pad, "t")
    np.testing.assert_allclose(out, _reference_pool(w, tensors, pad), rtol=1e-6, atol=1e-7)
    dout = rng.normal(size=(4, 9)).astype(np.float32)
    value = K.pool_grad(dout, slots, pad, 3, np.float32, "t")
    np.testing.assert_array_equal(value, _reference_rows(dout, tensors, 3, pad))


def test_slots_sharing_one_lod_object_use_one_offsets_array(backend):
    lod = [[0, 1, 2, 3]]
    tensors = [_ids([1, 1, 1], 50, shared_lod=lod) for _ in range(4)]
    slots = K.Slots(tensors, "t")
    assert slots.stride == 0 and slots.offs.shape == (4,)
    w = rng.normal(size=(50, 5)).astype(np.float32)
    np.testing.assert_allclose(K.pool(w, slots, -1, "t"), _reference_pool(w, tensors),
                               rtol=1e-6)


def test_rows_axpy_accumulates_duplicates(backend):
    p = rng.normal(size=(6, 2)).astype(np.float32)
    rows = np.array([4, 1, 4, 4])
    v = rng.normal(size=(4, 2)).astype(np.float32)
    want = p.copy()
    for r, x in zip(rows, v):
        want[r] -= 0.5 * x
    K.rows_axpy(p, rows, v, -0.5, "t")
    np.testing.assert_allclose(p, want, rtol=1e-6)


def test_bad_input_raises_and_writes_nothing(backend):
    w = rng.normal(size=(5, 2)).astype(np.float32)
    good, bad = _ids([1, 2], 5), LoDTensor(np.array([[1], [9], [0]], np.int64), [[0, 1, 3]])
    with pytest.raises(ExecutionError, match=r"t: id 9 is out of range for a table of 5 rows"):
        K.pool(w, K.Slots([good, bad], "t"), -1, "t")
    with pytest.raises(ExecutionError, match=r"different numbers of sequences \[2, 1\]"):
        K.Slots([good, _ids([3], 5)], "t")
    with pytest.raises(ExecutionError, match="Ids #1 has no LoD"):
        K.Slots([good, LoDTensor(np.zeros((2, 1), np.int64))], "t")
    torn = LoDTensor(np.array([[1], [2]], np.int64), [[0, 1, 5]])  # LoD says 5 ids, has 2
    with pytest.raises(ExecutionError, match="the LoD of Ids #1 does not fit its 2 ids"):
        K.pool(w, K.Slots([good, torn], "t"), -1, "t")
    with pytest.raises(ExecutionError, match="does not fit"):
        K.pool_grad(np.zeros((2, 4), np.float32), K.Slots([good, torn], "t"), -1, 2,
                    np.float32, "t")
    before = w.copy()
    with pytest.raises(ExecutionError, match="Grad has row 5 but Param has 5 rows"):
        K.rows_axpy(w, np.array([0, 5]), np.ones((2, 2), np.float32), -1.0, "t")
    np.testing.assert_array_equal(w, before)  # row 0 was not updated either


def test_fused_embedding_seq_pool_concat_op():
    w = rng.normal(size=(11, 4)).astype(np.float32)
    ids = [("a", _ids([1, 3, 0], 11)), ("b", _ids([2, 2, 1], 11))]
    tensors = [t for _, t in ids]
    check_output("fused_embedding_seq_pool_concat", {"W": w, "Ids": ids},
                 {"Out": _reference_pool(w, tensors)}, rtol=1e-5, atol=1e-6)
    check_grad("fused_embedding_seq_pool_concat", {"W": w, "Ids": ids}, ["W"])
    pad = int(np.asarray(tensors[0]).reshape(-1)[1])
    check_output("fused_embedding_seq_pool_concat", {"W": w, "Ids": ids},
                 {"Out": _reference_pool(w, tensors, pad)}, {"padding_idx": pad},
                 rtol=1e-5, atol=1e-6)
    check_grad("fused_embedding_seq_pool_concat", {"W": w, "Ids": ids}, ["W"],
               {"padding_idx": pad})
    with pytest.raises(ExecutionError, match="id 11 is out of range for a table of 11 rows"):
        run_op("fused_embedding_seq_pool_concat",
               {"W": w, "Ids": [("a", LoDTensor(np.array([[11]], np.int64), [[0, 1]]))]})


def _run_sgd(p, rows, value, lr=0.5):
    """One sgd op with a SelectedRows Grad (set in the scope: it cannot be fed); returns
    (the parameter array after the step, the ExecutionError raised or None)."""
    import fluidity as fluid
    main = fluid.Program()
    block = main.global_block()
    block.create_var(name="p", shape=list(p.shape), dtype="float32", persistable=True)
    block.create_var(name="lr", shape=[1], dtype="float32", persistable=True)
    block.create_var(name="g", shape=list(p.shape), dtype="float32", persistable=True,
                     type=fluid.core.VarType.SELECTED_ROWS)
    block.append_op("sgd", {"Param": ["p"], "LearningRate": ["lr"], "Grad": ["g"]},
                    {"ParamOut": ["p"]})
    scope = fluid.Scope()
    scope.var("p").get_tensor().set(p)
    scope.var("lr").get_tensor().set(np.array([lr], np.float32))
    scope.var("g").value = SelectedRows(rows, p.shape[0], value)
    err = None
    try:
        fluid.Executor().run(main, scope=scope)
    except ExecutionError as e:
        err = e
    return np.asarray(scope.find_var("p").get_tensor()).copy(), err


def test_sgd_sparse_rows_match_the_dense_update(backend):
    p = rng.normal(size=(8, 3)).astype(np.float32)
    rows = np.array([5, 0, 5, 7])
    v = rng.normal(size=(4, 3)).astype(np.float32)
    dense = SelectedRows(rows, 8, v).to_dense()
    got, err = _run_sgd(p, rows, v, 0.1)
    assert err is None
    np.testing.assert_allclose(got, p - 0.1 * dense, rtol=1e-6, atol=1e-7)


def test_sgd_sparse_bad_row_leaves_param_untouched(backend):
    p = rng.normal(size=(4, 2)).astype(np.float32)
    got, err = _run_sgd(p, np.array([1, 4]), np.ones((2, 2), np.float32))
    assert err is not None and "Grad has row 4 but Param has 4 rows" in str(err)
    np.testing.assert_array_equal(got, p)  # row 1 was not updated either


def test_without_a_compiler_the_numpy_kernels_serve(tmp_path, monkeypatch):
    monkeypatch.setenv("CC", "false")
    monkeypatch.setenv("FLUIDITY_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(K, "_lib", None)
    native.forget(K._SRC)
    try:
        with pytest.warns(UserWarning, match="sparse embedding kernels use numpy"):
            assert K._native() is False
        with pytest.raises(native.NativeBuildError, match="failed to compile"):
            native.load(K._SRC)
        w = rng.normal(size=(6, 2)).astype(np.float32)
        tensors = [_ids([2, 1], 6), _ids([1, 1], 6)]
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # warned once, not per call
            out = K.pool(w, K.Slots(tensors, "t"), -1, "t")
        np.testing.assert_allclose(out, _reference_pool(w, tensors), rtol=1e-6)
    finally:
        native.forget(K._SRC)
        K._lib = None


_UPDATES = {  # op type: (its state slots, attrs)
    "adam": (("Moment1", "Moment2", "Beta1Pow", "Beta2Pow"),
             {"beta1": 0.9, "beta2": 0.999, "epsilon": 1e-8}),
    "adagrad": (("Moment",), {"epsilon": 1e-6}),
}


def _run_update(op_type, p, grad, attrs=None, steps=3):
    """Steps of one update op (Grad a dense array or a SelectedRows, set in the scope: it
    cannot be fed); returns Param and the states after them."""
    import fluidity as fluid
    states, base_attrs = _UPDATES[op_type]
    main = fluid.Program()
    block = main.global_block()
    values = {"Param": p, "LearningRate": np.array([0.01], np.float32)}
    for s in states:
        values[s] = np.array([0.9 if s == "Beta1Pow" else 0.999], np.float32) \
            if s.endswith("Pow") else np.zeros_like(p)
    for n, v in values.items():
        block.create_var(name=n, shape=list(v.shape), dtype="float32", persistable=True)
    block.create_var(name="g", shape=list(p.shape), dtype="float32", persistable=True,
                     type=fluid.core.VarType.SELECTED_ROWS if isinstance(grad, SelectedRows)
                     else fluid.core.VarType.LOD_TENSOR)
    block.append_op(op_type, {**{n: [n] for n in values}, "Grad": ["g"]},
                    {"ParamOut": ["Param"], **{s + "Out": [s] for s in states}},
                    {**base_attrs, **(attrs or {})})
    scope = fluid.Scope()
    for n, v in values.items():
        scope.var(n).get_tensor().set(v)
    if isinstance(grad, SelectedRows):
        scope.var("g").value = grad
    else:
        scope.var("g").get_tensor().set(grad)
    exe = fluid.Executor()
    for _ in range(steps):
        exe.run(main, scope=scope)
    return [np.asarray(scope.find_var(n).get_tensor()).copy() for n in ("Param",) + states]


@pytest.mark.parametrize("op_type,kind", [("adam", "dense"), ("adam", "lazy rows"),
                                          ("adam", "all rows"), ("adagrad", "dense"),
                                          ("adagrad", "lazy rows")])
def test_update_in_c_equals_numpy_bit_for_bit(op_type, kind, monkeypatch):
    took = []
    real = getattr(K, op_type)
    monkeypatch.setattr(K, op_type, lambda *a: took.append(real(*a)) or took[-1])
    p = rng.normal(size=(9, 4)).astype(np.float32)
    attrs = {"lazy_mode": kind == "lazy rows"} if op_type == "adam" else {}
    if kind == "dense":
        grad = rng.normal(size=(9, 4)).astype(np.float32)
    else:  # duplicate rows are summed first, as Paddle's MergeAdd
        grad = SelectedRows(np.array([7, 2, 7, 0]), 9, rng.normal(size=(4, 4)).astype(np.float32))
    old = K.set_native(True)
    try:
        c = _run_update(op_type, p, grad, attrs)
        K.set_native(False)
        ref = _run_update(op_type, p, grad, attrs)
    finally:
        K.set_native(old)
    assert took[:3] == [True] * 3 and took[3:] == [False] * 3  # C, then numpy
    for a, b in zip(c, ref):
        np.testing.assert_array_equal(a, b)
    assert not np.array_equal(c[0], p)
    if kind == "lazy rows":  # rows absent from the gradient are untouched
        np.testing.assert_array_equal(c[0][[1, 3, 4, 5, 6, 8]], p[[1, 3, 4, 5, 6, 8]])


def test_merge_rows_sums_duplicates_as_merged_does():
    rows = rng.integers(0, 50, size=400)
    value = rng.normal(size=(400, 3)).astype(np.float32)
    got_rows, got = K.merge_rows(rows, value)
    assert list(got_rows) == list(dict.fromkeys(rows.tolist()))  # first-seen order
    want = SelectedRows(rows, 50, value).merged()
    order = np.argsort(got_rows)
    np.testing.assert_array_equal(got_rows[order], want.rows)
    # the same sums up to rounding: numpy's reduction may associate long runs differently
    np.testing.assert_allclose(got[order], want.value, rtol=1e-5, atol=1e-6)
    old = K.set_native(False)
    try:
        assert K.merge_rows(rows, value) is None  # the caller then uses merged()
    finally:
        K.set_native(old)
