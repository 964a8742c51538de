// Recurrent kernels for generated code, laid out as fluidity/ops/rnn.py lays its numpy kernels
// and rounding as they do (each sum in the kernel's order, no FMA contraction):
//
// * Paddle 2.x's `rnn` op (paddle.nn.LSTM/GRU/SimpleRNN): a dense time-major Input [T, B, I],
//   layers x directions, the input projection of all T steps one gemm, the recurrent one a
//   gemm per step, then the gates row by row;
// * Fluid's `lstm` / `gru` (dynamic_lstm / dynamic_gru) over LoD sequences: the packed rows
//   walked in Paddle's batch order (sequences longest first, so the ones still running at
//   step t are a prefix of that order), one gemm per step over all of them;
// * `gru_unit` (one GRU step over a dense batch) and `lstm_unit`.
//
// Included at the end of fluidity.h (it uses fl::gemm, fl::fmaxnp).
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>

namespace fl {

// --- activations ------------------------------------------------------------------------------
// Numbered as ops/rnn.py's ACT_CODES (gru_unit's integer attributes).
enum RnnAct { ACT_IDENTITY = 0, ACT_SIGMOID = 1, ACT_TANH = 2, ACT_RELU = 3 };

// exp and tanh for the recurrent cells, branch-free so that GCC vectorizes the gate loops
// (the C library's scalar expf/tanhf were ~85% of an LSTM step at batch 64). Within a few
// float32 ulp of numpy's: exp by Cody-Waite reduction to r in [-ln2/2, ln2/2], a degree-7
// Taylor polynomial and 2^n from the exponent bits (inputs clamped to [-87.3, 88.3]: e^x of
// less is below FLT_MIN, of more near FLT_MAX; NaN stays NaN); tanh from exp(2|x|) where that
// loses nothing, by its odd series below 0.3.
inline float rnn_exp(float x) {
    x = std::min(std::max(x, -87.3f), 88.3f);
    const float n = (x * 1.44269504088896341f + 12582912.0f) - 12582912.0f;   // round(x/ln2)
    const float r = (x - n * 0.693359375f) + n * 2.12194440e-4f;                 // x - n ln2
    float p = 1.0f / 5040.0f;
    p = p * r + 1.0f / 720.0f;
    p = p * r + 1.0f / 120.0f;
    p = p * r + 1.0f / 24.0f;
    p = p * r + 1.0f / 6.0f;
    p = p * r + 0.5f;
    p = p * r + 1.0f;
    p = p * r + 1.0f;
    const int32_t bits = ((int32_t)n + 127) << 23;
    float scale;
    std::memcpy(&scale, &bits, sizeof scale);
    return p * scale;
}

inline float rnn_tanh(float x) {
    const float a = std::fabs(x);
    const float a2 = a * a;
    float s = -1382.0f / 155925.0f;                 // a + a^3 (-1/3 + a^2 (2/15 + ...))
    s = s * a2 + 62.0f / 2835.0f;
    s = s * a2 - 17.0f / 315.0f;
    s = s * a2 + 2.0f / 15.0f;
    s = s * a2 - 1.0f / 3.0f;
    const float small = a + a * a2 * s;
    const float big = 1.0f - 2.0f / (rnn_exp(2.0f * a) + 1.0f);
    const float t = a < 0.3f ? small : big;
    return x != x ? x : std::copysign(t, x);       // NaN in, NaN out
}

template <int A>
inline float rnn_act(float x) {
    if constexpr (A == ACT_SIGMOID) {
        return 1.0f / (1.0f + rnn_exp(-x));     // ops/rnn.py's _sigmoid (no branches)
    } else if constexpr (A == ACT_TANH) {
        return rnn_tanh(x);
    } else if constexpr (A == ACT_RELU) {
        return fmaxnp(x, 0.0f);                 // np.maximum(x, 0): NaN stays NaN
    } else {
        return x;
    }
}

// --- Paddle 2.x `rnn` ---------------------------------------------------------------------------
enum RnnMode { RNN_LSTM = 0, RNN_GRU = 1, RNN_TANH = 2, RNN_RELU = 3 };

constexpr i64 rnn_gates(int mode) { return mode == RNN_LSTM ? 4 : (mode == RNN_GRU ? 3 : 1); }

// Step t of one direction for the B rows of the batch: xg = x_t @ W_ih^T + b_ih and
// hg = h @ W_hh^T ([B, G*H] each, gates in Paddle's order: LSTM [i, f, c, o], GRU [r, z, c]).
// h (and c) [B, H] are updated in place; the new hidden goes to out (row stride ldo). A row
// whose sequence has ended (t >= lens[b]) keeps its states and puts zeros out, as the kernel's
// np.where does.
template <int MODE, class L>
inline void rnn_step(i64 B, i64 H, i64 t, const float* xg, const float* hg, const float* b_hh,
                     const L* lens, float* h, float* c, float* out, i64 ldo) {
    const i64 GH = rnn_gates(MODE) * H;
    for (i64 b = 0; b < B; ++b) {
        float* o = out + b * ldo;
        if (lens != nullptr && !((i64)t < (i64)lens[b])) {
            for (i64 j = 0; j < H; ++j) o[j] = 0.0f;
            continue;
        }
        const float* x = xg + b * GH;
        const float* r = hg + b * GH;
        float* hb = h + b * H;
        if constexpr (MODE == RNN_LSTM) {       // (xg + h W^T) + b_hh, then the cell
            float* cb = c + b * H;
            for (i64 j = 0; j < H; ++j) {
                const float ig = rnn_act<ACT_SIGMOID>((x[j] + r[j]) + b_hh[j]);
                const float fg = rnn_act<ACT_SIGMOID>((x[H + j] + r[H + j]) + b_hh[H + j]);
                const float cg = rnn_tanh((x[2 * H + j] + r[2 * H + j]) + b_hh[2 * H + j]);
                const float og = rnn_act<ACT_SIGMOID>((x[3 * H + j] + r[3 * H + j]) + b_hh[3 * H + j]);
                const float cn = fg * cb[j] + ig * cg;
                const float hn = og * rnn_tanh(cn);
                cb[j] = cn;
                hb[j] = hn;
                o[j] = hn;
            }
        } else if constexpr (MODE == RNN_GRU) {  // c = tanh(x_c + r * (h W_c^T + b_hc))
            for (i64 j = 0; j < H; ++j) {
                const float rg = rnn_act<ACT_SIGMOID>(x[j] + (r[j] + b_hh[j]));
                const float zg = rnn_act<ACT_SIGMOID>(x[H + j] + (r[H + j] + b_hh[H + j]));
                const float cg = rnn_tanh(x[2 * H + j] + rg * (r[2 * H + j] + b_hh[2 * H + j]));
                const float hn = zg * hb[j] + (1.0f - zg) * cg;
                hb[j] = hn;
                o[j] = hn;
            }
        } else {
            constexpr int A = MODE == RNN_TANH ? ACT_TANH : ACT_RELU;
            for (i64 j = 0; j < H; ++j) {
                const float hn = rnn_act<A>((x[j] + r[j]) + b_hh[j]);
                hb[j] = hn;
                o[j] = hn;
            }
        }
    }
}

// One direction of one layer over x [T, B, in]: xg = x @ W_ih^T + b_ih for all steps at once
// (one gemm; xg is scratch [T*B, G*H]), then the steps (backwards when `reverse`), each a gemm
// h @ W_hh^T into hg (scratch [B, G*H]) and rnn_step. Step t's hidden goes to out + t*B*ldo.
template <int MODE, class L>
inline void rnn_direction(i64 T, i64 B, i64 in, i64 H, bool reverse, const float* x,
                          const float* w_ih, const float* w_hh, const float* b_ih,
                          const float* b_hh, const L* lens, float* h, float* c, float* out,
                          i64 ldo, float* xg, float* hg) {
    const i64 GH = rnn_gates(MODE) * H;
    gemm(false, true, T * B, GH, in, 1.0f, x, in, w_ih, in, 0.0f, xg, GH);
    for (i64 r = 0; r < T * B; ++r) {
        float* row = xg + r * GH;
        for (i64 j = 0; j < GH; ++j) row[j] = row[j] + b_ih[j];
    }
    for (i64 s = 0; s < T; ++s) {
        const i64 t = reverse ? T - 1 - s : s;
        gemm(false, true, B, GH, H, 1.0f, h, H, w_hh, H, 0.0f, hg, GH);
        rnn_step<MODE>(B, H, t, xg + t * B * GH, hg, b_hh, lens, h, c, out + t * B * ldo, ldo);
    }
}

// The whole op: `layers` layers of `dirs` directions, w = WeightList (every (layer, direction)'s
// W_ih [G*H, in], W_hh [G*H, H], then every b_ih, b_hh in that order). pre_h/pre_c
// [layers*dirs, B, H] are the initial states, st_h/st_c the final ones (c: LSTM only). A layer's
// output [T, B, dirs*H] (forward hidden, then backward) is the next one's input: inner layers
// write buf0, buf1, buf0, ... (scratch [T, B, dirs*H], null when unused), the last writes out.
template <int MODE, class L>
inline void rnn_forward(i64 T, i64 B, i64 I, i64 H, i64 layers, i64 dirs, const float* x,
                        const float* const* w, const float* pre_h, const float* pre_c,
                        const L* lens, float* out, float* st_h, float* st_c, float* buf0,
                        float* buf1, float* xg, float* hg) {
    const i64 n_w = 2 * layers * dirs, BH = B * H, DH = dirs * H;
    std::memcpy(st_h, pre_h, sizeof(float) * (size_t)(layers * dirs * BH));
    if constexpr (MODE == RNN_LSTM)
        std::memcpy(st_c, pre_c, sizeof(float) * (size_t)(layers * dirs * BH));
    const float* inp = x;
    i64 in = I;
    for (i64 l = 0; l < layers; ++l) {
        float* dst = l + 1 == layers ? out : (l % 2 == 0 ? buf0 : buf1);
        for (i64 d = 0; d < dirs; ++d) {
            const i64 k = l * dirs + d;
            rnn_direction<MODE>(T, B, in, H, d == 1, inp, w[2 * k], w[2 * k + 1], w[n_w + 2 * k],
                                w[n_w + 2 * k + 1], lens, st_h + k * BH,
                                MODE == RNN_LSTM ? st_c + k * BH : nullptr, dst + d * H, DH, xg,
                                hg);
        }
        inp = dst;
        in = DH;
    }
}

// --- LoD sequences in Paddle's batch order (ops/rnn.py `batches`) ---------------------------------
// Whether lod[0 .. n) are the offsets of sequences packing `rows` rows: from 0, never
// decreasing, ending at rows (else the segment runs interpreted; the kernel says what is wrong).
inline bool lod_is_offsets(const i64* lod, i64 n, i64 rows) {
    if (n < 1 || lod[0] != 0 || lod[n - 1] != rows) return false;
    for (i64 i = 1; i < n; ++i)
        if (lod[i] < lod[i - 1]) return false;
    return true;
}

// A walk over the N sequences of `lod` step by step: `order` (scratch [N]) sorts them longest
// first, ties in input order (np.argsort(-lens, kind="stable")); at step t the first `n` of
// them are still running and row(k) is the input row of the k-th (counted from the end of the
// sequence when `reverse`).
struct SeqBatch {
    const i64* lod;
    i64* order;
    i64 N;
    bool reverse;
    i64 t = -1, n = 0;

