// Primitives for the Fluid 1.x sequence, similarity and CRF op emitters (ops/sequence.py,
// ops/vector_norm.py, ops/crf.py). Each walks the sequences of a level-0 LoD (offsets into
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

// Its gradient as ops/vector_norm.py's CosSimGrad: dx = d (y / (xn yn) - out x / (xn xn)),
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

namespace fl {

// --- linear-chain CRF (ops/crf.py): Transition w is [D + 2, D], row 0 the start weights, row 1
// the end weights, rows 2.. tag-to-tag; the recursions run in double as the kernel's float64.

// ops/crf.py's _lse over n values at stride s: the max (0 when not finite) + log sum exp.
inline double crf_lse(const double* a, int64_t n, int64_t s) {
    double m = a[0];
    for (int64_t i = 1; i < n; ++i) m = a[i * s] > m ? a[i * s] : m;
    if (!std::isfinite(m)) m = 0.0;
    double sum = 0.0;
    for (int64_t i = 0; i < n; ++i) sum += std::exp(a[i * s] - m);
    return m + std::log(sum);
}

// The first row whose label is outside [0, d), or -1.
inline int64_t crf_bad_label(const int64_t* label, int64_t rows, int64_t d) {
    for (int64_t r = 0; r < rows; ++r)
        if (label[r] < 0 || label[r] >= d) return r;
    return -1;
}

// log alphas la [rows of the sequence, D] of the sequence at rows [s, e) of x (double x and
// w); returns log Z. tmp: D doubles.
inline double crf_alpha(const double* x, int64_t s, int64_t e, int64_t d, const double* w,
                        double* la, double* tmp) {
    const double* trans = w + 2 * d;
    for (int64_t j = 0; j < d; ++j) la[s * d + j] = w[j] + x[s * d + j];
    for (int64_t t = s + 1; t < e; ++t)
        for (int64_t j = 0; j < d; ++j) {
            for (int64_t i = 0; i < d; ++i) tmp[i] = la[(t - 1) * d + i] + trans[i * d + j];
            la[t * d + j] = x[t * d + j] + crf_lse(tmp, d, 1);
        }
    for (int64_t j = 0; j < d; ++j) tmp[j] = la[(e - 1) * d + j] + w[d + j];
    return crf_lse(tmp, d, 1);
}

// x and w as double (the kernel's astype(float64)).
inline void crf_widen(const float* x, int64_t rows, int64_t d, const float* tr, double* xd,
                      double* wd) {
    for (int64_t i = 0; i < rows * d; ++i) xd[i] = (double)x[i];
    for (int64_t i = 0; i < (d + 2) * d; ++i) wd[i] = (double)tr[i];
}

// linear_chain_crf's outputs for the sequences of `lod` over Emission x [rows, D]: Alpha
// (each step's alphas normalized to sum 1), EmissionExps (exp of each row less its max, in
// float), TransitionExps and the negative log-likelihood of each sequence's labels (0 for an
// empty one). xd [rows, D], wd [D + 2, D], la [rows, D] and tmp [D] are scratch.
inline void linear_chain_crf(const float* x, const float* tr, const int64_t* label,
                             const int64_t* lod, int64_t nseq, int64_t rows, int64_t d,
                             float* alpha, float* em_exps, float* tr_exps, float* nll, double* xd,
                             double* wd, double* la, double* tmp) {
    crf_widen(x, rows, d, tr, xd, wd);
    const double* trans = wd + 2 * d;
    std::memset(alpha, 0, sizeof(float) * rows * d);
    for (int64_t b = 0; b < nseq; ++b) {
        const int64_t s = lod[b], e = lod[b + 1];
        if (e <= s) {
            nll[b] = 0.0f;
            continue;
        }
        const double log_z = crf_alpha(xd, s, e, d, wd, la, tmp);
        double xs = 0.0, ts = 0.0;
        for (int64_t t = s; t < e; ++t) xs += xd[t * d + label[t]];
        for (int64_t t = s + 1; t < e; ++t) ts += trans[label[t - 1] * d + label[t]];
        const double score = (xs + (wd[label[s]] + wd[d + label[e - 1]])) + ts;
        nll[b] = (float)(log_z - score);
        for (int64_t t = s; t < e; ++t) {
            const double* l = la + t * d;
            double m = l[0], sum = 0.0;
            for (int64_t j = 1; j < d; ++j) m = l[j] > m ? l[j] : m;
            for (int64_t j = 0; j < d; ++j) sum += (tmp[j] = std::exp(l[j] - m));
            for (int64_t j = 0; j < d; ++j) alpha[t * d + j] = (float)(tmp[j] / sum);
        }
    }
    for (int64_t r = 0; r < rows; ++r) {
        const float* xr = x + r * d;
        float m = xr[0];
        for (int64_t j = 1; j < d; ++j) m = xr[j] > m ? xr[j] : m;
        for (int64_t j = 0; j < d; ++j) em_exps[r * d + j] = std::exp(xr[j] - m);
    }
    for (int64_t i = 0; i < (d + 2) * d; ++i) tr_exps[i] = std::exp(tr[i]);
}

// Its gradient by forward-backward (ops/crf.py's _CRF.grads): dx [rows, D] and dw [D + 2, D]
// (either nullptr) of the sequences' nll scaled by dnll. Scratch: xd, la, lb [rows, D], wd
// and dwd [D + 2, D], tmp [D] doubles.
inline void linear_chain_crf_grad(const float* x, const float* tr, const int64_t* label,
                                  const int64_t* lod, int64_t nseq, int64_t rows, int64_t d,
                                  const float* dnll, float* dx, float* dw, double* xd,
                                  double* wd, double* la, double* lb, double* dwd, double* tmp) {
    crf_widen(x, rows, d, tr, xd, wd);
    const double* trans = wd + 2 * d;
    for (int64_t i = 0; i < (d + 2) * d; ++i) dwd[i] = 0.0;
    if (dx != nullptr) std::memset(dx, 0, sizeof(float) * rows * d);
    for (int64_t b = 0; b < nseq; ++b) {
        const int64_t s = lod[b], e = lod[b + 1];
        if (e <= s) continue;
        const double log_z = crf_alpha(xd, s, e, d, wd, la, tmp);
        for (int64_t j = 0; j < d; ++j) lb[(e - 1) * d + j] = wd[d + j];
        for (int64_t t = e - 2; t >= s; --t)
            for (int64_t i = 0; i < d; ++i) {
                for (int64_t j = 0; j < d; ++j)
                    tmp[j] = trans[i * d + j] + (xd[(t + 1) * d + j] + lb[(t + 1) * d + j]);
                lb[t * d + i] = crf_lse(tmp, d, 1);
            }
        const double g = (double)dnll[b];
        for (int64_t t = s; t < e; ++t)
            for (int64_t j = 0; j < d; ++j) {
                const double marg = std::exp(la[t * d + j] + lb[t * d + j] - log_z);
                const double v = (marg - (label[t] == j ? 1.0 : 0.0)) * g;
                if (dx != nullptr) dx[t * d + j] = (float)v;
                if (t == s) dwd[j] += v;
                if (t == e - 1) dwd[d + j] += v;
            }
        for (int64_t t = s + 1; t < e; ++t)
            for (int64_t i = 0; i < d; ++i)
                for (int64_t j = 0; j < d; ++j) {
                    double pair = std::exp(la[(t - 1) * d + i] + trans[i * d + j] +
                                           (xd[t * d + j] + lb[t * d + j]) - log_z);
                    if (label[t - 1] == i && label[t] == j) pair -= 1.0;
                    dwd[(2 + i) * d + j] += pair * g;
                }
    }
    if (dw != nullptr)
        for (int64_t i = 0; i < (d + 2) * d; ++i) dw[i] = (float)dwd[i];
}

// crf_decoding's Viterbi paths (ties to the lowest tag) of the sequences of `lod`, as
// ops/crf.py's CRFDecoding.viterbi; with `label`, 1 where the path agrees and 0 elsewhere.
// Scratch: xd [rows, D], wd [D + 2, D], delta and cand [D] doubles, track [rows, D] int64.
inline void crf_decoding(const float* x, const float* tr, const int64_t* label,
                         const int64_t* lod, int64_t nseq, int64_t rows, int64_t d,
                         int64_t* path, double* xd, double* wd, double* delta, double* step,
                         int64_t* track) {
    crf_widen(x, rows, d, tr, xd, wd);
    const double* trans = wd + 2 * d;
    std::memset(path, 0, sizeof(int64_t) * rows);
    for (int64_t b = 0; b < nseq; ++b) {
        const int64_t s = lod[b], e = lod[b + 1];
        if (e <= s) continue;
        for (int64_t j = 0; j < d; ++j) delta[j] = wd[j] + xd[s * d + j];
        for (int64_t t = s + 1; t < e; ++t) {
            for (int64_t j = 0; j < d; ++j) {
                int64_t best = 0;
                double top = delta[0] + trans[j];
                for (int64_t i = 1; i < d; ++i) {
                    const double c = delta[i] + trans[i * d + j];
                    if (c > top) { top = c; best = i; }
                }
                track[t * d + j] = best;
                step[j] = top + xd[t * d + j];
            }
            for (int64_t j = 0; j < d; ++j) delta[j] = step[j];
        }
        int64_t cur = 0;
        double top = delta[0] + wd[d];
        for (int64_t j = 1; j < d; ++j)
            if (delta[j] + wd[d + j] > top) { top = delta[j] + wd[d + j]; cur = j; }
        for (int64_t t = e - 1; t >= s; --t) {
            path[t] = cur;
            if (t > s) cur = track[t * d + cur];
        }
    }
    if (label != nullptr)
        for (int64_t r = 0; r < rows; ++r) path[r] = path[r] == label[r] ? 1 : 0;
}

// --- chunk_eval (ops/crf.py): chunks of IOB / IOE / IOBES / plain tag sequences -------------
struct ChunkScheme {
    int64_t n_tags, begin, inside, end, single, other;   // -1: the scheme has no such tag
};

inline bool chunk_end(int64_t pt, int64_t pty, int64_t t, int64_t ty, const ChunkScheme& c) {
    if (pty == c.other) return false;
    if (ty == c.other || ty != pty) return true;
    if (pt == c.begin || pt == c.inside) return t == c.begin || t == c.single;
    return pt == c.end || pt == c.single;
}

inline bool chunk_begin(int64_t pt, int64_t pty, int64_t t, int64_t ty, const ChunkScheme& c) {
    if (pty == c.other) return ty != c.other;
    if (ty == c.other) return false;
    if (ty != pty || t == c.begin || t == c.single) return true;
    if (t == c.inside || t == c.end) return pt == c.end || pt == c.single;
    return false;
}

// The chunks (start, end, type) of labels[0, n) not of an excluded type, into seg [n, 3];
// returns their count.
inline int64_t chunk_segments(const int64_t* labels, int64_t n, const ChunkScheme& c,
                              const int64_t* excl, int64_t n_excl, int64_t* seg) {
    int64_t count = 0, start = 0, tag = -1, type = c.other;
    bool in_chunk = false;
    auto put = [&](int64_t a, int64_t b, int64_t ty) {
        for (int64_t k = 0; k < n_excl; ++k)
            if (excl[k] == ty) return;
        seg[3 * count] = a;
        seg[3 * count + 1] = b;
        seg[3 * count + 2] = ty;
        ++count;
    };
    for (int64_t i = 0; i < n; ++i) {
        const int64_t pt = tag, pty = type;
        tag = labels[i] % c.n_tags;
        type = labels[i] / c.n_tags;
        if (in_chunk && chunk_end(pt, pty, tag, type, c)) {
            put(start, i - 1, pty);
            in_chunk = false;
        }
        if (chunk_begin(pt, pty, tag, type, c)) {
            start = i;
            in_chunk = true;
        }
    }
    if (in_chunk) put(start, n - 1, type);
    return count;
}

// Counts of inferred, labelled and correct (identical) chunks over the sequences of `lod`;
// returns the first row whose label is outside [0, limit] (the kernel's check), or -1.
// so / st: scratch [rows, 3] int64 each.
inline int64_t chunk_eval(const int64_t* inf, const int64_t* lab, const int64_t* lod,
                          int64_t nseq, int64_t rows, const ChunkScheme& c, int64_t limit,
                          const int64_t* excl, int64_t n_excl, int64_t* so, int64_t* st,
                          int64_t* counts) {
    for (int64_t r = 0; r < rows; ++r) {
        if (inf[r] < 0 || inf[r] > limit) return r;
        if (lab[r] < 0 || lab[r] > limit) return r;
    }
    counts[0] = counts[1] = counts[2] = 0;
    for (int64_t b = 0; b < nseq; ++b) {
        const int64_t s = lod[b], n = lod[b + 1] - s;
        const int64_t no = chunk_segments(inf + s, n, c, excl, n_excl, so);
        const int64_t nt = chunk_segments(lab + s, n, c, excl, n_excl, st);
        counts[0] += no;
        counts[1] += nt;
        for (int64_t i = 0, j = 0; i < no && j < nt;) {   // both sorted by start, disjoint
            if (so[3 * i] < st[3 * j]) { ++i; continue; }
            if (so[3 * i] > st[3 * j]) { ++j; continue; }
            counts[2] += so[3 * i + 1] == st[3 * j + 1] && so[3 * i + 2] == st[3 * j + 2];
            ++i;
            ++j;
        }
    }
    return -1;
}

}  // namespace fl

