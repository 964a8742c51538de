/* The per-run half of a prepared compiled run (executor/direct.py), in one call from
   Python: each fed array's address, rank and dims into its input record of the segment's
   arguments, then the segment called with the GIL released.

   Called through ctypes.PYFUNCTYPE (the GIL held on entry, as the Python objects need).
   `arrays` is a list of the fed values, which direct.py has checked (C-contiguous ndarrays
   of the compiled dtype); `call` is one thread's call block:

     call[0] the segment function      call[5] n, the length of `arrays`
     call[1] its args vector           call[6..9] the record layout (codegen/abi.py):
     call[2] its arena                            DATA, NDIM, DIMS slots, MAX_DIMS
     call[3] the arena's capacity      call[10 + i] the int64 slot of array i's record in
     call[4] its error buffer                       the args vector, or -1: not read

   Returns the segment's return code, or FL_NOT_PACKED - i when array i exports no
   C-contiguous buffer of at most MAX_DIMS dims (nothing was called: Python takes the full
   path). */
#include <Python.h>
#include <stdint.h>
/* ndarray's struct and its accessors only (no numpy C-API table, no import_array): a fed
   array's type, dtype, flags, rank, dims and data are read in a few loads */
#define NPY_NO_DEPRECATED_API NPY_1_7_API_VERSION
#include <numpy/ndarraytypes.h>

#define FL_NOT_PACKED (-100)

typedef int (*fl_segment)(int64_t*, char*, int64_t, char*);

#include <time.h>

/* The last segment call's wall time on this thread, in ns (benchmarks/compiled.py reads it
   through fl_last_native_ns to tell the native call from the rest of a run). */
static _Thread_local int64_t last_ns;

int64_t fl_last_native_ns(void) { return last_ns; }

static int timed_call(fl_segment fn, int64_t* args, char* arena, int64_t cap, char* err) {
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    PyThreadState* ts = PyEval_SaveThread();
    const int rc = fn(args, arena, cap, err);
    PyEval_RestoreThread(ts);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    last_ns = (int64_t)(t1.tv_sec - t0.tv_sec) * 1000000000 + (t1.tv_nsec - t0.tv_nsec);
    return rc;
}

enum { FN, ARGS, ARENA, CAP, ERR, N, DATA, NDIM, DIMS, MAX_DIMS, RECS };

int fl_direct_call(PyObject* arrays, const int64_t* call) {
    const int64_t n = call[N];
    int64_t* const args = (int64_t*)(intptr_t)call[ARGS];
    if (!PyList_Check(arrays) || PyList_GET_SIZE(arrays) != n) return FL_NOT_PACKED;
    for (int64_t i = 0; i < n; ++i) {
        const int64_t at = call[RECS + i];
        if (at < 0) continue;
        Py_buffer v;
        if (PyObject_GetBuffer(PyList_GET_ITEM(arrays, i), &v, PyBUF_C_CONTIGUOUS) != 0) {
            PyErr_Clear();
            return (int)(FL_NOT_PACKED - i);
        }
        if (v.ndim > call[MAX_DIMS]) {
            PyBuffer_Release(&v);
            return (int)(FL_NOT_PACKED - i);
        }
        int64_t* const rec = args + at;
        rec[call[DATA]] = (int64_t)(intptr_t)v.buf;
        rec[call[NDIM]] = v.ndim;
        for (int d = 0; d < v.ndim; ++d) rec[call[DIMS] + d] = (int64_t)v.shape[d];
        PyBuffer_Release(&v);   /* the list keeps the array (and its memory) alive */
    }
    return timed_call((fl_segment)(intptr_t)call[FN], args, (char*)(intptr_t)call[ARENA],
                      call[CAP], (char*)(intptr_t)call[ERR]);
}

