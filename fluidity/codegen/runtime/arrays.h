// Tensor arrays and rank tables in generated code (codegen/emit/cpu/arrays.py, rank.py).
//
// A LoDTensorArray a compiled segment makes lives in a `TensorArray` the segment function
// owns (declared after the arena, freed when the function returns): a list of elements,
// each its own heap block of `rows` rows of one row size (the array's row dims are fixed
// when it is compiled). An element never written has rows -1; writing past the end grows
// the list as Fluid's write_to_array does. A rank table is an int64 [2, n] arena buffer: row
// 0 the sequences' original indices, longest first (a stable sort), row 1 their lengths.
#pragma once
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>
#include <vector>

namespace fl {

struct TensorArray {
    // lod: the entry's LoD levels back to back, outer first (nullptr: none); nlod: each
    // level's count (beam search's entries: sources -> prefixes -> rows)
    struct Elem { char* data; int64_t rows; int64_t* lod; int64_t nlod[2]; };
    std::vector<Elem> el;
    TensorArray() = default;
    TensorArray(const TensorArray&) = delete;
    TensorArray& operator=(const TensorArray&) = delete;
    ~TensorArray() { clear(); }
    void clear() {
        for (auto& e : el) { std::free(e.data); std::free(e.lod); }
        el.clear();
    }
    int64_t size() const { return (int64_t)el.size(); }
};

// Out[i] = a copy of x's `rows` rows (of `row_bytes` each); the array grows to i + 1
// entries (the compiled code has checked `rows` against what its readers reserve).
inline int array_write(TensorArray* a, int64_t i, const void* x, int64_t rows,
                       int64_t row_bytes, char* err, int k) {
    if (i < 0) return fail(err, k, "write_to_array: array index I is negative");
    if (i >= (int64_t)a->el.size()) {
        if (i > (int64_t)1 << 40) return fail(err, k, "write_to_array: array index I is too large");
        try {       // no exception may leave generated code: a failure is a return code
            a->el.resize((size_t)i + 1, TensorArray::Elem{nullptr, -1});
        } catch (const std::bad_alloc&) {
            return fail(err, k, "write_to_array: out of memory growing the array");
        }
    }
    TensorArray::Elem& e = a->el[(size_t)i];
    const int64_t n = rows * row_bytes;
    char* p = e.data;
    if (e.rows < rows || p == nullptr) {
        p = (char*)std::malloc(n > 0 ? (size_t)n : 1);
        if (p == nullptr) return fail(err, k, "write_to_array: out of memory");
        std::free(e.data);
        e.data = p;
    }
    if (n > 0) std::memcpy(p, x, (size_t)n);
    e.rows = rows == 0 ? -1 : rows;        // an empty value reads as never written
    std::free(e.lod);                      // array_write_lod gives a LoD value's
    e.lod = nullptr;
    return 0;
}

// Entry i (just written by array_write) keeps a copy of the written value's LoD:
// `n_levels` (1 or 2) levels `levels[l]` of `counts[l]` offsets. A LoD value of no rows is
// still written (a beam that ended everywhere: its LoD says so), unlike a plain one.
inline int array_write_lod(TensorArray* a, int64_t i, const int64_t* const* levels,
                           const int64_t* counts, int64_t n_levels, int64_t rows, char* err,
                           int k) {
    TensorArray::Elem& e = a->el[(size_t)i];
    int64_t words = 0;
    for (int64_t l = 0; l < n_levels; ++l) words += counts[l];
    int64_t* p = (int64_t*)std::malloc((size_t)(words > 0 ? words : 1) * 8);
    if (p == nullptr) return fail(err, k, "write_to_array: out of memory");
    int64_t* q = p;
    for (int64_t l = 0; l < n_levels; ++l) {
        if (counts[l] > 0) std::memcpy(q, levels[l], (size_t)counts[l] * 8);
        q += counts[l];
        e.nlod[l] = counts[l];
    }
    std::free(e.lod);
    e.lod = p;
    if (rows == 0) e.rows = 0;
    return 0;
}

// The count of level l of entry i's LoD (checked against what the reader reserves).
inline int array_lod_count(const TensorArray* a, int64_t i, int64_t l, int64_t cap,
                           int64_t* count, char* err, int k) {
    const TensorArray::Elem& e = a->el[(size_t)i];
    if (e.lod == nullptr)
        return fail(err, k, "read_from_array: the entry was written without LoD");
    *count = e.nlod[l];
    if (*count > cap) {
        std::snprintf(err, 512, "read_from_array: level %lld of entry %lld's LoD has %lld "
                      "offsets, more than the %lld its compiled reader reserves", (long long)l,
                      (long long)i, (long long)*count, (long long)cap);
        return 2 + k;
    }
    return 0;
}

inline void array_read_lod(const TensorArray* a, int64_t i, int64_t l, int64_t* out) {
    const TensorArray::Elem& e = a->el[(size_t)i];
    const int64_t* p = e.lod;
    for (int64_t m = 0; m < l; ++m) p += e.nlod[m];
    if (e.nlod[l] > 0) std::memcpy(out, p, (size_t)e.nlod[l] * 8);
}

// The rows of entry i, for the read that follows (Fluid's error when there is none).
inline int array_read_rows(const TensorArray* a, int64_t i, int64_t* rows, char* err, int k) {
    if (i < 0) return fail(err, k, "read_from_array: array index I is negative");
    if (i >= a->size() || a->el[(size_t)i].rows < 0) {
        std::snprintf(err, 512, "read_from_array: index %lld is out of range; the array has "
                      "%lld entries", (long long)i, (long long)a->size());
        return 2 + k;
    }
    *rows = a->el[(size_t)i].rows;
    return 0;
}

inline void array_read(const TensorArray* a, int64_t i, void* out, int64_t row_bytes) {
    const TensorArray::Elem& e = a->el[(size_t)i];
    if (e.rows > 0) std::memcpy(out, e.data, (size_t)(e.rows * row_bytes));
}

// read_from_array's gradient form (X_W): a missing entry reads as `absent_rows` rows of
// zeros (X_W's shape); `cap` is what the compiled reader reserves.
inline int array_read_rows_or(const TensorArray* a, int64_t i, int64_t absent_rows, int64_t cap,
                              int64_t* rows, char* err, int k) {
    if (i < 0) return fail(err, k, "read_from_array: array index I is negative");
    const bool has = i < a->size() && a->el[(size_t)i].rows >= 0;
    *rows = has ? a->el[(size_t)i].rows : absent_rows;
    if (*rows > cap) {
        std::snprintf(err, 512, "read_from_array: entry %lld has %lld rows, more than the %lld "
                      "its compiled reader reserves", (long long)i, (long long)*rows,
                      (long long)cap);
        return 2 + k;
    }
    return 0;
}

inline void array_read_or_zeros(const TensorArray* a, int64_t i, void* out, int64_t rows,
                                int64_t row_bytes) {
    if (i < a->size() && a->el[(size_t)i].rows >= 0) array_read(a, i, out, row_bytes);
    else if (rows > 0) std::memset(out, 0, (size_t)(rows * row_bytes));
}

// Appends an entry of `rows` rows to t and gives its storage in *data for the caller to
// fill; out of memory is the op's error (`oom`), with nothing appended or leaked.
inline int push_entry(TensorArray* t, int64_t rows, int64_t row_bytes, char** data,
                      const char* oom, char* err, int k) {
    const int64_t n = rows * row_bytes;
    char* p = (char*)std::malloc(n > 0 ? (size_t)n : 1);
    if (p == nullptr) return fail(err, k, oom);
    try {       // no exception may leave generated code: a failure is a return code
        t->el.push_back(TensorArray::Elem{p, rows});
    } catch (const std::bad_alloc&) {
        std::free(p);
        return fail(err, k, oom);
    }
    *data = p;
    return 0;
}

// --- a loop's passes saved for its gradient (codegen/control.py, loop_grad.py) ---------
// A tape is a TensorArray of one entry per forward pass (entry p: the value at pass p, with
// its rows); the gradient loop reads them back last pass first.
inline int tape_push(TensorArray* t, const void* x, int64_t rows, int64_t row_bytes, char* err,
                     int k) {
    char* p = nullptr;
    if (int rc = push_entry(t, rows, row_bytes, &p,
                            "while: out of memory saving a pass for the gradient", err, k))
        return rc;
    if (rows * row_bytes > 0) std::memcpy(p, x, (size_t)(rows * row_bytes));
    return 0;
}

inline int tape_rows(const TensorArray* t, int64_t p, int64_t cap, int64_t* rows, char* err,
                     int k) {
    if (p < 0 || p >= t->size())
        return fail(err, k, "while_grad: no values saved for this pass of the forward loop");
    *rows = t->el[(size_t)p].rows;
    if (*rows > cap) return fail(err, k, "while_grad: a saved value has more rows than reserved");
    return 0;
}

inline int tape_read(const TensorArray* t, int64_t p, void* out, int64_t row_bytes) {
    const TensorArray::Elem& e = t->el[(size_t)p];
    if (e.rows > 0) std::memcpy(out, e.data, (size_t)(e.rows * row_bytes));
    return 0;
}

// --- a StaticRNN's time steps (codegen/recurrent.py): row t of a time-major tensor ------
// (rows: how many the tensor has; a row past them is the interpreter's IndexError)
inline int row_read(void* step, const void* seq, int64_t t, int64_t rows, int64_t row_bytes,
                    char* err, int k) {
    if (t < 0 || t >= rows) return fail(err, k, "recurrent: a time step past the rows given");
    if (row_bytes > 0)
        std::memcpy(step, (const char*)seq + t * row_bytes, (size_t)row_bytes);
    return 0;
}

inline int row_write(void* seq, const void* step, int64_t t, int64_t rows, int64_t row_bytes,
                     char* err, int k) {
    if (t < 0 || t >= rows) return fail(err, k, "recurrent: a time step past the rows kept");
    if (row_bytes > 0)
        std::memcpy((char*)seq + t * row_bytes, step, (size_t)row_bytes);
    return 0;
}

// A gradient summed over the passes (a parameter's): the first pass's copied, later ones
// added in pass order (acc + g, the interpreter's add_grads order).
template <typename T>
inline int accumulate(T* acc, const T* g, int64_t n, bool first) {
    if (first) { if (n > 0) std::memcpy(acc, g, (size_t)n * sizeof(T)); return 0; }
    for (int64_t j = 0; j < n; ++j) acc[j] = acc[j] + g[j];
    return 0;
}

template <typename T>
inline int zero_fill(T* acc, int64_t n) {
    if (n > 0) std::memset(acc, 0, (size_t)n * sizeof(T));
    return 0;
}

// An array gradient summed over the passes: each entry of g that is written moves into acc
// (where acc has none) or is added to acc's (add_grads over arrays); g ends empty.
template <typename T>
inline int array_accumulate(TensorArray* acc, TensorArray* g, int64_t row_elems, char* err,
                            int k) {
    for (int64_t j = 0; j < g->size(); ++j) {
        TensorArray::Elem& e = g->el[(size_t)j];
        if (e.rows < 0) continue;
        if (j >= acc->size()) {
            try {
                acc->el.resize((size_t)j + 1, TensorArray::Elem{nullptr, -1});
            } catch (const std::bad_alloc&) {
                return fail(err, k, "while_grad: out of memory summing an array's gradient");
            }
        }
        TensorArray::Elem& a = acc->el[(size_t)j];
        if (a.rows < 0) {
            std::free(a.data);
            std::free(a.lod);
            a = e;
            e = TensorArray::Elem{nullptr, -1};
            continue;
        }
        if (a.rows != e.rows) {
            std::snprintf(err, 512, "while_grad: entry %lld of an array's gradient has %lld rows "
                          "in one pass and %lld in another", (long long)j, (long long)a.rows,
                          (long long)e.rows);
            return 2 + k;
        }
        T* x = (T*)a.data;
        const T* y = (const T*)e.data;
        for (int64_t q = 0; q < a.rows * row_elems; ++q) x[q] = x[q] + y[q];
    }
    g->clear();
    return 0;
}

inline int array_clear(TensorArray* a) { a->clear(); return 0; }

// --- blocks that leave the segment (codegen/render.py) -----------------------------------
// The values a segment hands back whole (array_export here, lod_export and held_export in
// beam.h) are blocks made one after another as its output records are written, each
// through the one `Exports` the segment function owns. Should one not be made (out of
// memory), the function returns its error and the Exports frees the blocks made before it:
// the caller adopts a call's blocks only when it returns 0, so a failed call orphans none.
// `handed()`, the function's last statement, gives them up to the caller, which copies each
// and frees it with fl_array_release (the library that allocated it frees).
#ifdef FL_EXPORT_FAULTS
// Tests only (tests/codegen/test_export_faults.py builds a library with this defined):
// the Nth block made from now on fails as if memory ran out; the blocks alive are counted.
namespace export_faults {
inline int64_t fail_at = 0;
inline int64_t live = 0;
}  // namespace export_faults
#endif

inline void release_block(void* p) {
#ifdef FL_EXPORT_FAULTS
    if (p != nullptr) --export_faults::live;
#endif
    std::free(p);
}

class Exports {
  public:
    Exports(const Exports&) = delete;
    Exports& operator=(const Exports&) = delete;
    ~Exports() {
        for (int i = 0; i < n_; ++i) release_block(made_[i]);
    }
    // A block of `bytes` the caller will own once handed; nullptr when out of memory (a
    // size past int64, negative here, is too).
    void* alloc(int64_t bytes) {
        if (n_ == cap_ || bytes < 0) return nullptr;   // n_ == cap_ never: render.py sizes it
#ifdef FL_EXPORT_FAULTS
        if (export_faults::fail_at > 0 && --export_faults::fail_at == 0) return nullptr;
#endif
        void* p = std::malloc(bytes > 0 ? (size_t)bytes : 1);
        if (p == nullptr) return nullptr;
#ifdef FL_EXPORT_FAULTS
        ++export_faults::live;
#endif
        made_[n_++] = p;
        return p;
    }
    void handed() { n_ = 0; }

