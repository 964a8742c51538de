/* A Hogwild worker's private copies of the hottest rows of a shared embedding table
 * (HogWild++-like delayed updates of hot rows; issue 27).
 *
 * Under Hogwild two worker threads that update the same rows of a table pay for every row
 * the other core just wrote (its cache lines move back and forth). With skip-gram's
 * negatives drawn from unigram^0.75, the few hundred most written rows of the output table
 * take half of its writes: a batch trained beside a second thread cost 1.35-1.78x the CPU
 * of a lone batch, and private tables took all of that away (benchmarks/RESULTS.md).
 *
 * So a worker (executor/native_loop.c) keeps, per qualifying table, copies of its K most
 * written rows: the step's lookups (`fl::lookup_rows`) read and its fused sparse sgd
 * (`fl::lookup_grad_sgd`) writes the copy for those ids, the shared row for the rest. The
 * K ids are counted from the worker's first `warmup` batches (writes of ids, in a table of
 * `cap` slots: O(K) memory whatever the table's height). Every `sync_every` batches the
 * worker adds what it changed (copy - snapshot) to each shared row and takes a fresh copy
 * (Hogwild-style: plain adds, no lock); the run's end does the same (nothing is lost). A
 * worker's updates of a hot row thus reach the other workers at most `sync_every` of its
 * batches late, and it sees theirs at most that late.
 *
 * The worker binds its set to its thread for the duration of each loop call (the step
 * library's exported `fl_hot_bind`); kernels match a table by its data address. Nothing is
 * bound outside a worker's loop call, and a run of one worker binds nothing: there the
 * kernels run exactly as before.
 *
 * Plain C, included by the C worker loop and by the C++ kernels (sparse.h).
 */
#ifndef FLUIDITY_HOT_ROWS_H
#define FLUIDITY_HOT_ROWS_H
#include <stdint.h>

/* COUNTING: ids' writes counted; KEPT: copies in use; OFF: the hottest rows took too small a
 * share of the writes counted for copies to pay (min_share): the table stays shared. */
enum { FL_HOT_COUNTING = 0, FL_HOT_KEPT = 1, FL_HOT_OFF = 2 };

typedef struct fl_hot_table {
    float *table;        /* the shared table's data (what kernels match W against) */
    int64_t width;       /* floats a row */
    int64_t k_max;       /* rows to keep */
    int64_t k;           /* rows kept: ids[0..k) (0 while counting) */
    int64_t cap;         /* slots of key / val (the count table), a power of two */
    int64_t shift;       /* 64 - log2(cap): the count table's hash */
    int64_t *key;        /* [cap] an id, or -1 */
    int64_t *val;        /* [cap] the id's writes counted */
    int64_t mcap;        /* slots of map, a power of two >= 2 * k_max */
    int64_t mshift;      /* 64 - log2(mcap) */
    int64_t *map;        /* [mcap] the id kept in each slot, or -1 (direct-mapped: an id
                            is kept in its home slot or not at all) */
    int64_t *ids;        /* [k_max] */
    float *copy;         /* [mcap, width] the worker's rows, by slot */
    float *snap;         /* [mcap, width] the shared rows as last copied */
    int64_t phase;       /* FL_HOT_COUNTING or FL_HOT_KEPT */
    int64_t warmup;      /* batches counted before the ids are chosen */
    int64_t sync_every;  /* batches between merges */
    int64_t batches;     /* batches since counting began / since the last merge */
    int64_t distinct;    /* ids in the count table (counting stops adding at cap / 2) */
    int64_t merges;      /* merges done (statistics) */
    int64_t counted;     /* writes counted (all ids, counted or not) */
    int64_t kept_writes; /* of them, writes of the ids chosen */
    double min_share;    /* keep copies only if kept_writes >= min_share * counted */
} fl_hot_table;

typedef struct fl_hot_set {
    int64_t n;
    fl_hot_table *t;
} fl_hot_set;

static inline uint64_t fl_hot_hash(int64_t id, int64_t shift) {
    return ((uint64_t)id * 0x9E3779B97F4A7C15ULL) >> shift;
}

/* Where row `id` of the table at `base` is read and written: the worker's copy when the id
 * is kept, else the shared row. The map is direct-mapped (an id is kept only in its home
 * slot, its copy at that slot: hot_choose skips an id whose slot is taken), so this is one
 * load of a small map and a select, no loop and no branch to mispredict (half the ids of a
 * batch may be kept, half not: a probing loop's branches, and a map of (id, row) pairs too
 * large for L1, cost more than the sharing the copies save). */
static inline float *fl_hot_dest(const fl_hot_table *h, float *base, int64_t id) {
    const uint64_t s = fl_hot_hash(id, h->mshift);
    const uintptr_t kept = (uintptr_t)(h->copy + (int64_t)s * h->width);
    const uintptr_t shared = (uintptr_t)(base + id * h->width);
    /* a mask, not `?:`: compilers turn the select into a branch (measured: mispredicted
     * for half the ids, it cost more than the copies saved) */
    const uintptr_t hit = (uintptr_t)0 - (uintptr_t)(h->map[s] == id);
    return (float *)(shared ^ ((kept ^ shared) & hit));
}

/* Count a write of row `id` (counting phase); a new id once the table is half full is
 * not counted (the hottest ids come early under a skewed distribution). */
static inline void fl_hot_count(fl_hot_table *h, int64_t id) {
    uint64_t s = fl_hot_hash(id, h->shift);
    h->counted++;
    const uint64_t mask = (uint64_t)h->cap - 1;
    for (;;) {
        const int64_t k = h->key[s];
        if (k == id) {
            h->val[s]++;
            return;
        }
        if (k < 0) {
            if (2 * h->distinct >= h->cap) return;
            h->key[s] = id;
            h->val[s] = 1;
            h->distinct++;
            return;
        }
        s = (s + 1) & mask;
    }
}

#endif