/* ---- the whole run in C: `fl_direct_runner(ctx)` makes a Python builtin `run(feed)` -------
   direct.py makes one runner per thread and prepared signature once a run went the Python
   way; a later `exe.run` of that signature calls it straight from Executor.run, so a run is
   one call of a C function (the per-run Python that remains is Executor.run's signature
   lookup). Per run it

     - takes each fed value out of the caller's dict by name, and accepts it only as the
       Python fast check does: exactly an ndarray, C-contiguous, of the compiled dtype (the
       same dtype object), of the shape last accepted by the full check (in the block);
     - checks that each parameter's Variable still holds the array its record points to;
     - leaves the feed and fetch holders as direct.py's Python does (a wrapper a column);
     - writes the fed arrays' records and calls the segment without the GIL;
     - copies each fetch out of the arena by the bound `copy` of the view direct.py made,
       when the output's record head is the one that view was made for.

   Any check that fails before the call returns FL_NOT_PACKED (nothing ran: direct.py takes
   its Python way, which says what is wrong); a segment's non-zero code is returned as it is;
   0 means the segment ran but a fetch needs Python. Otherwise the fetched arrays (a list).

   ctx: a tuple (block address, fed names, fed dtypes (a list), ndarray type, LoDTensor type,
   params ((Variable, input j), ...), seen (the state's list of arrays per input), feed
   holder, feed wrappers, fetch holder, fetch wrappers, copiers (a view's copy per fetch, or
   None), the segment input j of each fed name (or None), the state's shapes per input, the
   state itself (its `arena_ptr` and `cap`, read per run: any run may have grown the arena),
   the feed holder's column of each fed name, the fetch holder's column of each fetch). The
   block (int64, direct.py's RUNNER_* layout; R_VIEW_ARENA: the arena the copiers' views are
   of): */
enum { R_FN, R_ARGS, R_VIEW_ARENA, R_ERR, R_NFEED, R_NFETCH, R_DATA, R_NDIM, R_DIMS,
       R_MAXD, R_HEAD };
enum { C_BLOCK, C_NAMES, C_DTYPES, C_NDARRAY, C_LODTENSOR, C_PARAMS, C_SEEN, C_FEED_HOLDER,
       C_FEED_WRAPS, C_FETCH_HOLDER, C_FETCH_WRAPS, C_COPIERS, C_JS, C_SHAPES, C_STATE, C_FEED_COLS,
       C_FETCH_COLS, C_LEN };

#include <string.h>

/* attribute names, interned once (intern_names) */
static PyObject *s_value, *s_array, *s_arena_ptr, *s_cap;             /* the runner's */
static PyObject *s_runner, *s_revision, *s_setup_revision, *s_parent; /* the hot call's */

static int intern_names(void) {
    if (s_parent != NULL) return 0;
    static const char* const names[] = {"value", "_array", "arena_ptr", "cap", "runner",
                                        "revision", "setup_revision", "parent"};
    PyObject** const slots[] = {&s_value, &s_array, &s_arena_ptr, &s_cap, &s_runner,
                                &s_revision, &s_setup_revision, &s_parent};
    for (int i = 0; i < 8; ++i)
        if (*slots[i] == NULL && (*slots[i] = PyUnicode_InternFromString(names[i])) == NULL)
            return -1;
    return 0;
}

/* `holder.value` (a new reference) when it is a list with an item at each of `cols`, as a
   run leaves it; NULL otherwise (no holder: None). */
static PyObject* holder_list(PyObject* holder, PyObject* cols, int* ok) {
    *ok = 1;
    if (holder == Py_None) return NULL;
    PyObject* list = PyObject_GetAttr(holder, s_value);
    if (list == NULL) { PyErr_Clear(); *ok = 0; return NULL; }
    int good = PyList_CheckExact(list);
    for (Py_ssize_t k = 0; good && k < PyTuple_GET_SIZE(cols); ++k) {
        const Py_ssize_t c = PyLong_AsSsize_t(PyTuple_GET_ITEM(cols, k));
        good = c >= 0 && c < PyList_GET_SIZE(list);
    }
    if (!good) { Py_DECREF(list); *ok = 0; return NULL; }
    return list;
}

/* Column cols[k] of the holder's `list` holds arrays[k] for every k, as direct.py's Python
   does it: the column's wrapper (wraps[col], a LoDTensor) refilled when the column still
   holds it, else a new wrapper put in both. */