namespace fl {

// --- gather-like sequence ops (ops/sequence.py) ---------------------------------------------
// The longest sequence of `lod` (0 for none).
inline int64_t seq_max_len(const int64_t* lod, int64_t n) {
    int64_t m = 0;
    for (int64_t i = 0; i + 1 < n; ++i) m = lod[i + 1] - lod[i] > m ? lod[i + 1] - lod[i] : m;
    return m;
}

// out: row i of x (w values) repeated as many times as sequence i of `lod` is long.
template <typename T>
inline void seq_repeat_rows(const T* x, const int64_t* lod, int64_t nseq, int64_t w, T* out) {
    for (int64_t i = 0; i < nseq; ++i)
        for (int64_t r = lod[i]; r < lod[i + 1]; ++r)
            std::memcpy(out + r * w, x + i * w, sizeof(T) * w);
}

// Its gradient: dx row i = the rows of sequence i of d added in order (np.add.at into zeros).
inline void seq_repeat_rows_grad(const float* d, const int64_t* lod, int64_t nseq, int64_t w,
                                 float* dx) {
    std::memset(dx, 0, sizeof(float) * nseq * w);
    for (int64_t i = 0; i < nseq; ++i)
        for (int64_t r = lod[i]; r < lod[i + 1]; ++r)
            for (int64_t c = 0; c < w; ++c) dx[i * w + c] += d[r * w + c];
}

// The rows of every sequence in reverse order (its own inverse: the gradient too).
template <typename T>
inline void seq_reverse(const T* x, const int64_t* lod, int64_t nseq, int64_t w, T* out) {
    for (int64_t i = 0; i < nseq; ++i) {
        const int64_t s = lod[i], e = lod[i + 1];
        for (int64_t r = s; r < e; ++r) std::memcpy(out + r * w, x + (s + e - 1 - r) * w, sizeof(T) * w);
    }
}

// sequence_softmax over one value per row: per sequence exp(x - max) / sum, the max
// NaN-propagating (np.maximum.reduceat) and the sum pairwise (np.add.reduceat of 1-D).
inline void seq_softmax(const float* x, const int64_t* lod, int64_t nseq, float* out) {
    for (int64_t i = 0; i < nseq; ++i) {
        const int64_t s = lod[i], e = lod[i + 1];
        if (e <= s) continue;
        float m = x[s];
        for (int64_t r = s + 1; r < e; ++r) m = fmaxnp(m, x[r]);
        for (int64_t r = s; r < e; ++r) out[r] = std::exp(x[r] - m);
        const float sum = pairwise_sum(out + s, e - s, 1);
        for (int64_t r = s; r < e; ++r) out[r] = out[r] / sum;
    }
}

// Its gradient: dx = y * (dy - sum over the sequence of y * dy).
inline void seq_softmax_grad(const float* y, const float* dy, const int64_t* lod, int64_t nseq,
                             float* dx) {
    for (int64_t i = 0; i < nseq; ++i) {
        const int64_t s = lod[i], e = lod[i + 1];
        if (e <= s) continue;
        for (int64_t r = s; r < e; ++r) dx[r] = y[r] * dy[r];
        const float sum = pairwise_sum(dx + s, e - s, 1);
        for (int64_t r = s; r < e; ++r) dx[r] = y[r] * (dy[r] - sum);
    }
}

// sequence_enumerate: out[t, j] = v[t + j] while t + j stays in t's sequence, else pad.
template <typename T>
inline void seq_enumerate(const T* v, const int64_t* lod, int64_t nseq, int64_t win, T pad,
                          T* out) {
    for (int64_t i = 0; i < nseq; ++i)
        for (int64_t t = lod[i]; t < lod[i + 1]; ++t)
            for (int64_t j = 0; j < win; ++j) out[t * win + j] = t + j < lod[i + 1] ? v[t + j] : pad;
}

// sequence_pad: sequence i's rows at [i, 0 .. len), the rest of its `width` rows the pad
// (one value, or one row when pad_row), lengths into len_out.
template <typename T>
inline void seq_pad(const T* x, const int64_t* lod, int64_t nseq, int64_t width, int64_t w,
                    const T* pad, bool pad_row, T* out, int64_t* len_out) {
    for (int64_t i = 0; i < nseq; ++i) {
        const int64_t s = lod[i], n = lod[i + 1] - s;
        len_out[i] = n;
        std::memcpy(out + i * width * w, x + s * w, sizeof(T) * n * w);
        for (int64_t r = n; r < width; ++r)
            for (int64_t c = 0; c < w; ++c) out[(i * width + r) * w + c] = pad[pad_row ? c : 0];
    }
}

// Its gradient: the rows of each sequence taken back out of the padded dOut.
inline void seq_pad_grad(const float* d, const int64_t* lod, int64_t nseq, int64_t width,
                         int64_t w, float* dx) {
    for (int64_t i = 0; i < nseq; ++i) {
        const int64_t s = lod[i], n = lod[i + 1] - s;
        std::memcpy(dx + s * w, d + i * width * w, sizeof(float) * n * w);
    }
}

// sequence_scatter: out = x, then out[i, ids[j]] += upd[j] for j in sequence i of ids, in
// order; returns the first j whose id is outside [0, w), or -1 (nothing written then).
inline int64_t seq_scatter(const float* x, const int64_t* ids, const float* upd,
                           const int64_t* lod, int64_t nseq, int64_t w, float* out) {
    for (int64_t j = 0; j < lod[nseq]; ++j)
        if (ids[j] < 0 || ids[j] >= w) return j;
    std::memcpy(out, x, sizeof(float) * nseq * w);
    for (int64_t i = 0; i < nseq; ++i)
        for (int64_t j = lod[i]; j < lod[i + 1]; ++j) out[i * w + ids[j]] += upd[j];
    return -1;
}

}  // namespace fl

