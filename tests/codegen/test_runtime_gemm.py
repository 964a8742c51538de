"""fl::gemm's matrix-vector forms (runtime/fluidity.h): one row or one column of C goes to
sgemv, for every transpose of A and B, with leading dims wider than the matrices; beta = 0
never reads what C held (a NaN stays out), beta = 1 accumulates. Each result within the
float32 rounding of a K-term dot product (|error| <= K * eps * sum |a_k b_k|) of the float64
product; a batch-1 layer (x[1,K] @ W[K,N]) is numpy's own result bit for bit, since numpy's
matmul sends that shape to the same sgemv."""
import ctypes

import numpy as np
import pytest

from fluidity.codegen import build

SOURCE = """#include "fluidity.h"
extern "C" void run(int ta, int tb, long M, long N, long K, float alpha, const float* A,
                    long lda, const float* B, long ldb, float beta, float* C, long ldc) {
  fl::gemm(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}
"""
_lib = []


def _run(ta, tb, m, n, k, alpha, a, b, beta, c):
    if not _lib:
        lib = build.load(build.compile_cached(SOURCE))
        lib.run.argtypes = [ctypes.c_int, ctypes.c_int] + [ctypes.c_long] * 3 + [
            ctypes.c_float, ctypes.c_void_p, ctypes.c_long, ctypes.c_void_p, ctypes.c_long,
            ctypes.c_float, ctypes.c_void_p, ctypes.c_long]
        _lib.append(lib)
    _lib[0].run(ta, tb, m, n, k, alpha, a.ctypes.data, a.shape[1], b.ctypes.data, b.shape[1],
                beta, c.ctypes.data, c.shape[1])


@pytest.mark.parametrize("ta", [0, 1])
@pytest.mark.parametrize("tb", [0, 1])
@pytest.mark.parametrize("m, n", [(1, 37), (29, 1), (1, 1)])
@pytest.mark.parametrize("beta", [0.0, 1.0])
def test_a_row_or_a_column_of_c_is_a_gemv_within_dot_product_rounding(ta, tb, m, n, beta):
    rng = np.random.default_rng(m * 100 + n + 7 * ta + 3 * tb)
    k, pad, alpha = 53, 3, -0.7
    a_shape, b_shape = ((k, m) if ta else (m, k)), ((n, k) if tb else (k, n))
    a = rng.normal(size=(a_shape[0], a_shape[1] + pad)).astype(np.float32)   # lda > cols
    b = rng.normal(size=(b_shape[0], b_shape[1] + pad)).astype(np.float32)
    c = rng.normal(size=(m, n + pad)).astype(np.float32)
    if beta == 0.0:
        c[:, :n] = np.nan                      # beta = 0: never read
    before = c.copy()
    opa = a[:, :a_shape[1]].astype(np.float64)
    opb = b[:, :b_shape[1]].astype(np.float64)
    opa, opb = (opa.T if ta else opa), (opb.T if tb else opb)
    want = alpha * (opa @ opb) + (beta * before[:, :n].astype(np.float64) if beta else 0)
    bound = k * np.finfo(np.float32).eps * (abs(alpha) * (np.abs(opa) @ np.abs(opb)) +
                                            (np.abs(before[:, :n]) if beta else 0)) + 1e-30
    _run(ta, tb, m, n, k, alpha, a, b, beta, c)
    assert np.all(np.abs(c[:, :n] - want) <= bound)
    np.testing.assert_array_equal(c[:, n:], before[:, n:])     # past ldc's columns: untouched


def test_a_batch_one_layer_is_numpys_matmul_bit_for_bit():
    rng = np.random.default_rng(0)
    x = rng.random((1, 784), dtype=np.float32)
    w = rng.normal(size=(784, 256)).astype(np.float32)
    c = np.full((1, 256), np.nan, np.float32)
    _run(0, 0, 1, 256, 784, 1.0, x, w, 0.0, c)
    np.testing.assert_array_equal(c, x @ w)
