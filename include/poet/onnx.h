/* poet: your own model from ONNX, with its weights, and back.
 *
 * poet_onnx_import reads an ONNX model (opsets 7 to 17, as PyTorch 1.13
 * exports them) into poet's forward graph with its initializers as the
 * initial weights, folds what can be computed at import (shapes, constants),
 * adds a softmax cross-entropy loss over the output and builds the backward
 * pass with poet's autodiff. The model can then be planned, trained (the
 * weights go to poet_engine_config or poet_export_options) and written back
 * with the trained weights by poet_onnx_write. docs/onnx.md lists the
 * operators and how each maps. */
#ifndef POET_ONNX_H
#define POET_ONNX_H

#include <stddef.h>
#include <stdint.h>

#include "poet/graph.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct poet_onnx_options {
    int batch;          /* rows of a batch; 0: the model's own (a fixed first dimension, or 1) */
    const char *input;  /* the data input's name; NULL: the first graph input that is not an initializer */
    const char *output; /* the logits' name; NULL: the first graph output */
    const char *train;  /* what trains (poet_graph_set_trainable); NULL: all */
} poet_onnx_options;

typedef struct poet_onnx_model poet_onnx_model;

/* Reads path. An operator or attribute poet does not support, a file that
 * is not ONNX or is truncated, and an inconsistent graph (a dangling input,
 * shapes that do not fit, a cycle) are refused with one line naming the
 * node, the op and what is wrong. */
poet_status poet_onnx_import(const char *path, const poet_onnx_options *o, poet_onnx_model **out, poet_err *err);
/* The same from bytes (for fuzzing); a model read this way can be written
 * back too. */
poet_status poet_onnx_import_bytes(const uint8_t *data, size_t len, const char *name, const poet_onnx_options *o,
                                   poet_onnx_model **out, poet_err *err);
void poet_onnx_free(poet_onnx_model *m);

/* The training graph (forward, loss, backward), owned by the model. */
const poet_graph *poet_onnx_graph(const poet_onnx_model *m);
/* The initial weights and buffers (batch norm statistics, constants) in
 * the layout poet_export_options and poet_engine_config take. */
const float *poet_onnx_params(const poet_onnx_model *m, uint64_t *count);
const float *poet_onnx_buffers(const poet_onnx_model *m, uint64_t *count);

typedef struct poet_onnx_summary {
    int opset;
    int onnx_nodes;       /* in the file */
    int folded;           /* computed at import */
    int forward_nodes;    /* poet's forward graph, loss included */
    int initializers;     /* bound to poet's weights or buffers */
    uint64_t params, buffers;
    char input[POET_NAME_BYTES], output[POET_NAME_BYTES];
    char output_op[16];   /* "Softmax" or "LogSoftmax" where the output ends with one, which the loss takes over */
    int64_t input_dims[POET_MAX_DIMS];
    int input_ndim;
} poet_onnx_summary;

void poet_onnx_summarize(const poet_onnx_model *m, poet_onnx_summary *s);

/* Writes the model as it was read with params and buffers (poet's layout,
 * e.g. a trained engine's) in place of its initializers, atomically. */
poet_status poet_onnx_write(const poet_onnx_model *m, const float *params, const float *buffers, const char *path,
                            poet_err *err);

#ifdef __cplusplus
}
#endif
#endif
