/* ONNX out: the model as it was read, its initializers replaced by poet's
 * trained weights and batch norm statistics. An initializer that exporters
 * shared through Identity (equal values merged) but that poet trained as a
 * weight of its own becomes an initializer in place of that Identity. */
#include <stdlib.h>
#include <string.h>

#include "../base/hash.h"
#include "internal.h"
#include "poet/file.h"

/* The bound values as little-endian bytes of the tensor's type (float or double). */
static bool fill_raw(Onnx__TensorProto *t, const binding *b, const float *src)
{
    bool dbl = t->has_data_type && t->data_type == ONNX_DOUBLE;
    size_t width = dbl ? 8 : 4;
    uint8_t *raw = malloc((size_t)b->n * width + 1);
    if (!raw) return false;
    for (uint64_t k = 0; k < b->n; k++) {
        /* ONNX keeps a transposed weight [rows][cols]; poet has it [cols][rows] */
        uint64_t at = transposed_at(k, b->rows, b->cols), bits;
        if (dbl) {
            double d = src[at];
            memcpy(&bits, &d, 8);
        } else {
            uint32_t u;
            memcpy(&u, &src[at], 4);
            bits = u;
        }
        le_put(raw + k * width, bits, (int)width);
    }
    free(t->float_data);
    free(t->double_data);
    t->float_data = NULL, t->n_float_data = 0;
    t->double_data = NULL, t->n_double_data = 0;
    if (t->has_raw_data) free(t->raw_data.data);
    t->raw_data = (ProtobufCBinaryData){(size_t)b->n * width, raw};
    t->has_raw_data = true;
    return true;
}

/* A new float initializer named as Identity node k's output, shaped as its input's. */
static Onnx__TensorProto *initializer_for(Onnx__GraphProto *g, const Onnx__NodeProto *id)
{
    const Onnx__TensorProto *src = NULL;
    for (size_t k = 0; k < g->n_initializer && !src; k++)
        if (id->n_input && g->initializer[k]->name && strcmp(g->initializer[k]->name, id->input[0]) == 0)
            src = g->initializer[k];
    Onnx__TensorProto *t = malloc(sizeof *t);
    Onnx__TensorProto **grown = realloc(g->initializer, (g->n_initializer + 1) * sizeof *grown);
    if (!t || !grown || !src) {
        free(t);
        if (grown) g->initializer = grown;
        return NULL;
    }
    g->initializer = grown;
    onnx__tensor_proto__init(t);
    t->name = malloc(strlen(id->output[0]) + 1);
    t->dims = malloc((src->n_dims + 1) * sizeof *t->dims);
    if (!t->name || !t->dims) {
        free(t->name), free(t->dims), free(t);
        return NULL;
    }
    strcpy(t->name, id->output[0]);
    memcpy(t->dims, src->dims, src->n_dims * sizeof *t->dims);
    t->n_dims = src->n_dims;
    t->has_data_type = true;
    t->data_type = ONNX_FLOAT;
    g->initializer[g->n_initializer++] = t;
    return t;
}

static poet_status apply(Onnx__GraphProto *g, const poet_onnx_model *m, const float *params, const float *buffers,
                         bool *drop, poet_err *err)
{
    for (int k = 0; k < m->n_bind; k++) {
        const binding *b = &m->bind[k];
        const float *src = (b->buffer ? buffers : params) + b->at;
        Onnx__TensorProto *t = NULL;
        if (b->from.kind == FROM_INITIALIZER && (size_t)b->from.index < g->n_initializer) {
            t = g->initializer[b->from.index];
        } else if (b->from.kind == FROM_IDENTITY && (size_t)b->from.index < g->n_node) {
            t = initializer_for(g, g->node[b->from.index]);
            drop[b->from.index] = true;
        }
        if (!t || !fill_raw(t, b, src))
            return poet_fail(err, POET_ERR_NOMEM, "out of memory writing the ONNX model (or it changed since it was read)");
    }
    size_t kept = 0;
    for (size_t k = 0; k < g->n_node; k++) {
        if (drop[k]) onnx__node_proto__free_unpacked(g->node[k], NULL);
        else g->node[kept++] = g->node[k];
    }
    g->n_node = kept;
    return POET_OK;
}

poet_status poet_onnx_write(const poet_onnx_model *m, const float *params, const float *buffers, const char *path,
                            poet_err *err)
{
    Onnx__ModelProto *mp = onnx__model_proto__unpack(NULL, m->file_len, m->file);
    if (!mp || !mp->graph) {
        onnx__model_proto__free_unpacked(mp, NULL);
        return poet_fail(err, POET_ERR_PARSE, "the model read no longer parses");
    }
    bool *drop = calloc(mp->graph->n_node + 1, sizeof *drop);
    poet_status st = drop ? apply(mp->graph, m, params, buffers, drop, err)
                          : poet_fail(err, POET_ERR_NOMEM, "out of memory writing %s", path);
    uint8_t *out = NULL;
    size_t len = 0;
    if (!st) {
        len = onnx__model_proto__get_packed_size(mp);
        out = malloc(len + 1);
        if (!out) st = poet_fail(err, POET_ERR_NOMEM, "out of memory writing %s", path);
        else onnx__model_proto__pack(mp, out);
    }
    if (!st) st = poet_write_file_atomic(path, out, len, err);
    free(out);
    free(drop);
    onnx__model_proto__free_unpacked(mp, NULL);
    return st;
}
