// nce (ops/sampled.py): its negative samplers over the op's Philox stream (philox.h), bit for
// bit the kernel's _Sampler.sample, and its cost and gradient in the kernel's precisions
// (logits in float, the sampler's probabilities and the costs in double).
#pragma once
#include <cmath>
#include <cstdint>
#include <cstring>

#include "numerics.h"
#include "philox.h"

namespace fl {

struct NceSampler {
    int kind;                    // 0 uniform, 1 log_uniform, 2 custom_dist
    int64_t n;                   // num_total_classes
    const float* probs;          // custom_dist: CustomDistProbs [n]
    const int64_t* alias;        // custom_dist: CustomDistAlias [n]
    const float* alias_probs;    // custom_dist: CustomDistAliasProbs [n]

    // The probability of class c, a float as Fluid 1.8's samplers give it (the kernel's
    // _Sampler.probability): log_uniform's ln n held as a float.
    inline double probability(int64_t c) const {
        if (kind == 0) return (double)(float)(1.0 / (double)n);
        if (kind == 1)
            return (double)(float)(std::log(((double)c + 2.0) / ((double)c + 1.0)) /
                                   nce_log_range(n));
        return (double)probs[c];
    }

    // ln n rounded to a float, as the kernel's _Sampler.log_range.
    static inline double nce_log_range(int64_t n) {
        return (double)(float)philox_log((double)n);
    }
};

// Negative j of row i (m = i * k + j) into labels[i * width + nt + j], m in [0, rows * k).
inline void nce_sample(const Philox& g, const NceSampler& s, int64_t rows, int64_t nt, int64_t k,
                       int64_t* labels) {
    const int64_t width = nt + k, total = rows * k;
    auto put = [&](int64_t m, int64_t c) { labels[(m / k) * width + nt + m % k] = c; };
    const uint64_t n = (uint64_t)s.n;
    if (s.kind == 0) {
        g.each_word(0, total,
                    [&](int64_t m, uint32_t w) { put(m, (int64_t)(((uint64_t)w * n) >> 32)); });
    } else if (s.kind == 1) {   // floor(exp(u ln n)) - 1, modulo n - 1 (Fluid 1.8's)
        const double log_range = NceSampler::nce_log_range(s.n);
        const int64_t mod = s.n - 1 > 1 ? s.n - 1 : 1;
        g.each_word(0, total, [&](int64_t m, uint32_t w) {
            int64_t v = (int64_t)std::floor(philox_exp(philox_u24(w) * log_range)) - 1;
            v %= mod;
            put(m, v < 0 ? v + mod : v);
        });
    } else {   // Walker's alias: the drawn class unless u > its probability and alias != -1
        uint32_t first = 0;
        g.each_word(0, 2 * total, [&](int64_t j, uint32_t w) {
            if ((j & 1) == 0) { first = w; return; }
            const int64_t idx = (int64_t)(((uint64_t)first * n) >> 32);
            const bool take = philox_u24(w) > (double)s.alias_probs[idx] && s.alias[idx] != -1;
            put(j >> 1, take ? s.alias[idx] : idx);
        });
    }
}

// o = sigmoid(x_i . W[l] + b[l]) in float, for label l = labels[i * width + j].
inline float nce_logit(const float* x, const float* w, const float* b, int64_t d, int64_t l) {
    const float* wr = w + l * d;
    float acc = 0.0f;
    for (int64_t t = 0; t < d; ++t) acc += x[t] * wr[t];
    if (b) acc += b[l];
    return sigmoid(acc);
}

// Cost [rows] and SampleLogits [rows, width] (o) from labels [rows, width] filled.
inline void nce_forward(const float* x, const float* w, const float* b, const float* sw,
                        const int64_t* labels, int64_t rows, int64_t d, int64_t nt, int64_t k,
                        const NceSampler& s, float* logits, float* cost) {
    const int64_t width = nt + k;
    for (int64_t i = 0; i < rows; ++i) {
        double c = 0.0;
        for (int64_t j = 0; j < width; ++j) {
            const int64_t l = labels[i * width + j];
            const float o = nce_logit(x + i * d, w, b, d, l);
            logits[i * width + j] = o;
            const double q = (double)((float)s.probability(l) * (float)k);
            double v = j < nt ? -std::log((double)o / ((double)o + q))
                              : -std::log(q / ((double)o + q));
            if (sw) v = v * (double)sw[i];
            c += v;
        }
        cost[i] = (float)c;
    }
}

// The gradients (NCEGrad's kernel): dlogit as the kernel rounds it, then dX [rows, d],
// dW (dense [n, d] accumulated in label order, or the rows' values [rows * width, d] when
// `dw_rows`), dB [n].
inline void nce_backward(const float* x, const float* w, const float* b, const float* sw,
                         const int64_t* labels, const float* dcost, int64_t rows, int64_t d,
                         int64_t nt, int64_t k, const NceSampler& s, float* dx, float* dw,
                         float* dw_rows, float* db) {
    const int64_t width = nt + k;
    if (dw) std::memset(dw, 0, sizeof(float) * s.n * d);
    if (db) std::memset(db, 0, sizeof(float) * s.n);
    for (int64_t i = 0; i < rows; ++i) {
        if (dx) std::memset(dx + i * d, 0, sizeof(float) * d);
        for (int64_t j = 0; j < width; ++j) {
            const int64_t l = labels[i * width + j];
            const float o = nce_logit(x + i * d, w, b, d, l);
            const double q = (double)((float)s.probability(l) * (float)k);
            double g = j < nt ? q / ((double)o + q) * (double)(float)(o - 1.0f)
                              : (double)(float)(o * (1.0f - o)) / ((double)o + q);
            g = g * (double)dcost[i];
            if (sw) g = g * (double)sw[i];
            const float gf = (float)g;
            if (dx) {
                const float* wr = w + l * d;
                for (int64_t t = 0; t < d; ++t) dx[i * d + t] += gf * wr[t];
            }
            if (dw) {
                float* r = dw + l * d;
                for (int64_t t = 0; t < d; ++t) r[t] += gf * x[i * d + t];
            }
            if (dw_rows) {
                float* r = dw_rows + (i * width + j) * d;
                for (int64_t t = 0; t < d; ++t) r[t] = gf * x[i * d + t];
            }
            if (db) db[l] += gf;
        }
    }
}

}  // namespace fl