static int hold(PyObject* list, PyObject* wraps, PyObject* cols, PyObject* lodtensor,
                PyObject* const* arrays) {
    if (list == NULL) return 0;
    for (Py_ssize_t k = 0; k < PyTuple_GET_SIZE(cols); ++k) {
        const Py_ssize_t c = PyLong_AsSsize_t(PyTuple_GET_ITEM(cols, k));
        PyObject* w = PyList_GET_ITEM(wraps, c);
        if (w != Py_None && PyList_GET_ITEM(list, c) == w) {
            if (PyObject_SetAttr(w, s_array, arrays[k]) != 0) return -1;
            continue;
        }
        w = PyObject_CallOneArg(lodtensor, arrays[k]);
        if (w == NULL) return -1;
        Py_INCREF(w);
        PyList_SetItem(wraps, c, w);
        PyList_SetItem(list, c, w);
    }
    return 0;
}

/* The int64 value of attribute `name` of `obj`, or -1 (an error cleared). */
static int64_t int_attr(PyObject* obj, PyObject* name) {
    PyObject* v = PyObject_GetAttr(obj, name);
    if (v == NULL) { PyErr_Clear(); return -1; }
    const int64_t r = PyLong_Check(v) ? (int64_t)PyLong_AsLongLong(v) : -1;
    Py_DECREF(v);
    if (PyErr_Occurred()) { PyErr_Clear(); return -1; }
    return r;
}

#define FL_MAX_FEEDS 64

