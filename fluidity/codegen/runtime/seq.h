// Primitives for the Fluid 1.x sequence, similarity and CRF op emitters (ops/sequence.py,
// ops/loss_fluid1.py, ops/crf.py). Each walks the sequences of a level-0 LoD (offsets into
// the rows) in the order the numpy kernel does, so sums add in the kernel's order.
#pragma once
#include <cmath>
#include <cstdint>
#include <cstring>

namespace fl {

// sequence_conv's context matrix col [T, K * M]: block k of row t is the row t - s + cs + k
// of t's sequence [s, e) when it lies inside, else the PaddingData row (`pad`, [up + down, M],
// nullptr when not trainable: zeros) as ops/sequence.py's SequenceConv.index picks it.
inline void seq_context(const float* x, const int64_t* lod, int64_t nseq, int64_t m, int64_t k,
                        int64_t cs, const float* pad, int64_t up, float* col) {
    for (int64_t i = 0; i < nseq; ++i) {
        const int64_t s = lod[i], e = lod[i + 1], len = e - s;
        for (int64_t t = s; t < e; ++t)
            for (int64_t j = 0; j < k; ++j) {
                const int64_t p = t - s + cs + j;
                float* dst = col + (t * k + j) * m;
                const float* src = nullptr;
                if (p >= 0 && p < len)
                    src = x + (s + p) * m;
                else if (pad != nullptr)
                    src = pad + (p < 0 ? up + p : up + p - len) * m;
                if (src != nullptr)
                    std::memcpy(dst, src, sizeof(float) * m);
                else
                    std::memset(dst, 0, sizeof(float) * m);
            }
    }
}

// Its transpose: the blocks of dcol [T, K * M] added back into the rows they came from, in
// (t, k) order as np.add.at adds them; dx [T, M] and dpad (or nullptr) are zeroed first.
inline void seq_context_grad(const float* dcol, const int64_t* lod, int64_t nseq, int64_t rows,
                             int64_t m, int64_t k, int64_t cs, float* dx, float* dpad,
                             int64_t up, int64_t n_pad) {
    if (dx != nullptr) std::memset(dx, 0, sizeof(float) * rows * m);
    if (dpad != nullptr) std::memset(dpad, 0, sizeof(float) * n_pad * m);
    for (int64_t i = 0; i < nseq; ++i) {
        const int64_t s = lod[i], e = lod[i + 1], len = e - s;
        for (int64_t t = s; t < e; ++t)
            for (int64_t j = 0; j < k; ++j) {
                const int64_t p = t - s + cs + j;
                const float* src = dcol + (t * k + j) * m;
                float* dst = nullptr;
                if (p >= 0 && p < len)
                    dst = dx != nullptr ? dx + (s + p) * m : nullptr;
                else if (dpad != nullptr)
                    dst = dpad + (p < 0 ? up + p : up + p - len) * m;
                if (dst != nullptr)
                    for (int64_t c = 0; c < m; ++c) dst[c] += src[c];
            }
    }
}

}  // namespace fl

namespace fl {

// cos_sim over rows of width w: out[i] = <x_i, y_i> / (|x_i| |y_i|), y_i = y's row i, or its
// only row when ny == 1; each sum pairwise over the products as numpy's sum(axis=1).
inline void cos_sim(const float* x, const float* y, int64_t n, int64_t ny, int64_t w, float* out,
                    float* xn, float* yn, float* tmp) {
    for (int64_t r = 0; r < ny; ++r) {
        const float* yr = y + r * w;
        for (int64_t c = 0; c < w; ++c) tmp[c] = yr[c] * yr[c];
        yn[r] = std::sqrt(pairwise_sum(tmp, w, 1));
    }
    for (int64_t i = 0; i < n; ++i) {
        const float* xr = x + i * w;
        const int64_t r = ny == 1 ? 0 : i;
        const float* yr = y + r * w;
        for (int64_t c = 0; c < w; ++c) tmp[c] = xr[c] * xr[c];
        xn[i] = std::sqrt(pairwise_sum(tmp, w, 1));
        for (int64_t c = 0; c < w; ++c) tmp[c] = xr[c] * yr[c];
        out[i] = pairwise_sum(tmp, w, 1) / (xn[i] * yn[r]);
    }
}

// Its gradient as ops/loss_fluid1.py's CosSimGrad: dx = d (y / (xn yn) - out x / (xn xn)),
// dy likewise, summed over X's rows (in order, from the first) when Y is one row of several.
inline void cos_sim_grad(const float* x, const float* y, int64_t n, int64_t ny, int64_t w,
                         const float* out, const float* xn, const float* yn, const float* d,
                         float* dx, float* dy) {
    const bool shared = ny == 1 && n != 1;
    for (int64_t i = 0; i < n; ++i) {
        const int64_t r = ny == 1 ? 0 : i;
        const float* xr = x + i * w;
        const float* yr = y + r * w;
        const float a = xn[i], b = yn[r], o = out[i], g = d[i];
        const float ab = a * b, aa = a * a, bb = b * b;
        if (dx != nullptr)
            for (int64_t c = 0; c < w; ++c) dx[i * w + c] = g * (yr[c] / ab - o * xr[c] / aa);
        if (dy != nullptr)
            for (int64_t c = 0; c < w; ++c) {
                const float v = g * (xr[c] / ab - o * yr[c] / bb);
                if (!shared)
                    dy[i * w + c] = v;
                else
                    dy[c] = i == 0 ? v : dy[c] + v;
            }
    }
}

}  // namespace fl