  protected:
    Exports(void** made, int cap) : made_(made), cap_(cap) {}

  private:
    void** made_;
    int cap_;
    int n_ = 0;
};

// The Exports of a segment that hands back N blocks (its slots on the function's stack).
template <int N>
class ExportsOf final : public Exports {
  public:
    ExportsOf() : Exports(slots_, N) {}

  private:
    void* slots_[N];
};

// The array as one block the caller owns: int64 n, int64 rows[n] (-1: never written), then
// the entries' bytes back to back. The caller copies it into a LoDTensorArray.
inline int array_export(const TensorArray* a, int64_t row_bytes, Exports* ex, int64_t* addr,
                        char* err, int k) {
    const int64_t n = a->size();
    int64_t bytes = (1 + n) * 8;
    for (const auto& e : a->el)
        if (e.rows > 0) bytes += e.rows * row_bytes;
    char* p = (char*)ex->alloc(bytes);
    if (p == nullptr) return fail(err, k, "out of memory handing a tensor array back");
    int64_t* head = (int64_t*)p;
    head[0] = n;
    char* q = p + (1 + n) * 8;
    for (int64_t j = 0; j < n; ++j) {
        const TensorArray::Elem& e = a->el[(size_t)j];
        head[1 + j] = e.rows;
        if (e.rows > 0) {
            std::memcpy(q, e.data, (size_t)(e.rows * row_bytes));
            q += e.rows * row_bytes;
        }
    }
    *addr = (int64_t)(intptr_t)p;
    return 0;
}

}  // namespace fl

