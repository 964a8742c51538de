// Convolution, pooling, normalization and rearranging kernels for generated code, laid out
// as fluidity/ops/conv.py and norm.py lay theirs (NCHW; columns [C, kh, kw] x [N, oh, ow]),
// so the BLAS calls are the numpy kernels' own.
#pragma once
#include <cmath>
#include <cstdint>
#include <cstring>

#include "numerics.h"   // fmaxnp

#if defined(__AVX__) && !defined(__clang__)
#include <immintrin.h>   // masked loads and stores: max_pool_plane_grad_2x2
#endif

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

// Stride 1 with OW == W (a "same" padding): output position k = oh * OW + ow of a plane
// reads tap (i, j) at input position k + shift, shift = (i*DH - PT) * W + j*DW - PL, so a
// tap's columns are the plane shifted by a constant, added into dx as one run of the plane
// instead of OH short rows (col2im_flat: 1.5x col2im on the MNIST CNN's 14-float rows in
// a C harness; the same run for im2col was slower than its rows, so im2col keeps them).
// The run starts at the first valid output row's first valid column and ends at the last
// valid row's last valid column, so every position it reads or writes lies in the plane;
// inside it the positions whose column lies outside [lo, hi) (valid_cols) are the ones a
// shift carries into the next or previous row: col2im_flat zeroes them in dcols before the
// add (adding +0 changes no sum: dx starts at +0 and so never holds -0). Each dx element
// gets its taps' values in col2im's order.
inline bool conv_flat_taps(const ConvGeom& g) {
    return g.SH == 1 && g.SW == 1 && g.OW == g.W;
}

struct FlatTap {
    int64_t lo, hi, oh_lo, oh_hi, shift, k0, k1;
    bool any;
};

inline FlatTap flat_tap(const ConvGeom& g, int64_t i, int64_t j) {
    FlatTap t;
    valid_cols(g, j, &t.lo, &t.hi);
    const int64_t dh = i * g.DH - g.PT;          // input row of output row 0
    t.oh_lo = dh >= 0 ? 0 : -dh;
    t.oh_hi = g.H - dh < g.OH ? g.H - dh : g.OH;
    t.any = t.oh_lo < t.oh_hi && t.lo < t.hi;
    t.shift = dh * g.W + j * g.DW - g.PL;
    t.k0 = t.oh_lo * g.OW + t.lo;
    t.k1 = (t.oh_hi - 1) * g.OW + t.hi;
    return t;
}

// Zero the positions of rows [oh_lo, oh_hi) whose column is outside [lo, hi).
inline void flat_zero_wrapped(float* __restrict p, const ConvGeom& g, const FlatTap& t) {
    if (t.lo == 0 && t.hi == g.OW) return;
    for (int64_t oh = t.oh_lo; oh < t.oh_hi; ++oh) {
        for (int64_t ow = 0; ow < t.lo; ++ow) p[oh * g.OW + ow] = 0.0f;
        for (int64_t ow = t.hi; ow < g.OW; ++ow) p[oh * g.OW + ow] = 0.0f;
    }
}

// col2im (the same sums, the same order) where conv_flat_taps(g); dcols is clobbered.
inline void col2im_flat(float* __restrict dcols, const ConvGeom& g, float* __restrict dx) {
    const int64_t P = g.OH * g.OW, ncol = g.N * P;
    std::memset(dx, 0, sizeof(float) * (size_t)(g.N * g.C * g.H * g.W));
    for (int64_t i = 0; i < g.KH; ++i)
        for (int64_t j = 0; j < g.KW; ++j) {
            const FlatTap t = flat_tap(g, i, j);
            if (!t.any) continue;
            for (int64_t c = 0; c < g.C; ++c)
                for (int64_t n = 0; n < g.N; ++n) {
                    float* src = dcols + ((c * g.KH + i) * g.KW + j) * ncol + n * P;
                    flat_zero_wrapped(src, g, t);
                    float* dst = dx + (n * g.C + c) * g.H * g.W + t.shift;
                    for (int64_t k = t.k0; k < t.k1; ++k) dst[k] += src[k];
                }
        }
}

// Direct convolution of one sample for dilation 1, one group (any kernel size, stride and
// padding), without im2col's columns. The sample is first copied into `xp`, each padded
// plane split into its SH x SW phases (padded row SH * r + pi, column SW * s + pj is row r,
// column s of phase (pi, pj); one phase for stride 1), each phase RH = OH + (KH - 1) / SH
// rows of WS = OW + (KW - 1) / SW columns (the zero border stays from the first sample of
// a call: `fresh` zeroes it). Output position q = oh * WS + ow then reads tap (c, i, j) at
// xp + q + off[c, i, j], off = the offset of phase (i % SH, j % SW) of plane c plus
// (i / SH) * WS + j / SW (dconv_offsets): a run of consecutive positions reads consecutive
// floats of every tap, so the columns past OW ((KW - 1) / SW of each row, computed and
// never read) cost less than cutting the rows. The filter is packed
// (dconv_pack) as blocks of 16 output channels (8 for the last block when M is not a
// multiple of 16), tap-major; the micro-kernel holds DCONV_R positions x 16 channels in
// registers and, per tap, loads the tap's 16 weights (two vectors) and broadcasts each
// position's input: the multiply-adds of a gemm with its operands straight from the
// image. The result is tmp [Q rounded up to DCONV_R][Mp] (Mp = M rounded up to 8), which
// the conv's epilogue writes out in NCHW. Each output sums its C*KH*KW products in tap
// order (not a gemm's order; the tests' tolerance covers any order).
constexpr int64_t DCONV_R = 6;

