// 3-D sliding windows for generated code, laid out as fluidity/ops/volume.py's patch maps:
// conv3d and conv3d_transpose as vol2col / col2vol around gemms (columns [C, kd, kh, kw] x
// [n, od, oh, ow], conv2d's im2col layout one dim deeper), and 3-D pooling over per-axis
// tables of each window's input positions (the kernel's patch map is their product).
#pragma once
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>

#include "numerics.h"   // pairwise_sum

namespace fl {

// A 3-D window over a C x D x H x W volume: K = KD*KH*KW taps, O = OD*OH*OW outputs;
// output (od, oh, ow)'s tap (a, b, j) reads depth od*SD - PD + a*DD (likewise h, w).
struct VolGeom {
    int64_t C, D, H, W, KD, KH, KW, OD, OH, OW, SD, SH, SW, PD, PH, PW, DD, DH, DW;
};

inline int64_t vol_taps(const VolGeom& g) { return g.KD * g.KH * g.KW; }
inline int64_t vol_outs(const VolGeom& g) { return g.OD * g.OH * g.OW; }
inline int64_t vol_size(const VolGeom& g) { return g.D * g.H * g.W; }

// cols[c*K + k][n*O + o] = x[n, c, at(o, k)], 0 in the padding, for the nb samples at x
// (volume.py's gather_patches; every group's rows one after another).
inline void vol2col(const float* __restrict x, const VolGeom& g, int64_t nb,
                    float* __restrict cols) {
    const int64_t K = vol_taps(g), O = vol_outs(g), S = vol_size(g), ncol = nb * O;
    for (int64_t c = 0; c < g.C; ++c)
        for (int64_t a = 0; a < g.KD; ++a)
            for (int64_t b = 0; b < g.KH; ++b)
                for (int64_t j = 0; j < g.KW; ++j) {
                    float* row = cols + (c * K + (a * g.KH + b) * g.KW + j) * ncol;
                    for (int64_t n = 0; n < nb; ++n) {
                        const float* img = x + (n * g.C + c) * S;
                        for (int64_t od = 0; od < g.OD; ++od) {
                            const int64_t d = od * g.SD - g.PD + a * g.DD;
                            for (int64_t oh = 0; oh < g.OH; ++oh) {
                                const int64_t h = oh * g.SH - g.PH + b * g.DH;
                                float* dst = row + n * O + (od * g.OH + oh) * g.OW;
                                if (d < 0 || d >= g.D || h < 0 || h >= g.H) {
                                    for (int64_t ow = 0; ow < g.OW; ++ow) dst[ow] = 0.0f;
                                    continue;
                                }
                                const float* src = img + (d * g.H + h) * g.W;
                                for (int64_t ow = 0; ow < g.OW; ++ow) {
                                    const int64_t w = ow * g.SW - g.PW + j * g.DW;
                                    dst[ow] = (w >= 0 && w < g.W) ? src[w] : 0.0f;
                                }
                            }
                        }
                    }
                }
}

// The adjoint (volume.py's scatter_patches): dx of the nb samples zeroed, then each column
// added to the input element it was read from.
inline void col2vol(const float* __restrict cols, const VolGeom& g, int64_t nb,
                    float* __restrict dx) {
    const int64_t K = vol_taps(g), O = vol_outs(g), S = vol_size(g), ncol = nb * O;
    std::memset(dx, 0, sizeof(float) * (size_t)(nb * g.C * S));
    for (int64_t c = 0; c < g.C; ++c)
        for (int64_t a = 0; a < g.KD; ++a)
            for (int64_t b = 0; b < g.KH; ++b)
                for (int64_t j = 0; j < g.KW; ++j) {
                    const float* row = cols + (c * K + (a * g.KH + b) * g.KW + j) * ncol;
                    for (int64_t n = 0; n < nb; ++n) {
                        float* img = dx + (n * g.C + c) * S;
                        for (int64_t od = 0; od < g.OD; ++od) {
                            const int64_t d = od * g.SD - g.PD + a * g.DD;
                            if (d < 0 || d >= g.D) continue;
                            for (int64_t oh = 0; oh < g.OH; ++oh) {
                                const int64_t h = oh * g.SH - g.PH + b * g.DH;
                                if (h < 0 || h >= g.H) continue;
                                const float* src = row + n * O + (od * g.OH + oh) * g.OW;
                                float* dst = img + (d * g.H + h) * g.W;
                                for (int64_t ow = 0; ow < g.OW; ++ow) {
                                    const int64_t w = ow * g.SW - g.PW + j * g.DW;
                                    if (w >= 0 && w < g.W) dst[w] += src[ow];
                                }
                            }
                        }
                    }
                }
}

// out[n, f, o] = t[f, n*O + o] (+ bias[f]) for nb samples of F channels: a gemm's result
// in NCDHW, the bias added after the product as the kernel adds it.
inline void vol_out(const float* __restrict t, float* __restrict out, int64_t F, int64_t nb,
                    int64_t O, const float* __restrict bias) {
    for (int64_t n = 0; n < nb; ++n)
        for (int64_t f = 0; f < F; ++f) {
            const float* src = t + f * nb * O + n * O;
            float* dst = out + (n * F + f) * O;
            if (bias) {
                const float bv = bias[f];
                for (int64_t o = 0; o < O; ++o) dst[o] = src[o] + bv;
            } else {
                for (int64_t o = 0; o < O; ++o) dst[o] = src[o];
            }
        }
}

// --- pooling --------------------------------------------------------------------------------
// Windows given per axis (they are separable, adaptive cells too): z[0][od*KD + a] is the
// input depth of tap a of output depth od, -1 where it lies in the padding or past an
// adaptive cell's end (likewise z[1] for rows, z[2] for columns). Taps run in the patch
// map's order: depth, then row, then column.
struct PoolTabs3 {
    const int64_t* z[3];
    int64_t D, H, W, OD, OH, OW, KD, KH, KW;
};

inline int64_t pool3_outs(const PoolTabs3& t) { return t.OD * t.OH * t.OW; }

// The flat input position of output o's tap k, -1 in the padding.
inline int64_t pool3_at(const PoolTabs3& t, int64_t o, int64_t k) {
    const int64_t ow = o % t.OW, oh = (o / t.OW) % t.OH, od = o / (t.OW * t.OH);
    const int64_t j = k % t.KW, b = (k / t.KW) % t.KH, a = k / (t.KW * t.KH);
    const int64_t d = t.z[0][od * t.KD + a], h = t.z[1][oh * t.KH + b], w = t.z[2][ow * t.KW + j];
    return (d < 0 || h < 0 || w < 0) ? -1 : (d * t.H + h) * t.W + w;
}

// The taps of output o that lie inside the input (exclusive average's divisor).
inline int64_t pool3_count(const PoolTabs3& t, int64_t o) {
    const int64_t ow = o % t.OW, oh = (o / t.OW) % t.OH, od = o / (t.OW * t.OH);
    int64_t cd = 0, ch = 0, cw = 0;
    for (int64_t a = 0; a < t.KD; ++a) cd += t.z[0][od * t.KD + a] >= 0;
    for (int64_t b = 0; b < t.KH; ++b) ch += t.z[1][oh * t.KH + b] >= 0;
    for (int64_t j = 0; j < t.KW; ++j) cw += t.z[2][ow * t.KW + j] >= 0;
    return cd * ch * cw;
}

// The window's maximum, padding read as -inf (np.max over the gathered patch: a NaN wins),
// and the first tap holding it as np.argmax picks it (the first NaN, else the first
// maximum); *at is that tap's input position (-1: a padding tap).
inline float pool3_window_max(const float* img, const PoolTabs3& t, int64_t o, int64_t* at) {
    const int64_t K = t.KD * t.KH * t.KW;
    float v = -INFINITY;
    int64_t best = -1;
    for (int64_t k = 0; k < K; ++k) {
        const int64_t p = pool3_at(t, o, k);
        const float x = p >= 0 ? img[p] : -INFINITY;
        if (k == 0 || (v == v && (x > v || x != x))) {
            v = x;
            best = p;
        }
    }
    *at = best;
    return v;
}

// Max pooling of each of `planes` planes (pool3d max; max_pool3d_with_index with its mask).
inline void pool3d_max(const float* __restrict x, float* __restrict out, int32_t* __restrict mask,
                       const PoolTabs3& t, int64_t planes) {
    const int64_t S = t.D * t.H * t.W, O = pool3_outs(t);
    for (int64_t p = 0; p < planes; ++p)
        for (int64_t o = 0; o < O; ++o) {
            int64_t at;
            out[p * O + o] = pool3_window_max(x + p * S, t, o, &at);
            if (mask) mask[p * O + o] = (int32_t)at;
        }
}

// Average pooling: each window's taps (padding as 0) summed as numpy sums the gathered
// patch (pairwise, in tap order), divided by its count of inside taps (`exclusive`) or by
// its size. `win` holds K floats.
inline void pool3d_avg(const float* __restrict x, float* __restrict out, const PoolTabs3& t,
                       int64_t planes, bool exclusive, float* __restrict win) {
    const int64_t S = t.D * t.H * t.W, O = pool3_outs(t), K = t.KD * t.KH * t.KW;
    for (int64_t p = 0; p < planes; ++p)
        for (int64_t o = 0; o < O; ++o) {
            for (int64_t k = 0; k < K; ++k) {
                const int64_t at = pool3_at(t, o, k);
                win[k] = at >= 0 ? x[p * S + at] : 0.0f;
            }
            const float div = (float)(exclusive ? pool3_count(t, o) : K);
            out[p * O + o] = pairwise_sum(win, K, 1) / div;
        }
}

// Max pooling's gradient: each output's gradient added (float, in output order) to the
// input element that holds its window's first maximum; none when the maximum is NaN (the
// kernel's `cols == max` holds nowhere) or lies in the padding.
inline void pool3d_max_grad(const float* __restrict x, const float* __restrict dout,
                            float* __restrict dx, const PoolTabs3& t, int64_t planes) {
    const int64_t S = t.D * t.H * t.W, O = pool3_outs(t);
    std::memset(dx, 0, sizeof(float) * (size_t)(planes * S));
    for (int64_t p = 0; p < planes; ++p)
        for (int64_t o = 0; o < O; ++o) {
            int64_t at;
            const float v = pool3_window_max(x + p * S, t, o, &at);
            if (v == v && at >= 0) dx[p * S + at] += dout[p * O + o];
        }
}

// Average pooling's gradient, in the kernel's precisions: exclusive (a count array
// divides in double, and the patches are scattered in double), else d / K in float added
// in float. `acc` holds planes * S doubles.
inline void pool3d_avg_grad(const float* __restrict dout, float* __restrict dx,
                            const PoolTabs3& t, int64_t planes, bool exclusive,
                            double* __restrict acc) {
    const int64_t S = t.D * t.H * t.W, O = pool3_outs(t), K = t.KD * t.KH * t.KW;
    if (exclusive) std::memset(acc, 0, sizeof(double) * (size_t)(planes * S));
    else std::memset(dx, 0, sizeof(float) * (size_t)(planes * S));
    for (int64_t p = 0; p < planes; ++p)
        for (int64_t o = 0; o < O; ++o) {
            const float d = dout[p * O + o];
            const double vd = (double)d / (double)pool3_count(t, o);
            const float vf = d / (float)K;
            for (int64_t k = 0; k < K; ++k) {
                const int64_t at = pool3_at(t, o, k);
                if (at < 0) continue;
                if (exclusive) acc[p * S + at] += vd;
                else dx[p * S + at] += vf;
            }
        }
    if (exclusive)
        for (int64_t i = 0; i < planes * S; ++i) dx[i] = (float)acc[i];
}

// max_pool3d_with_index's gradient: each Out@GRAD element added (in double, as the
// kernel's bincount) to the element of its plane that Mask names. Mask comes from the
// caller: an entry outside [0, S) stops the run naming it.
inline int max_pool3d_index_grad(const int32_t* __restrict mask, const float* __restrict dout,
                                 float* __restrict dx, double* __restrict acc, int64_t planes,
                                 int64_t O, int64_t S, char* err, int op) {
    for (int64_t i = 0; i < planes * O; ++i)
        if (mask[i] < 0 || mask[i] >= S) {
            std::snprintf(err, 512, "max_pool3d_with_index_grad: Mask entry %lld is outside "
                          "[0, %lld)", (long long)mask[i], (long long)S);
            return 2 + op;
        }
    std::memset(acc, 0, sizeof(double) * (size_t)(planes * S));
    for (int64_t p = 0; p < planes; ++p)
        for (int64_t o = 0; o < O; ++o) acc[p * S + mask[p * O + o]] += (double)dout[p * O + o];
    for (int64_t i = 0; i < planes * S; ++i) dx[i] = (float)acc[i];
    return 0;
}

// --- trilinear_interp -----------------------------------------------------------------------
// A separable resize of D x H x W planes to OD x OH x OW: per axis a the taps of output row
// k are i[a][k*T[a] + t] with float64 weights w[a][...] (unused taps weigh 0), the rows of
// the kernel's interpolation matrices.
struct Taps3 {
    const int64_t* i[3];
    const double* w[3];
    int64_t T[3], D, H, W, OD, OH, OW;
};

// Each output the float64 sum of its taps (the kernel's einsum is float64), rounded to float.
inline void resize3(const float* __restrict x, float* __restrict out, const Taps3& t,
                    int64_t planes) {
    const int64_t S = t.D * t.H * t.W, O = t.OD * t.OH * t.OW;
    for (int64_t p = 0; p < planes; ++p)
        for (int64_t a = 0; a < t.OD; ++a)
            for (int64_t b = 0; b < t.OH; ++b)
                for (int64_t c = 0; c < t.OW; ++c) {
                    double v = 0.0;
                    for (int64_t u = 0; u < t.T[0]; ++u)
                        for (int64_t q = 0; q < t.T[1]; ++q)
                            for (int64_t r = 0; r < t.T[2]; ++r)
                                v += t.w[0][a * t.T[0] + u] * t.w[1][b * t.T[1] + q] *
                                     (double)x[p * S + (t.i[0][a * t.T[0] + u] * t.H +
                                                        t.i[1][b * t.T[1] + q]) * t.W +
                                               t.i[2][c * t.T[2] + r]] *
                                     t.w[2][c * t.T[2] + r];
                    out[p * O + (a * t.OH + b) * t.OW + c] = (float)v;
                }
}

// The adjoint: each output gradient spread over its taps in float64 (acc: planes * S
// doubles), then rounded to float.
inline void resize3_grad(const float* __restrict d, float* __restrict dx, double* __restrict acc,
                         const Taps3& t, int64_t planes) {
    const int64_t S = t.D * t.H * t.W, O = t.OD * t.OH * t.OW;
    std::memset(acc, 0, sizeof(double) * (size_t)(planes * S));
    for (int64_t p = 0; p < planes; ++p)
        for (int64_t a = 0; a < t.OD; ++a)
            for (int64_t b = 0; b < t.OH; ++b)
                for (int64_t c = 0; c < t.OW; ++c) {
                    const double v = (double)d[p * O + (a * t.OH + b) * t.OW + c];
                    for (int64_t u = 0; u < t.T[0]; ++u)
                        for (int64_t q = 0; q < t.T[1]; ++q)
                            for (int64_t r = 0; r < t.T[2]; ++r)
                                acc[p * S + (t.i[0][a * t.T[0] + u] * t.H +
                                             t.i[1][b * t.T[1] + q]) * t.W +
                                    t.i[2][c * t.T[2] + r]] +=
                                    t.w[0][a * t.T[0] + u] * t.w[1][b * t.T[1] + q] * v *
                                    t.w[2][c * t.T[2] + r];
                }
    for (int64_t i = 0; i < planes * S; ++i) dx[i] = (float)acc[i];
}

}  // namespace fl
