"""runtime/philox.h, the C twin of core/philox.py: its constants are the Python tables', and
compiled it gives the same words, the same log/cos/exp and the same uniforms, normals and
dropout masks bit for bit."""
import ctypes
import math
import re

import numpy as np

from fluidity.codegen import build
from fluidity.core import philox

SOURCE = """#include "fluidity.h"
extern "C" void words(uint32_t* out, long n, uint32_t seed, uint32_t stream, uint64_t run,
                      long first) {
  fl::Philox g(seed, stream, run);
  g.each_word(first, n, [&](int64_t j, uint32_t w) { out[j - first] = w; });
}
extern "C" void funcs(const double* x, const double* u, const double* y, double* l, double* c,
                      double* e, long n) {
  for (long i = 0; i < n; ++i) {
    l[i] = fl::philox_log(x[i]); c[i] = fl::philox_cos_2pi(u[i]); e[i] = fl::philox_exp(y[i]);
  }
}
extern "C" void draws(float* u, float* z, const float* x, float* d, uint8_t* m, long n,
                      uint32_t seed, uint32_t stream, uint64_t run, uint32_t thr, float keep) {
  fl::Philox g(seed, stream, run);
  fl::philox_uniform_f32(g, u, n, -1.5, 2.5);
  fl::philox_normal_f32(g, z, n, 0.5, 2.0);
  fl::philox_dropout(g, x, d, m, n, thr, true, keep, false);
}
"""


def _p(a):
    return a.ctypes.data_as(ctypes.c_void_p)


def _header_table(text, name):
    body = re.search(name + r"\[\] = \{([^}]*)\}", text).group(1)
    return tuple(float.fromhex(v.strip()) for v in body.split(",") if v.strip())


def test_header_constants_are_the_python_tables():
    with open(f"{build.RUNTIME_DIR}/philox.h") as f:
        text = f.read()
    assert _header_table(text, "kPhiloxLog") == philox.LOG_C
    assert _header_table(text, "kPhiloxCos") == philox.COS_C
    assert _header_table(text, "kPhiloxExp") == philox.EXP_C
    for c_name, value in (("kPhiloxLn2", philox.LN2), ("kPhiloxTwoPi", philox.TWO_PI),
                          ("kPhiloxInvLn2", philox.INV_LN2),
                          ("kPhiloxSqrtHalf", philox.SQRT_HALF),
                          ("kPhiloxLn2Hi", philox.LN2_HI), ("kPhiloxLn2Lo", philox.LN2_LO)):
        got = re.search(c_name + r" = ([^;]*);", text).group(1)
        assert float.fromhex(got) == value, c_name


def test_compiled_twin_draws_the_same_bits():
    lib = build.load(build.compile_cached(SOURCE))
    for seed, stream, run, first, n in ((1, 2, 0, 0, 37), (2 ** 32 - 1, 99, 2 ** 40 + 3, 6, 50)):
        out = np.empty(n, np.uint32)
        lib.words(_p(out), ctypes.c_long(n), ctypes.c_uint32(seed), ctypes.c_uint32(stream),
                  ctypes.c_uint64(run), ctypes.c_long(first))
        np.testing.assert_array_equal(out, philox.words(n, seed, stream, run, first))

    rng = np.random.default_rng(0)
    n = 20001
    x = np.concatenate([rng.uniform(0, 1, n - 4), [2.0 ** -32, 1.0, 0.5, 1e300]])
    u = rng.uniform(0, 1, n)
    y = rng.uniform(-50, 50, n)
    l, c, e = (np.empty(n) for _ in range(3))
    lib.funcs(_p(x), _p(u), _p(y), _p(l), _p(c), _p(e), ctypes.c_long(n))
    np.testing.assert_array_equal(l, philox.log(x))
    np.testing.assert_array_equal(c, philox.cos_2pi(u))
    np.testing.assert_array_equal(e, philox.exp(y))

    n, seed, stream, run, p = 1001, 7, 8, 9, 0.35
    xs = rng.standard_normal(n).astype(np.float32)
    uo, zo, do = (np.empty(n, np.float32) for _ in range(3))
    mo = np.empty(n, np.uint8)
    lib.draws(_p(uo), _p(zo), _p(xs), _p(do), _p(mo), ctypes.c_long(n), ctypes.c_uint32(seed),
              ctypes.c_uint32(stream), ctypes.c_uint64(run),
              ctypes.c_uint32(philox.keep_threshold(p)), ctypes.c_float(1.0 - p))
    np.testing.assert_array_equal(uo, philox.uniform((n,), -1.5, 2.5, seed, stream, run))
    np.testing.assert_array_equal(zo, philox.normal((n,), 0.5, 2.0, seed, stream, run))
    mask = philox.keep_mask((n,), p, seed, stream, run)
    np.testing.assert_array_equal(mo, mask)
    np.testing.assert_array_equal(do, xs * mask / (1.0 - p))
    assert not math.isnan(float(zo.sum()))