typedef float dconv_v8 __attribute__((vector_size(32), aligned(4)));

// The 8-float vectors pass by value between inline functions of one translation unit: the
// ABI note GCC gives for that without AVX (a portable build) concerns no caller elsewhere.
#pragma GCC diagnostic ignored "-Wpsabi"

inline int64_t dconv_mp(int64_t M) { return (M + 7) / 8 * 8; }

// The phases' rows and columns (RH, WS), floats of the padded sample (with the slack the
// last tile reads past the grid) and of tmp.
inline int64_t dconv_rh(const ConvGeom& g) { return g.OH + (g.KH - 1) / g.SH; }
inline int64_t dconv_ws(const ConvGeom& g) { return g.OW + (g.KW - 1) / g.SW; }
inline int64_t dconv_xp_floats(const ConvGeom& g) {
    return g.C * g.SH * g.SW * dconv_rh(g) * dconv_ws(g) + dconv_ws(g) + DCONV_R + 8;
}
inline int64_t dconv_tmp_floats(const ConvGeom& g, int64_t M) {
    return (g.OH * dconv_ws(g) + DCONV_R + 8) * dconv_mp(M);
}

// off[(c * KH + i) * KW + j]: where tap (c, i, j) of output position 0 is in xp.
inline void dconv_offsets(const ConvGeom& g, int64_t* off) {
    const int64_t RH = dconv_rh(g), WS = dconv_ws(g), PH = RH * WS;
    for (int64_t c = 0; c < g.C; ++c)
        for (int64_t i = 0; i < g.KH; ++i)
            for (int64_t j = 0; j < g.KW; ++j)
                off[(c * g.KH + i) * g.KW + j] = ((c * g.SH + i % g.SH) * g.SW + j % g.SW) * PH
                                                 + i / g.SH * WS + j / g.SW;
}

// w [M, K] -> wp: per block of 16 channels (or the last 8) [K][16 or 8], zeros past M.
inline void dconv_pack(const float* __restrict w, int64_t M, int64_t K, float* __restrict wp) {
    const int64_t Mp = dconv_mp(M);
    for (int64_t m0 = 0; m0 < Mp; m0 += 16) {
        const int64_t nb = Mp - m0 >= 16 ? 16 : 8;
        for (int64_t k = 0; k < K; ++k)
            for (int64_t mb = 0; mb < nb; ++mb)
                wp[m0 * K + k * nb + mb] = m0 + mb < M ? w[(m0 + mb) * K + k] : 0.0f;
    }
}

// The tile's taps: rows (c, i) at off[(c * KH + i) * KW] (KH rows of each of the CI = C
// planes), KW taps along each, at row + j (SW1: column stride 1) or at the row's offsets
// off[... + j] - off[...] (colo).
template <int MV, bool SW1>
__attribute__((optimize("fp-contract=fast"), always_inline))
inline void dconv_tile(const float* __restrict xq, const float* __restrict wb,
                       const int64_t* __restrict off, const int64_t* __restrict colo,
                       int64_t CI, int64_t KW, float* __restrict o, int64_t Mp) {
    dconv_v8 a[DCONV_R][MV];
    for (int r = 0; r < DCONV_R; ++r)
        for (int v = 0; v < MV; ++v) a[r][v] = dconv_v8{};
    for (int64_t ci = 0; ci < CI; ++ci) {
        const float* row = xq + off[ci * KW];
        for (int64_t j = 0; j < KW; ++j, wb += 8 * MV) {
            const float* at = SW1 ? row + j : row + colo[j];
            dconv_v8 w[MV];
            for (int v = 0; v < MV; ++v) w[v] = *(const dconv_v8*)(wb + 8 * v);
            for (int r = 0; r < DCONV_R; ++r) {
                const float t = at[r];
                for (int v = 0; v < MV; ++v) a[r][v] += w[v] * t;
            }
        }
    }
    for (int r = 0; r < DCONV_R; ++r)
        for (int v = 0; v < MV; ++v) *(dconv_v8*)(o + r * Mp + 8 * v) = a[r][v];
}

// One sample: x [C, H, W] -> tmp [q][Mp] (q = oh * WS + ow); wp from dconv_pack, off from
// dconv_offsets; xp of dconv_xp_floats, zeroed when `fresh` (then only the image's
// positions are written).
__attribute__((optimize("fp-contract=fast", "no-tree-loop-distribute-patterns")))
inline void direct_conv(const float* __restrict x, const float* __restrict wp,
                        const int64_t* __restrict off, const ConvGeom& g, int64_t M,
                        float* __restrict xp, bool fresh, float* __restrict tmp) {
    const int64_t RH = dconv_rh(g), WS = dconv_ws(g), K = g.C * g.KH * g.KW;
    const int64_t Mp = dconv_mp(M), Q = g.OH * WS, PH = RH * WS;
    if (fresh) std::memset(xp, 0, sizeof(float) * (size_t)dconv_xp_floats(g));
    for (int64_t c = 0; c < g.C; ++c)
        for (int64_t h = 0; h < g.H; ++h) {
            const int64_t ph = h + g.PT, r = ph / g.SH;
            if (r >= RH) break;
            const float* src = x + (c * g.H + h) * g.W;
            for (int64_t pj = 0; pj < g.SW; ++pj) {       // padded column SW * s + pj
                float* dst = xp + ((c * g.SH + ph % g.SH) * g.SW + pj) * PH + r * WS;
                const int64_t w0 = pj - g.PL;            // its image column: SW * s + w0
                int64_t s0 = w0 >= 0 ? 0 : (-w0 + g.SW - 1) / g.SW;
                int64_t s1 = (g.W - w0 + g.SW - 1) / g.SW;
                if (s1 > WS) s1 = WS;
                if (g.SW == 1)
                    for (int64_t s = s0; s < s1; ++s) dst[s] = src[s + w0];
                else
                    for (int64_t s = s0; s < s1; ++s) dst[s] = src[s * g.SW + w0];
            }
        }
    int64_t colo[64];                              // DIRECT_MAX_K bounds KW
    for (int64_t j = 0; j < g.KW && j < 64; ++j) colo[j] = off[j] - off[0];
    const int64_t CI = g.C * g.KH;
    for (int64_t m0 = 0; m0 < Mp; m0 += 16) {
        const float* wb = wp + m0 * K;
        float* t0 = tmp + m0;
        if (Mp - m0 >= 16 && g.SW == 1)
            for (int64_t q = 0; q < Q; q += DCONV_R)
                dconv_tile<2, true>(xp + q, wb, off, colo, CI, g.KW, t0 + q * Mp, Mp);
        else if (Mp - m0 >= 16)
            for (int64_t q = 0; q < Q; q += DCONV_R)
                dconv_tile<2, false>(xp + q, wb, off, colo, CI, g.KW, t0 + q * Mp, Mp);
        else if (g.SW == 1)
            for (int64_t q = 0; q < Q; q += DCONV_R)
                dconv_tile<1, true>(xp + q, wb, off, colo, CI, g.KW, t0 + q * Mp, Mp);
        else
            for (int64_t q = 0; q < Q; q += DCONV_R)
                dconv_tile<1, false>(xp + q, wb, off, colo, CI, g.KW, t0 + q * Mp, Mp);
    }
}

