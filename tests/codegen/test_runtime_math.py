"""The runtime's vectorizable exp and tanh (runtime/rnn.h, used by the recurrent cells) stay
within a few float32 ulp of numpy's over the whole range, and keep NaN, +-inf and -0."""
import ctypes

import numpy as np

from fluidity.codegen import build

SOURCE = """#include "fluidity.h"
extern "C" void run(const float* x, float* e, float* t, long n) {
  for (long i = 0; i < n; ++i) { e[i] = fl::rnn_exp(x[i]); t[i] = fl::rnn_tanh(x[i]); }
}
"""


def _ulps(got, want):
    ok = np.isfinite(want) & (np.abs(want) > np.finfo(np.float32).tiny)
    return float(np.max(np.abs(got[ok] - want[ok]) / np.spacing(np.abs(want[ok]))))


def test_exp_and_tanh_are_within_a_few_ulp_of_numpy():
    lib = build.load(build.compile_cached(SOURCE))
    x = np.concatenate([np.linspace(-87, 88, 200001), np.linspace(-1, 1, 100001),
                        np.geomspace(1e-8, 1, 5001), -np.geomspace(1e-8, 1, 5001),
                        [np.nan, np.inf, -np.inf, 0.0, -0.0]]).astype(np.float32)
    e, t = np.empty_like(x), np.empty_like(x)
    p = [a.ctypes.data_as(ctypes.c_void_p) for a in (x, e, t)]
    lib.run(*p, ctypes.c_long(len(x)))
    fin = np.isfinite(x)
    assert _ulps(e[fin], np.exp(x[fin])) <= 4
    assert _ulps(t[fin], np.tanh(x[fin])) <= 4
    assert np.isnan(t[-5]) and np.isnan(e[-5])
    assert t[-4] == 1.0 and t[-3] == -1.0 and np.signbit(t[-1]) and t[-2] == 0.0
