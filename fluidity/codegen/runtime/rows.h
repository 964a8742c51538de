// Activations and normalizations of rows along an axis for generated code: mish,
// log_softmax and layer_norm, each as its op's numpy kernel computes it (the precision and
// order of sums noted per function).
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>
#include "reduce.h"

namespace fl {

// --- activations --------------------------------------------------------------------------------
// Paddle's mish: x * tanh(softplus(x)), softplus(x) = x where x > threshold (the kernel's
// _softplus_thr: log(1 + exp(min(x, threshold))) otherwise), all in float.
inline float mish_softplus(float x, float threshold) {
    return x > threshold ? x : logaddexp0(fminnp(x, threshold));
}
inline float mish(float x, float threshold) { return x * std::tanh(mish_softplus(x, threshold)); }
inline float mish_grad(float x, float d, float threshold) {
    const float t = std::tanh(mish_softplus(x, threshold));
    return d * (t + x * (1.0f - t * t) * (x > threshold ? 1.0f : sigmoid(x)));
}

// --- rows along an axis -------------------------------------------------------------------------
// log_softmax of x seen as [pre, n, post] along n (ops/activation.py LogSoftmax):
// (x - m) - log(sum(exp(x - m))). The sum is numpy's: pairwise along a contiguous axis
// (post == 1, exp values staged in out), else element by element in order.
inline void log_softmax(const float* x, float* out, i64 pre, i64 n, i64 post) {
    for (i64 p = 0; p < pre; ++p)
        for (i64 q = 0; q < post; ++q) {
            const float* xr = x + p * n * post + q;
            float* o = out + p * n * post + q;
            float m = -INFINITY;
            for (i64 i = 0; i < n; ++i) m = fmaxnp(m, xr[i * post]);
            float s = 0.0f;
            if (post == 1) {
                for (i64 i = 0; i < n; ++i) o[i] = std::exp(xr[i] - m);
                s = pairwise_sum(o, n, 1);
            } else {
                for (i64 i = 0; i < n; ++i) s += std::exp(xr[i * post] - m);
            }
            const float ls = std::log(s);
            for (i64 i = 0; i < n; ++i) o[i * post] = (xr[i * post] - m) - ls;
        }
}

// its gradient: dx = d - exp(o) * sum(d) along the axis (the sum as in log_softmax).
inline void log_softmax_grad(const float* o, const float* d, float* dx, i64 pre, i64 n,
                             i64 post) {
    for (i64 p = 0; p < pre; ++p)
        for (i64 q = 0; q < post; ++q) {
            const i64 base = p * n * post + q;
            float s = 0.0f;
            if (post == 1) s = pairwise_sum(d + base, n, 1);
            else
                for (i64 i = 0; i < n; ++i) s += d[base + i * post];
            for (i64 i = 0; i < n; ++i)
                dx[base + i * post] = d[base + i * post] - std::exp(o[base + i * post]) * s;
        }
}

// layer_norm over the rows of x [rows, cols] (ops/norm.py LayerNorm): mean and variance by
// numpy's pairwise sums (the squares staged in `tmp`, cols floats), y = (x - m) / sqrt(v + eps),
// then * scale, + bias where given (null: absent); mean/var written where not null.
inline void layer_norm(const float* x, const float* scale, const float* bias, float* y,
                       float* mean, float* var, float* tmp, i64 rows, i64 cols, float eps) {
    for (i64 r = 0; r < rows; ++r) {
        const float* xr = x + r * cols;
        float* yr = y + r * cols;
        const float m = pairwise_sum(xr, cols, 1) / (float)cols;
        for (i64 j = 0; j < cols; ++j) {
            const float t = xr[j] - m;
            tmp[j] = t * t;
        }
        const float v = pairwise_sum(tmp, cols, 1) / (float)cols;
        const float s = std::sqrt(v + eps);
        for (i64 j = 0; j < cols; ++j) {
            float t = (xr[j] - m) / s;
            if (scale) t = t * scale[j];
            if (bias) t = t + bias[j];
            yr[j] = t;
        }
        if (mean) mean[r] = m;
        if (var) var[r] = v;
    }
}

// its gradient (LayerNormGrad): per row, xhat = (x - mean) * inv, dxhat = d * scale,
// dx = inv * (dxhat - mean(dxhat) - xhat * mean(dxhat * xhat)) (row means pairwise, staged in
// tmp); dscale / dbias (where not null) sum d * xhat / d over the rows as numpy's sum over axis
// 0 does: row by row in order, or with one column (a contiguous run) pairwise. tmp holds
// 2 * cols + 2 * rows floats.
inline void layer_norm_grad(const float* x, const float* scale, const float* mean,
                            const float* var, const float* d, float* dx, float* dscale,
                            float* dbias, float* tmp, i64 rows, i64 cols, float eps) {
    float* t1 = tmp;
    float* t2 = tmp + cols;
    float* c1 = tmp + 2 * cols;          // one column: d * xhat and d of each row
    float* c2 = c1 + rows;
    const bool column = cols == 1;
    if (dscale)
        for (i64 j = 0; j < cols; ++j) dscale[j] = 0.0f;
    if (dbias)
        for (i64 j = 0; j < cols; ++j) dbias[j] = 0.0f;
    for (i64 r = 0; r < rows; ++r) {
        const float* xr = x + r * cols;
        const float* dr = d + r * cols;
        const float inv = 1.0f / std::sqrt(var[r] + eps);
        const float mu = mean[r];
        for (i64 j = 0; j < cols; ++j) {
            const float xh = (xr[j] - mu) * inv;
            const float g = scale ? dr[j] * scale[j] : dr[j];
            t1[j] = g;
            t2[j] = g * xh;
            if (column) {
                c1[r] = dr[j] * xh;
                c2[r] = dr[j];
            } else {
                if (dscale) dscale[j] += dr[j] * xh;
                if (dbias) dbias[j] += dr[j];
            }
        }
        if (!dx) continue;
        const float m1 = pairwise_sum(t1, cols, 1) / (float)cols;
        const float m2 = pairwise_sum(t2, cols, 1) / (float)cols;
        float* o = dx + r * cols;
        for (i64 j = 0; j < cols; ++j) {
            const float xh = (xr[j] - mu) * inv;
            o[j] = inv * ((t1[j] - m1) - xh * m2);
        }
    }
    if (column) {
        if (dscale) dscale[0] = pairwise_sum(c1, rows, 1);
        if (dbias) dbias[0] = pairwise_sum(c2, rows, 1);
    }
}

}  // namespace fl