namespace fl {

// --- Fluid's gru backward (gru_grad) -------------------------------------------------------------
// ops/rnn.py's GRUGrad over gru_seq's batch order, steps last to first: per step the gate
// derivatives row by row, then the kernel's products as gemms (drh = dc W_c^T; dhp += dur
// W_ur^T; dW_ur += hp^T dur; dW_c += rh^T dc). In: x's LoD, w [D, 3D] (w_ur then w_c flat), h0
// (or null), gates [rows, 3D] (activated), rh and bh [rows, D] (batch order, as gru wrote
// them), dh_out [rows, D] (x's rows; or null). Out (each or null but dw, db): dx [rows, 3D],
// dh0 [N, D], dw [D, 3D], db [3D]. Scratch: order [N], brow [rows], bounds [rows + 2], dg
// [rows, 3D], hp0, dh_next [N, D], drh [N, D].
template <int GATE, int ACT>
inline void gru_seq_grad(const i64* lod, i64 N, i64 D, bool reverse, bool origin,
                         const float* w, const float* h0, const float* gates, const float* rh,
                         const float* bh, const float* dh_out, float* dx, float* dh0, float* dw,
                         float* db, i64* order, i64* brow, i64* bounds, float* dg, float* hp0,
                         float* dh_next, float* drh) {
    const i64 G = 3 * D;
    SeqBatch sb(lod, N, order, reverse);
    const i64 T = seq_steps(sb, brow, bounds), a = bounds[T];
    seq_initial(sb, h0, D, hp0);
    std::memset(dw, 0, sizeof(float) * (size_t)(D * G));
    std::memset(dh_next, 0, sizeof(float) * (size_t)(N * D));
    const float* w_ur = w;
    const float* w_c = w + 2 * D * D;
    float* dw_ur = dw;
    float* dw_c = dw + 2 * D * D;
    for (i64 t = T - 1; t >= 0; --t) {
        const i64 s = bounds[t], n = bounds[t + 1] - s;
        const float* hp = t == 0 ? hp0 : bh + bounds[t - 1] * D;
        for (i64 k = 0; k < n; ++k) {
            const float* gk = gates + (s + k) * G;
            float* dgk = dg + (s + k) * G;
            const i64 row = brow[s + k];
            for (i64 j = 0; j < D; ++j) {
                const float u = gk[j], c = gk[2 * D + j], h = hp[k * D + j];
                const float dh = (dh_out ? dh_out[row * D + j] : 0.0f) + dh_next[k * D + j];
                float du, dhp, dc;
                if (origin) {
                    du = dh * (h - c);
                    dhp = dh * u;
                    dc = dh * (1.0f - u);
                } else {
                    du = dh * (c - h);
                    dhp = dh * (1.0f - u);
                    dc = dh * u;
                }
                dgk[j] = du * rnn_dact<GATE>(u);
                dgk[2 * D + j] = dc * rnn_dact<ACT>(c);
                dh_next[k * D + j] = dhp;
            }
        }
        gemm(false, true, n, D, D, 1.0f, dg + s * G + 2 * D, G, w_c, D, 0.0f, drh, D);
        for (i64 k = 0; k < n; ++k) {
            const float* gk = gates + (s + k) * G;
            float* dgk = dg + (s + k) * G;
            for (i64 j = 0; j < D; ++j) {
                const float r = gk[D + j], d = drh[k * D + j];
                dgk[D + j] = d * hp[k * D + j] * rnn_dact<GATE>(r);
                dh_next[k * D + j] = dh_next[k * D + j] + d * r;
            }
        }
        gemm(false, true, n, D, 2 * D, 1.0f, dg + s * G, G, w_ur, 2 * D, 1.0f, dh_next, D);
        gemm(true, false, D, 2 * D, n, 1.0f, hp, D, dg + s * G, G, 1.0f, dw_ur, 2 * D);
        gemm(true, false, D, D, n, 1.0f, rh + s * D, D, dg + s * G + 2 * D, G, 1.0f, dw_c, D);
    }
    if (db) std::memset(db, 0, sizeof(float) * (size_t)G);
    for (i64 r = 0; r < a; ++r) {
        const float* dgr = dg + r * G;
        if (dx) std::memcpy(dx + brow[r] * G, dgr, sizeof(float) * (size_t)G);
        if (db)
            for (i64 j = 0; j < G; ++j) db[j] += dgr[j];
    }
    if (dh0)
        for (i64 k = 0; k < N; ++k)
            std::memcpy(dh0 + order[k] * D, dh_next + k * D, sizeof(float) * (size_t)D);
}

}  // namespace fl