// The filter gradient of a conv direct_conv computes at stride 1 (dilation 1, one group,
// few taps): dw[m, t] = the sum over the batch and positions of dy[n, m, p] * x at tap t
// from p, without im2col's columns or the [M, N*OH*OW] swap of dy. Each sample is padded
// into xp as direct_conv pads it at stride 1 (one phase); on that padded grid (rows of WP = OW + KW - 1) tap
// t = (c, i, j) of position q = oh * WP + ow reads xp[q + off_t], off_t = c*HP*WP + i*WP + j,
// so with each plane of dy copied into dp on the same grid (zeros in the KW - 1 columns
// past OW and past the last row's end), dw[m, t] is the dot product of dp with xp shifted
// by off_t: a block of up to DWGRAD_TB taps keeps its sums in vector registers while dp
// streams once. A sample's dot products are float (8 lanes, added up at the end), the
// batch's sums of them double. A sample holding an inf or NaN takes the real positions
// only (the grid's extra columns would add inf * 0). dp needs dwgrad_dp_floats(g), xp
// dconv_xp_floats(g).
constexpr int DWGRAD_TB = 12;

inline int64_t dwgrad_dp_floats(const ConvGeom& g) {
    return (g.OH * (g.OW + g.KW - 1) + 7) / 8 * 8;
}

template <int TB>
__attribute__((optimize("fp-contract=fast"), always_inline))
inline void dwgrad_block(const float* __restrict dp, const float* __restrict xp,
                         const int64_t* off, int64_t Q8, double* __restrict acc) {
    dconv_v8 a[TB];
    for (int k = 0; k < TB; ++k) a[k] = dconv_v8{};
    for (int64_t q = 0; q < Q8; q += 8) {
        const dconv_v8 d = *(const dconv_v8*)(dp + q);
        for (int k = 0; k < TB; ++k) a[k] += d * *(const dconv_v8*)(xp + off[k] + q);
    }
    for (int k = 0; k < TB; ++k) {
        float s = 0.0f;
        for (int l = 0; l < 8; ++l) s += a[k][l];
        acc[k] += (double)s;
    }
}

inline void dwgrad_taps(const float* dp, const float* xp, const int64_t* off, int64_t nt,
                        int64_t Q8, double* acc) {
    switch (nt) {
#define FL_DWGRAD_CASE(n) case n: dwgrad_block<n>(dp, xp, off, Q8, acc); break;
        FL_DWGRAD_CASE(1) FL_DWGRAD_CASE(2) FL_DWGRAD_CASE(3) FL_DWGRAD_CASE(4)
        FL_DWGRAD_CASE(5) FL_DWGRAD_CASE(6) FL_DWGRAD_CASE(7) FL_DWGRAD_CASE(8)
        FL_DWGRAD_CASE(9) FL_DWGRAD_CASE(10) FL_DWGRAD_CASE(11) FL_DWGRAD_CASE(12)
#undef FL_DWGRAD_CASE
        default: break;
    }
}