static PyObject* fl_direct_run(PyObject* ctx, PyObject* feed) {
    int64_t* const b = (int64_t*)PyLong_AsVoidPtr(PyTuple_GET_ITEM(ctx, C_BLOCK));
    PyObject* const names = PyTuple_GET_ITEM(ctx, C_NAMES);
    PyObject* const dtypes = PyTuple_GET_ITEM(ctx, C_DTYPES);
    PyObject* const seen = PyTuple_GET_ITEM(ctx, C_SEEN);
    const int64_t nfeed = b[R_NFEED], nfetch = b[R_NFETCH], maxd = b[R_MAXD];
    const int64_t feed_stride = 2 + maxd, fetch_stride = 3 + maxd;
    int64_t* const feeds = b + R_HEAD;
    int64_t* const fetches = feeds + nfeed * feed_stride;
    int64_t* const args = (int64_t*)(intptr_t)b[R_ARGS];
    PyObject* values[FL_MAX_FEEDS];
    void* bufs[FL_MAX_FEEDS];
    if (!PyDict_CheckExact(feed) || PyDict_GET_SIZE(feed) != nfeed || nfeed > FL_MAX_FEEDS)
        return PyLong_FromLong(FL_NOT_PACKED);
    /* the fed values: exactly ndarrays of the accepted format and shape, C-contiguous */
    for (int64_t i = 0; i < nfeed; ++i) {
        PyObject* v = PyDict_GetItemWithError(feed, PyTuple_GET_ITEM(names, i));
        if (v == NULL) { PyErr_Clear(); return PyLong_FromLong(FL_NOT_PACKED); }
        if ((PyObject*)Py_TYPE(v) != PyTuple_GET_ITEM(ctx, C_NDARRAY))
            return PyLong_FromLong(FL_NOT_PACKED);
        values[i] = v;
    }
    for (int64_t i = 0; i < nfeed; ++i) {
        const int64_t* f = feeds + i * feed_stride;   /* rec slot, accepted ndim, dims */
        PyArrayObject* a = (PyArrayObject*)values[i];
        int ok = (PyObject*)PyArray_DESCR(a) == PyList_GET_ITEM(dtypes, i) &&
                 (PyArray_FLAGS(a) & NPY_ARRAY_C_CONTIGUOUS) && PyArray_NDIM(a) == f[1];
        for (int d = 0; ok && d < PyArray_NDIM(a); ++d) ok = PyArray_DIMS(a)[d] == f[2 + d];
        if (!ok) return PyLong_FromLong(FL_NOT_PACKED);
        bufs[i] = PyArray_DATA(a);
    }
    /* the parameters: each Variable still holds the LoDTensor of the array its record has */
    PyObject* const params = PyTuple_GET_ITEM(ctx, C_PARAMS);
    for (Py_ssize_t k = 0; k < PyTuple_GET_SIZE(params); ++k) {
        PyObject* p = PyTuple_GET_ITEM(params, k);
        PyObject* t = PyObject_GetAttr(PyTuple_GET_ITEM(p, 0), s_value);
        if (t == NULL) { PyErr_Clear(); return PyLong_FromLong(FL_NOT_PACKED); }
        int ok = (PyObject*)Py_TYPE(t) == PyTuple_GET_ITEM(ctx, C_LODTENSOR);
        if (ok) {
            PyObject* a = PyObject_GetAttr(t, s_array);
            if (a == NULL) PyErr_Clear();
            ok = a != NULL && a == PyList_GET_ITEM(seen, PyLong_AsSsize_t(PyTuple_GET_ITEM(p, 1)));
            Py_XDECREF(a);
        }
        Py_DECREF(t);
        if (!ok) return PyLong_FromLong(FL_NOT_PACKED);
    }
    PyObject* const st = PyTuple_GET_ITEM(ctx, C_STATE);
    const int64_t arena = int_attr(st, s_arena_ptr), cap = int_attr(st, s_cap);
    if (arena <= 0 || cap < 0) return PyLong_FromLong(FL_NOT_PACKED);
    int ok_fed, ok_held;
    PyObject* fed = holder_list(PyTuple_GET_ITEM(ctx, C_FEED_HOLDER),
                                PyTuple_GET_ITEM(ctx, C_FEED_COLS), &ok_fed);
    PyObject* held = holder_list(PyTuple_GET_ITEM(ctx, C_FETCH_HOLDER),
                                 PyTuple_GET_ITEM(ctx, C_FETCH_COLS), &ok_held);
    if (!ok_fed || !ok_held) {
        Py_XDECREF(fed);
        Py_XDECREF(held);
        return PyLong_FromLong(FL_NOT_PACKED);
    }
    PyObject* out = NULL;
    /* every check passed: the records take the fed arrays (of the accepted shapes), and
       the Python packing's cache says so (the array; its shape unknown: written whole) */
    PyObject* const js = PyTuple_GET_ITEM(ctx, C_JS);
    PyObject* const shapes = PyTuple_GET_ITEM(ctx, C_SHAPES);
    for (int64_t i = 0; i < nfeed; ++i) {
        const int64_t* f = feeds + i * feed_stride;
        PyObject* jo = PyTuple_GET_ITEM(js, i);
        if (f[0] < 0 || jo == Py_None) continue;
        int64_t* const rec = args + f[0];
        rec[b[R_DATA]] = (int64_t)(intptr_t)bufs[i];
        rec[b[R_NDIM]] = f[1];
        for (int64_t d = 0; d < f[1]; ++d) rec[b[R_DIMS] + d] = f[2 + d];
        const Py_ssize_t j = PyLong_AsSsize_t(jo);
        Py_INCREF(values[i]);
        PyList_SetItem(seen, j, values[i]);
        Py_INCREF(Py_None);
        PyList_SetItem(shapes, j, Py_None);
    }
    const int rc = timed_call((fl_segment)(intptr_t)b[R_FN], args, (char*)(intptr_t)arena, cap,
                              (char*)(intptr_t)b[R_ERR]);
    PyObject* const copiers = PyTuple_GET_ITEM(ctx, C_COPIERS);
    PyObject* const lodtensor = PyTuple_GET_ITEM(ctx, C_LODTENSOR);
    int fetch_ok = rc == 0 && b[R_VIEW_ARENA] == arena;
    /* the fetches: each output's record head as when its view (of this arena) was made */
    for (int64_t k = 0; fetch_ok && k < nfetch; ++k) {
        const int64_t* f = fetches + k * fetch_stride;   /* rec slot, data, ndim, dims */
        const int64_t* rec = args + f[0];
        fetch_ok = PyList_GET_ITEM(copiers, k) != Py_None && rec[b[R_DATA]] == f[1] &&
                   rec[b[R_NDIM]] == f[2];
        for (int64_t d = 0; fetch_ok && d < f[2]; ++d) fetch_ok = rec[b[R_DIMS] + d] == f[3 + d];
    }
    if (!fetch_ok) {            /* an error, or a fetch Python makes: the code for direct.py */
        out = PyLong_FromLong(rc);
        goto done;
    }
    out = PyList_New(nfetch);
    if (out == NULL) goto done;
    for (int64_t k = 0; k < nfetch; ++k) {
        PyObject* a = PyObject_CallNoArgs(PyList_GET_ITEM(copiers, k));
        if (a == NULL) { Py_CLEAR(out); goto done; }
        PyList_SET_ITEM(out, k, a);
    }
    if (hold(fed, PyTuple_GET_ITEM(ctx, C_FEED_WRAPS), PyTuple_GET_ITEM(ctx, C_FEED_COLS),
             lodtensor, values) != 0 ||
        hold(held, PyTuple_GET_ITEM(ctx, C_FETCH_WRAPS), PyTuple_GET_ITEM(ctx, C_FETCH_COLS),
             lodtensor, ((PyListObject*)out)->ob_item) != 0)
        Py_CLEAR(out);
done:
    Py_XDECREF(fed);
    Py_XDECREF(held);
    return out;
}

