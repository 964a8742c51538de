// Philox4x32-10 and the numbers drawn from it: the C twin of fluidity/core/philox.py, which
// documents the one mapping from (seed, stream, run, element) to a number. Every float step
// here is the same IEEE double operation, in the same order, as the numpy code (the build
// passes -ffp-contract=off, so no FMA changes a rounding), so interpreted and compiled
// programs draw bit-identical numbers. Constants are the hex images of philox.py's tables
// (tests/codegen/test_philox_runtime.py compares them).
#pragma once
#include <cmath>
#include <cstdint>

namespace fl {

struct Philox {
    uint32_t k0, k1;       // (seed, stream)
    uint32_t r0, r1;       // the run counter, low and high words

    Philox(uint32_t seed, uint32_t stream, uint64_t run)
        : k0(seed), k1(stream), r0((uint32_t)run), r1((uint32_t)(run >> 32)) {}

    // The four words of block b (words 4b .. 4b + 3 of the draw).
    inline void block(uint64_t b, uint32_t w[4]) const {
        uint32_t c0 = (uint32_t)b, c1 = (uint32_t)(b >> 32), c2 = r0, c3 = r1;
        uint32_t a = k0, k = k1;
        for (int r = 0; r < 10; ++r) {
            const uint64_t p0 = (uint64_t)0xD2511F53u * c0, p1 = (uint64_t)0xCD9E8D57u * c2;
            const uint32_t h0 = (uint32_t)(p0 >> 32), l0 = (uint32_t)p0;
            const uint32_t h1 = (uint32_t)(p1 >> 32), l1 = (uint32_t)p1;
            c0 = h1 ^ c1 ^ a;
            c1 = l1;
            c2 = h0 ^ c3 ^ k;
            c3 = l0;
            a += 0x9E3779B9u;
            k += 0xBB67AE85u;
        }
        w[0] = c0; w[1] = c1; w[2] = c2; w[3] = c3;
    }

    // Word j of the draw.
    inline uint32_t word(uint64_t j) const {
        uint32_t w[4];
        block(j >> 2, w);
        return w[j & 3];
    }