// acc: M * C*KH*KW doubles of scratch.
inline void direct_conv_s1_wgrad(const float* __restrict x, const float* __restrict dy,
                                 const ConvGeom& g, int64_t M, float* __restrict xp,
                                 float* __restrict dp, double* __restrict acc,
                                 float* __restrict dw) {
    const int64_t HP = g.OH + g.KH - 1, WP = g.OW + g.KW - 1, T = g.C * g.KH * g.KW;
    const int64_t Q8 = dwgrad_dp_floats(g), P = g.OH * g.OW;
    std::memset(xp, 0, sizeof(float) * (size_t)dconv_xp_floats(g));
    std::memset(dp, 0, sizeof(float) * (size_t)Q8);
    for (int64_t k = 0; k < M * T; ++k) acc[k] = 0.0;
    int64_t off[64];
    for (int64_t t = 0; t < T && t < 64; ++t) {
        const int64_t c = t / (g.KH * g.KW), i = t / g.KW % g.KH, j = t % g.KW;
        off[t] = c * HP * WP + i * WP + j;
    }
    const int64_t h_hi = g.H < HP - g.PT ? g.H : HP - g.PT;
    const int64_t w_hi = g.W < WP - g.PL ? g.W : WP - g.PL;
    for (int64_t n = 0; n < g.N; ++n) {
        float finite = 0.0f;              // x * 0 summed: NaN iff the sample holds inf or NaN
        for (int64_t c = 0; c < g.C; ++c)
            for (int64_t h = 0; h < h_hi; ++h) {
                const float* src = x + ((n * g.C + c) * g.H + h) * g.W;
                float* dst = xp + (c * HP + h + g.PT) * WP + g.PL;
                for (int64_t w = 0; w < w_hi; ++w) {
                    dst[w] = src[w];
                    finite += src[w] * 0.0f;
                }
            }
        for (int64_t m = 0; m < M; ++m) {
            const float* d = dy + (n * M + m) * P;
            if (finite != 0.0f || finite != finite) {
                // the padded grid's extra columns would multiply an inf by dp's 0: only
                // the real positions, one by one
                for (int64_t t = 0; t < T; ++t) {
                    float sum = 0.0f;
                    for (int64_t oh = 0; oh < g.OH; ++oh)
                        for (int64_t ow = 0; ow < g.OW; ++ow)
                            sum += d[oh * g.OW + ow] * xp[oh * WP + ow + off[t]];
                    acc[m * T + t] += (double)sum;
                }
                continue;
            }
            for (int64_t oh = 0; oh < g.OH; ++oh)
                for (int64_t ow = 0; ow < g.OW; ++ow) dp[oh * WP + ow] = d[oh * g.OW + ow];
            for (int64_t t0 = 0; t0 < T; t0 += DWGRAD_TB)
                dwgrad_taps(dp, xp, off + t0, T - t0 < DWGRAD_TB ? T - t0 : DWGRAD_TB, Q8,
                            acc + m * T + t0);
        }
    }
    for (int64_t k = 0; k < M * T; ++k) dw[k] = (float)acc[k];
}

// The epilogue's access to tmp [q][Mp]: the 8 x 8 block of positions p .. p + 7 (rows
// `stride` floats apart) and channels c0 .. c0 + 7 as 8 vectors, one a channel
// (dconv_load_t: an in-register transpose), and a vector's first n (<= 8) values stored.
typedef int dconv_i8 __attribute__((vector_size(32)));

#if defined(__clang__)     // GCC's two-vector shuffle with a mask vector, lane by lane
inline dconv_v8 dconv_shuffle(const dconv_v8& a, const dconv_v8& b, const dconv_i8& mask) {
    dconv_v8 r;
    for (int k = 0; k < 8; ++k) r[k] = mask[k] < 8 ? a[mask[k]] : b[mask[k] - 8];
    return r;
}
#define DCONV_SHUFFLE dconv_shuffle
#else
#define DCONV_SHUFFLE __builtin_shuffle
#endif

inline void dconv_load_t(const float* __restrict p, int64_t stride, dconv_v8* r) {
    dconv_v8 a[8], t[8], u[8];
    for (int k = 0; k < 8; ++k) a[k] = *(const dconv_v8*)(p + k * stride);
    const dconv_i8 lo{0, 8, 1, 9, 4, 12, 5, 13}, hi{2, 10, 3, 11, 6, 14, 7, 15};
    const dconv_i8 l2{0, 1, 8, 9, 4, 5, 12, 13}, h2{2, 3, 10, 11, 6, 7, 14, 15};
    const dconv_i8 l4{0, 1, 2, 3, 8, 9, 10, 11}, h4{4, 5, 6, 7, 12, 13, 14, 15};
    for (int k = 0; k < 8; k += 2) {
        t[k] = DCONV_SHUFFLE(a[k], a[k + 1], lo);
        t[k + 1] = DCONV_SHUFFLE(a[k], a[k + 1], hi);
    }
    for (int k = 0; k < 8; k += 4) {
        u[k] = DCONV_SHUFFLE(t[k], t[k + 2], l2);
        u[k + 1] = DCONV_SHUFFLE(t[k], t[k + 2], h2);
        u[k + 2] = DCONV_SHUFFLE(t[k + 1], t[k + 3], l2);
        u[k + 3] = DCONV_SHUFFLE(t[k + 1], t[k + 3], h2);
    }
    for (int k = 0; k < 4; ++k) {
        r[k] = DCONV_SHUFFLE(u[k], u[k + 4], l4);
        r[k + 4] = DCONV_SHUFFLE(u[k], u[k + 4], h4);
    }
}

inline void dconv_store(float* __restrict dst, const dconv_v8& v, int64_t n) {
    if (n >= 8) {
        *(dconv_v8*)dst = v;
        return;
    }
    float t[8];
    *(dconv_v8*)t = v;
    int64_t k = 0;                  // fixed-size copies: no loop for GCC to make a call of
    if (n & 4) { std::memcpy(dst, t, 16); k = 4; }
    if (n & 2) { std::memcpy(dst + k, t + k, 8); k += 2; }
    if (n & 1) dst[k] = t[k];
}

