/* Internal to the ONNX importer: its state, and the helpers the op
 * families share (values.c: names, values, poet nodes and weights;
 * map_*.c: each family's ops; import.c: the dispatch and the graph). */
#ifndef POET_SRC_ONNX_IMPORTER_H
#define POET_SRC_ONNX_IMPORTER_H

#include "internal.h"

typedef struct importer {
    const Onnx__GraphProto *gp;
    int opset;
    poet_onnx_model *m;
    value *vals;
    int n_vals, cap_vals;
    int *slot; /* open-addressing index into vals by name */
    int slots;
    int *uses; /* per value: consumers in the graph, graph outputs included */
    bool *skip; /* ONNX nodes a pattern already mapped */
    uint64_t cap_params, cap_buffers;
    int cap_bind;
    int batch, folded;
    const char *loss_output; /* the output the loss reads */
    poet_err *err;
} importer;

/* ---- map_*.c: each family's ops ---- */
poet_status im_map_conv(importer *im, const Onnx__NodeProto *np);
poet_status im_map_pool(importer *im, const Onnx__NodeProto *np, bool max);
poet_status im_map_pad(importer *im, const Onnx__NodeProto *np);
poet_status im_map_gemm(importer *im, const Onnx__NodeProto *np);
poet_status im_add_pair(importer *im, const Onnx__NodeProto *np, poet_op op, const value *a, const value *b);
poet_status im_map_matmul(importer *im, const Onnx__NodeProto *np, int at);
const value *im_trained_tensor(const importer *im, const value *v);
poet_status im_map_binary(importer *im, const Onnx__NodeProto *np, poet_op op);
poet_status im_map_prelu(importer *im, const Onnx__NodeProto *np);
poet_status im_map_unary(importer *im, const Onnx__NodeProto *np, poet_op op, const poet_attrs *a);
poet_status im_map_clip(importer *im, const Onnx__NodeProto *np);
bool im_ends_output(const importer *im, const Onnx__NodeProto *np);
poet_status im_map_output_softmax(importer *im, const Onnx__NodeProto *np);
poet_status im_map_softmax(importer *im, const Onnx__NodeProto *np);
poet_status im_map_dropout(importer *im, const Onnx__NodeProto *np);
poet_status im_map_batchnorm(importer *im, const Onnx__NodeProto *np);
poet_status im_map_layernorm(importer *im, const Onnx__NodeProto *np);
poet_status im_map_instancenorm(importer *im, const Onnx__NodeProto *np);
poet_status im_map_layernorm_pattern(importer *im, const Onnx__NodeProto *np, int at);
poet_status im_reshape_to(importer *im, const Onnx__NodeProto *np, int x, const int64_t *dims, int ndim);
poet_status im_map_reshape(importer *im, const Onnx__NodeProto *np);
poet_status im_map_flatten(importer *im, const Onnx__NodeProto *np);
poet_status im_map_squeeze(importer *im, const Onnx__NodeProto *np);
poet_status im_map_transpose(importer *im, const Onnx__NodeProto *np);
poet_status im_map_concat(importer *im, const Onnx__NodeProto *np);
poet_status im_map_split(importer *im, const Onnx__NodeProto *np);
poet_status im_map_slice(importer *im, const Onnx__NodeProto *np);
poet_status im_map_gather(importer *im, const Onnx__NodeProto *np);
poet_status im_map_resize(importer *im, const Onnx__NodeProto *np);
/* ---- values.c ---- */
int im_find(const importer *im, const char *name);
/* The slot index grown to twice the values, and rebuilt. */
poet_status im_grow_slots(importer *im);
/* Adds a value, or returns the placeholder a reader created for the name;
 * a name produced twice is refused. Returns its index or -1. */
int im_define(importer *im, const char *name);
/* Defines name as a known tensor, taking t over (freed on failure); its
 * index, or -1 after an error. */
int im_define_known(importer *im, const char *name, tensor *t);
poet_status im_refuse(importer *im, const Onnx__NodeProto *np, const char *what);
const char *im_input_name(const Onnx__NodeProto *np, int j);
bool im_padded(const int32_t pad[4]);
const value *im_viewed_input(importer *im, const Onnx__NodeProto *np, int j, bool required);
const value *im_input_value(importer *im, const Onnx__NodeProto *np, int j, bool required);
int im_activation(importer *im, const Onnx__NodeProto *np, int j);
const tensor *im_known(importer *im, const Onnx__NodeProto *np, int j, bool required);
const value *im_known_value(importer *im, const Onnx__NodeProto *np, int j);
int im_add_node(importer *im, poet_op op, const int *inputs, int n_inputs, const poet_attrs *a, const char *out);
int im_add_step(importer *im, const Onnx__NodeProto *np, poet_op op, int x, const poet_attrs *a, const char *suffix);
poet_status im_name_output(importer *im, const Onnx__NodeProto *np, int k, int v);
poet_status im_emit(importer *im, const Onnx__NodeProto *np, poet_op op, const int *inputs, int n_inputs,
                        const poet_attrs *a);
poet_status im_fill(importer *im, const value *src, bool buffer, uint64_t offset, int64_t rows, int64_t cols);
int64_t im_prod(const int64_t *d, int n);
const poet_shape *im_shape_of(const importer *im, int node);
onnx_shape im_value_shape(const importer *im, const value *v);
poet_status im_name_view(importer *im, const Onnx__NodeProto *np, int k, int v, const view *w);
int im_shaped_activation(importer *im, const Onnx__NodeProto *np, int j, onnx_shape *s);
int im_padded_activation(importer *im, const Onnx__NodeProto *np, int j, int32_t pad[4]);

#endif
