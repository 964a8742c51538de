/* A model compiled by `fluidity compile MODEL_DIR -o OUT/`: its C API.
 *
 *   char err[512];
 *   fluidity_model* m = fluidity_model_load("OUT/model.params", err, sizeof err);
 *   fluidity_tensor in[1] = {{5, 2, {1, 784}, pixels, NULL, 0}}, out[1];
 *   if (fluidity_model_run(m, in, out, err, sizeof err)) { puts(err); }
 *   // out[0].data: float32 [out[0].dims[0], out[0].dims[1]], valid until the next run
 *   fluidity_model_free(m);
 *
 * Inputs and outputs are in the order fluidity_model_input_name / _output_name give (the
 * saved model's feed and fetch order). A handle runs one call at a time; for threads take
 * fluidity_model_clone(m) each: clones share the parameters and own their work memory.
 */
#ifndef FLUIDITY_MODEL_H
#define FLUIDITY_MODEL_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define FLUIDITY_MAX_DIMS 8

/* dtype codes are Paddle's VarType: 0 bool, 2 int32, 3 int64, 5 float32, 6 float64,
 * 20 uint8, 21 int8 */
typedef struct fluidity_tensor {
    int dtype;
    int ndim;                /* at most FLUIDITY_MAX_DIMS */
    int64_t dims[FLUIDITY_MAX_DIMS];
    void* data;              /* C order, dims[0] * ... * dims[ndim-1] elements */
    const int64_t* lod;      /* level-0 sequence offsets (lod_len of them) or NULL */
    int64_t lod_len;
} fluidity_tensor;

typedef struct fluidity_model fluidity_model;

int fluidity_model_num_inputs(void);
int fluidity_model_num_outputs(void);
const char* fluidity_model_input_name(int i);
const char* fluidity_model_output_name(int i);
int fluidity_model_input_dtype(int i);

/* Reads the parameters (Paddle's combined format, in the compiled model's order); NULL with
 * a message in err when the file is missing, cut short or of another model. */
fluidity_model* fluidity_model_load(const char* params_path, char* err, size_t err_len);
fluidity_model* fluidity_model_clone(const fluidity_model* m);

/* 0 on success; otherwise a message in err naming the input or the op at fault. Outputs
 * point into the handle's memory until its next run. */
int fluidity_model_run(fluidity_model* m, const fluidity_tensor* inputs,
                       fluidity_tensor* outputs, char* err, size_t err_len);
void fluidity_model_free(fluidity_model* m);

#ifdef __cplusplus
}
#endif
#endif
