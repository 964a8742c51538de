// Beam search over LoD values in generated code: the twins of ops/beam.py's kernels
// (beam_search, beam_search_decode), bit for bit on ids and LoD; scores are the same
// float64 arithmetic rounded to the scores' type once, as numpy's.
//
// A 2-level LoD here is two offset arrays, level 0 the outer: level 0 offsets into level 1's
// entries (sources -> prefixes), level 1 offsets into rows (prefixes -> rows). beam_search
// takes the sources as absolute row offsets (`abs_level`: Paddle's ToAbsOffset of the level
// it groups by) and writes selected rows in prefix order with their level-1 offsets; its
// output's level 0 is those absolute offsets (one level-1 entry per input row).
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>
#include <vector>

#include "status.h"
#include "arrays.h"     // TensorArray: beam_search_decode reads two

namespace fl {

// An offsets array is well formed: n >= 1 entries, starting at 0, non-decreasing, ending at
// or below `limit` (the entries or rows it indexes; -1: no limit). The message names `what`.
inline int check_offsets(const int64_t* off, int64_t n, int64_t limit, const char* what,
                         char* err, int k) {
    if (n < 1 || off[0] != 0) {
        std::snprintf(err, 512, "%s: its LoD offsets must start at 0", what);
        return 2 + k;
    }
    for (int64_t j = 1; j < n; ++j)
        if (off[j] < off[j - 1]) {
            std::snprintf(err, 512, "%s: its LoD offsets decrease at %lld", what, (long long)j);
            return 2 + k;
        }
    if (limit >= 0 && off[n - 1] > limit) {
        std::snprintf(err, 512, "%s: its LoD ends at %lld, past its %lld rows", what,
                      (long long)off[n - 1], (long long)limit);
        return 2 + k;
    }
    return 0;
}

// out[0..n0) = level 0 as absolute offsets into rows: out[j] = lod1[lod0[j]] (lod0 indexes
// lod1's n1 entries; both checked).
inline int abs_level(const int64_t* lod0, int64_t n0, const int64_t* lod1, int64_t n1,
                     int64_t rows, int64_t* out, const char* what, char* err, int k) {
    if (int rc = check_offsets(lod1, n1, rows, what, err, k)) return rc;
    if (int rc = check_offsets(lod0, n0, n1 - 1, what, err, k)) return rc;
    for (int64_t j = 0; j < n0; ++j) out[j] = lod1[lod0[j]];
    return 0;
}

// The most rows beam_search selects from `n` prefix rows of `width` candidates grouped in
// `n_src` sources: each source keeps at most `beam`, each row gives at most min(width, beam).
inline int64_t beam_search_bound(int64_t n, int64_t width, int64_t n_src, int64_t beam) {
    const int64_t per_row = width < beam ? width : beam;
    const int64_t a = n * (per_row > 1 ? per_row : 1), b = n_src * beam;
    return a < b ? a : b;
}

struct BeamCand {
    int64_t row, id, ord;
    double score;
};

// numpy's lexsort of (order, -row, -score): the higher score first (NaN last), then the
// later row, then the earlier candidate.
inline bool beam_before(const BeamCand& a, const BeamCand& b) {
    const bool an = std::isnan(a.score), bn = std::isnan(b.score);
    if (an != bn) return bn;
    if (!an && a.score != b.score) return a.score > b.score;
    if (a.row != b.row) return a.row > b.row;
    return a.ord < b.ord;
}

// One step of beam search (ops/beam.py BeamSearch). Inputs: `n` prefix rows, pre_ids[n],
// pre_scores[n], scores[n * width] and ids[n * width] (nullptr: candidate c is id c);
// `high[0..n_high)` the sources as absolute row offsets. Outputs (at most
// beam_search_bound rows): sel_ids, sel_scores, parent (the prefix row of each), low (the
// level-1 offsets, high[n_high - 1] + 1 entries) and *n_sel; with sel_ids nullptr only
// *n_sel (the compiled op's rows, known before its outputs are written). A prefix that ended (its id is
// end_id) is one candidate with its score unchanged; a source whose every kept row is an
// end_id of an ended prefix keeps none.
template <typename P, typename C, typename T>
inline int beam_search(const P* pre_ids, const T* pre_scores, const C* ids, const T* scores,
                       int64_t n, int64_t width, const int64_t* high, int64_t n_high,
                       int64_t beam, int64_t end_id, bool accumulated, int64_t* sel_ids,
                       T* sel_scores, int32_t* parent, int64_t* low, int64_t* n_sel, char* err,
                       int k) {
    if (int rc = check_offsets(high, n_high, n, "beam_search: scores", err, k)) return rc;
    if (beam < 0) return fail(err, k, "beam_search: beam_size is negative");
    std::vector<BeamCand> cand, keep;
    int64_t out = 0;
    const bool fill = sel_ids != nullptr;
    if (fill) low[0] = 0;
    try {       // no exception may leave generated code: a failure is a return code
        for (int64_t s = 0; s + 1 < n_high; ++s) {
            cand.clear();
            for (int64_t r = high[s]; r < high[s + 1]; ++r) {
                if ((int64_t)pre_ids[r] == end_id) {
                    cand.push_back(BeamCand{r, end_id, (int64_t)cand.size(),
                                            (double)pre_scores[r]});
                    continue;
                }
                for (int64_t c = 0; c < width; ++c) {
                    const double v = (double)scores[r * width + c];
                    const double sc = accumulated ? v : (double)pre_scores[r] + std::log(v);
                    cand.push_back(BeamCand{r, ids ? (int64_t)ids[r * width + c] : c,
                                            (int64_t)cand.size(), sc});
                }
            }
            const int64_t m = std::min<int64_t>(beam, (int64_t)cand.size());
            std::partial_sort(cand.begin(), cand.begin() + m, cand.end(), beam_before);
            keep.assign(cand.begin(), cand.begin() + m);
            // by row, each row's in rank order (a stable sort of the ranked)
            std::stable_sort(keep.begin(), keep.end(),
                             [](const BeamCand& a, const BeamCand& b) { return a.row < b.row; });
            bool ended = true;
            for (const BeamCand& c : keep)
                ended = ended && c.id == end_id && (int64_t)pre_ids[c.row] == end_id;
            if (ended) keep.clear();
            if (!fill) {
                out += (int64_t)keep.size();
                continue;
            }
            size_t q = 0;
            for (int64_t r = high[s]; r < high[s + 1]; ++r) {
                for (; q < keep.size() && keep[q].row == r; ++q, ++out) {
                    sel_ids[out] = keep[q].id;
                    sel_scores[out] = (T)keep[q].score;
                    parent[out] = (int32_t)r;
                }
                low[r + 1] = out;
            }
        }
    } catch (const std::bad_alloc&) {
        return fail(err, k, "beam_search: out of memory");
    }
    *n_sel = out;
    return 0;
}

// One step of the selections beam_search_decode walks back: `rows` ids and scores, and the
// step's 2-level LoD (src: n_src offsets into sent's entries; sent: n_sent offsets into
// rows). A step never written has rows < 0.
template <typename I, typename T>
struct BeamStep {
    const I* ids;
    const T* scores;
    int64_t rows;
    const int64_t* src;
    int64_t n_src;
    const int64_t* sent;
    int64_t n_sent;
};

// The sentences of beam_search_decode (ops/beam.py BeamSearchDecode): walked back from each
// source's last step with rows, each sentence's words in time order (an end_id repeated by
// an ended prefix kept once), each source's sentences by final score, best first (stable).
// Appends to words, word_scores and the offsets src_lod (sources -> sentences, starts
// {0}) and sent_lod (sentences -> words, starts {0}).
template <typename I, typename T>
inline int beam_search_decode(const BeamStep<I, T>* steps, int64_t n_steps, int64_t end_id,
                              std::vector<int64_t>& words, std::vector<T>& word_scores,
                              std::vector<int64_t>& src_lod, std::vector<int64_t>& sent_lod,
                              char* err, int k) {
    struct Sent { std::vector<int64_t> w; std::vector<T> s; int64_t at; };
    int64_t first = -1;
    for (int64_t t = 0; t < n_steps && first < 0; ++t)
        if (steps[t].rows >= 0) first = t;
    if (first < 0)
        return fail(err, k, "beam_search_decode: Ids and Scores must be non-empty arrays of "
                            "the same length");
    for (int64_t t = first; t < n_steps; ++t) {
        const BeamStep<I, T>& st = steps[t];
        if (st.rows < 0) continue;
        if (st.src == nullptr || st.sent == nullptr) {
            std::snprintf(err, 512, "beam_search_decode: step %lld of Ids has no 2-level LoD; "
                          "beam_search's outputs have 2 levels", (long long)(t - first));
            return 2 + k;
        }
        if (int rc = check_offsets(st.sent, st.n_sent, st.rows, "beam_search_decode: Ids",
                                   err, k)) return rc;
        if (int rc = check_offsets(st.src, st.n_src, st.n_sent - 1, "beam_search_decode: Ids",
                                   err, k)) return rc;
    }
    const int64_t n_src = steps[first].n_src - 1;
    try {
        std::vector<std::vector<Sent>> per((size_t)n_src);
        for (int64_t t = n_steps - 1; t >= first; --t) {
            const BeamStep<I, T>& st = steps[t];
            if (st.rows < 0) continue;
            const int64_t m = std::min(n_src, st.n_src - 1);
            for (int64_t q = 0; q < m; ++q) {
                std::vector<Sent>& ss = per[(size_t)q];
                if (ss.empty()) {        // the source's last step (it ended or the loop did)
                    for (int64_t p = st.src[q]; p < st.src[q + 1]; ++p)
                        for (int64_t c = st.sent[p]; c < st.sent[p + 1]; ++c)
                            ss.push_back(Sent{{(int64_t)st.ids[c]}, {st.scores[c]}, p});
                    continue;
                }
                for (Sent& s : ss) {
                    const int64_t c = s.at;
                    if (c < 0 || c >= st.rows) {
                        std::snprintf(err, 512, "beam_search_decode: step %lld selects from "
                                      "row %lld of a step with %lld rows", (long long)(t + 1 - first),
                                      (long long)c, (long long)st.rows);
                        return 2 + k;
                    }
                    if ((int64_t)st.ids[c] != end_id || s.w.empty()) {
                        s.w.push_back((int64_t)st.ids[c]);
                        s.s.push_back(st.scores[c]);
                    }
                    s.at = (int64_t)(std::upper_bound(st.sent, st.sent + st.n_sent, c) -
                                     st.sent) - 1;
                }
            }
        }
        for (std::vector<Sent>& ss : per) {
            // by the final (accumulated) score, best first; the walk stored it first
            std::stable_sort(ss.begin(), ss.end(), [](const Sent& a, const Sent& b) {
                return a.s.front() > b.s.front();
            });
            for (const Sent& s : ss) {
                for (size_t j = s.w.size(); j-- > 0;) {
                    words.push_back(s.w[j]);
                    word_scores.push_back(s.s[j]);
                }
                sent_lod.push_back((int64_t)words.size());
            }
            src_lod.push_back(src_lod.back() + (int64_t)ss.size());
        }
    } catch (const std::bad_alloc&) {
        return fail(err, k, "beam_search_decode: out of memory");
    }
    return 0;
}

// The sources beam_search groups by, as absolute row offsets into high[0..n_high): level
// `level` of a LoD of `n_levels` (1 or 2) levels lod0/lod1 (lod1 unused with one level).
inline int beam_sources(const int64_t* lod0, int64_t n0, const int64_t* lod1, int64_t n1,
                        int64_t n_levels, int64_t level, int64_t rows, int64_t* high,
                        char* err, int k) {
    if (n_levels == 2 && level == 0)
        return abs_level(lod0, n0, lod1, n1, rows, high, "beam_search: scores", err, k);
    const int64_t* src = n_levels == 2 ? lod1 : lod0;
    const int64_t n = n_levels == 2 ? n1 : n0;
    for (int64_t j = 0; j < n; ++j) high[j] = src[j];
    return check_offsets(high, n, rows, "beam_search: scores", err, k);
}

// The compiled op's first half, before its outputs are sized: the sources into high (as
// beam_sources) and the rows beam_search will select into *rows.
template <typename P, typename C, typename T>
inline int beam_search_rows(const P* pre_ids, const T* pre_scores, const C* ids, const T* scores,
                            int64_t n, int64_t width, const int64_t* lod0, int64_t n0,
                            const int64_t* lod1, int64_t n1, int64_t n_levels, int64_t level,
                            int64_t* high, int64_t beam, int64_t end_id, bool accumulated,
                            int64_t* rows, char* err, int k) {
    if (int rc = beam_sources(lod0, n0, lod1, n1, n_levels, level, n, high, err, k)) return rc;
    const int64_t n_high = n_levels == 2 && level == 0 ? n0 : n_levels == 2 ? n1 : n0;
    if (high[n_high - 1] != n) {
        std::snprintf(err, 512, "beam_search: the LoD of scores ends at %lld, not at its %lld "
                      "rows", (long long)high[n_high - 1], (long long)n);
        return 2 + k;
    }
    return beam_search<P, C, T>(pre_ids, pre_scores, ids, scores, n, width, high, n_high, beam,
                                end_id, accumulated, nullptr, nullptr, nullptr, nullptr, rows,
                                err, k);
}

// A LoD the segment computed, handed back (codegen/render.py) as one block of `ex` (see
// Exports in arrays.h) the caller copies: int64 n_levels, count[n_levels], then each
// level's offsets, outer first.
inline int lod_export(const int64_t* const* levels, const int64_t* counts, int64_t n_levels,
                      Exports* ex, int64_t* addr, char* err, int k) {
    int64_t words = 1 + n_levels;
    for (int64_t j = 0; j < n_levels; ++j) words += counts[j];
    int64_t* p = (int64_t*)ex->alloc(words * 8);
    if (p == nullptr) return fail(err, k, "out of memory handing a LoD back");
    p[0] = n_levels;
    int64_t* q = p + 1 + n_levels;
    for (int64_t j = 0; j < n_levels; ++j) {
        p[1 + j] = counts[j];
        for (int64_t i = 0; i < counts[j]; ++i) *q++ = levels[j][i];
    }
    *addr = (int64_t)(intptr_t)p;
    return 0;
}

// A value of a size known only when it is made (codegen/cir.py HeldBuf), owned by the
// segment function and handed back as one block (held_export).
struct Held {
    std::vector<char> data;
    std::vector<int64_t> dims;
    std::vector<std::vector<int64_t>> lod;
};

// The block of `ex` (see Exports in arrays.h) the caller copies: int64 ndim, dims[ndim],
// n_levels, counts[n_levels], the levels' offsets, then the bytes. A value never made
// (its op did not run) is an empty block of rank `ndim` with no LoD.
inline int held_export(const Held* h, int64_t ndim, Exports* ex, int64_t* addr, char* err,
                       int k) {
    int64_t words = 2 + ndim + (int64_t)h->lod.size();
    for (const auto& l : h->lod) words += (int64_t)l.size();
    const int64_t bytes = words * 8 + (int64_t)h->data.size();
    int64_t* p = (int64_t*)ex->alloc(bytes);
    if (p == nullptr) return fail(err, k, "out of memory handing a value back");
    int64_t* q = p;
    *q++ = ndim;
    for (int64_t a = 0; a < ndim; ++a) *q++ = a < (int64_t)h->dims.size() ? h->dims[(size_t)a] : 0;
    *q++ = (int64_t)h->lod.size();
    for (const auto& l : h->lod) *q++ = (int64_t)l.size();
    for (const auto& l : h->lod)
        for (int64_t v : l) *q++ = v;
    if (!h->data.empty()) std::memcpy(q, h->data.data(), h->data.size());
    *addr = (int64_t)(intptr_t)p;
    return 0;
}

// beam_search_decode over two arrays the segment wrote (entries with a 2-level LoD, as
// beam_search makes them): the sentences into out_ids (int64 [words]) and out_scores
// (T [words]), both with the LoD [sources -> sentences, sentences -> words].
template <typename I, typename T>
inline int beam_decode_arrays(const TensorArray* ids, const TensorArray* scores,
                              int64_t end_id, Held* out_ids, Held* out_scores, char* err,
                              int k) {
    if (ids->size() != scores->size())
        return fail(err, k, "beam_search_decode: Ids and Scores must be non-empty arrays of "
                            "the same length");
    try {
        std::vector<BeamStep<I, T>> steps;
        for (int64_t t = 0; t < ids->size(); ++t) {
            const TensorArray::Elem& e = ids->el[(size_t)t];
            const TensorArray::Elem& s = scores->el[(size_t)t];
            BeamStep<I, T> st{(const I*)e.data, (const T*)s.data, e.rows, nullptr, 0, nullptr, 0};
            if (e.rows >= 0 && s.rows != e.rows) {
                std::snprintf(err, 512, "beam_search_decode: step %lld of Ids has %lld rows, "
                              "of Scores %lld", (long long)t, (long long)e.rows,
                              (long long)s.rows);
                return 2 + k;
            }
            if (e.rows >= 0 && e.lod != nullptr) {
                st.src = e.lod;
                st.n_src = e.nlod[0];
                st.sent = e.lod + e.nlod[0];
                st.n_sent = e.nlod[1];
            }
            steps.push_back(st);
        }
        std::vector<int64_t> words, src{0}, sent{0};
        std::vector<T> word_scores;
        if (int rc = beam_search_decode<I, T>(steps.data(), (int64_t)steps.size(), end_id, words,
                                              word_scores, src, sent, err, k))
            return rc;
        const int64_t n = (int64_t)words.size();
        out_ids->data.resize((size_t)n * sizeof(int64_t));
        if (n) std::memcpy(out_ids->data.data(), words.data(), (size_t)n * sizeof(int64_t));
        out_scores->data.resize((size_t)n * sizeof(T));
        if (n) std::memcpy(out_scores->data.data(), word_scores.data(), (size_t)n * sizeof(T));
        out_ids->dims = out_scores->dims = {n};
        out_ids->lod = out_scores->lod = {src, sent};
    } catch (const std::bad_alloc&) {
        return fail(err, k, "beam_search_decode: out of memory");
    }
    return 0;
}

// gather_tree (ops/beam.py GatherTree): ids and parents [steps, batch, beam]; out[t, b, k]
// the id at step t of the beam that ends at k of the last step, found by following parents
// back from the last step. Every parent is checked to be a beam index first (the kernel
// fails before it writes, naming the range it found).
template <typename I, typename P>
inline int gather_tree(const I* ids, const P* parents, I* out, int64_t steps, int64_t batch,
                       int64_t beam, char* err, int k) {
    const int64_t n = steps * batch * beam;
    if (n == 0) return 0;
    P lo = parents[0], hi = parents[0];
    for (int64_t i = 1; i < n; ++i) {
        lo = parents[i] < lo ? parents[i] : lo;
        hi = parents[i] > hi ? parents[i] : hi;
    }
    if (lo < 0 || (int64_t)hi >= beam) {
        std::snprintf(err, 512, "gather_tree: Parents must be beam indices in [0, %lld), got "
                      "values in [%lld, %lld]", (long long)beam, (long long)lo, (long long)hi);
        return 2 + k;
    }
    const int64_t last = (steps - 1) * batch * beam;
    for (int64_t b = 0; b < batch; ++b)
        for (int64_t j = 0; j < beam; ++j) {
            int64_t p = (int64_t)parents[last + b * beam + j];
            out[last + b * beam + j] = ids[last + b * beam + j];
            for (int64_t t = steps - 2; t >= 0; --t) {
                const int64_t row = (t * batch + b) * beam;
                out[row + j] = ids[row + p];
                p = (int64_t)parents[row + p];
            }
        }
    return 0;
}

// The entries of `a` that hold a value joined into `o` (tensor_array_to_tensor's copy):
// for each of the `outer` runs before `axis`, each entry's run along axis and after it.
inline void join_entries(const TensorArray* a, int64_t elem_bytes, int nrow,
                         const int64_t* row_dims, int axis, int64_t outer, char* o) {
    int64_t tail = 1;                        // the elements of one entry after axis's rows
    for (int d = axis > 1 ? axis : 1; d <= nrow; ++d) tail *= row_dims[d - 1];
    for (int64_t r = 0; r < outer; ++r)
        for (const auto& e : a->el) {
            if (e.data == nullptr) continue;
            const int64_t rows = e.rows < 0 ? 0 : e.rows;
            const int64_t n = (axis == 0 ? rows * tail : tail) * elem_bytes;
            if (n > 0) std::memcpy(o, e.data + r * n, (size_t)n);
            o += n;
        }
}

// tensor_array_to_tensor (ops/tensor_array.py): the entries of `a` that hold a value (a
// written entry, its rows 0 included; a gap never written is skipped, as the kernel skips
// an empty LoDTensor), each [rows, row_dims...] of `elem_bytes`-byte elements, stacked along
// a new dim `axis` (stack) or concatenated along `axis` into `out`; each entry's size along
// axis (1 when stacked) into int32 `index` (null: not wanted). Entries that do not line up
// stop the run, as numpy's stack and concatenate refuse them.
inline int array_to_held(const TensorArray* a, int64_t elem_bytes, int nrow,
                         const int64_t* row_dims, int axis, bool stack, Held* out,
                         Held* index, char* err, int k) {
    if (a->size() == 0)
        return fail(err, k, "tensor_array_to_tensor: X must be a non-empty tensor array");
    const int nd = 1 + nrow;
    std::vector<const TensorArray::Elem*> parts;
    for (const auto& e : a->el)
        if (e.data != nullptr) parts.push_back(&e);
    if (parts.empty())
        return fail(err, k, stack ? "tensor_array_to_tensor: need at least one array to stack"
                                  : "tensor_array_to_tensor: need at least one array to "
                                    "concatenate");
    auto rows = [](const TensorArray::Elem* e) { return e->rows < 0 ? (int64_t)0 : e->rows; };
    auto dim = [&](const TensorArray::Elem* e, int d) { return d == 0 ? rows(e) : row_dims[d - 1]; };
    const int64_t first = rows(parts[0]);
    for (const auto* p : parts)
        if (rows(p) != first && (stack || axis != 0))
            return fail(err, k, stack ? "tensor_array_to_tensor: all input arrays must have "
                                        "the same shape"
                                      : "tensor_array_to_tensor: all the input array "
                                        "dimensions except for the concatenation axis must "
                                        "match exactly");
    int64_t outer = 1, along = 0, total = 0;
    for (int d = 0; d < axis && d < nd; ++d) outer *= dim(parts[0], d);
    std::vector<int64_t> inner(parts.size());
    for (size_t i = 0; i < parts.size(); ++i) {
        int64_t n = 1;
        for (int d = axis; d < nd; ++d) n *= dim(parts[i], d);
        inner[i] = n;
        total += n;
        along += stack ? 1 : dim(parts[i], axis);
    }
    try {       // no exception may leave generated code: a failure is a return code
        out->dims.clear();
        for (int d = 0; d < nd; ++d) {
            if (d == axis) out->dims.push_back(stack ? (int64_t)parts.size() : along);
            if (d != axis || stack) out->dims.push_back(dim(parts[0], d));
        }
        if (stack && axis == nd) out->dims.push_back((int64_t)parts.size());
        out->lod.clear();
        out->data.resize((size_t)(outer * total * elem_bytes));
        if (index != nullptr) {
            index->dims.assign(1, (int64_t)parts.size());
            index->lod.clear();
            index->data.resize(parts.size() * sizeof(int32_t));
            int32_t* q = (int32_t*)index->data.data();
            for (size_t i = 0; i < parts.size(); ++i)
                q[i] = stack ? 1 : (int32_t)dim(parts[i], axis);
        }
    } catch (const std::bad_alloc&) {
        return fail(err, k, "tensor_array_to_tensor: out of memory");
    }
    join_entries(a, elem_bytes, nrow, row_dims, axis, outer, out->data.data());
    return 0;
}

// tensor_array_to_tensor into arena values (its entries bounded before the loop that
// wrote them: trip_bound.py): `n` the entries that hold a value. An array of more entries
// than `most`, the bound the outputs reserve, stops the run with an error (never a write
// past them); none that holds a value fails as array_to_held does.
inline int array_join_count(const TensorArray* a, int64_t most, bool stack, int64_t* n,
                            char* err, int k) {
    if (a->size() > most) {
        std::snprintf(err, 512, "tensor_array_to_tensor: the array has %lld entries, more "
                      "than the %lld its loop's bound allows", (long long)a->size(),
                      (long long)most);
        return 2 + k;
    }
    if (a->size() == 0)
        return fail(err, k, "tensor_array_to_tensor: X must be a non-empty tensor array");
    int64_t parts = 0;
    for (const auto& e : a->el) parts += e.data != nullptr;
    if (parts == 0)
        return fail(err, k, stack ? "tensor_array_to_tensor: need at least one array to stack"
                                  : "tensor_array_to_tensor: need at least one array to "
                                    "concatenate");
    *n = parts;
    return 0;
}

// The rows of the joined entries: each entry's, all the same (`sum`: concatenated along
// axis 0, their sum); at most `most` (what the outputs reserve). Entries that do not line
// up stop the run as array_to_held's do.
inline int array_join_rows(const TensorArray* a, bool stack, bool sum, int64_t most,
                           int64_t* rows, char* err, int k) {
    int64_t first = -1, total = 0;
    for (const auto& e : a->el) {
        if (e.data == nullptr) continue;
        const int64_t r = e.rows < 0 ? 0 : e.rows;
        if (first >= 0 && r != first && !sum)
            return fail(err, k, stack ? "tensor_array_to_tensor: all input arrays must have "
                                        "the same shape"
                                      : "tensor_array_to_tensor: all the input array "
                                        "dimensions except for the concatenation axis must "
                                        "match exactly");
        if (first < 0) first = r;
        total += r;
    }
    *rows = sum ? total : first;
    if (*rows > most)
        return fail(err, k, "tensor_array_to_tensor: the entries have more rows than the "
                            "compiled code reserved");
    return 0;
}

// OutIndex of the joined entries: 1 each when stacked, else each one's size along axis.
inline void join_index(const TensorArray* a, bool stack, int axis, const int64_t* row_dims,
                       int32_t* index) {
    for (const auto& e : a->el) {
        if (e.data == nullptr) continue;
        *index++ = stack ? 1 : (int32_t)(axis == 0 ? (e.rows < 0 ? 0 : e.rows)
                                                   : row_dims[axis - 1]);
    }
}

}  // namespace fl