static PyMethodDef fl_run_def = {"run", (PyCFunction)fl_direct_run, METH_O,
                                 "One prepared compiled run (executor/direct.py)."};

PyObject* fl_direct_runner(PyObject* ctx) {
    if (intern_names() != 0) return NULL;
    if (!PyTuple_CheckExact(ctx) || PyTuple_GET_SIZE(ctx) != C_LEN) {
        PyErr_SetString(PyExc_ValueError, "fl_direct_runner: a bad context");
        return NULL;
    }
    return PyCFunction_New(&fl_run_def, ctx);
}

/* ---- the signature check in C: `fl_direct_hot(hctx)` makes a builtin
   `hot(program, feed, fetch_list, scope, block_id, return_numpy, feed_var_name,
   fetch_var_name)` -----------------------------------------------------------------------
   Executor.run keeps one for the signature it last ran through a prepared run and calls it
   first: it checks, as Executor._lookup_direct and FullPath.valid_for do in Python, that the
   run's arguments are that signature's (the same program and scope objects, the fed names
   in the same order, the same fetched objects, the same block, holders and return_numpy)
   and that the program, its setup and the scope chain are at the revisions the run was
   prepared at, then calls this thread's runner. Returns None when the call is not that
   signature or no longer valid (nothing ran), FL_NOT_PACKED when it is but this thread has
   no runner yet (nothing ran: direct.py's Python way takes it), else what the runner
   returns (the fetched list, or a code for direct.py).

   hctx: (the DirectRun's per-thread object (its `runner`), a weak reference to the program,
   one to the scope, the fed names, the fetched objects, block_id, return_numpy (a bool),
   feed_var_name, fetch_var_name, the program's view, the view's revision, the program's
   setup revision (None without one), the scope chain's revisions (a tuple)). */
enum { H_TLS, H_PROGRAM, H_SCOPE, H_NAMES, H_FETCH, H_BLOCK, H_NUMPY, H_FEED_VAR, H_FETCH_VAR,
       H_VIEW, H_REVISION, H_SETUP, H_CHAIN, H_LEN };


/* Whether attribute `name` of `obj` equals `want` (a missing attribute reads as None). */
static int attr_is(PyObject* obj, PyObject* name, PyObject* want) {
    PyObject* v = PyObject_GetAttr(obj, name);
    if (v == NULL) {
        if (!PyErr_ExceptionMatches(PyExc_AttributeError)) { PyErr_Clear(); return 0; }
        PyErr_Clear();
        v = Py_NewRef(Py_None);
    }
    const int same = v == want || PyObject_RichCompareBool(v, want, Py_EQ) == 1;
    if (PyErr_Occurred()) PyErr_Clear();
    Py_DECREF(v);
    return same;
}

