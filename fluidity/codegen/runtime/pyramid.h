// Spatial pyramid pooling (spp) for generated code, laid out as ops/pooling_pyramid.py: level
// l pools each plane, padded to bins*kh x bins*kw (kh = ceil(H / bins), the map placed at
// (ph, pw) and cut to hh x ww), into bins x bins windows.
#pragma once
#include <cfloat>
#include <cstdint>
#include <cstring>

namespace fl {

struct SppLevel {
    int64_t bins, kh, ph, kw, pw, hh, ww;
};

// full[p] = plane p of x (H x W) padded as the level pads it, `fill` outside.
inline void spp_pad(const float* __restrict x, float* __restrict full, int64_t planes, int64_t H,
                    int64_t W, const SppLevel& L, float fill) {
    const int64_t FH = L.bins * L.kh, FW = L.bins * L.kw;
    for (int64_t p = 0; p < planes; ++p) {
        float* f = full + p * FH * FW;
        for (int64_t i = 0; i < FH * FW; ++i) f[i] = fill;
        for (int64_t r = 0; r < L.hh; ++r)
            std::memcpy(f + (L.ph + r) * FW + L.pw, x + p * H * W + r * W,
                        sizeof(float) * (size_t)L.ww);
    }
}

// The level's share of X@GRAD, added in double into acc: max routes each window's
// Out@GRAD to its first maximum (np.argmax over the padded window: a NaN first; none when
// that is a padded cell), avg spreads Out@GRAD / max(cells inside, 1) over the cells inside.
// Out@GRAD of (n, c, bi, bj) is dout[n * ostride + at + (c * bins + bi) * bins + bj].
inline void spp_grad_level(const float* __restrict x, const float* __restrict dout,
                           double* __restrict acc, int64_t N, int64_t C, int64_t H, int64_t W,
                           const SppLevel& L, int64_t ostride, int64_t at, bool maxpool) {
    const int64_t B = L.bins;
    for (int64_t n = 0; n < N; ++n)
        for (int64_t c = 0; c < C; ++c) {
            const float* img = x + (n * C + c) * H * W;
            double* g = acc + (n * C + c) * H * W;
            for (int64_t bi = 0; bi < B; ++bi)
                for (int64_t bj = 0; bj < B; ++bj) {
                    const float d = dout[n * ostride + at + (c * B + bi) * B + bj];
                    if (maxpool) {
                        float v = 0.0f;
                        int64_t best = -1;
                        bool first = true;
                        for (int64_t i = 0; i < L.kh; ++i)
                            for (int64_t j = 0; j < L.kw; ++j) {
                                const int64_t r = bi * L.kh + i - L.ph, s = bj * L.kw + j - L.pw;
                                const bool in = r >= 0 && r < L.hh && s >= 0 && s < L.ww;
                                const float t = in ? img[r * W + s] : -FLT_MAX;
                                if (first || (v == v && (t > v || t != t))) {
                                    v = t;
                                    best = in ? r * W + s : -1;
                                    first = false;
                                }
                            }
                        if (best >= 0) g[best] += (double)d;
                    } else {
                        int64_t rows = 0, cols = 0;
                        for (int64_t i = 0; i < L.kh; ++i) {
                            const int64_t r = bi * L.kh + i - L.ph;
                            rows += r >= 0 && r < L.hh;
                        }
                        for (int64_t j = 0; j < L.kw; ++j) {
                            const int64_t s = bj * L.kw + j - L.pw;
                            cols += s >= 0 && s < L.ww;
                        }
                        const int64_t cnt = rows * cols > 1 ? rows * cols : 1;
                        const double v = (double)d / (double)cnt;
                        for (int64_t i = 0; i < L.kh; ++i)
                            for (int64_t j = 0; j < L.kw; ++j) {
                                const int64_t r = bi * L.kh + i - L.ph, s = bj * L.kw + j - L.pw;
                                if (r >= 0 && r < L.hh && s >= 0 && s < L.ww) g[r * W + s] += v;
                            }
                    }
                }
        }
}

}  // namespace fl
