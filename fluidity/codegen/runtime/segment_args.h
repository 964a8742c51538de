/* The calling convention of a compiled segment, written once for every caller: the native
 * plan (fluidity/executor/native.py) and the CUDA plan (executor/cuda.py) through its
 * Python twin fluidity/codegen/abi.py, the standalone model (model.h) and the Hogwild
 * worker loop (executor/native_loop.c) through this header. tests/codegen/test_abi.py
 * parses this file and checks the twin against it.
 *
 *   int fl_seg_N(int64_t* args, char* arena, int64_t cap, char* err);
 *
 * `args` is FL_ARGS_HEAD int64 slots, then one fl_tensor_arg per input of the segment, then
 * one per output, in the order the segment lists them (fl_inputs / fl_outputs). The caller
 * fills the inputs' records; the segment fills the outputs' records and, when `cap` bytes of
 * arena are too few, writes the bytes it needs to args[FL_ARG_NEED] and returns 1 (the
 * caller grows the arena and calls again). Other return codes: status.h.
 *
 * Plain C, so that the C worker loop, the C target and C++ all include it.
 */
#ifndef FLUIDITY_SEGMENT_ARGS_H
#define FLUIDITY_SEGMENT_ARGS_H
#include <stdint.h>

#define FL_MAX_DIMS 8      /* the most dims a tensor argument has */
#define FL_ARGS_HEAD 1     /* int64 slots before the first tensor record */
#define FL_ARG_NEED 0      /* the head slot the arena size asked for is written to */

/* One tensor argument. An input's record holds its data's address, rank and dims, and for
 * a LoD tensor the address and count of its level-0 offsets, for a SelectedRows the
 * address of its row ids and its height. An output's record holds where the segment left
 * it: its byte offset in the arena (-1: a persistable updated in its own memory), rank (-1:
 * not written, a branch that sets it did not run), dims, and for a SelectedRows the arena
 * offset of its row ids and its height. */
typedef struct fl_tensor_arg {
    int64_t data;               /* input: address; output: arena offset, or -1 */
    int64_t ndim;               /* output: -1 when not written */
    int64_t dims[FL_MAX_DIMS];
    int64_t aux;                /* LoD offsets' address (an input's levels back to back,
                                   outer first; an output's computed LoD: the address of
                                   a block beam.h's lod_export makes), or the row ids
                                   (address / offset) */
    int64_t aux_len;            /* offsets of the outermost level (each next level's count:
                                   the previous level's last offset + 1); an output's LoD
                                   levels; or a SelectedRows' height */
} fl_tensor_arg;

#define FL_ARG_SLOTS ((int64_t)(sizeof(fl_tensor_arg) / sizeof(int64_t)))

static inline fl_tensor_arg* fl_inputs(int64_t* args) {
    return (fl_tensor_arg*)(args + FL_ARGS_HEAD);
}

static inline fl_tensor_arg* fl_outputs(int64_t* args, int64_t n_inputs) {
    return fl_inputs(args) + n_inputs;
}

/* The int64 slots of a segment's args with n_inputs inputs and n_outputs outputs. */
static inline int64_t fl_args_len(int64_t n_inputs, int64_t n_outputs) {
    return FL_ARGS_HEAD + (n_inputs + n_outputs) * FL_ARG_SLOTS;
}

#endif
