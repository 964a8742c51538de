/* A Hogwild worker's inner loop over one parsed MultiSlot chunk, without Python: per batch,
 * point the compiled step's slot inputs at the chunk's values (LoD rebased to the batch),
 * call the step (a compiled segment, fluidity/codegen: `int fl_seg_N(int64_t* args, char*
 * arena, int64_t cap, char* err)`), and fold each fetch target's batch mean into the
 * worker's report period; a full period (report_every batches) becomes one finished report.
 *
 * Called through ctypes, so it runs with the GIL released, and it touches nothing another
 * worker writes: its state (fl_worker_t) is the worker's own, allocated on cache lines of
 * its own by the caller; the parameters are read and updated in place by the step, without
 * locks, as Hogwild prescribes. It returns to Python (which takes the GIL) only when the
 * chunk is done, when `budget_ns` of wall time has passed (progress stays timely on heavy
 * models), when the report buffer is full, after each report if `return_on_report` (an
 * observer wants the ids of every report's batches), when the run's stop flag is set, or at
 * a batch the step refuses: status -1 (inputs of shapes the step was not built for: the
 * caller runs that batch interpreted), >= 2 (an op failed: its code, the message in err),
 * -2 (out of memory). Each call records its start and end (CLOCK_MONOTONIC): the worker's
 * busy intervals; and adds the thread's CPU time it took (CLOCK_THREAD_CPUTIME_ID), so
 * examples per worker CPU-second can be told apart from the cores the machine gave. Given
 * a batch log, each batch's wall and CPU times go to it too (benchmarks/async_sharing.py:
 * a batch whose wall time is its CPU time ran undisturbed; two workers' such batches that
 * overlap ran on two cores at once).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "segment_args.h"   /* the segment's argument records (fluidity/codegen/runtime) */

typedef int (*seg_fn)(int64_t *args, char *arena, int64_t cap, char *err);

/* Mirrored field by field by native_loop.py's _WorkerState (ctypes). */
typedef struct {
    /* the step, set once per worker */
    seg_fn fn;
    int64_t *args;             /* the step's tensor arguments: this worker's own copy */
    int64_t n_inputs;          /* the step's inputs: its outputs' records follow them */
    char *arena;               /* 64-byte aligned, grown when the step asks for more */
    int64_t cap;
    char *err;
    int64_t n_slots;
    const int64_t *in_idx;     /* per used slot: its input index in args, -1 if unread */
    int64_t batch;
    int64_t *lod_buf;          /* n_slots * (batch + 1) int64 of scratch */
    int64_t n_fetch;
    const int64_t *out_idx;    /* per fetch target: its output index */
    const int64_t *fetch_dtype;
    int64_t report_every;      /* batches per report */
    int64_t return_on_report;
    int64_t budget_ns;         /* return after this much wall time (0: never early) */
    const volatile int8_t *stop;   /* the run's stop flag: read, never written, here */
    int64_t *position;         /* this worker's row of the position board (own cache line) */
    /* the chunk, set per chunk */
    const int64_t *width;      /* per used slot: values per line (dense) or 0 (sparse) */
    const int64_t *esize;
    char *const *vals;
    const int64_t *offs;       /* [n_slots, stride] per-line value offsets */
    int64_t stride;
    const int64_t *line_of;    /* example -> line of the chunk (from 0) */
    int64_t line_base;         /* lines of the file before the chunk */
    int64_t *cursor;           /* the chunk's next unclaimed line: batches are claimed by an
                                  atomic add, so a worker with no file left can help finish
                                  another's chunk (on its own cache line; uncontended unless
                                  two workers share the chunk at a run's end) */
    /* the open report period and the worker's totals */
    int64_t period_batches, period_examples;
    double *period_sums;       /* [n_fetch]: sum over the period of batch mean * lines */
    double *total_sums;        /* [n_fetch] */
    int64_t total_batches, total_examples;
    /* finished reports, read and emptied by the caller */
    int64_t n_reports, cap_reports;
    int64_t *rep_counts;       /* [cap_reports, 2]: batches, examples */
    double *rep_means;         /* [cap_reports, n_fetch] */
    /* the last call */
    int64_t status;
    int64_t calls;
    int64_t t_start, t_end;    /* CLOCK_MONOTONIC ns */
    int64_t cpu_ns;            /* this thread's CPU time in the calls, summed */
    /* an optional log of each batch's (wall start, wall end, CPU start, CPU end) in ns
       (CLOCK_MONOTONIC, CLOCK_THREAD_CPUTIME_ID): NULL (the default) logs nothing */
    int64_t *batch_log;
    int64_t batch_log_cap, batch_log_n;
} fl_worker_t;

static int64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static int64_t thread_cpu_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static int grow(fl_worker_t *w, int64_t need) {
    void *q = NULL;
    if (need < 64) need = 64;
    if (posix_memalign(&q, 64, (size_t)need) != 0) return 0;
    free(w->arena);
    w->arena = (char *)q;
    w->cap = need;
    return 1;
}