namespace fl {

// --- hierarchical_sigmoid over Paddle's default complete tree (ops/sampled.py) ------------------
// Class l's path: c = l + num_classes; its L = bitlen(c) - 1 nodes are (c >> (j + 1)) - 1 with
// bits (c >> j) & 1, j < L; slots past L (up to `width`) have pre-activation 0.

// The first row whose label or tree node is out of range (label outside [0, num_classes), a
// node past W's rows), or -1.
inline int64_t hsig_bad_row(const int64_t* label, int64_t n, int64_t num_classes,
                            int64_t w_rows) {
    for (int64_t i = 0; i < n; ++i) {
        if (label[i] < 0 || label[i] >= num_classes) return i;
        const uint64_t c = (uint64_t)(label[i] + num_classes);
        if ((int64_t)(c >> 1) - 1 >= w_rows) return i;      // the deepest node is the largest
    }
    return -1;
}

// The pre-activation of slot j of row i: x_i . W[node] (+ Bias[node]) clipped to [-40, 40].
inline float hsig_pre(const float* xi, const float* w, const float* b, int64_t d,
                      int64_t node) {
    const float* wr = w + node * d;
    float s = 0.0f;
    for (int64_t k = 0; k < d; ++k) s += xi[k] * wr[k];
    if (b != nullptr) s = s + b[node];
    return s < -40.0f ? -40.0f : (s > 40.0f ? 40.0f : s);
}

// Out[i] = sum_j softplus(pre) (float32, pairwise) - sum_j bit * pre (in double, as numpy's
// int64 bits promote it); soft [n, width] = the softplus terms (PreOut).
inline void hsig_default(const float* x, const float* w, const float* b, const int64_t* label,
                         int64_t n, int64_t d, int64_t num_classes, int64_t width, float* out,
                         float* soft) {
    for (int64_t i = 0; i < n; ++i) {
        const uint64_t c = (uint64_t)(label[i] + num_classes);
        const int64_t len = 63 - __builtin_clzll(c);
        double bits = 0.0;
        for (int64_t j = 0; j < width; ++j) {
            float pre = 0.0f;
            if (j < len) {
                pre = hsig_pre(x + i * d, w, b, d, (int64_t)(c >> (j + 1)) - 1);
                if ((c >> j) & 1) bits += (double)pre;
            }
            soft[i * width + j] = logaddexp0(pre);
        }
        out[i] = (float)((double)pairwise_sum(soft + i * width, width, 1) - bits);
    }
}

// Its gradient: dpre = (sigmoid(pre) - bit) * dout in double, rounded to float; dx row i =
// the sum over its path of dpre W[node]; dW[node] += dpre x_i and dBias[node] += dpre in the
// kernel's (row, slot) order. dx, dw, db may be null; dw, db are zeroed first.
inline void hsig_default_grad(const float* x, const float* w, const float* b,
                              const int64_t* label, int64_t n, int64_t d, int64_t num_classes,
                              int64_t w_rows, const float* dout, float* dx, float* dw,
                              float* db) {
    if (dw != nullptr) std::memset(dw, 0, sizeof(float) * w_rows * d);
    if (db != nullptr) std::memset(db, 0, sizeof(float) * w_rows);
    for (int64_t i = 0; i < n; ++i) {
        const uint64_t c = (uint64_t)(label[i] + num_classes);
        const int64_t len = 63 - __builtin_clzll(c);
        const float* xi = x + i * d;
        if (dx != nullptr) std::memset(dx + i * d, 0, sizeof(float) * d);
        for (int64_t j = 0; j < len; ++j) {
            const int64_t node = (int64_t)(c >> (j + 1)) - 1;
            const float pre = hsig_pre(xi, w, b, d, node);
            const double bit = (double)((c >> j) & 1);
            const float dp = (float)(((double)sigmoid(pre) - bit) * (double)dout[i]);
            const float* wr = w + node * d;
            if (dx != nullptr)
                for (int64_t k = 0; k < d; ++k) dx[i * d + k] += dp * wr[k];
            if (dw != nullptr)
                for (int64_t k = 0; k < d; ++k) dw[node * d + k] += dp * xi[k];
            if (db != nullptr) db[node] += dp;
        }
    }
}

}  // namespace fl

