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

#define FL_NOT_PACKED (-100)

typedef int (*fl_segment)(int64_t*, char*, int64_t, char*);

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
    PyThreadState* ts = PyEval_SaveThread();
    const int rc = ((fl_segment)(intptr_t)call[FN])(args, (char*)(intptr_t)call[ARENA],
                                                    call[CAP], (char*)(intptr_t)call[ERR]);
    PyEval_RestoreThread(ts);
    return rc;
}