// weak: one definition however many translation units include this header
extern "C" __attribute__((weak, visibility("default"))) void fl_array_release(void* p) {
    fl::release_block(p);
}

#ifdef FL_EXPORT_FAULTS
extern "C" __attribute__((weak, visibility("default"))) void fl_export_fail_at(int64_t n) {
    fl::export_faults::fail_at = n;
}

extern "C" __attribute__((weak, visibility("default"))) int64_t fl_export_live() {
    return fl::export_faults::live;
}
#endif

namespace fl {

// --- rank tables --------------------------------------------------------------------------
// table[0..n): original indices, longest first (stable); table[n..2n): the lengths.
inline void rank_table(const int64_t* lod, int64_t n, int64_t* table) {
    int64_t* idx = table;
    int64_t* len = table + n;
    for (int64_t j = 0; j < n; ++j) idx[j] = j;
    // a stable sort keeps equal lengths in order (numpy's stable argsort of -lengths)
    std::stable_sort(idx, idx + n, [lod](int64_t a, int64_t b) {
        return lod[a + 1] - lod[a] > lod[b + 1] - lod[b];
    });
    for (int64_t j = 0; j < n; ++j) len[j] = lod[idx[j] + 1] - lod[idx[j]];
}

// How many sequences have more than t steps (the batch at step t).
inline int64_t rank_longer_than(const int64_t* table, int64_t n, int64_t t) {
    const int64_t* len = table + n;
    int64_t lo = 0, hi = n;          // lengths descend: the first index with len <= t
    while (lo < hi) {
        const int64_t mid = lo + (hi - lo) / 2;
        if (len[mid] > t) lo = mid + 1; else hi = mid;
    }
    return lo;
}

// shrink_rnn_memory's rows: the first (sequences longer than i) rows of X's x_rows.
inline int shrink_rows(const int64_t* table, int64_t n, int64_t i, int64_t x_rows,
                       int64_t* rows, char* err, int k) {
    if (i < 0) return fail(err, k, "shrink_rnn_memory: array index I is negative");
    const int64_t c = rank_longer_than(table, n, i);
    *rows = c < x_rows ? c : x_rows;
    return 0;
}

// lod_tensor_to_array: entry t holds step t of every sequence longer than t, in rank order.
inline int lod_to_array(TensorArray* a, const int64_t* table, int64_t n, const int64_t* lod,
                        const char* x, int64_t row_bytes, char* err, int k) {
    a->clear();
    const int64_t steps = n > 0 ? table[n] : 0;
    for (int64_t t = 0; t < steps; ++t) {
        const int64_t b = rank_longer_than(table, n, t);
        char* p = nullptr;
        if (int rc = push_entry(a, b, row_bytes, &p, "lod_tensor_to_array: out of memory",
                                err, k))
            return rc;
        for (int64_t j = 0; j < b; ++j)
            std::memcpy(p + j * row_bytes, x + (lod[table[j]] + t) * row_bytes, (size_t)row_bytes);
    }
    return 0;
}

// array_to_lod_tensor: sequences back in their original order (out has lod's rows, zeros
// where an entry is missing, as the kernel leaves them).
inline int array_to_lod(const TensorArray* a, const int64_t* table, int64_t n,
                        const int64_t* lod, char* out, int64_t out_rows, int64_t row_bytes,
                        char* err, int k) {
    const int64_t steps = n > 0 ? table[n] : 0;
    if (out_rows > 0) std::memset(out, 0, (size_t)(out_rows * row_bytes));
    bool any = false;
    for (int64_t t = 0; t < steps && t < a->size(); ++t) {
        const TensorArray::Elem& e = a->el[(size_t)t];
        if (e.rows < 0) continue;
        any = true;
        const int64_t b = rank_longer_than(table, n, t);
        if (e.rows < b) {
            std::snprintf(err, 512, "array_to_lod_tensor: entry %lld of the array has %lld rows "
                          "for %lld sequences longer than %lld steps", (long long)t,
                          (long long)e.rows, (long long)b, (long long)t);
            return 2 + k;
        }
        for (int64_t j = 0; j < b; ++j)
            std::memcpy(out + (lod[table[j]] + t) * row_bytes, e.data + j * row_bytes,
                        (size_t)row_bytes);
    }
    if (!any) return fail(err, k, "array_to_lod_tensor: the array has no entries");
    return 0;
}

}  // namespace fl