// fmaxnp lane by lane (a NaN in a wins, as the scalar's).
inline dconv_v8 fmaxnp(const dconv_v8& a, float b) {
#if defined(__clang__)
    dconv_v8 r;
    for (int k = 0; k < 8; ++k) r[k] = fmaxnp(a[k], b);
    return r;
#else
    const dconv_v8 bv = dconv_v8{} + b;
    return (a >= bv || a != a) ? a : bv;
#endif
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

// The depthwise kernel's register-tiled form for dilation 1 and column stride 1 or 2 (the
// others run depthwise_conv): each plane is copied once into `xp` with its padding (the
// border zeroed on the first plane only: every plane's border is at the same places), for
// stride 2 split into its even and odd columns, so that every tap of a run of 8 output
// columns reads 8 consecutive floats; the 8 outputs sum their KH*KW taps in a register
// (fused multiply-adds, in tap order) and are stored once, where depthwise_conv adds each
// tap along the output row in memory. xp holds dwconv_xp_floats(g) floats.
inline int64_t dwconv_xp_floats(const ConvGeom& g) {
    return 2 * ((g.OH - 1) * g.SH + g.KH) * (g.OW + g.KW + 32);
}

// NV vectors of 8 output columns (independent sums, so the multiply-adds overlap), the
// first n (<= 8 * NV) stored.
template <int NV>
__attribute__((optimize("fp-contract=fast"), always_inline))
inline void dwconv_tile(const float* __restrict row0, const float* __restrict wm, int64_t KH,
                        int64_t KW, int64_t SW, int64_t WS, int64_t half, int64_t rstride,
                        float* __restrict o, int64_t n) {
    dconv_v8 acc[NV];
    for (int v = 0; v < NV; ++v) acc[v] = dconv_v8{};
    for (int64_t i = 0; i < KH; ++i) {
        const float* row = row0 + i * WS;
        for (int64_t j = 0; j < KW; ++j) {
            const float* at = SW == 1 ? row + j : row + (j & 1) * half + j / 2;
            const float t = wm[i * KW + j];
            for (int v = 0; v < NV; ++v) acc[v] += *(const dconv_v8*)(at + 8 * v) * t;
        }
    }
    for (int v = 0; v < NV; ++v)
        if (n > 8 * v) dconv_store(o + 8 * v, acc[v], n - 8 * v);
}

// One plane of depthwise_conv_tiled: plane `img` of the input copied into xp (whose
// border the caller zeroed), the output plane `o` [OH, OW] computed tile by tile. Not
// inlined: its callers' per-plane epilogues are compiled without its fp-contract=fast (they
// must round as the unfused ops do).
__attribute__((optimize("fp-contract=fast", "no-tree-loop-distribute-patterns"), noinline))
inline void dwconv_plane_tiled(const float* __restrict img, const float* __restrict wm,
                               const ConvGeom& g, float* __restrict xp, float* __restrict o) {
    const int64_t HP = (g.OH - 1) * g.SH + g.KH;
    const int64_t WS = g.OW + g.KW + 32;            // one phase's row
    const int64_t half = HP * WS;                   // the odd columns' phase (stride 2)
    const int64_t h_hi = g.H < HP - g.PT ? g.H : HP - g.PT;
    for (int64_t h = 0; h < h_hi; ++h) {
        const float* src = img + h * g.W;
        float* row = xp + (h + g.PT) * WS;
        if (g.SW == 1) {
            const int64_t w_hi = g.W < WS - g.PL ? g.W : WS - g.PL;
            for (int64_t c = 0; c < w_hi; ++c) row[c + g.PL] = src[c];
        } else {          // padded column 2k + p is phase p's k-th: image column
            for (int64_t p = 0; p < 2; ++p) {         // 2k + p - PL, where in [0, W)
                const int64_t off = p - g.PL;
                int64_t k0 = off >= 0 ? 0 : (-off + 1) / 2;
                int64_t k1 = (g.W - off + 1) / 2;
                if (k1 > WS) k1 = WS;
                float* dst = row + p * half;
                const float* s2 = src + off;
                for (int64_t k = k0; k < k1; ++k) dst[k] = s2[2 * k];
            }
        }
    }
    for (int64_t oh = 0; oh < g.OH; ++oh)
        for (int64_t o0 = 0; o0 < g.OW; o0 += 32) {
            const float* row0 = xp + oh * g.SH * WS + o0;
            float* orow = o + oh * g.OW + o0;
            const int64_t n = g.OW - o0;
            if (n > 24)
                dwconv_tile<4>(row0, wm, g.KH, g.KW, g.SW, WS, half, WS, orow, n);
            else if (n > 16)
                dwconv_tile<3>(row0, wm, g.KH, g.KW, g.SW, WS, half, WS, orow, n);
            else if (n > 8)
                dwconv_tile<2>(row0, wm, g.KH, g.KW, g.SW, WS, half, WS, orow, n);
            else
                dwconv_tile<1>(row0, wm, g.KH, g.KW, g.SW, WS, half, WS, orow, n);
        }
}

// The tiled depthwise conv writing NCHW: each output plane (n, m) computed, then
// epi(m, plane, OH*OW) applied to it while it is still in cache (the conv's bias and fused
// epilogue, in place), instead of a second sweep over the whole output.
template <typename Epi>
inline void depthwise_conv_tiled(const float* __restrict x, const float* __restrict w,
                                 const ConvGeom& g, int64_t mult, float* __restrict xp,
                                 float* __restrict out, Epi epi) {
    const int64_t M = g.C * mult, P = g.OH * g.OW;
    std::memset(xp, 0, sizeof(float) * (size_t)dwconv_xp_floats(g));
    for (int64_t n = 0; n < g.N; ++n)
        for (int64_t m = 0; m < M; ++m) {
            float* o = out + (n * M + m) * P;
            dwconv_plane_tiled(x + (n * g.C + m / mult) * g.H * g.W, w + m * g.KH * g.KW, g,
                               xp, o);
            epi(m, o, P);
        }
}

// Winograd F(2x2, 3x3) for 3x3 convs with stride 1, dilation 1, one group (the emitter
// takes it for deep convs): each 2x2 block of outputs ("tile") is A^T [(G g G^T) . (B^T d
// B)] A over the 4x4 input patch d, 16 products a tile and input channel where the direct
// form has 36; summed over the channels, the 16 elementwise products are 16 gemms U_k
// [M, C] @ V_k [C, tiles], the conv's multiply-adds / 2.25. The generated code runs them
// per block of tiles (the block's V and gemm results stay in L2): wino_filter once a
// call, then per block wino_input, 16 fl::gemm, wino_output (which applies the conv's
// epilogue per value). Tiles are numbered over the batch (n, th, tw); the input is read
// from a padded copy of its sample split into even and odd columns (wino_pad), so a run
// of tiles along a row reads consecutive floats.
struct WinoGeom {
    int64_t TH, TW, HP, WS;       // tiles down and across; the padded copy's rows, phase row
};

inline WinoGeom wino_geom(const ConvGeom& g) {
    const int64_t TH = (g.OH + 1) / 2, TW = (g.OW + 1) / 2;
    return WinoGeom{TH, TW, 2 * TH + 2, TW + 1};
}

inline int64_t wino_xp_floats(const ConvGeom& g) {
    const WinoGeom q = wino_geom(g);
    return g.C * q.HP * 2 * q.WS + 16;     // + what the last vector of tiles reads past
}

// U [16][M][C] = G g G^T of each filter w [M][C][3][3].
inline void wino_filter(const float* __restrict w, int64_t M, int64_t C, float* __restrict U) {
    for (int64_t m = 0; m < M; ++m)
        for (int64_t c = 0; c < C; ++c) {
            const float* g = w + (m * C + c) * 9;
            float t[4][3], u[4][4];
            for (int j = 0; j < 3; ++j) {
                t[0][j] = g[j];
                t[1][j] = 0.5f * (g[j] + g[3 + j] + g[6 + j]);
                t[2][j] = 0.5f * (g[j] - g[3 + j] + g[6 + j]);
                t[3][j] = g[6 + j];
            }
            for (int i = 0; i < 4; ++i) {
                u[i][0] = t[i][0];
                u[i][1] = 0.5f * (t[i][0] + t[i][1] + t[i][2]);
                u[i][2] = 0.5f * (t[i][0] - t[i][1] + t[i][2]);
                u[i][3] = t[i][2];
            }
            for (int k = 0; k < 16; ++k) U[(k * M + m) * C + c] = u[k / 4][k % 4];
        }
}

// Sample n of x into xp [C][HP][2][WS]: padded row r, padded column pc at [r][pc & 1][pc / 2].
__attribute__((optimize("no-tree-loop-distribute-patterns")))
inline void wino_pad(const float* __restrict x, const ConvGeom& g, int64_t n,
                     float* __restrict xp) {
    const WinoGeom q = wino_geom(g);
    std::memset(xp, 0, sizeof(float) * (size_t)wino_xp_floats(g));
    for (int64_t c = 0; c < g.C; ++c)
        for (int64_t h = 0; h < g.H && h + g.PT < q.HP; ++h) {
            const float* src = x + ((n * g.C + c) * g.H + h) * g.W;
            float* row = xp + (c * q.HP + h + g.PT) * 2 * q.WS;
            for (int64_t p = 0; p < 2; ++p) {            // image column 2k + p - PL
                const int64_t off = p - g.PL;
                const int64_t k0 = off >= 0 ? 0 : (-off + 1) / 2;
                int64_t k1 = (g.W - off + 1) / 2;
                if (k1 > q.WS) k1 = q.WS;
                float* dst = row + p * q.WS;
                for (int64_t k = k0; k < k1; ++k) dst[k] = src[off + 2 * k];
            }
        }
}

// V [16][C][ld] = B^T d B of tiles t0 .. t0 + tb - 1 (*padded: the sample xp holds, -1 for
// none; a new sample is padded when the tiles reach it). Runs of tiles along a row go 8 a
// vector, the last vector of a run past its end: those lanes land in the next run's slots
// (written again after) or in the ld - tb >= 8 floats past the block.
inline void wino_input(const float* __restrict x, const ConvGeom& g, int64_t t0, int64_t tb,
                       int64_t ld, float* __restrict xp, int64_t* padded, float* __restrict V) {
    const WinoGeom q = wino_geom(g);
    const int64_t TT = q.TH * q.TW, CT = g.C * ld;
    for (int64_t t = t0; t < t0 + tb;) {
        const int64_t n = t / TT, th = t % TT / q.TW, tw0 = t % TT % q.TW;
        const int64_t len = q.TW - tw0 < t0 + tb - t ? q.TW - tw0 : t0 + tb - t;
        if (*padded != n) {
            wino_pad(x, g, n, xp);
            *padded = n;
        }
        for (int64_t c = 0; c < g.C; ++c) {
            const float* base = xp + (c * q.HP + 2 * th) * 2 * q.WS + tw0;
            float* v = V + c * ld + (t - t0);
            for (int64_t k = 0; k < len; k += 8) {    // 8 tiles a vector
                dconv_v8 d[4][4], s[4][4];
                for (int r = 0; r < 4; ++r) {
                    const float* ev = base + r * 2 * q.WS + k;
                    const float* od = ev + q.WS;
                    d[r][0] = *(const dconv_v8*)ev; d[r][1] = *(const dconv_v8*)od;
                    d[r][2] = *(const dconv_v8*)(ev + 1); d[r][3] = *(const dconv_v8*)(od + 1);
                }
                for (int j = 0; j < 4; ++j) {
                    s[0][j] = d[0][j] - d[2][j];
                    s[1][j] = d[1][j] + d[2][j];
                    s[2][j] = d[2][j] - d[1][j];
                    s[3][j] = d[1][j] - d[3][j];
                }
                for (int i = 0; i < 4; ++i) {
                    *(dconv_v8*)(v + (i * 4 + 0) * CT + k) = s[i][0] - s[i][2];
                    *(dconv_v8*)(v + (i * 4 + 1) * CT + k) = s[i][1] + s[i][2];
                    *(dconv_v8*)(v + (i * 4 + 2) * CT + k) = s[i][2] - s[i][1];
                    *(dconv_v8*)(v + (i * 4 + 3) * CT + k) = s[i][1] - s[i][3];
                }
            }
        }
        t += len;
    }
}

// out (NCHW) of tiles t0 .. t0 + tb - 1 from the gemms' R [16][M][ld]: A^T r A per tile and
// channel, 8 tiles a vector, each value through epi(channel, values) (the conv's bias and
// fused epilogue); lanes past a run of tiles fall on columns past OW and are not stored.
template <typename Epi>
inline void wino_output(const float* __restrict R, const ConvGeom& g, int64_t M, int64_t t0,
                        int64_t tb, int64_t ld, float* __restrict out, Epi epi) {
    const WinoGeom q = wino_geom(g);
    const int64_t TT = q.TH * q.TW, MT = M * ld;
    for (int64_t t = t0; t < t0 + tb;) {
        const int64_t n = t / TT, th = t % TT / q.TW, tw0 = t % TT % q.TW;
        const int64_t len = q.TW - tw0 < t0 + tb - t ? q.TW - tw0 : t0 + tb - t;
        const bool two_rows = 2 * th + 1 < g.OH;
        for (int64_t m = 0; m < M; ++m) {
            const float* r = R + m * ld + (t - t0);
            float* o = out + ((n * M + m) * g.OH + 2 * th) * g.OW;
            for (int64_t k = 0; k < len; k += 8) {    // 8 tiles a vector
                dconv_v8 a[2][4];
                for (int j = 0; j < 4; ++j) {
                    const dconv_v8 m0 = *(const dconv_v8*)(r + (0 + j) * MT + k);
                    const dconv_v8 m1 = *(const dconv_v8*)(r + (4 + j) * MT + k);
                    const dconv_v8 m2 = *(const dconv_v8*)(r + (8 + j) * MT + k);
                    const dconv_v8 m3 = *(const dconv_v8*)(r + (12 + j) * MT + k);
                    a[0][j] = m0 + m1 + m2;
                    a[1][j] = m1 - m2 - m3;
                }
                const int64_t col = 2 * (tw0 + k), n_out = g.OW - col;   // columns left
                for (int rr = 0; rr < 2; ++rr) {
                    if (rr == 1 && !two_rows) break;
                    const dconv_v8 y0 = epi(m, a[rr][0] + a[rr][1] + a[rr][2]);
                    const dconv_v8 y1 = epi(m, a[rr][1] - a[rr][2] - a[rr][3]);
                    const dconv_i8 lo{0, 8, 1, 9, 2, 10, 3, 11}, hi{4, 12, 5, 13, 6, 14, 7, 15};
                    float* orow = o + rr * g.OW + col;
                    dconv_store(orow, DCONV_SHUFFLE(y0, y1, lo), n_out);
                    if (n_out > 8) dconv_store(orow + 8, DCONV_SHUFFLE(y0, y1, hi), n_out - 8);
                }
            }
        }
        t += len;
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
        if (g.SW == 2) {          // the common 2-stride: a constant stride GCC vectorizes
            for (int64_t b = 0; b < g.OW; ++b) orow[b] = base[2 * b];
            for (int64_t i = 0; i < g.KH; ++i)
                for (int64_t j = (i == 0 ? 1 : 0); j < g.KW; ++j) {
                    const float* r = base + i * g.W + j;
                    for (int64_t b = 0; b < g.OW; ++b) orow[b] = fmaxnp(orow[b], r[2 * b]);
                }
            continue;
        }
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

// The 2x2 stride-2 case of max_pool_plane_grad_disjoint: the same strictly-greater scan of
// the taps (0,0), (0,1), (1,0), (1,1), each window's d written to its winner and 0 to its
// other three taps, 8 windows of a row at a time (even and odd columns split by shuffles,
// the four results interleaved back), so nothing is zeroed first but the rows and columns
// no window covers; the row's last n % 8 windows through AVX's masked loads and stores.
// 3x the scalar scan below on the MNIST CNN's 28x28 planes (its branches mispredict on
// random data); builds without AVX keep that scan.
#if defined(__AVX__) && !defined(__clang__)
#define FL_POOL_GRAD_2X2 1
// Windows b .. b + 7 from the row pair's 16 + 16 floats a0 a1 / b0 b1 and their d: the
// gradient of the two rows' 16 floats each (o[0], o[1]: the upper row; o[2], o[3]); with
// `relu`, relu_grad's of it (X is relu's Out: fusion.relu_grad_into_gradient).
inline void pool_grad_2x2_v8(const dconv_v8& a0, const dconv_v8& a1, const dconv_v8& b0,
                             const dconv_v8& b1, const dconv_v8& d, bool relu, dconv_v8* o) {
    const dconv_i8 ev{0, 2, 4, 6, 8, 10, 12, 14}, od{1, 3, 5, 7, 9, 11, 13, 15};
    const dconv_i8 lo{0, 8, 1, 9, 2, 10, 3, 11}, hi{4, 12, 5, 13, 6, 14, 7, 15};
    const dconv_v8 v00 = __builtin_shuffle(a0, a1, ev), v01 = __builtin_shuffle(a0, a1, od);
    const dconv_v8 v10 = __builtin_shuffle(b0, b1, ev), v11 = __builtin_shuffle(b0, b1, od);
    const dconv_i8 p01 = v01 > v00;
    const dconv_v8 m1 = p01 ? v01 : v00;
    const dconv_i8 p10 = v10 > m1;
    const dconv_v8 m2 = p10 ? v10 : m1;
    const dconv_i8 p11 = v11 > m2;
    const dconv_v8 z{}, one = z + 1.0f;
    // relu_grad's d * (Out > 0 ? 1 : 0) at the winner, Out = the window's maximum
    const dconv_v8 dv = relu ? d * ((p11 ? v11 : m2) > z ? one : z) : d;
    const dconv_v8 g11 = p11 ? dv : z, g10 = (p10 & ~p11) ? dv : z;
    const dconv_v8 g01 = (p01 & ~p10 & ~p11) ? dv : z, g00 = (p01 | p10 | p11) ? z : dv;
    o[0] = __builtin_shuffle(g00, g01, lo);
    o[1] = __builtin_shuffle(g00, g01, hi);
    o[2] = __builtin_shuffle(g10, g11, lo);
    o[3] = __builtin_shuffle(g10, g11, hi);
}

// Lanes [0, n) of a mask for _mm256_maskload_ps / maskstore (n may be <= 0 or >= 8).
inline __m256i pool_lanes(int64_t n) {
    const __m256i idx = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    return _mm256_cmpgt_epi32(_mm256_set1_epi32((int)(n < 0 ? 0 : n > 8 ? 8 : n)), idx);
}

// The row's windows 8 at a time; the last n % 8 through masked loads and stores.
inline void pool_grad_2x2_row(const float* r0, const float* r1, const float* dr, float* o0,
                              float* o1, int64_t n, bool relu) {
    int64_t b = 0;
    dconv_v8 o[4];
    for (; b + 8 <= n; b += 8) {
        const float *p0 = r0 + 2 * b, *p1 = r1 + 2 * b;
        pool_grad_2x2_v8(*(const dconv_v8*)p0, *(const dconv_v8*)(p0 + 8), *(const dconv_v8*)p1,
                         *(const dconv_v8*)(p1 + 8), *(const dconv_v8*)(dr + b), relu, o);
        *(dconv_v8*)(o0 + 2 * b) = o[0];
        *(dconv_v8*)(o0 + 2 * b + 8) = o[1];
        *(dconv_v8*)(o1 + 2 * b) = o[2];
        *(dconv_v8*)(o1 + 2 * b + 8) = o[3];
    }
    if (b == n) return;
    const int64_t k = n - b;
    const __m256i lo = pool_lanes(2 * k), hi = pool_lanes(2 * k - 8), dk = pool_lanes(k);
    const float *p0 = r0 + 2 * b, *p1 = r1 + 2 * b;
    pool_grad_2x2_v8((dconv_v8)_mm256_maskload_ps(p0, lo), (dconv_v8)_mm256_maskload_ps(p0 + 8, hi),
                     (dconv_v8)_mm256_maskload_ps(p1, lo), (dconv_v8)_mm256_maskload_ps(p1 + 8, hi),
                     (dconv_v8)_mm256_maskload_ps(dr + b, dk), relu, o);
    _mm256_maskstore_ps(o0 + 2 * b, lo, (__m256)o[0]);
    _mm256_maskstore_ps(o0 + 2 * b + 8, hi, (__m256)o[1]);
    _mm256_maskstore_ps(o1 + 2 * b, lo, (__m256)o[2]);
    _mm256_maskstore_ps(o1 + 2 * b + 8, hi, (__m256)o[3]);
}

inline void max_pool_plane_grad_2x2(const float* __restrict img, const float* __restrict d,
                                    float* __restrict gx, const PoolGeom& g, bool relu) {
    const int64_t W = g.W, c1 = g.C0 + 2 * g.OW;
    for (int64_t h = 0; h < g.H; ++h) {
        const int64_t a2 = h - g.R0;
        if (a2 < 0 || a2 >= 2 * g.OH) {
            for (int64_t w = 0; w < W; ++w) gx[h * W + w] = 0.0f;
            continue;
        }
        for (int64_t w = 0; w < g.C0; ++w) gx[h * W + w] = 0.0f;
        for (int64_t w = c1; w < W; ++w) gx[h * W + w] = 0.0f;
    }
    for (int64_t a = 0; a < g.OH; ++a) {
        const int64_t at = (2 * a + g.R0) * W + g.C0;
        pool_grad_2x2_row(img + at, img + at + W, d + a * g.OS, gx + at, gx + at + W, g.OW,
                          relu);
    }
}
#endif  // FL_POOL_GRAD_2X2

// max's gradient where windows do not overlap (SH >= KH, SW >= KW): each window's d goes to
// its first maximum (strictly greater replaces), the only contribution that position gets;
// gx is zeroed first. With `relu` (img is a relu's Out), relu_grad's of that: d * (the
// maximum > 0 ? 1 : 0), the others 0 as relu_grad makes them.
inline void max_pool_plane_grad_disjoint(const float* __restrict img, const float* __restrict d,
                                         float* __restrict gx, const PoolGeom& g,
                                         bool relu = false) {
#if defined(FL_POOL_GRAD_2X2)
    if (g.KH == 2 && g.KW == 2 && g.SH == 2 && g.SW == 2) {
        max_pool_plane_grad_2x2(img, d, gx, g, relu);
        return;
    }
#endif
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
            const float dv = d[a * g.OS + b];
            gx[at] = relu ? dv * (v > 0 ? 1.0f : 0.0f) : dv;
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
