// Convolution, pooling, normalization and rearranging kernels for generated code, laid out
// as fluidity/ops/conv.py and norm.py lay theirs (NCHW; columns [C, kh, kw] x [N, oh, ow]),
// so the BLAS calls are the numpy kernels' own.
#pragma once
#include <cmath>
#include <cstdint>
#include <cstring>

#include "numerics.h"   // fmaxnp

namespace fl {

struct ConvGeom {
    int64_t N, C, H, W, KH, KW, OH, OW, SH, SW, PT, PL, DH, DW;
};

// The output columns [lo, hi) whose input column ow*SW - PL + j*DW lies inside [0, W) for
// kernel column j (the others read padding).
inline void valid_cols(const ConvGeom& g, int64_t j, int64_t* lo, int64_t* hi) {
    const int64_t off = j * g.DW - g.PL;        // input column of output column 0
    int64_t a = off >= 0 ? 0 : (-off + g.SW - 1) / g.SW;
    int64_t b = off > g.W - 1 ? 0 : (g.W - 1 - off) / g.SW + 1;
    if (b > g.OW) b = g.OW;
    if (a > b) a = b;
    *lo = a;
    *hi = b;
}

// cols[(c*KH + i)*KW + j][(n*OH + oh)*OW + ow] = x[n, c, oh*SH - PT + i*DH, ow*SW - PL + j*DW]
// (0 outside the image): conv.py's _im2col, every group's rows one after another. Each
// output row is written as its padding, then a contiguous (SW = 1) or strided copy, as
// loops the compiler vectorizes: the rows are short (OW floats), and GCC's memcpy for them
// (rep movs) cost three times the copy (perf, the MNIST CNN's second conv).
__attribute__((optimize("no-tree-loop-distribute-patterns")))
inline void im2col(const float* __restrict x, const ConvGeom& g, float* __restrict cols) {
    const int64_t ncol = g.N * g.OH * g.OW;
    for (int64_t c = 0; c < g.C; ++c)
        for (int64_t i = 0; i < g.KH; ++i)
            for (int64_t j = 0; j < g.KW; ++j) {
                float* row = cols + ((c * g.KH + i) * g.KW + j) * ncol;
                int64_t lo, hi;
                valid_cols(g, j, &lo, &hi);
                const int64_t w0 = j * g.DW - g.PL;
                for (int64_t n = 0; n < g.N; ++n) {
                    const float* img = x + (n * g.C + c) * g.H * g.W;
                    for (int64_t oh = 0; oh < g.OH; ++oh) {
                        const int64_t h = oh * g.SH - g.PT + i * g.DH;
                        float* dst = row + (n * g.OH + oh) * g.OW;
                        if (h < 0 || h >= g.H) {
                            for (int64_t ow = 0; ow < g.OW; ++ow) dst[ow] = 0.0f;
                            continue;
                        }
                        const float* src = img + h * g.W + w0;
                        for (int64_t ow = 0; ow < lo; ++ow) dst[ow] = 0.0f;
                        if (g.SW == 1)
                            for (int64_t ow = lo; ow < hi; ++ow) dst[ow] = src[ow];
                        else
                            for (int64_t ow = lo; ow < hi; ++ow) dst[ow] = src[ow * g.SW];
                        for (int64_t ow = hi; ow < g.OW; ++ow) dst[ow] = 0.0f;
                    }
                }
            }
}

// The adjoint: dx[n, c, h, w] += dcols[...] tap by tap (i, then j), as conv.py's col2im adds
// one strided slice per kernel tap. dx is zeroed first.
inline void col2im(const float* __restrict dcols, const ConvGeom& g, float* __restrict dx) {
    const int64_t ncol = g.N * g.OH * g.OW;
    std::memset(dx, 0, sizeof(float) * (size_t)(g.N * g.C * g.H * g.W));
    for (int64_t i = 0; i < g.KH; ++i)
        for (int64_t j = 0; j < g.KW; ++j) {
            int64_t lo, hi;
            valid_cols(g, j, &lo, &hi);
            const int64_t w0 = j * g.DW - g.PL;
            for (int64_t c = 0; c < g.C; ++c) {
                const float* row = dcols + ((c * g.KH + i) * g.KW + j) * ncol;
                for (int64_t n = 0; n < g.N; ++n) {
                    float* img = dx + (n * g.C + c) * g.H * g.W;
                    for (int64_t oh = 0; oh < g.OH; ++oh) {
                        const int64_t h = oh * g.SH - g.PT + i * g.DH;
                        if (h < 0 || h >= g.H) continue;
                        const float* src = row + (n * g.OH + oh) * g.OW;
                        float* dst = img + h * g.W + w0;
                        for (int64_t ow = lo; ow < hi; ++ow) dst[ow * g.SW] += src[ow];
                    }
                }
            }
        }
}

// Depthwise convolution (groups = C, one input channel a group, `mult` output channels a
// group), direct: out[m, n] (planes in the gemm layout [M, N, OH*OW]) = the sum over taps
// (i, j) of w[m, i, j] * x[n, m / mult] shifted, each tap added along an output row over its
// valid columns. Not gemm-shaped (K = KH*KW per output channel), so no gemm.
inline void depthwise_conv(const float* __restrict x, const float* __restrict w,
                           const ConvGeom& g, int64_t mult, float* __restrict out) {
    const int64_t M = g.C * mult, P = g.OH * g.OW;
    for (int64_t m = 0; m < M; ++m)
        for (int64_t n = 0; n < g.N; ++n) {
            const float* img = x + (n * g.C + m / mult) * g.H * g.W;
            const float* wm = w + m * g.KH * g.KW;
            float* o = out + (m * g.N + n) * P;
            std::memset(o, 0, sizeof(float) * (size_t)P);
            for (int64_t i = 0; i < g.KH; ++i)
                for (int64_t j = 0; j < g.KW; ++j) {
                    int64_t lo, hi;
                    valid_cols(g, j, &lo, &hi);
                    const float wt = wm[i * g.KW + j];
                    for (int64_t oh = 0; oh < g.OH; ++oh) {
                        const int64_t h = oh * g.SH - g.PT + i * g.DH;
                        if (h < 0 || h >= g.H) continue;
                        const float* src = img + h * g.W + j * g.DW - g.PL;
                        float* dst = o + oh * g.OW;
                        if (g.SW == 1)
                            for (int64_t ow = lo; ow < hi; ++ow) dst[ow] += wt * src[ow];
                        else
                            for (int64_t ow = lo; ow < hi; ++ow) dst[ow] += wt * src[ow * g.SW];
                    }
                }
        }
}

// Its gradients from d = Output@GRAD in NCHW: dx (zeroed first; each tap's contribution added
// along the rows) and dw[m, i, j] = the sum over the batch and positions of d * x, in double.
// Either may be null.
inline void depthwise_conv_grad(const float* __restrict x, const float* __restrict w,
                                const float* __restrict d, const ConvGeom& g, int64_t mult,
                                float* __restrict dx, float* __restrict dw) {
    const int64_t M = g.C * mult, P = g.OH * g.OW;
    if (dx) std::memset(dx, 0, sizeof(float) * (size_t)(g.N * g.C * g.H * g.W));
    for (int64_t m = 0; m < M; ++m)
        for (int64_t i = 0; i < g.KH; ++i)
            for (int64_t j = 0; j < g.KW; ++j) {
                int64_t lo, hi;
                valid_cols(g, j, &lo, &hi);
                const float wt = w[(m * g.KH + i) * g.KW + j];
                double acc = 0.0;
                for (int64_t n = 0; n < g.N; ++n) {
                    const int64_t plane = (n * g.C + m / mult) * g.H * g.W;
                    const float* dm = d + (n * M + m) * P;
                    for (int64_t oh = 0; oh < g.OH; ++oh) {
                        const int64_t h = oh * g.SH - g.PT + i * g.DH;
                        if (h < 0 || h >= g.H) continue;
                        const int64_t at = plane + h * g.W + j * g.DW - g.PL;
                        const float* drow = dm + oh * g.OW;
                        if (dx) {
                            float* dst = dx + at;
                            for (int64_t ow = lo; ow < hi; ++ow) dst[ow * g.SW] += wt * drow[ow];
                        }
                        if (dw) {
                            const float* src = x + at;
                            float s = 0.0f;
                            for (int64_t ow = lo; ow < hi; ++ow) s += drow[ow] * src[ow * g.SW];
                            acc += (double)s;
                        }
                    }
                }
                if (dw) dw[(m * g.KH + i) * g.KW + j] = (float)acc;
            }
}

// Pooling over windows that all lie whole inside the plane (no padding reached, not
// adaptive): window (a, b) covers rows a*SH + R0 + [0, KH) and columns b*SW + C0 + [0, KW),
// and its output is o[a * OS + b] (OS = OW for a whole plane; a padded pooling's interior is
// such a rectangle too). These loops run along an output row, tap by tap, so the compiler
// vectorizes them (the generic form looks every window up in tables).
struct PoolGeom {
    int64_t H, W, OH, OW, KH, KW, SH, SW, R0, C0, OS;
};

// max: the first tap, then fmaxnp with each further tap (rows, then columns), as the numpy
// kernel's np.maximum over its taps (NaN wins).
inline void max_pool_plane(const float* __restrict img, float* __restrict o, const PoolGeom& g) {
    for (int64_t a = 0; a < g.OH; ++a) {
        const float* base = img + (a * g.SH + g.R0) * g.W + g.C0;
        float* orow = o + a * g.OS;
        for (int64_t b = 0; b < g.OW; ++b) orow[b] = base[b * g.SW];
        for (int64_t i = 0; i < g.KH; ++i)
            for (int64_t j = (i == 0 ? 1 : 0); j < g.KW; ++j) {
                const float* r = base + i * g.W + j;
                for (int64_t b = 0; b < g.OW; ++b) orow[b] = fmaxnp(orow[b], r[b * g.SW]);
            }
    }
}

// avg: per window the column sums of its rows, added column by column, divided by `div`
// (the generic form's order).
inline void avg_pool_plane(const float* __restrict img, float* __restrict o, const PoolGeom& g,
                           float div) {
    constexpr int64_t B = 64;
    float acc[B], col[B];
    for (int64_t a = 0; a < g.OH; ++a) {
        const float* base = img + (a * g.SH + g.R0) * g.W + g.C0;
        for (int64_t b0 = 0; b0 < g.OW; b0 += B) {
            const int64_t nb = g.OW - b0 < B ? g.OW - b0 : B;
            const float* bb = base + b0 * g.SW;
            for (int64_t b = 0; b < nb; ++b) acc[b] = 0.0f;
            for (int64_t j = 0; j < g.KW; ++j) {
                for (int64_t b = 0; b < nb; ++b) col[b] = 0.0f;
                for (int64_t i = 0; i < g.KH; ++i) {
                    const float* r = bb + i * g.W + j;
                    for (int64_t b = 0; b < nb; ++b) col[b] += r[b * g.SW];
                }
                for (int64_t b = 0; b < nb; ++b) acc[b] += col[b];
            }
            float* orow = o + a * g.OS + b0;
            for (int64_t b = 0; b < nb; ++b) orow[b] = acc[b] / div;
        }
    }
}

// max's gradient where windows do not overlap (SH >= KH, SW >= KW): each window's d goes to
// its first maximum (strictly greater replaces), the only contribution that position gets;
// gx is zeroed first.
inline void max_pool_plane_grad_disjoint(const float* __restrict img, const float* __restrict d,
                                         float* __restrict gx, const PoolGeom& g) {
    std::memset(gx, 0, sizeof(float) * (size_t)(g.H * g.W));
    for (int64_t a = 0; a < g.OH; ++a)
        for (int64_t b = 0; b < g.OW; ++b) {
            const int64_t at0 = (a * g.SH + g.R0) * g.W + b * g.SW + g.C0;
            int64_t at = at0;
            float v = img[at0];
            for (int64_t i = 0; i < g.KH; ++i)
                for (int64_t j = 0; j < g.KW; ++j) {
                    const float t = img[at0 + i * g.W + j];
                    if (t > v) { v = t; at = at0 + i * g.W + j; }
                }
            gx[at] = d[a * g.OS + b];
        }
}

// [M, N, P] <-> [N, M, P] (a conv output in its gemm layout and NCHW).
inline void swap01(const float* in, float* out, int64_t M, int64_t N, int64_t P) {
    for (int64_t m = 0; m < M; ++m)
        for (int64_t n = 0; n < N; ++n)
            std::memcpy(out + (n * M + m) * P, in + (m * N + n) * P, sizeof(float) * (size_t)P);
}

// out = x with its dims permuted: out.dim[k] = x.dim[perm[k]] (any rank up to 8).
template <typename T>
inline void transpose(const T* x, T* out, int nd, const int64_t* dims, const int* perm) {
    int64_t xstride[8], odims[8], idx[8] = {0};
    int64_t s = 1, total = 1;
    for (int k = nd - 1; k >= 0; --k) { xstride[k] = s; s *= dims[k]; }
    for (int k = 0; k < nd; ++k) { odims[k] = dims[perm[k]]; total *= odims[k]; }
    for (int64_t o = 0; o < total; ++o) {
        int64_t src = 0;
        for (int k = 0; k < nd; ++k) src += idx[k] * xstride[perm[k]];
        out[o] = x[src];
        for (int k = nd - 1; k >= 0; --k) {
            if (++idx[k] < odims[k]) break;
            idx[k] = 0;
        }
    }
}

}  // namespace fl