static int same_signature(PyObject* h, PyObject* const* a) {
    PyObject *program = a[0], *feed = a[1], *fetch_list = a[2], *scope = a[3];
    if (PyWeakref_GetObject(PyTuple_GET_ITEM(h, H_PROGRAM)) != program ||
        PyWeakref_GetObject(PyTuple_GET_ITEM(h, H_SCOPE)) != scope)
        return 0;
    /* the fed names, in order */
    PyObject* const names = PyTuple_GET_ITEM(h, H_NAMES);
    if (!PyDict_CheckExact(feed) || PyDict_GET_SIZE(feed) != PyTuple_GET_SIZE(names))
        return 0;
    Py_ssize_t pos = 0, i = 0;
    PyObject *key, *value;
    while (PyDict_Next(feed, &pos, &key, &value)) {
        PyObject* want = PyTuple_GET_ITEM(names, i++);
        if (key != want && (!PyUnicode_CheckExact(key) || PyUnicode_Compare(key, want) != 0)) {
            if (PyErr_Occurred()) PyErr_Clear();
            return 0;
        }
    }
    /* the fetched objects themselves (a Variable's == builds an op: identity only) */
    PyObject* const fetch = PyTuple_GET_ITEM(h, H_FETCH);
    if (!PyList_CheckExact(fetch_list) || PyList_GET_SIZE(fetch_list) != PyTuple_GET_SIZE(fetch))
        return 0;
    for (Py_ssize_t k = 0; k < PyTuple_GET_SIZE(fetch); ++k)
        if (PyList_GET_ITEM(fetch_list, k) != PyTuple_GET_ITEM(fetch, k)) return 0;
    /* block, return_numpy, holders */
    const int numpy = PyObject_IsTrue(a[5]);
    if (numpy < 0) { PyErr_Clear(); return 0; }
    if ((numpy != 0) != (PyTuple_GET_ITEM(h, H_NUMPY) == Py_True)) return 0;
    static const int args_at[3] = {4, 6, 7}, ctx_at[3] = {H_BLOCK, H_FEED_VAR, H_FETCH_VAR};
    for (int k = 0; k < 3; ++k) {
        PyObject *got = a[args_at[k]], *want = PyTuple_GET_ITEM(h, ctx_at[k]);
        const int eq = got == want || PyObject_RichCompareBool(got, want, Py_EQ) == 1;
        if (PyErr_Occurred()) PyErr_Clear();
        if (!eq) return 0;
    }
    /* the revisions: the program's view and setup, the scope and its ancestors */
    if (!attr_is(PyTuple_GET_ITEM(h, H_VIEW), s_revision, PyTuple_GET_ITEM(h, H_REVISION)) ||
        !attr_is(program, s_setup_revision, PyTuple_GET_ITEM(h, H_SETUP)))
        return 0;
    PyObject* const chain = PyTuple_GET_ITEM(h, H_CHAIN);
    PyObject* s = Py_NewRef(scope);
    int ok = 1;
    for (Py_ssize_t k = 0; ok && k < PyTuple_GET_SIZE(chain); ++k) {
        if (k > 0) {
            PyObject* p = PyObject_GetAttr(s, s_parent);
            Py_DECREF(s);
            if (p == NULL) { PyErr_Clear(); return 0; }
            s = p;
        }
        ok = s != Py_None && attr_is(s, s_revision, PyTuple_GET_ITEM(chain, k));
    }
    Py_DECREF(s);
    return ok;
}

static PyObject* fl_direct_hot_call(PyObject* h, PyObject* const* a, Py_ssize_t n) {
    if (n != 8) {
        PyErr_SetString(PyExc_TypeError, "hot() takes 8 arguments");
        return NULL;
    }
    if (!same_signature(h, a)) Py_RETURN_NONE;
    PyObject* runner = PyObject_GetAttr(PyTuple_GET_ITEM(h, H_TLS), s_runner);
    if (runner == NULL) { PyErr_Clear(); Py_RETURN_NONE; }
    if (runner == Py_None) {
        Py_DECREF(runner);
        return PyLong_FromLong(FL_NOT_PACKED);
    }
    PyObject* out = PyObject_CallOneArg(runner, a[1]);
    Py_DECREF(runner);
    return out;
}

static PyMethodDef fl_hot_def = {"hot", (PyCFunction)(void (*)(void))fl_direct_hot_call,
                                 METH_FASTCALL, "A prepared run's signature check and run."};

PyObject* fl_direct_hot(PyObject* hctx) {
    if (intern_names() != 0) return NULL;
    if (!PyTuple_CheckExact(hctx) || PyTuple_GET_SIZE(hctx) != H_LEN ||
        !PyWeakref_Check(PyTuple_GET_ITEM(hctx, H_PROGRAM)) ||
        !PyWeakref_Check(PyTuple_GET_ITEM(hctx, H_SCOPE)) ||
        !PyTuple_CheckExact(PyTuple_GET_ITEM(hctx, H_NAMES)) ||
        !PyTuple_CheckExact(PyTuple_GET_ITEM(hctx, H_FETCH)) ||
        !PyTuple_CheckExact(PyTuple_GET_ITEM(hctx, H_CHAIN))) {
        PyErr_SetString(PyExc_ValueError, "fl_direct_hot: a bad context");
        return NULL;
    }
    return PyCFunction_New(&fl_hot_def, hctx);
}