namespace fl {

// --- group_norm_grad / instance_norm_grad (NCHW; ops/norm.py's _norm_backward) -----------------
// Per sample and group i (of G; instance_norm: a group per channel) of `per` = CG * R values:
// inv = 1 / sqrt(var + eps) (instance_norm's SavedVariance is inv already), xhat = (x - mean)
// inv, dxhat = dy * scale[channel], dx = inv * (dxhat - mean(dxhat) - xhat * mean(dxhat xhat))
// with the means pairwise over the group; dScale / dBias per channel summed in double.
// Scratch: xh, dxh, t [per] floats, acc [2 * G * CG] doubles.
inline void channel_norm_grad(const float* x, const float* dy, const float* mean,
                              const float* var, bool var_is_inv, float eps, const float* scale,
                              int64_t n, int64_t g, int64_t cg, int64_t r, float* dx, float* ds,
                              float* db, float* xh, float* dxh, float* t, double* acc) {
    const int64_t per = cg * r, c = g * cg;
    for (int64_t k = 0; k < 2 * c; ++k) acc[k] = 0.0;
    for (int64_t b = 0; b < n; ++b)
        for (int64_t gi = 0; gi < g; ++gi) {
            const int64_t i = b * g + gi, base = i * per;
            const float inv = var_is_inv ? var[i] : 1.0f / std::sqrt(var[i] + eps);
            const float mi = mean[i];
            for (int64_t j = 0; j < per; ++j) {
                const int64_t ch = gi * cg + j / r;
                const float d = dy[base + j];
                xh[j] = (x[base + j] - mi) * inv;
                dxh[j] = scale != nullptr ? d * scale[ch] : d;
                t[j] = dxh[j] * xh[j];
                acc[ch] += (double)(d * xh[j]);
                acc[c + ch] += (double)d;
            }
            const float m1 = pairwise_sum(dxh, per, 1) / (float)per;
            const float m2 = pairwise_sum(t, per, 1) / (float)per;
            if (dx != nullptr)
                for (int64_t j = 0; j < per; ++j) dx[base + j] = inv * (dxh[j] - m1 - xh[j] * m2);
        }
    for (int64_t k = 0; k < c; ++k) {
        if (ds != nullptr) ds[k] = (float)acc[k];
        if (db != nullptr) db[k] = (float)acc[c + k];
    }
}

}  // namespace fl
