/* A Hogwild worker's inner loop over one parsed MultiSlot chunk, without Python: per batch,
 * point the compiled step's slot inputs at the chunk's values (LoD rebased to the batch),
 * call the step (a compiled segment, fluidity/codegen: `int fl_seg_N(int64_t* args, char*
 * arena, int64_t cap, char* err)`), and add each fetch target's batch mean to `sums`.
 *
 * Called through ctypes, so the whole chunk runs with the GIL released. Returns the number
 * of batches done; it stops early at a batch the step refuses: *status is then -1 (inputs of
 * shapes the step was not built for: the caller runs that batch interpreted), >= 2 (an op
 * failed: its code, the message in err) or -2 (out of memory). *status 0: all done.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "segment_args.h"   /* the segment's argument records (fluidity/codegen/runtime) */

typedef int (*seg_fn)(int64_t *args, char *arena, int64_t cap, char *err);

/* The arena: 64-byte aligned, grown when the step asks for more. */
typedef struct {
    char *p;
    int64_t cap;
} arena_t;

static int grow(arena_t *a, int64_t need) {
    void *q = NULL;
    if (need < 64) need = 64;
    if (posix_memalign(&q, 64, (size_t)need) != 0) return 0;
    free(a->p);
    a->p = (char *)q;
    a->cap = need;
    return 1;
}

void fl_arena_free(arena_t *a) {
    free(a->p);
    a->p = NULL;
    a->cap = 0;
}

/* mean of n values of a fetch output of dtype code (5 float32, 6 float64, 3 int64, 2 int32) */
static double mean_of(const char *p, int64_t n, int dtype) {
    double s = 0;
    for (int64_t i = 0; i < n; ++i) {
        switch (dtype) {
            case 5: s += ((const float *)p)[i]; break;
            case 6: s += ((const double *)p)[i]; break;
            case 3: s += (double)((const int64_t *)p)[i]; break;
            default: s += (double)((const int32_t *)p)[i]; break;
        }
    }
    return n ? s / (double)n : 0.0;
}

/*
 * slots: n_slots feed slots; for slot s: in_idx[s] its input index in args (-1: unused by
 * the step), width[s] its values per line for a dense slot (0: sparse, fed [ids, 1] with the
 * batch's LoD), esize[s] bytes per value, vals[s] the chunk's values, offs[s * stride + line]
 * the chunk's per-line offsets. lod_buf: scratch of n_slots * (batch + 1) int64.
 * Batches of `batch` lines from line `first` to `last` (the last may be short).
 * fetch: n_fetch outputs (out_idx into the step's outputs, dtype codes); sums[k * n_fetch + f]
 * gets batch k's mean, lines[k] its number of lines.
 */
int64_t fl_worker_chunk(seg_fn fn, int64_t *args, int64_t n_inputs, arena_t *arena, char *err,
                        int n_slots, const int64_t *in_idx, const int64_t *width,
                        const int64_t *esize, char **vals, const int64_t *offs, int64_t stride,
                        int64_t first, int64_t last, int64_t batch, int64_t *lod_buf,
                        int n_fetch, const int64_t *out_idx, const int64_t *fetch_dtype,
                        double *sums, int64_t *lines, int64_t *status) {
    int64_t k = 0;
    *status = 0;
    for (int64_t a = first; a < last; a += batch, ++k) {
        const int64_t b = a + batch < last ? a + batch : last, n = b - a;
        for (int s = 0; s < n_slots; ++s) {
            if (in_idx[s] < 0) continue;
            fl_tensor_arg *in = fl_inputs(args) + in_idx[s];
            const int64_t *o = offs + s * stride;
            const int64_t v0 = o[a], v1 = o[b];
            in->data = (int64_t)(intptr_t)(vals[s] + v0 * esize[s]);
            in->ndim = 2;
            if (width[s]) {
                in->dims[0] = n;
                in->dims[1] = width[s];
            } else {
                int64_t *lod = lod_buf + s * (batch + 1);
                for (int64_t i = 0; i <= n; ++i) lod[i] = o[a + i] - v0;
                in->dims[0] = v1 - v0;
                in->dims[1] = 1;
                in->aux = (int64_t)(intptr_t)lod;
                in->aux_len = n + 1;
            }
        }
        int rc;
        while ((rc = fn(args, arena->p, arena->cap, err)) == 1)
            if (!grow(arena, args[FL_ARG_NEED])) {
                *status = -2;
                return k;
            }
        if (rc != 0) {
            *status = rc;
            return k;
        }
        for (int f = 0; f < n_fetch; ++f) {
            const fl_tensor_arg *out = fl_outputs(args, n_inputs) + out_idx[f];
            int64_t numel = 1;
            for (int64_t d = 0; d < out->ndim; ++d) numel *= out->dims[d];
            sums[k * n_fetch + f] = out->data >= 0 ?
                mean_of(arena->p + out->data, numel, (int)fetch_dtype[f]) : 0.0;
        }
        lines[k] = n;
    }
    return k;
}
