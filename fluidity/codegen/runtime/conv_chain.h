// A chain of 1x1 and depthwise convs (fusion.conv_chain) run a sample at a time in
// channel-last layout: the sample's input plane stack [C, H*W] is transposed once into
// [H*W, C], every conv of the chain reads and writes [positions, channels] in one of two
// scratch buffers (a sample's values stay in cache from one conv to the next), and the last
// result is transposed back into NCHW. Channel-last is the layout both kernels want: a 1x1
// conv is then a gemm whose activations need no packing ([P, K] rows are read in place,
// the weights packed once a call) and whose epilogue runs on the accumulators before the
// one store; a depthwise tap is one 8-channel vector multiply-add at one position (no
// padded plane copy; a stride of 2 is a stride between positions, not a shuffle).
// Every channel count is a multiple of 8 (the emitter checks). The conv sums use fused
// multiply-adds in tap / input-channel order; each epilogue step is the unfused op's own
// float arithmetic (conv.py's _epilogue_steps), lane by lane.
#pragma once
#include <cstdint>

#if defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>
#define FL_CHAIN_AVX2 1
#endif

namespace fl {

// A link's epilogue per output channel c, each step optional (null / false): v += b1[c]
// (the conv's Bias), v += b2[c] (a bias add after it), v = v * k[c] + off[c] (a frozen
// batch_norm), v = fmaxnp(v, 0) (relu).
struct ChainEpi {
    const float* b1;
    const float* b2;
    const float* k;
    const float* off;
    bool relu;
};

// One value's epilogue (the plain loops' form of chain_epi8).
inline float chain_epi1(float v, const ChainEpi& e, int64_t c) {
    if (e.b1) v = v + e.b1[c];
    if (e.b2) v = v + e.b2[c];
    if (e.k) v = v * e.k[c] + e.off[c];
    if (e.relu) v = fmaxnp(v, 0.0f);
    return v;
}

#ifdef FL_CHAIN_AVX2
inline __m256 chain_epi8(__m256 v, const ChainEpi& e, int64_t c) {
    if (e.b1) v = _mm256_add_ps(v, _mm256_loadu_ps(e.b1 + c));
    if (e.b2) v = _mm256_add_ps(v, _mm256_loadu_ps(e.b2 + c));
    if (e.k) v = _mm256_add_ps(_mm256_mul_ps(v, _mm256_loadu_ps(e.k + c)),
                               _mm256_loadu_ps(e.off + c));
    if (e.relu) {          // fmaxnp(v, 0): v where v >= 0 or v is NaN, else 0
        const __m256 z = _mm256_setzero_ps();
        const __m256 keep = _mm256_or_ps(_mm256_cmp_ps(v, z, _CMP_GE_OQ),
                                         _mm256_cmp_ps(v, v, _CMP_UNORD_Q));
        v = _mm256_blendv_ps(z, v, keep);
    }
    return v;
}

#endif

#ifdef FL_CHAIN_AVX2
// The 8 x 8 block at `src` (rows `ls` floats apart) stored transposed at `dst` (rows `ld`
// apart).
inline void chain_t8x8(const float* __restrict src, int64_t ls, float* __restrict dst,
                       int64_t ld) {
    __m256 r0 = _mm256_loadu_ps(src), r1 = _mm256_loadu_ps(src + ls),
           r2 = _mm256_loadu_ps(src + 2 * ls), r3 = _mm256_loadu_ps(src + 3 * ls),
           r4 = _mm256_loadu_ps(src + 4 * ls), r5 = _mm256_loadu_ps(src + 5 * ls),
           r6 = _mm256_loadu_ps(src + 6 * ls), r7 = _mm256_loadu_ps(src + 7 * ls);
    __m256 t0 = _mm256_unpacklo_ps(r0, r1), t1 = _mm256_unpackhi_ps(r0, r1),
           t2 = _mm256_unpacklo_ps(r2, r3), t3 = _mm256_unpackhi_ps(r2, r3),
           t4 = _mm256_unpacklo_ps(r4, r5), t5 = _mm256_unpackhi_ps(r4, r5),
           t6 = _mm256_unpacklo_ps(r6, r7), t7 = _mm256_unpackhi_ps(r6, r7);
    r0 = _mm256_shuffle_ps(t0, t2, 0x44); r1 = _mm256_shuffle_ps(t0, t2, 0xEE);
    r2 = _mm256_shuffle_ps(t1, t3, 0x44); r3 = _mm256_shuffle_ps(t1, t3, 0xEE);
    r4 = _mm256_shuffle_ps(t4, t6, 0x44); r5 = _mm256_shuffle_ps(t4, t6, 0xEE);
    r6 = _mm256_shuffle_ps(t5, t7, 0x44); r7 = _mm256_shuffle_ps(t5, t7, 0xEE);
    _mm256_storeu_ps(dst, _mm256_permute2f128_ps(r0, r4, 0x20));
    _mm256_storeu_ps(dst + ld, _mm256_permute2f128_ps(r1, r5, 0x20));
    _mm256_storeu_ps(dst + 2 * ld, _mm256_permute2f128_ps(r2, r6, 0x20));
    _mm256_storeu_ps(dst + 3 * ld, _mm256_permute2f128_ps(r3, r7, 0x20));
    _mm256_storeu_ps(dst + 4 * ld, _mm256_permute2f128_ps(r0, r4, 0x31));
    _mm256_storeu_ps(dst + 5 * ld, _mm256_permute2f128_ps(r1, r5, 0x31));
    _mm256_storeu_ps(dst + 6 * ld, _mm256_permute2f128_ps(r2, r6, 0x31));
    _mm256_storeu_ps(dst + 7 * ld, _mm256_permute2f128_ps(r3, r7, 0x31));
}
#endif

// a [R, S] (rows S apart) -> b [S, R]: 8 x 8 blocks through registers, the rows and
// columns past the last whole block one value at a time.
inline void chain_transpose(const float* __restrict a, int64_t R, int64_t S,
                            float* __restrict b) {
    int64_t r8 = 0, s8 = 0;
#ifdef FL_CHAIN_AVX2
    r8 = R / 8 * 8;
    s8 = S / 8 * 8;
    for (int64_t s0 = 0; s0 < s8; s0 += 8)
        for (int64_t r0 = 0; r0 < r8; r0 += 8) chain_t8x8(a + r0 * S + s0, S, b + s0 * R + r0, R);
#endif
    for (int64_t r = 0; r < R; ++r)
        for (int64_t s = r < r8 ? s8 : 0; s < S; ++s) b[s * R + r] = a[r * S + s];
}

// x [C, HW] -> y [HW, C].
inline void chain_to_nhwc(const float* __restrict x, int64_t C, int64_t HW,
                          float* __restrict y) {
    chain_transpose(x, C, HW, y);
}

// y [HW, C] -> x [C, HW].
inline void chain_to_nchw(const float* __restrict y, int64_t C, int64_t HW,
                          float* __restrict x) {
    chain_transpose(y, HW, C, x);
}

// The direct kernel's result for one sample, tmp [OH rows of WS positions][M] (direct_conv;
// the positions past OW in a row are not outputs), as y [OH*OW, M] with the head conv's
// epilogue.
inline void chain_from_grid(const float* __restrict tmp, int64_t OH, int64_t OW, int64_t WS,
                            int64_t M, const ChainEpi& e, float* __restrict y) {
    for (int64_t a = 0; a < OH; ++a)
        for (int64_t i = 0; i < OW; ++i) {
            const float* src = tmp + (a * WS + i) * M;
            float* dst = y + (a * OW + i) * M;
#ifdef FL_CHAIN_AVX2
            for (int64_t c = 0; c < M; c += 8)
                _mm256_storeu_ps(dst + c, chain_epi8(_mm256_loadu_ps(src + c), e, c));
#else
            for (int64_t c = 0; c < M; ++c) dst[c] = chain_epi1(src[c], e, c);
#endif
        }
}

// A 1x1 conv's filter [M, K] packed for chain_pointwise: panels of 16 output channels,
// [M/16 rounded up][K][16], a last panel of 8 channels zero-filled to 16.
inline int64_t chain_pw_packed_floats(int64_t M, int64_t K) { return (M + 15) / 16 * 16 * K; }
inline void chain_pw_pack(const float* __restrict w, int64_t M, int64_t K,
                          float* __restrict wp) {
    for (int64_t mb = 0; mb < (M + 15) / 16; ++mb)
        for (int64_t k = 0; k < K; ++k)
            for (int64_t j = 0; j < 16; ++j) {
                const int64_t m = mb * 16 + j;
                wp[(mb * K + k) * 16 + j] = m < M ? w[m * K + k] : 0.0f;
            }
}

// A depthwise filter [C, 1, KH, KW] as [KH*KW][C] (one tap's channels side by side).
inline void chain_dw_pack(const float* __restrict w, int64_t C, int64_t taps,
                          float* __restrict wt) {
    for (int64_t c = 0; c < C; ++c)
        for (int64_t t = 0; t < taps; ++t) wt[t * C + c] = w[c * taps + t];
}

#ifdef FL_CHAIN_AVX2
// R positions (rows of x, K apart) x 8 * H output channels (H = 1 or 2 vectors), summed
// over the K input channels in registers, the epilogue applied, stored into `o` (rows M
// apart) at channel c0.
template <int R, int H>
__attribute__((always_inline)) inline void chain_pw_tile(const float* __restrict x, int64_t K,
                                                         const float* __restrict wp,
                                                         float* __restrict o, int64_t M,
                                                         int64_t c0, const ChainEpi& e) {
    __m256 a00 = _mm256_setzero_ps(), a01 = a00, a10 = a00, a11 = a00, a20 = a00, a21 = a00,
           a30 = a00, a31 = a00, a40 = a00, a41 = a00, a50 = a00, a51 = a00;
    const float *x0 = x, *x1 = x + K, *x2 = x + 2 * K, *x3 = x + 3 * K, *x4 = x + 4 * K,
                *x5 = x + 5 * K;
#pragma GCC unroll 4
    for (int64_t k = 0; k < K; ++k) {
        const __m256 w0 = _mm256_loadu_ps(wp + k * 16);
        const __m256 w1 = H > 1 ? _mm256_loadu_ps(wp + k * 16 + 8) : w0;
        __m256 b;
#define FL_PW_ROW(r)                                                          \
        if constexpr (R > r) {                                                \
            b = _mm256_broadcast_ss(x##r + k);                                \
            a##r##0 = _mm256_fmadd_ps(b, w0, a##r##0);                        \
            if constexpr (H > 1) a##r##1 = _mm256_fmadd_ps(b, w1, a##r##1);   \
        }
        FL_PW_ROW(0) FL_PW_ROW(1) FL_PW_ROW(2) FL_PW_ROW(3) FL_PW_ROW(4) FL_PW_ROW(5)
#undef FL_PW_ROW
    }
#define FL_PW_STORE(r)                                                                     \
    if constexpr (R > r) {                                                                 \
        _mm256_storeu_ps(o + r * M + c0, chain_epi8(a##r##0, e, c0));                      \
        if constexpr (H > 1) _mm256_storeu_ps(o + r * M + c0 + 8, chain_epi8(a##r##1, e, c0 + 8)); \
    }
    FL_PW_STORE(0) FL_PW_STORE(1) FL_PW_STORE(2) FL_PW_STORE(3) FL_PW_STORE(4) FL_PW_STORE(5)
#undef FL_PW_STORE
}

// Output channels [m0, m1) (m0 a multiple of 16) of R positions.
template <int R>
inline void chain_pw_tiles(const float* x, int64_t K, const float* wp, float* o, int64_t M,
                           int64_t m0, int64_t m1, const ChainEpi& e) {
    int64_t m = m0;
    for (; m + 16 <= m1; m += 16) chain_pw_tile<R, 2>(x, K, wp + m * K, o, M, m, e);
    if (m < m1) chain_pw_tile<R, 1>(x, K, wp + m * K, o, M, m, e);
}
#endif

// Output channels a pass of chain_pointwise takes over all positions: the pass's packed
// filter (PW_PASS_BYTES at most, a multiple of 16 channels) stays in L2 while the
// positions stream by.
constexpr int64_t CHAIN_PW_PASS_BYTES = 128 << 10;
inline int64_t chain_pw_pass(int64_t M, int64_t K) {
    int64_t m = CHAIN_PW_PASS_BYTES / (4 * (K > 0 ? K : 1)) / 16 * 16;
    return m < 16 ? 16 : m > M ? M : m;
}

// A 1x1 conv of one sample: out [P, M] = x [P, K] @ w^T (wp: chain_pw_pack), each
// output's epilogue applied before it is stored. Per pass of output channels
// (chain_pw_pass), per tile of 6 positions (in L1), every panel of 16 of the pass's
// channels (the pass's packed filter in L2).
inline void chain_pointwise(const float* __restrict x, int64_t P, int64_t K,
                            const float* __restrict wp, int64_t M, float* __restrict out,
                            const ChainEpi& e) {
#ifdef FL_CHAIN_AVX2
    const int64_t pass = chain_pw_pass(M, K);
    for (int64_t m0 = 0; m0 < M; m0 += pass) {
        const int64_t m1 = m0 + pass < M ? m0 + pass : M;
        int64_t p = 0;
        for (; p + 6 <= P; p += 6) chain_pw_tiles<6>(x + p * K, K, wp, out + p * M, M, m0, m1, e);
        const float* xr = x + p * K;
        float* orow = out + p * M;
        switch (P - p) {
            case 5: chain_pw_tiles<5>(xr, K, wp, orow, M, m0, m1, e); break;
            case 4: chain_pw_tiles<4>(xr, K, wp, orow, M, m0, m1, e); break;
            case 3: chain_pw_tiles<3>(xr, K, wp, orow, M, m0, m1, e); break;
            case 2: chain_pw_tiles<2>(xr, K, wp, orow, M, m0, m1, e); break;
            case 1: chain_pw_tiles<1>(xr, K, wp, orow, M, m0, m1, e); break;
            default: break;
        }
    }
#else
    for (int64_t p = 0; p < P; ++p)
        for (int64_t m = 0; m < M; ++m) {
            const float* wr = wp + ((m / 16) * K) * 16 + m % 16;
            float v = 0.0f;
            for (int64_t k = 0; k < K; ++k) v = std::fma(x[p * K + k], wr[k * 16], v);
            out[p * M + m] = chain_epi1(v, e, m);
        }
#endif
}

#ifdef FL_CHAIN_AVX2
// T output positions along a row (their taps all inside the row: no column check), 8
// channels from c, of a depthwise conv over one sample's [H, W, C]; rows outside the
// image skipped.
template <int T>
__attribute__((always_inline)) inline void chain_dw_tile(const float* __restrict x,
                                                         const float* __restrict wt,
                                                         const ConvGeom& g, int64_t oh,
                                                         int64_t ow0, int64_t c,
                                                         float* __restrict o,
                                                         const ChainEpi& e) {
    __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0, a4 = a0, a5 = a0, a6 = a0,
           a7 = a0;
    const int64_t C = g.C, S = g.SW * C;
    for (int64_t i = 0; i < g.KH; ++i) {
        const int64_t h = oh * g.SH - g.PT + i;
        if (h < 0 || h >= g.H) continue;
        const float* row = x + (h * g.W + ow0 * g.SW - g.PL) * C + c;
        const float* wr = wt + i * g.KW * C + c;
        for (int64_t j = 0; j < g.KW; ++j) {
            const __m256 wv = _mm256_loadu_ps(wr + j * C);
            const float* r = row + j * C;
            a0 = _mm256_fmadd_ps(_mm256_loadu_ps(r), wv, a0);
#define FL_DW_TAP(t) if constexpr (T > t) a##t = _mm256_fmadd_ps(_mm256_loadu_ps(r + t * S), wv, a##t);
            FL_DW_TAP(1) FL_DW_TAP(2) FL_DW_TAP(3) FL_DW_TAP(4) FL_DW_TAP(5) FL_DW_TAP(6) FL_DW_TAP(7)
#undef FL_DW_TAP
        }
    }
    float* op = o + (oh * g.OW + ow0) * C + c;
    _mm256_storeu_ps(op, chain_epi8(a0, e, c));
#define FL_DW_ST(t) if constexpr (T > t) _mm256_storeu_ps(op + t * C, chain_epi8(a##t, e, c));
    FL_DW_ST(1) FL_DW_ST(2) FL_DW_ST(3) FL_DW_ST(4) FL_DW_ST(5) FL_DW_ST(6) FL_DW_ST(7)
#undef FL_DW_ST
}

#endif

// One output position's 8 channels from c, every tap checked against the image's edges.
inline void chain_dw_edge(const float* __restrict x, const float* __restrict wt,
                          const ConvGeom& g, int64_t oh, int64_t ow, int64_t c,
                          float* __restrict o, const ChainEpi& e) {
    const int64_t C = g.C;
#ifdef FL_CHAIN_AVX2
    __m256 acc = _mm256_setzero_ps();
#else
    float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
#endif
    for (int64_t i = 0; i < g.KH; ++i) {
        const int64_t h = oh * g.SH - g.PT + i;
        if (h < 0 || h >= g.H) continue;
        for (int64_t j = 0; j < g.KW; ++j) {
            const int64_t w = ow * g.SW - g.PL + j;
            if (w < 0 || w >= g.W) continue;
            const float* src = x + (h * g.W + w) * C + c;
            const float* wv = wt + (i * g.KW + j) * C + c;
#ifdef FL_CHAIN_AVX2
            acc = _mm256_fmadd_ps(_mm256_loadu_ps(src), _mm256_loadu_ps(wv), acc);
#else
            for (int l = 0; l < 8; ++l) acc[l] = std::fma(src[l], wv[l], acc[l]);
#endif
        }
    }
    float* op = o + (oh * g.OW + ow) * C + c;
#ifdef FL_CHAIN_AVX2
    _mm256_storeu_ps(op, chain_epi8(acc, e, c));
#else
    for (int l = 0; l < 8; ++l) op[l] = chain_epi1(acc[l], e, c + l);
#endif
}

// A depthwise conv (multiplier 1, dilation 1) of one sample: x [H, W, C] -> o [OH, OW, C]
// (g: its geometry with N = 1; wt: chain_dw_pack). Per output row, the columns whose taps
// all fall inside the row in tiles of 8 and 4 positions, every 8-channel block of a tile
// before the next tile (the tile's input rows stay in L1); the edge columns checked.
inline void chain_depthwise(const float* __restrict x, const float* __restrict wt,
                            const ConvGeom& g, float* __restrict o, const ChainEpi& e) {
    // interior columns: ow * SW - PL >= 0 and ow * SW - PL + KW - 1 < W
    int64_t lo = (g.PL + g.SW - 1) / g.SW;
    int64_t hi = g.W - g.KW + g.PL >= 0 ? (g.W - g.KW + g.PL) / g.SW + 1 : 0;
    if (hi > g.OW) hi = g.OW;
    if (lo > hi) lo = hi;
    for (int64_t oh = 0; oh < g.OH; ++oh) {
        for (int64_t ow = 0; ow < lo; ++ow)
            for (int64_t c = 0; c < g.C; c += 8) chain_dw_edge(x, wt, g, oh, ow, c, o, e);
        int64_t ow = lo;
#ifdef FL_CHAIN_AVX2
        for (; ow + 8 <= hi; ow += 8)
            for (int64_t c = 0; c < g.C; c += 8) chain_dw_tile<8>(x, wt, g, oh, ow, c, o, e);
        for (; ow + 4 <= hi; ow += 4)
            for (int64_t c = 0; c < g.C; c += 8) chain_dw_tile<4>(x, wt, g, oh, ow, c, o, e);
        for (; ow < hi; ++ow)
            for (int64_t c = 0; c < g.C; c += 8) chain_dw_tile<1>(x, wt, g, oh, ow, c, o, e);
#endif
        for (; ow < g.OW; ++ow)
            for (int64_t c = 0; c < g.C; c += 8) chain_dw_edge(x, wt, g, oh, ow, c, o, e);
    }
}

}  // namespace fl