    SeqBatch(const i64* lod_, i64 N_, i64* order_, bool reverse_)
        : lod(lod_), order(order_), N(N_), reverse(reverse_), n(N_) {
        for (i64 i = 0; i < N; ++i) order[i] = i;
        std::stable_sort(order, order + N, [this](i64 a, i64 b) { return len(a) > len(b); });
    }
    i64 len(i64 s) const { return lod[s + 1] - lod[s]; }
    // the next step: false when every sequence has ended
    bool next() {
        ++t;
        while (n > 0 && len(order[n - 1]) <= t) --n;
        return n > 0;
    }
    i64 row(i64 k) const {
        const i64 s = order[k];
        return reverse ? lod[s + 1] - 1 - t : lod[s] + t;
    }
};

// Every step of `sb` at once, for the backward passes that walk the steps in reverse: the
// input rows in step order into brow, step t's being brow[bounds[t], bounds[t + 1]).
// Returns the number of steps T (bounds holds T + 1 entries).
inline i64 seq_steps(SeqBatch& sb, i64* brow, i64* bounds) {
    i64 T = 0, a = 0;
    bounds[0] = 0;
    while (sb.next()) {
        for (i64 k = 0; k < sb.n; ++k) brow[a + k] = sb.row(k);
        a += sb.n;
        bounds[++T] = a;
    }
    return T;
}

// The initial states of the sequences in batch order: init[order[k]] ([N, D] rows), or zeros.
inline void seq_initial(const SeqBatch& sb, const float* init, i64 D, float* dst) {
    for (i64 k = 0; k < sb.N; ++k) {
        if (init == nullptr)
            std::memset(dst + k * D, 0, sizeof(float) * (size_t)D);
        else
            std::memcpy(dst + k * D, init + sb.order[k] * D, sizeof(float) * (size_t)D);
    }
}

// --- Fluid's lstm (dynamic_lstm) ---------------------------------------------------------------
// x [rows, 4D] projected inputs (columns [candidate, input, forget, output]), w [D, 4D],
// bias [4D] (+ peepholes W_ic, W_fc, W_oc [D] each when PEEP), h0/c0 [N, D] or null. Writes
// hidden, cell [rows, D] (x's rows) and, in batch order, gates [rows, 4D] (activated) and
// cacts [rows, D] (act(cell)). Scratch: order [N], h, c [N, D], hg [N, 4D].
template <int GATE, int CELL, int CAND, bool PEEP>
inline void lstm_seq(const float* x, const i64* lod, i64 N, i64 D, bool reverse, const float* w,
                     const float* bias, const float* h0, const float* c0, float* hidden,
                     float* cell, float* gates, float* cacts, i64* order, float* h, float* c,
                     float* hg) {
    const i64 G = 4 * D;
    SeqBatch sb(lod, N, order, reverse);
    seq_initial(sb, h0, D, h);
    seq_initial(sb, c0, D, c);
    const float* wic = bias + 4 * D;
    const float* wfc = bias + 5 * D;
    const float* woc = bias + 6 * D;
    i64 a = 0;                                  // first batch row of this step
    while (sb.next()) {
        const i64 n = sb.n;
        float* g = gates + a * G;
        for (i64 k = 0; k < n; ++k) {           // g = x[rows] + b, as the kernel's g_all
            const float* xr = x + sb.row(k) * G;
            float* gk = g + k * G;
            for (i64 j = 0; j < G; ++j) gk[j] = xr[j] + bias[j];
        }
        gemm(false, false, n, G, D, 1.0f, h, D, w, G, 0.0f, hg, G);
        for (i64 k = 0; k < n; ++k) {
            float* gk = g + k * G;
            const float* rk = hg + k * G;
            float* ck = c + k * D;
            float* hk = h + k * D;
            float* ak = cacts + (a + k) * D;
            const i64 row = sb.row(k);
            float* hid = hidden + row * D;
            float* cel = cell + row * D;
            for (i64 j = 0; j < D; ++j) {
                const float cp = ck[j];
                const float zc = gk[j] + rk[j], zi = gk[D + j] + rk[D + j];
                const float zf = gk[2 * D + j] + rk[2 * D + j];
                const float zo = gk[3 * D + j] + rk[3 * D + j];
                const float cand = rnn_act<CAND>(zc);
                const float ig = rnn_act<GATE>(PEEP ? zi + cp * wic[j] : zi);
                const float fg = rnn_act<GATE>(PEEP ? zf + cp * wfc[j] : zf);
                const float cn = cand * ig + cp * fg;
                const float og = rnn_act<GATE>(PEEP ? zo + cn * woc[j] : zo);
                const float ca = rnn_act<CELL>(cn);
                const float hn = og * ca;
                gk[j] = cand;
                gk[D + j] = ig;
                gk[2 * D + j] = fg;
                gk[3 * D + j] = og;
                ak[j] = ca;
                ck[j] = cn;
                hk[j] = hn;
                hid[j] = hn;
                cel[j] = cn;
            }
        }
        a += n;
    }
}

// The derivative of activation A from its output y (ops/rnn.py's ACTS).
template <int A>
inline float rnn_dact(float y) {
    if constexpr (A == ACT_SIGMOID) {
        return y * (1.0f - y);
    } else if constexpr (A == ACT_TANH) {
        return 1.0f - y * y;
    } else if constexpr (A == ACT_RELU) {
        return y > 0.0f ? 1.0f : 0.0f;
    } else {
        return 1.0f;
    }
}

// lstm_grad: the kernel's backward over the same batch order, steps last to first. In:
// x's LoD, w, bias, h0/c0 (or null), hidden/cell [rows, D] (x's rows), gates [rows, 4D] and
// cacts [rows, D] (batch order, as lstm wrote them), dh_out/dc_out [rows, D] (or null). Out:
// dx [rows, 4D], dh0/dc0 [N, D], dw [D, 4D], db [4D (+3D)]. Scratch: order [N], brow [rows]
// (batch row -> x row), bounds [rows + 2], hid/cel/dg [rows, D|D|4D], hp/cp [N, D] (initial
// states), dh_next/dc_next [N, D].
template <int GATE, int CELL, int CAND, bool PEEP>
inline void lstm_seq_grad(const i64* lod, i64 N, i64 R, i64 D, bool reverse, const float* w,
                          const float* bias, const float* h0, const float* c0,
                          const float* hidden, const float* cell, const float* gates,
                          const float* cacts, const float* dh_out, const float* dc_out,
                          float* dx, float* dh0, float* dc0, float* dw, float* db, i64* order,
                          i64* brow, i64* bounds, float* hid, float* cel, float* dg, float* hp0,
                          float* cp0, float* dh_next, float* dc_next) {
    const i64 G = 4 * D;
    SeqBatch sb(lod, N, order, reverse);
    const i64 T = seq_steps(sb, brow, bounds), a = bounds[T];
    seq_initial(sb, h0, D, hp0);
    seq_initial(sb, c0, D, cp0);
    for (i64 r = 0; r < a; ++r) {
        std::memcpy(hid + r * D, hidden + brow[r] * D, sizeof(float) * (size_t)D);
        std::memcpy(cel + r * D, cell + brow[r] * D, sizeof(float) * (size_t)D);
    }
    std::memset(dw, 0, sizeof(float) * (size_t)(D * G));
    std::memset(dh_next, 0, sizeof(float) * (size_t)(N * D));
    std::memset(dc_next, 0, sizeof(float) * (size_t)(N * D));
    float* dpeep = db + G;
    if (PEEP) std::memset(dpeep, 0, sizeof(float) * (size_t)(3 * D));
    const float* wic = bias + 4 * D;
    const float* wfc = bias + 5 * D;
    const float* woc = bias + 6 * D;
    for (i64 t = T - 1; t >= 0; --t) {
        const i64 s = bounds[t], n = bounds[t + 1] - s;
        const float* hp = t == 0 ? hp0 : hid + bounds[t - 1] * D;
        const float* cp = t == 0 ? cp0 : cel + bounds[t - 1] * D;
        for (i64 k = 0; k < n; ++k) {
            const float* gk = gates + (s + k) * G;
            const float* ck = cel + (s + k) * D;
            const float* ak = cacts + (s + k) * D;
            float* dgk = dg + (s + k) * G;
            const i64 row = brow[s + k];
            for (i64 j = 0; j < D; ++j) {
                const float cand = gk[j], ig = gk[D + j], fg = gk[2 * D + j], og = gk[3 * D + j];
                const float c = ck[j], ca = ak[j], cpj = cp[k * D + j];
                const float dh = (dh_out ? dh_out[row * D + j] : 0.0f) + dh_next[k * D + j];
                const float dog = dh * ca * rnn_dact<GATE>(og);
                float dc = (dc_out ? dc_out[row * D + j] : 0.0f) + dc_next[k * D + j] +
                           dh * og * rnn_dact<CELL>(ca);
                if (PEEP) dc = dc + dog * woc[j];
                const float dcand = dc * ig * rnn_dact<CAND>(cand);
                const float dig = dc * cand * rnn_dact<GATE>(ig);
                const float dfg = dc * cpj * rnn_dact<GATE>(fg);
                dgk[j] = dcand;
                dgk[D + j] = dig;
                dgk[2 * D + j] = dfg;
                dgk[3 * D + j] = dog;
                float dcn = dc * fg;
                if (PEEP) {
                    dcn = dcn + dig * wic[j] + dfg * wfc[j];
                    dpeep[j] += dig * cpj;
                    dpeep[D + j] += dfg * cpj;
                    dpeep[2 * D + j] += dog * c;
                }
                dc_next[k * D + j] = dcn;
            }
        }
        gemm(true, false, D, G, n, 1.0f, hp, D, dg + s * G, G, 1.0f, dw, G);
        gemm(false, true, n, D, G, 1.0f, dg + s * G, G, w, G, 0.0f, dh_next, D);
    }
    for (i64 j = 0; j < G; ++j) db[j] = 0.0f;
    for (i64 r = 0; r < a; ++r) {
        const float* dgr = dg + r * G;
        if (dx) std::memcpy(dx + brow[r] * G, dgr, sizeof(float) * (size_t)G);
        for (i64 j = 0; j < G; ++j) db[j] += dgr[j];
    }
    for (i64 k = 0; k < N; ++k) {
        if (dh0) std::memcpy(dh0 + order[k] * D, dh_next + k * D, sizeof(float) * (size_t)D);
        if (dc0) std::memcpy(dc0 + order[k] * D, dc_next + k * D, sizeof(float) * (size_t)D);
    }
}

// --- GRU: one step (gru_unit; a step of gru) -----------------------------------------------------
// n rows: g [n, 3D] = the projected input + bias (columns [update, reset, candidate]) in, the
// activated gates out; hp [n, D] the previous states; w_ur [D, 2D] and w_c [D, D] the two
// parts of the flat Weight. Writes rh = r * hp [n, D] and h [n, D]; hg is scratch [n, 2D].
// As ops/rnn.py's _gru_step: h = u * c + (1 - u) * hp, or u * hp + (1 - u) * c (origin_mode).
template <int GATE, int ACT>
inline void gru_step(i64 n, i64 D, float* g, const float* hp, const float* w_ur,
                     const float* w_c, float* rh, float* hg, float* h, bool origin) {
    const i64 G = 3 * D;
    gemm(false, false, n, 2 * D, D, 1.0f, hp, D, w_ur, 2 * D, 0.0f, hg, 2 * D);
    for (i64 k = 0; k < n; ++k) {
        float* gk = g + k * G;
        const float* rk = hg + k * 2 * D;
        const float* hk = hp + k * D;
        float* rhk = rh + k * D;
        for (i64 j = 0; j < 2 * D; ++j) gk[j] = rnn_act<GATE>(gk[j] + rk[j]);
        for (i64 j = 0; j < D; ++j) rhk[j] = gk[D + j] * hk[j];
    }
    gemm(false, false, n, D, D, 1.0f, rh, D, w_c, D, 0.0f, hg, D);
    for (i64 k = 0; k < n; ++k) {
        float* gk = g + k * G;
        const float* rk = hg + k * D;
        const float* hk = hp + k * D;
        float* out = h + k * D;
        for (i64 j = 0; j < D; ++j) {
            const float cg = rnn_act<ACT>(gk[2 * D + j] + rk[j]);
            const float u = gk[j];
            gk[2 * D + j] = cg;
            out[j] = origin ? u * hk[j] + (1.0f - u) * cg : u * cg + (1.0f - u) * hk[j];
        }
    }
}

// --- Fluid's gru (dynamic_gru) -------------------------------------------------------------------
// x [rows, 3D], w [D, 3D] (flat: w_ur [D, 2D] then w_c [D, D]), bias [3D] or null, h0 [N, D]
// or null. Writes hidden [rows, D] (x's rows) and, in batch order, gates [rows, 3D], rh
// [rows, D] and bh [rows, D] (each step's states: the next step's previous ones are a prefix
// of them). Scratch: order [N], h_init [N, D], hg [N, 2D].
template <int GATE, int ACT>
inline void gru_seq(const float* x, const i64* lod, i64 N, i64 D, bool reverse, bool origin,
                    const float* w, const float* bias, const float* h0, float* hidden,
                    float* gates, float* rh, float* bh, i64* order, float* h_init, float* hg) {
    const i64 G = 3 * D;
    SeqBatch sb(lod, N, order, reverse);
    seq_initial(sb, h0, D, h_init);
    const float* hp = h_init;
    i64 a = 0;
    while (sb.next()) {
        const i64 n = sb.n;
        float* g = gates + a * G;
        for (i64 k = 0; k < n; ++k) {
            const float* xr = x + sb.row(k) * G;
            float* gk = g + k * G;
            if (bias == nullptr)
                std::memcpy(gk, xr, sizeof(float) * (size_t)G);
            else
                for (i64 j = 0; j < G; ++j) gk[j] = xr[j] + bias[j];
        }
        float* hn = bh + a * D;
        gru_step<GATE, ACT>(n, D, g, hp, w, w + 2 * D * D, rh + a * D, hg, hn, origin);
        for (i64 k = 0; k < n; ++k)
            std::memcpy(hidden + sb.row(k) * D, hn + k * D, sizeof(float) * (size_t)D);
        hp = hn;
        a += n;
    }
}

// --- lstm_unit ---------------------------------------------------------------------------------
// x [n, 4D] pre-activations [input, forget, output, candidate], c_prev [n, D]:
// c = sigmoid(f + forget_bias) * c_prev + sigmoid(i) * tanh(g), h = sigmoid(o) * tanh(c).
inline void lstm_unit(i64 n, i64 D, const float* x, const float* c_prev, float forget_bias,
                      float* c, float* h) {
    for (i64 k = 0; k < n; ++k) {
        const float* xk = x + k * 4 * D;
        const float* cp = c_prev + k * D;
        float* ck = c + k * D;
        float* hk = h + k * D;
        for (i64 j = 0; j < D; ++j) {
            const float ig = rnn_act<ACT_SIGMOID>(xk[j]);
            const float fg = rnn_act<ACT_SIGMOID>(xk[D + j] + forget_bias);
            const float og = rnn_act<ACT_SIGMOID>(xk[2 * D + j]);
            const float cg = rnn_tanh(xk[3 * D + j]);
            const float cn = fg * cp[j] + ig * cg;
            ck[j] = cn;
            hk[j] = og * rnn_tanh(cn);
        }
    }
}

}  // namespace fl
