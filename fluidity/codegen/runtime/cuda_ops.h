// The device kernels the CUDA emitters call (codegen/emit/cuda/), one named function each:
// host functions that launch grid-stride kernels (fl::cu::each, cuda_rt.h) over device
// pointers, one thread per element or per row, in the C++ target's arithmetic and order
// (fluidity.h and the emitters of codegen/emit/cpu/), so both targets round alike. No
// shared memory and no __syncthreads, so the host emulation (cuda_host.h) runs them as is.
#pragma once

namespace fl {
namespace cu {

// --- copies and fills --------------------------------------------------------------------------
template <class T>
inline void fill_value(T* p, i64 n, T v) {
    each(n, [=] __device__(i64 i) { p[i] = v; });
}

template <class T>
inline void copy(const T* src, T* dst, i64 n) {
    each(n, [=] __device__(i64 i) { dst[i] = src[i]; });
}

// concat: X's [pre, n] blocks into Out's rows (`row` long) at column `at`, and back.
template <class T>
inline void concat_part(T* out, const T* x, i64 pre, i64 n, i64 row, i64 at) {
    each(pre * n, [=] __device__(i64 i) { out[(i / n) * row + at + i % n] = x[i]; });
}

template <class T>
inline void concat_part_grad(T* g, const T* d, i64 pre, i64 n, i64 row, i64 at) {
    each(pre * n, [=] __device__(i64 i) { g[i] = d[(i / n) * row + at + i % n]; });
}

// --- arithmetic --------------------------------------------------------------------------------
// scale: v = (A)x[i]; out = (T)(v * s) (form 0), (T)(v * s + b) (1), (T)((v + b) * s) (2), A
// being float for float X, double otherwise (numpy's float64 product, then astype).
enum ScaleForm { SCALE_ONLY = 0, SCALE_THEN_BIAS = 1, BIAS_THEN_SCALE = 2 };

template <class T, class A>
inline void scale(const T* x, T* out, i64 n, A s, A b, int form) {
    each(n, [=] __device__(i64 i) {
        const A v = (A)x[i];
        out[i] = form == SCALE_ONLY ? (T)(v * s) : form == SCALE_THEN_BIAS ? (T)(v * s + b)
                                                                           : (T)((v + b) * s);
    });
}

// sum of N same-shaped float tensors, added left to right as the kernel adds.
template <int N>
struct Ptrs {
    const float* p[N];
};

template <int N>
inline void add_n(float* out, i64 n, Ptrs<N> xs) {
    each(n, [=] __device__(i64 i) {
        float s = xs.p[0][i];
        for (int k = 1; k < N; ++k) s = s + xs.p[k][i];
        out[i] = s;
    });
}

// mean: one thread sums pairwise, as numpy (the CPU's bits).
inline void mean(const float* x, float* out, i64 n) {
    each(1, [=] __device__(i64) { out[0] = pairwise_sum(x, n, 1) / (float)(n); });
}

inline void mean_grad(const float* d, float* dx, i64 n) {
    each(n, [=] __device__(i64 i) { dx[i] = d[0] / (float)(n > 1 ? n : 1); });
}

// fc's epilogue over Out [rows, width]: + bias[column] (when given), then relu (when set).
inline void bias_relu(float* out, const float* bias, i64 rows, i64 width, bool relu) {
    each(rows * width, [=] __device__(i64 i) {
        float v = out[i];
        if (bias) v = v + bias[i % width];
        if (relu) v = v > 0 ? v : 0.0f;
        out[i] = v;
    });
}

// relu's gradient mask: d = dout where out > 0, else 0 (dout * 0 or 1, as the kernel).
inline void relu_mask(const float* dout, const float* out, float* d, i64 n) {
    each(n, [=] __device__(i64 i) { d[i] = dout[i] * (out[i] > 0 ? 1.0f : 0.0f); });
}

// db[j] = the sum of column j of d [rows, width], rows in order.
inline void column_sums(const float* d, float* db, i64 rows, i64 width) {
    each(width, [=] __device__(i64 j) {
        float acc = 0.0f;
        for (i64 r = 0; r < rows; ++r) acc += d[r * width + j];
        db[j] = acc;
    });
}

// --- activations -------------------------------------------------------------------------------
// round half to even: mode 0 rint(x); 1 rint(x * scale) / scale; -1 rint(x / scale) * scale
// (numpy's rounding to `decimals` places, scale 10^|decimals|).
template <class T>
inline void round_elements(const T* x, T* out, i64 n, int mode, T scale) {
    each(n, [=] __device__(i64 i) {
        if (mode == 0) out[i] = rint(x[i]);
        else if (mode > 0) out[i] = (T)(rint(x[i] * scale) / scale);
        else out[i] = (T)(rint(x[i] / scale) * scale);
    });
}

// softmax over the last axis of [rows, cols], one thread per row (fl::softmax_row).
inline void softmax_rows(const float* x, float* out, i64 rows, i64 cols) {
    each(rows, [=] __device__(i64 r) { softmax_row(x + r * cols, out + r * cols, cols); });
}

inline void softmax_rows_grad(const float* o, const float* d, float* dx, i64 rows, i64 cols) {
    each(rows, [=] __device__(i64 r) {
        softmax_row_grad(o + r * cols, d + r * cols, dx + r * cols, cols);
    });
}

// --- losses ------------------------------------------------------------------------------------
// cross_entropy2 over [rows, cols] probabilities, one thread per row: Y = -log(x[label]),
// MatchX = x[label]; an ignored row gives 0 (MatchX its first element); a label out of range
// gives NaN (a kernel cannot stop the run; the C++ target reports it).
inline void cross_entropy2_rows(const float* x, const int64_t* label, float* y, float* match,
                                i64 rows, i64 cols, i64 ignore) {
    each(rows, [=] __device__(i64 r) {
        const i64 l = label[r];
        if (l == ignore) {
            y[r] = 0.0f;
            match[r] = 0.0f;
            return;
        }
        if (l < 0 || l >= cols) {
            y[r] = NAN;
            match[r] = NAN;
            return;
        }
        const float v = x[r * cols + l];
        match[r] = v;
        y[r] = -tolerable_log(v);
    });
}

inline void cross_entropy2_rows_grad(const int64_t* label, const float* match, const float* dy,
                                     float* g, i64 rows, i64 cols, i64 ignore) {
    each(rows * cols, [=] __device__(i64 i) {
        const i64 r = i / cols, c = i % cols;
        const i64 l = label[r];
        g[i] = (l != ignore && l == c) ? -dy[r] / match[r] : 0.0f;
    });
}

// softmax_with_cross_entropy with hard labels, one thread per row (softmax_xent_row).
inline void softmax_xent_rows(const float* x, const int64_t* label, float* prob, float* loss,
                              i64 rows, i64 cols, i64 ignore) {
    each(rows, [=] __device__(i64 r) {
        loss[r] = softmax_xent_row(x + r * cols, label[r], prob + r * cols, cols, ignore);
    });
}

inline void softmax_xent_rows_grad(const float* prob, const int64_t* label, const float* dloss,
                                   float* d, i64 rows, i64 cols, i64 ignore) {
    each(rows, [=] __device__(i64 r) {
        softmax_xent_row_grad(prob + r * cols, label[r], dloss[r], d + r * cols, cols, ignore);
    });
}

// --- update ops --------------------------------------------------------------------------------
inline void sgd_dense(float* p, const float* lr, const float* g, i64 n) {
    each(n, [=] __device__(i64 i) { p[i] = p[i] - lr[0] * g[i]; });
}

// A SelectedRows gradient of `k` rows of `width`: each element atomically added to Param's
// row (duplicates accumulate; rows outside the table are skipped).
inline void sgd_rows(float* p, i64 height, const float* lr, const float* g, const int64_t* rows,
                     i64 k, i64 width) {
    each(k * width, [=] __device__(i64 t) {
        const i64 r = rows[t / width], c = t % width;
        if (r >= 0 && r < height) atomicAdd(p + r * width + c, -lr[0] * g[t]);
    });
}

// The rows of a SelectedRows gradient summed into a dense [height, width] one (zeroed here),
// with a mark per row present.
inline void merge_rows(const float* g, const int64_t* rows, i64 k, i64 width, float* dense,
                       int64_t* seen, i64 height) {
    fill_value(dense, height * width, 0.0f);
    fill_value<int64_t>(seen, height, 0);
    each(k * width, [=] __device__(i64 t) {
        const i64 r = rows[t / width], c = t % width;
        if (r < 0 || r >= height) return;
        atomicAdd(dense + r * width + c, g[t]);
        if (c == 0) seen[r] = 1;
    });
}

// Adam over n elements (fl::adam_elem), its step sizes from the beta powers in double; with
// `seen` (lazy mode over a merged sparse gradient) only the rows marked there. Epsilon is
// Fluid 1.8's, added as given, or (scale_eps: an op written by Paddle >= 2.1) Paddle 2.1+'s
// eps * sqrt(1 - beta2^t). Then, unless use_global_beta_pow, the beta powers advance in a
// second launch (after every thread has read them).
inline void adam(float* p, float* m1, float* m2, const float* g, i64 n, const float* lr,
                 float* b1p, float* b2p, double b1, double b2, double eps, bool scale_eps,
                 const int64_t* seen, i64 width, bool advance_pows) {
    each(n, [=] __device__(i64 i) {
        if (seen && !seen[i / width]) return;
        const double p1 = (double)b1p[0], p2 = (double)b2p[0];
        const double lr_t = (double)lr[0] * sqrt(1.0 - p2) / (1.0 - p1);
        const double eps_t = scale_eps ? eps * sqrt(1.0 - p2) : eps;
        adam_elem(p + i, m1 + i, m2 + i, g[i], lr_t, (float)b1, (float)(1.0 - b1), (float)b2,
                  (float)(1.0 - b2), eps_t);
    });
    if (advance_pows)
        each(1, [=] __device__(i64) {
            b1p[0] = b1p[0] * (float)b1;
            b2p[0] = b2p[0] * (float)b2;
        });
}

// --- batch norm --------------------------------------------------------------------------------
// Per channel ch of X [n, c, p]: the batch mean into m[ch] and variance into v[ch], summed in
// double in the C++ target's order.
inline void bn_channel_stats(const float* x, float* m, float* v, i64 n, i64 c, i64 p) {
    each(c, [=] __device__(i64 ch) {
        double s = 0, q = 0;
        for (i64 b = 0; b < n; ++b) {
            const float* r = x + (b * c + ch) * p;
            for (i64 i = 0; i < p; ++i) s += r[i];
        }
        const float mu = (float)(s / (double)(n * p));
        for (i64 b = 0; b < n; ++b) {
            const float* r = x + (b * c + ch) * p;
            for (i64 i = 0; i < p; ++i) {
                const float t = r[i] - mu;
                q += t * t;
            }
        }
        m[ch] = mu;
        v[ch] = (float)(q / (double)(n * p));
    });
}

// running = running * momentum + batch * (1 - momentum), both factors float32 constants.
inline void bn_running(const float* run, const float* batch, float* out, i64 c, float mom,
                       float rest) {
    each(c, [=] __device__(i64 ch) { out[ch] = run[ch] * mom + batch[ch] * rest; });
}

// inv[ch] = 1 / sqrt(v[ch] + eps), and the mean saved (when `saved`).
inline void bn_inverse_std(const float* v, const float* m, float* inv, float* saved, i64 c,
                           float eps) {
    each(c, [=] __device__(i64 ch) {
        inv[ch] = 1.0f / sqrtf(v[ch] + eps);
        if (saved) saved[ch] = m[ch];
    });
}

// Y = X * k + off per channel: k = scale * inv, off = bias - mean * scale * inv.
inline void bn_apply(const float* x, const float* scale, const float* bias, const float* m,
                     const float* inv, float* y, i64 total, i64 c, i64 p) {
    each(total, [=] __device__(i64 t) {
        const i64 ch = (t / p) % c;
        const float k = scale[ch] * inv[ch];
        const float off = bias[ch] - m[ch] * scale[ch] * inv[ch];
        y[t] = x[t] * k + off;
    });
}

// Per channel: db = the sum of dY, ds = the sum of dY * x_hat, in double in this order.
inline void bn_grad_channel_sums(const float* x, const float* dy, const float* sm,
                                 const float* inv, float* db, float* ds, i64 n, i64 c, i64 p) {
    each(c, [=] __device__(i64 ch) {
        double sb = 0, ss = 0;
        for (i64 b = 0; b < n; ++b) {
            const float* r = x + (b * c + ch) * p;
            const float* g = dy + (b * c + ch) * p;
            for (i64 i = 0; i < p; ++i) {
                sb += g[i];
                ss += g[i] * ((r[i] - sm[ch]) * inv[ch]);
            }
        }
        db[ch] = (float)sb;
        ds[ch] = (float)ss;
    });
}

// dX = k * dY (global statistics), else k * (dY - (db + x_hat * ds) / (n * p)).
inline void bn_grad_x(const float* x, const float* dy, const float* scale, const float* sm,
                      const float* inv, const float* db, const float* ds, float* dx, i64 n,
                      i64 c, i64 p, bool global_stats) {
    each(n * c * p, [=] __device__(i64 t) {
        const i64 ch = (t / p) % c;
        const float k = scale[ch] * inv[ch];
        if (global_stats) {
            dx[t] = dy[t] * k;
            return;
        }
        const float xh = (x[t] - sm[ch]) * inv[ch];
        dx[t] = k * (dy[t] - (db[ch] + xh * ds[ch]) / (float)(n * p));
    });
}

// --- convolution -------------------------------------------------------------------------------
struct Geom {      // a conv's geometry, as runtime/conv.h's ConvGeom
    i64 N, C, H, W, KH, KW, OH, OW, SH, SW, PT, PL, DH, DW;
};

// cols[(c*KH + i)*KW + j][(n*OH + oh)*OW + ow] (runtime/conv.h im2col), one thread each.
inline void im2col(const float* x, Geom g, float* cols) {
    const i64 ncol = g.N * g.OH * g.OW;
    each(g.C * g.KH * g.KW * ncol, [=] __device__(i64 t) {
        const i64 col = t % ncol, r = t / ncol;
        const i64 j = r % g.KW, i = (r / g.KW) % g.KH, c = r / (g.KW * g.KH);
        const i64 ow = col % g.OW, oh = (col / g.OW) % g.OH, n = col / (g.OW * g.OH);
        const i64 h = oh * g.SH - g.PT + i * g.DH, w = ow * g.SW - g.PL + j * g.DW;
        cols[t] = (h >= 0 && h < g.H && w >= 0 && w < g.W)
                      ? x[((n * g.C + c) * g.H + h) * g.W + w] : 0.0f;
    });
}

// tmp [M, N*P] (the gemm's output) to NCHW Out, plus the bias per channel when given.
inline void conv_output(const float* tmp, const float* bias, float* out, i64 n, i64 m, i64 p) {
    each(n * m * p, [=] __device__(i64 t) {
        const i64 q = t % p, mm = (t / p) % m, nn = t / (p * m);
        const float v = tmp[(mm * n + nn) * p + q];
        out[t] = bias ? v + bias[mm] : v;
    });
}

// Output@GRAD [N, M, P] to d [M, N*P].
inline void conv_dout(const float* dout, float* d, i64 n, i64 m, i64 p) {
    each(m * n * p, [=] __device__(i64 t) {
        const i64 q = t % p, nn = (t / p) % n, mm = t / (p * n);
        d[t] = dout[(nn * m + mm) * p + q];
    });
}

// Input@GRAD: each pixel gathers its taps from dcols in the C++ target's order (i, then j).
inline void col2im_gather(const float* dcols, Geom g, float* dx) {
    const i64 ncol = g.N * g.OH * g.OW;
    each(g.N * g.C * g.H * g.W, [=] __device__(i64 t) {
        const i64 x_ = t % g.W, y_ = (t / g.W) % g.H, cc = (t / (g.W * g.H)) % g.C,
                  nn = t / (g.W * g.H * g.C);
        float acc = 0.0f;
        for (i64 i = 0; i < g.KH; ++i) {
            const i64 hh = y_ + g.PT - i * g.DH;
            if (hh < 0 || hh % g.SH) continue;
            const i64 oh_ = hh / g.SH;
            if (oh_ >= g.OH) continue;
            for (i64 j = 0; j < g.KW; ++j) {
                const i64 ww = x_ + g.PL - j * g.DW;
                if (ww < 0 || ww % g.SW) continue;
                const i64 ow_ = ww / g.SW;
                if (ow_ >= g.OW) continue;
                acc += dcols[((cc * g.KH + i) * g.KW + j) * ncol + (nn * g.OH + oh_) * g.OW + ow_];
            }
        }
        dx[t] = acc;
    });
}

// Bias@GRAD[c] = the sum of d's row c (in double).
inline void row_sums_double(const float* d, float* db, i64 m, i64 ncol) {
    each(m, [=] __device__(i64 cc) {
        double s = 0;
        for (i64 i = 0; i < ncol; ++i) s += d[cc * ncol + i];
        db[cc] = (float)s;
    });
}

// --- pooling (NCHW) ------------------------------------------------------------------------------
// Window a of an axis covers [max(a*S - P, 0), min(a*S - P + K, n)); `out` windows.
struct PoolAxis {
    i64 S, P, K, n, out;
};

FL_HD inline void pool_window(const PoolAxis& ax, i64 a, i64& lo, i64& hi) {
    lo = a * ax.S - ax.P > 0 ? a * ax.S - ax.P : 0;
    hi = a * ax.S - ax.P + ax.K < ax.n ? a * ax.S - ax.P + ax.K : ax.n;
}

// The average's divisor: the window's area (exclusive), else the fixed `divisor`.
FL_HD inline float pool_divisor(i64 i0, i64 i1, i64 j0, i64 j1, float divisor) {
    return divisor > 0 ? divisor
                       : (float)((i1 - i0) * (j1 - j0) > 1 ? (i1 - i0) * (j1 - j0) : 1);
}

// One thread per output element: max (the first maximum, NaN wins) or avg (columns of each
// row summed, then divided as the kernel divides).
inline void pool2d(const float* x, float* out, i64 planes, PoolAxis ah, PoolAxis aw, bool max,
                   float divisor) {
    each(planes * ah.out * aw.out, [=] __device__(i64 t) {
        const i64 b = t % aw.out, a = (t / aw.out) % ah.out, pl = t / (ah.out * aw.out);
        const float* img = x + pl * ah.n * aw.n;
        i64 i0, i1, j0, j1;
        pool_window(ah, a, i0, i1);
        pool_window(aw, b, j0, j1);
        float v;
        if (max) {
            v = -INFINITY;
            bool any = false;
            for (i64 i = i0; i < i1; ++i)
                for (i64 j = j0; j < j1; ++j) {
                    const float s = img[i * aw.n + j];
                    if (!any || s > v || s != s) {
                        v = s;
                        any = true;
                    }
                }
        } else {
            v = 0.0f;
            for (i64 j = j0; j < j1; ++j) {
                float col = 0.0f;
                for (i64 i = i0; i < i1; ++i) col += img[i * aw.n + j];
                v += col;
            }
            v = v / pool_divisor(i0, i1, j0, j1, divisor);
        }
        out[t] = v;
    });
}

// One thread per input element gathering the windows that hold it (rows of windows, then
// columns): max adds each window's gradient where it is that window's first maximum (in
// double, as the kernel's bincount), avg the window's share.
inline void pool2d_grad(const float* x, const float* dout, float* dx, i64 planes, PoolAxis ah,
                        PoolAxis aw, bool max, float divisor) {
    const i64 h = ah.n, w = aw.n;
    each(planes * h * w, [=] __device__(i64 t) {
        const i64 xx = t % w, y = (t / w) % h, pl = t / (h * w);
        const float* img = x + pl * h * w;
        const float* d = dout + pl * ah.out * aw.out;
        const i64 nh = y + ah.P - ah.K + 1, nw = xx + aw.P - aw.K + 1;
        const i64 alo = nh > 0 ? (nh + ah.S - 1) / ah.S : 0;
        const i64 ahi = (y + ah.P) / ah.S < ah.out - 1 ? (y + ah.P) / ah.S : ah.out - 1;
        const i64 blo = nw > 0 ? (nw + aw.S - 1) / aw.S : 0;
        const i64 bhi = (xx + aw.P) / aw.S < aw.out - 1 ? (xx + aw.P) / aw.S : aw.out - 1;
        double acc_max = 0.0;
        float acc_avg = 0.0f;
        for (i64 a = alo; a <= ahi; ++a)
            for (i64 b = blo; b <= bhi; ++b) {
                i64 i0, i1, j0, j1;
                pool_window(ah, a, i0, i1);
                pool_window(aw, b, j0, j1);
                if (y < i0 || y >= i1 || xx < j0 || xx >= j1) continue;
                const float dv = d[a * aw.out + b];
                if (!max) {
                    acc_avg += dv / pool_divisor(i0, i1, j0, j1, divisor);
                    continue;
                }
                float v = -INFINITY;
                i64 at = -1;
                for (i64 i = i0; i < i1; ++i)
                    for (i64 j = j0; j < j1; ++j) {
                        const float s = img[i * w + j];
                        if (at < 0 || s > v) {
                            v = s;
                            at = i * w + j;
                        }
                    }
                if (at == y * w + xx) acc_max += (double)dv;
            }
        dx[t] = max ? (float)acc_max : acc_avg;
    });
}

// --- sequences ---------------------------------------------------------------------------------
// sequence_pool's pooltypes (ops/sequence.py), over rows [s, t) of width w at column j.
enum SeqPool { POOL_SUM, POOL_AVERAGE, POOL_SQRT, POOL_MAX, POOL_MIN, POOL_FIRST, POOL_LAST };

FL_HD inline float seq_pool_value(const float* x, i64 s, i64 t, i64 w, i64 j, int ptype,
                                  int32_t* arg) {
    float v = x[s * w + j];
    int32_t a = (int32_t)s;
    switch (ptype) {
        case POOL_SUM:
            for (i64 r = s + 1; r < t; ++r) v += x[r * w + j];
            break;
        case POOL_AVERAGE:
            for (i64 r = s + 1; r < t; ++r) v += x[r * w + j];
            v = (float)((double)v / (double)(t - s));
            break;
        case POOL_SQRT:
            for (i64 r = s + 1; r < t; ++r) v += x[r * w + j];
            v = (float)((double)v / sqrt((double)(t - s)));
            break;
        case POOL_MAX:
            for (i64 r = s + 1; r < t; ++r)
                if (x[r * w + j] > v || x[r * w + j] != x[r * w + j]) {
                    v = x[r * w + j];
                    a = (int32_t)r;
                }
            break;
        case POOL_MIN:
            for (i64 r = s + 1; r < t; ++r)
                if (x[r * w + j] < v || x[r * w + j] != x[r * w + j]) {
                    v = x[r * w + j];
                    a = (int32_t)r;
                }
            break;
        case POOL_LAST:
            v = x[(t - 1) * w + j];
            break;
        default:
            break;
    }
    *arg = a;
    return v;
}

// One thread per output element; an empty sequence pools to `pad` (its MaxIndex X's rows).
inline void sequence_pool(const float* x, const int64_t* lod, float* out, int32_t* idx,
                          i64 n_seq, i64 w, i64 rows, int ptype, float pad) {
    each(n_seq * w, [=] __device__(i64 k) {
        const i64 i = k / w, j = k % w;
        const i64 s = lod[i], t = lod[i + 1];
        const bool arg = ptype == POOL_MAX || ptype == POOL_MIN;
        if (t <= s) {
            out[i * w + j] = pad;
            if (arg) idx[i * w + j] = (int32_t)rows;
            return;
        }
        int32_t a;
        out[i * w + j] = seq_pool_value(x, s, t, w, j, ptype, &a);
        if (arg) idx[i * w + j] = a;
    });
}

// One thread per element of X@GRAD: its row's sequence found by a binary search of the
// LoD, then the pooltype's share (divided in double as numpy does), or its one row's.
inline void sequence_pool_grad(const float* x, const int64_t* lod, const float* dout, float* g,
                               i64 n_seq, i64 w, i64 total, int ptype) {
    each(total, [=] __device__(i64 k) {
        const i64 row = k / w, j = k % w;
        i64 lo = 0, hi = n_seq - 1;
        while (lo < hi) {
            const i64 mid = (lo + hi + 1) / 2;
            if (lod[mid] <= row) lo = mid;
            else hi = mid - 1;
        }
        const i64 s = lod[lo], t = lod[lo + 1];
        const float d = dout[lo * w + j];
        float v = 0.0f;
        if (ptype == POOL_SUM) v = d;
        else if (ptype == POOL_AVERAGE) v = (float)((double)d / (double)(t - s));
        else if (ptype == POOL_SQRT) v = (float)((double)d / sqrt((double)(t - s)));
        else if (ptype == POOL_FIRST) v = row == s ? d : 0.0f;
        else if (ptype == POOL_LAST) v = row == t - 1 ? d : 0.0f;
        else {
            int32_t a;
            seq_pool_value(x, s, t, w, j, ptype, &a);
            if (a == row) v = d;
        }
        g[k] = v;
    });
}

// --- embeddings --------------------------------------------------------------------------------
// Out[k, c] = W[ids[k], c]; pad ids (and ids out of the table, which the C++ target reports)
// give zeros.
inline void lookup(const float* w, const int64_t* ids, float* out, i64 n, i64 d, i64 height,
                   i64 pad) {
    each(n * d, [=] __device__(i64 t) {
        const i64 k = t / d, c = t % d;
        const i64 r = ids[k];
        out[t] = (r == pad || r < 0 || r >= height) ? 0.0f : w[r * d + c];
    });
}

// W@GRAD as a SelectedRows: one row per id (zeros for pad ids).
inline void lookup_grad_rows(const int64_t* ids, const float* dout, float* v, int64_t* rows,
                             i64 n, i64 d, i64 pad) {
    each(n * d, [=] __device__(i64 t) {
        const i64 k = t / d, c = t % d;
        v[t] = ids[k] == pad ? 0.0f : dout[t];
        if (c == 0) rows[k] = ids[k];
    });
}

// W@GRAD dense: zeroed, then each row atomically added.
inline void lookup_grad_dense(const int64_t* ids, const float* dout, float* g, i64 n, i64 d,
                              i64 height, i64 pad) {
    fill_value(g, height * d, 0.0f);
    each(n * d, [=] __device__(i64 t) {
        const i64 k = t / d, c = t % d;
        const i64 r = ids[k];
        if (r >= 0 && r < height) atomicAdd(g + r * d + c, ids[k] == pad ? 0.0f : dout[t]);
    });
}

// Out[i, s*D:(s+1)*D] of slot s = the sum of W's rows for its ids of sequence i, in id order;
// pad ids and ids out of the table are skipped.
inline void pooled_lookup(const float* w, const int64_t* ids, const int64_t* lod, float* out,
                          i64 batch, i64 d, i64 height, i64 pad, i64 width, i64 slot) {
    each(batch * d, [=] __device__(i64 t) {
        const i64 i = t / d, c = t % d;
        float acc = 0.0f;
        for (i64 j = lod[i]; j < lod[i + 1]; ++j) {
            const i64 id = ids[j];
            if (id == pad || id < 0 || id >= height) continue;
            acc += w[id * d + c];
        }
        out[i * width + slot * d + c] = acc;
    });
}

// The gradient of slot s's ids: each id's row is its sequence's slice of Out@GRAD (found by
// a binary search of the LoD; zeros for pad ids), as rows `base`.. of a SelectedRows, or
// (rows null) atomically added into a dense table gradient.
inline void pooled_lookup_grad(const int64_t* ids, const int64_t* lod, const float* dout,
                               float* v, int64_t* rows, i64 n_ids, i64 batch, i64 d,
                               i64 height, i64 pad, i64 width, i64 slot, i64 base) {
    each(n_ids * d, [=] __device__(i64 t) {
        const i64 k = t / d, c = t % d;
        i64 lo = 0, hi = batch - 1;
        while (lo < hi) {
            const i64 mid = (lo + hi + 1) / 2;
            if (lod[mid] <= k) lo = mid;
            else hi = mid - 1;
        }
        const i64 id = ids[k];
        const float g = id == pad ? 0.0f : dout[lo * width + slot * d + c];
        if (rows) {
            v[(base + k) * d + c] = g;
            if (c == 0) rows[base + k] = id;
        } else if (id >= 0 && id < height) {
            atomicAdd(v + id * d + c, g);
        }
    });
}

}  // namespace cu
}  // namespace fl
