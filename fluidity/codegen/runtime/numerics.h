// Fluidity's float arithmetic that rounds as the numpy kernels do, one text for both targets:
// fluidity.h includes it for the C++ target (g++: plain host functions) and cuda_rt.h for
// the CUDA target, where FL_HD makes each a __host__ __device__ function (nvcc; g++ in the
// host emulation, cuda_host.h). It is written with C's float math names (expf, logf,
// log1pf, powf) and double's (tanh, erf): on the host they are the very functions std::exp
// and the rest call for those types, and nvcc has each on the device, so both targets build
// the same arithmetic from this one file. Nothing here may use std:: math or the host-only
// library (no BLAS, no printf).
#pragma once
#include <cmath>
#include <cstdint>
#include <type_traits>

#ifndef FL_HD
#define FL_HD
#endif

namespace fl {

using i64 = int64_t;

// numpy's maximum/minimum: a NaN in either operand is the result.
FL_HD inline float fmaxnp(float a, float b) { return (a >= b || a != a) ? a : b; }
FL_HD inline float fminnp(float a, float b) { return (a <= b || a != a) ? a : b; }
// the same in double (a float64 np.maximum / np.minimum)
FL_HD inline double fmaxnp_d(double a, double b) { return (a >= b || a != a) ? a : b; }
FL_HD inline double fminnp_d(double a, double b) { return (a <= b || a != a) ? a : b; }

FL_HD inline float sigmoid(float x) {   // the same branches as ops/activation.py's _sigmoid
    if (x >= 0) return 1.0f / (1.0f + expf(-x));
    float e = expf(x);
    return e / (1.0f + e);
}

// Paddle's "tolerable" log of the loss ops (ops/loss.py _log): clipped to +-1e20, so
// log(0) is -1e20, never -inf.
FL_HD inline float tolerable_log(float x) {
    const float v = logf(x);
    return v != v ? v : (v < -1e20f ? -1e20f : (v > 1e20f ? 1e20f : v));
}

FL_HD inline float sign(float x) { return x > 0 ? 1.0f : (x < 0 ? -1.0f : x); }

FL_HD inline float logaddexp0(float x) {   // log(1 + exp(x)), numpy's logaddexp(0, x)
    return x > 0 ? x + log1pf(expf(-x)) : log1pf(expf(x));
}

// numpy's pairwise summation of n floats (umath/loops_utils pairwise_sum), so a compiled
// full reduction (or a device thread's row sum) rounds as numpy's does.
FL_HD inline float pairwise_sum(const float* a, i64 n, i64 stride) {
    if (n < 8) {
        float res = 0.0f;
        for (i64 i = 0; i < n; ++i) res += a[i * stride];
        return res;
    }
    if (n <= 128) {
        float r[8];
        for (int j = 0; j < 8; ++j) r[j] = a[j * stride];
        i64 i = 8;
        for (; i < n - (n % 8); i += 8)
            for (int j = 0; j < 8; ++j) r[j] += a[(i + j) * stride];
        float res = ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7]));
        for (; i < n; ++i) res += a[i * stride];
        return res;
    }
    i64 n2 = n / 2;
    n2 -= n2 % 8;
    return pairwise_sum(a, n2, stride) + pairwise_sum(a + n2 * stride, n - n2, stride);
}

// gelu as ops/activation.py's Gelu. Exact: 0.5 * x * (1 + erf(x / sqrt(2))), erf in double
// (numpy's vectorized math.erf) and the product in double. Approximate: the tanh form, whose
// tanh numpy takes in double (np.sqrt(2 / pi) is a float64 scalar), the polynomial in float.
constexpr double SQRT_2_OVER_PI = 0.7978845608028654;   // np.sqrt(2 / np.pi)

FL_HD inline double gelu_tanh(float x) {
    const float inner = x + 0.044715f * powf(x, 3.0f);
    return tanh(SQRT_2_OVER_PI * (double)inner);
}

FL_HD inline float gelu(float x, bool approximate) {
    if (approximate) return (float)((double)(0.5f * x) * (1.0 + gelu_tanh(x)));
    return (float)((double)(0.5f * x) * (1.0 + erf((double)(x / 1.4142135623730951f))));
}

// d * gelu'(x), in the kernel's precisions (GeluGrad).
FL_HD inline float gelu_grad(float x, float d, bool approximate) {
    if (approximate) {
        const double t = gelu_tanh(x);
        const float poly = 1.0f + 0.134145f * x * x;            // 1 + (3 * 0.044715) * x * x
        const double g = 0.5 * (1.0 + t) + (double)(0.5f * x) * (1.0 - t * t) * SQRT_2_OVER_PI
                         * (double)poly;
        return (float)((double)d * g);
    }
    const double cdf = 0.5 * (1.0 + erf((double)(x / 1.4142135623730951f)));
    const float pdf = x * expf(-x * x / 2.0f) / 2.5066282746310002f;   // sqrt(2 * pi)
    return (float)((double)d * (cdf + (double)pdf));
}

// numpy's integer floor_divide and mod (int32, int64): the quotient rounded toward minus
// infinity, the remainder with the divisor's sign; a zero divisor gives 0 (numpy warns), and
// MIN // -1 wraps to MIN (numpy's result), computed without C's undefined overflow.
template <class T> FL_HD inline T floordiv_np(T a, T b) {
    if (b == 0) return 0;
    if (b == -1) return (T)(0 - (std::make_unsigned_t<T>)a);
    const T q = a / b;
    return (a % b != 0 && ((a < 0) != (b < 0))) ? (T)(q - 1) : q;
}
template <class T> FL_HD inline T mod_np(T a, T b) {
    if (b == 0 || b == -1) return 0;
    const T r = a % b;
    return (r != 0 && ((r < 0) != (b < 0))) ? (T)(r + b) : r;
}

}  // namespace fl