    // f(j, word j) for j in [first, first + n), one Philox call per four words.
    template <typename F>
    inline void each_word(int64_t first, int64_t n, F&& f) const {
        uint32_t w[4];
        int64_t j = first;
        const int64_t end = first + n;
        while (j < end) {
            block((uint64_t)j >> 2, w);
            for (int q = (int)(j & 3); q < 4 && j < end; ++q, ++j) f(j, w[q]);
        }
    }
};

// The generator of one run (philox.key_and_run): a seeded op's key (seed, 0) at run 0; with
// seed 0, key (the state's key, stream) at the state's run, the state then advanced.
inline Philox philox_for(int64_t seed, int64_t* state, uint32_t stream) {
    if (seed != 0) return Philox((uint32_t)(uint64_t)seed, 0, 0);
    const uint64_t run = (uint64_t)state[1];
    state[1] = (int64_t)(run + 1);
    return Philox((uint32_t)(uint64_t)state[0], stream, run);
}

// --- own transcendental functions (philox.py's log, cos_2pi, exp) --------------------------
static const double kPhiloxLog[] = {
    0x1.0000000000000p+0, 0x1.5555555555555p-2, 0x1.999999999999ap-3, 0x1.2492492492492p-3,
    0x1.c71c71c71c71cp-4, 0x1.745d1745d1746p-4, 0x1.3b13b13b13b14p-4, 0x1.1111111111111p-4,
    0x1.e1e1e1e1e1e1ep-5, 0x1.af286bca1af28p-5, 0x1.8618618618618p-5};
static const double kPhiloxCos[] = {
    0x1.0000000000000p+0, -0x1.0000000000000p-1, 0x1.5555555555555p-5, -0x1.6c16c16c16c17p-10,
    0x1.a01a01a01a01ap-16, -0x1.27e4fb7789f5cp-22, 0x1.1eed8eff8d898p-29, -0x1.93974a8c07c9dp-37,
    0x1.ae7f3e733b81fp-45, -0x1.6827863b97d97p-53, 0x1.e542ba4020225p-62, -0x1.0ce396db7f853p-70};
static const double kPhiloxExp[] = {
    0x1.0000000000000p+0, 0x1.0000000000000p+0, 0x1.0000000000000p-1, 0x1.5555555555555p-3,
    0x1.5555555555555p-5, 0x1.1111111111111p-7, 0x1.6c16c16c16c17p-10, 0x1.a01a01a01a01ap-13,
    0x1.a01a01a01a01ap-16, 0x1.71de3a556c734p-19, 0x1.27e4fb7789f5cp-22, 0x1.ae64567f544e4p-26,
    0x1.1eed8eff8d898p-29, 0x1.6124613a86d09p-33, 0x1.93974a8c07c9dp-37, 0x1.ae7f3e733b81fp-41};
static const double kPhiloxLn2 = 0x1.62e42fefa39efp-1;
static const double kPhiloxTwoPi = 0x1.921fb54442d18p+2;
static const double kPhiloxInvLn2 = 0x1.71547652b82fep+0;
static const double kPhiloxSqrtHalf = 0x1.6a09e667f3bcdp-1;
static const double kPhiloxLn2Hi = 0x1.62e42feep-1;
static const double kPhiloxLn2Lo = 0x1.a39ef35793c76p-33;

template <int N>
inline double philox_horner(const double (&c)[N], double x) {
    double acc = c[N - 1];
    for (int k = N - 2; k >= 0; --k) acc = acc * x + c[k];
    return acc;
}

inline double philox_log(double x) {
    int e;
    double m = std::frexp(x, &e);
    if (m < kPhiloxSqrtHalf) {
        m = m * 2.0;
        e -= 1;
    }
    const double s = (m - 1.0) / (m + 1.0);
    return (double)e * kPhiloxLn2 + (2.0 * s) * philox_horner(kPhiloxLog, s * s);
}

inline double philox_cos_2pi(double u) {
    double t = u > 0.5 ? 1.0 - u : u;
    const bool flip = t > 0.25;
    if (flip) t = 0.5 - t;
    const double x = t * kPhiloxTwoPi;
    const double c = philox_horner(kPhiloxCos, x * x);
    return flip ? -c : c;
}

inline double philox_exp(double y) {
    const double k = std::floor(y * kPhiloxInvLn2 + 0.5);
    const double r = (y - k * kPhiloxLn2Hi) - k * kPhiloxLn2Lo;
    return std::ldexp(philox_horner(kPhiloxExp, r), (int)k);
}

// --- from words to numbers -----------------------------------------------------------------
inline double philox_u24(uint32_t w) { return (double)(w >> 8) * 0x1p-24; }

inline double philox_normal(uint32_t w0, uint32_t w1) {
    const double u1 = ((double)w0 + 1.0) * 0x1p-32, u2 = (double)w1 * 0x1p-32;
    return std::sqrt(-2.0 * philox_log(u1)) * philox_cos_2pi(u2);
}

// out[i] = lo + u_i * (hi - lo) rounded to float (philox.uniform, float32).
inline void philox_uniform_f32(const Philox& g, float* out, int64_t n, double lo, double hi) {
    const double range = hi - lo;
    g.each_word(0, n, [&](int64_t j, uint32_t w) { out[j] = (float)(lo + philox_u24(w) * range); });
}

// out[i] = mean + std * z_i rounded to float, z_i from words 2i, 2i + 1 (philox.normal).
inline void philox_normal_f32(const Philox& g, float* out, int64_t n, double mean, double std_) {
    uint32_t w[4];
    for (int64_t i = 0; i < n; i += 2) {
        g.block((uint64_t)i >> 1, w);
        out[i] = (float)(mean + std_ * philox_normal(w[0], w[1]));
        if (i + 1 < n) out[i + 1] = (float)(mean + std_ * philox_normal(w[2], w[3]));
    }
}

// Dropout's training form: mask[i] = (word_i >> 8) >= threshold; out[i] = x[i] * mask[i]
// (float), divided by `keep` (float 1 - p) when `upscale` (philox.keep_mask, ops/nn.py).
inline void philox_dropout(const Philox& g, const float* x, float* out, uint8_t* mask, int64_t n,
                           uint32_t threshold, bool upscale, float keep, bool all_dropped) {
    g.each_word(0, n, [&](int64_t j, uint32_t w) {
        const uint8_t m = (w >> 8) >= threshold ? 1 : 0;
        if (mask) mask[j] = m;
        const float v = x[j] * (float)m;
        out[j] = upscale ? (all_dropped ? 0.0f : v / keep) : v;
    });
}

}  // namespace fl

namespace fl {

// random_crop (ops/image_geometry.py): instance i (of m, each `tail` [k dims]) cropped to
// `crop` at offsets ((word i * k + j) * (tail[j] - crop[j] + 1)) >> 32; returns SeedOut,
// word m * k's low 31 bits (1 when they are 0).
template <typename T>
inline int64_t philox_random_crop(const Philox& g, const T* x, T* out, int64_t m, int k,
                                  const int64_t* tail, const int64_t* crop) {
    int64_t in_size = 1, out_size = 1;
    for (int j = 0; j < k; ++j) {
        in_size *= tail[j];
        out_size *= crop[j];
    }
    int64_t off[16];
    for (int64_t i = 0; i < m; ++i) {
        for (int j = 0; j < k; ++j)
            off[j] = (int64_t)(((uint64_t)g.word((uint64_t)(i * k + j)) *
                                (uint64_t)(tail[j] - crop[j] + 1)) >> 32);
        for (int64_t e = 0; e < out_size; ++e) {
            int64_t rem = e, src = 0, stride = 1;
            for (int j = k - 1; j >= 0; --j) {
                src += (rem % crop[j] + off[j]) * stride;
                rem /= crop[j];
                stride *= tail[j];
            }
            out[i * out_size + e] = x[i * in_size + src];
        }
    }
    const int64_t next = (int64_t)(g.word((uint64_t)(m * k)) & 0x7FFFFFFFu);
    return next ? next : 1;
}

}  // namespace fl