void fl_worker_free(fl_worker_t *w) {
    free(w->arena);
    w->arena = NULL;
    w->cap = 0;
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

/* Close the open period into the next finished report. */
static void finish_report(fl_worker_t *w) {
    int64_t r = w->n_reports++;
    double *m = w->rep_means + r * w->n_fetch;
    const double ex = w->period_examples > 0 ? (double)w->period_examples : 1.0;
    w->rep_counts[2 * r] = w->period_batches;
    w->rep_counts[2 * r + 1] = w->period_examples;
    for (int64_t f = 0; f < w->n_fetch; ++f) {
        m[f] = w->period_sums[f] / ex;
        w->period_sums[f] = 0.0;
    }
    w->period_batches = w->period_examples = 0;
}

/* The open period as a report, if it holds a batch (the worker's last, at its end). */
void fl_worker_flush(fl_worker_t *w) {
    if (w->period_batches && w->n_reports < w->cap_reports) finish_report(w);
}

/* Batches of `batch` lines of the bound chunk, each claimed from the chunk's cursor (lines
 * from the cursor's value up to `last`, the chunk's line count; the last batch may be short), until none is left or
 * a reason to return. Returns the line of the batch it stopped at when w->status says one
 * failed (that batch is this caller's: -1 asks it to run the batch interpreted), else
 * `last` when the chunk has no batch left, or the cursor's value after an early return
 * (nothing wrong). Batches start at multiples of `batch` from the chunk's first line, so
 * they are the same whichever workers claim them. */
int64_t fl_worker_run(fl_worker_t *w, int64_t last) {
    const int64_t t0 = now_ns(), c0 = thread_cpu_ns(), batch = w->batch;
    int64_t a, ret = last;
    w->status = 0;
    w->t_start = t0;
    w->calls++;
    for (;;) {
        if (*w->stop || w->n_reports >= w->cap_reports) {
            ret = __atomic_load_n(w->cursor, __ATOMIC_RELAXED);
            break;
        }
        a = __atomic_fetch_add(w->cursor, batch, __ATOMIC_RELAXED);
        if (a >= last) {
            ret = last;
            break;
        }
        const int64_t b = a + batch < last ? a + batch : last, n = b - a;
        w->position[1] = w->line_base + w->line_of[a] + 1;
        w->position[2] = w->line_base + w->line_of[b - 1] + 1;
        for (int64_t s = 0; s < w->n_slots; ++s) {
            if (w->in_idx[s] < 0) continue;
            fl_tensor_arg *in = fl_inputs(w->args) + w->in_idx[s];
            const int64_t *o = w->offs + s * w->stride;
            const int64_t v0 = o[a], v1 = o[b];
            in->data = (int64_t)(intptr_t)(w->vals[s] + v0 * w->esize[s]);
            in->ndim = 2;
            if (w->width[s]) {
                in->dims[0] = n;
                in->dims[1] = w->width[s];
            } else {
                int64_t *lod = w->lod_buf + s * (batch + 1);
                for (int64_t i = 0; i <= n; ++i) lod[i] = o[a + i] - v0;
                in->dims[0] = v1 - v0;
                in->dims[1] = 1;
                in->aux = (int64_t)(intptr_t)lod;
                in->aux_len = n + 1;
            }
        }
        int rc;
        int64_t *log = w->batch_log && w->batch_log_n < w->batch_log_cap ?
            w->batch_log + 4 * w->batch_log_n++ : NULL;
        if (log) {
            log[2] = thread_cpu_ns();
            log[0] = now_ns();
        }
        while ((rc = w->fn(w->args, w->arena, w->cap, w->err)) == 1)
            if (!grow(w, w->args[FL_ARG_NEED])) {
                rc = -2;
                break;
            }
        if (log) {
            log[1] = now_ns();
            log[3] = thread_cpu_ns();
        }
        if (rc != 0) {
            w->status = rc;
            ret = a;
            break;
        }
        for (int64_t f = 0; f < w->n_fetch; ++f) {
            const fl_tensor_arg *out = fl_outputs(w->args, w->n_inputs) + w->out_idx[f];
            int64_t numel = 1;
            for (int64_t d = 0; d < out->ndim; ++d) numel *= out->dims[d];
            const double m = out->data >= 0 ? mean_of(w->arena + out->data, numel,
                                                      (int)w->fetch_dtype[f]) : 0.0;
            w->period_sums[f] += m * (double)n;
            w->total_sums[f] += m * (double)n;
        }
        w->period_batches++;
        w->period_examples += n;
        w->total_batches++;
        w->total_examples += n;
        int early = 0;
        if (w->period_batches >= w->report_every) {
            finish_report(w);
            early = (int)w->return_on_report;
        }
        if (early || (w->budget_ns > 0 && now_ns() - t0 >= w->budget_ns)) {
            ret = __atomic_load_n(w->cursor, __ATOMIC_RELAXED);
            break;
        }
    }
    w->t_end = now_ns();
    w->cpu_ns += thread_cpu_ns() - c0;
    return ret < last ? ret : last;
}
