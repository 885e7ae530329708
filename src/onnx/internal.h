/* Internal: what the ONNX importer, its constant folding and the writer
 * share. */
#ifndef POET_SRC_ONNX_INTERNAL_H
#define POET_SRC_ONNX_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>

#include "onnx.pb-c.h"
#include "poet/onnx.h"

enum { ONNX_FLOAT = 1, ONNX_INT32 = 6, ONNX_INT64 = 7, ONNX_BOOL = 9, ONNX_DOUBLE = 11 };
enum { TENSOR_MAX_DIMS = 8 };

/* A tensor known at import: an initializer, a Constant, or a folded result.
 * Floats and integers (int64, int32, bool) are kept apart. */
typedef struct tensor {
    bool is_float;
    int ndim;
    int64_t dims[TENSOR_MAX_DIMS];
    uint64_t n;
    float *f;
    int64_t *i;
} tensor;

/* Where a tensor came from, for writing trained values back. */
typedef enum { FROM_NONE, FROM_INITIALIZER, FROM_IDENTITY } origin_kind;

typedef struct origin {
    origin_kind kind;
    int index;        /* the initializer's, or the Identity node's */
    bool transposed;  /* the value is that 2-d tensor transposed (a folded Transpose) */
} origin;

/* An activation's shape as ONNX sees it. */
typedef struct onnx_shape {
    int ndim;
    int64_t dim[TENSOR_MAX_DIMS];
} onnx_shape;
/* How a value differs from the poet node that holds it, where poet never
 * computes the difference: zero padding of H and W that the Conv or
 * AveragePool reading it takes into its own padding, or a shape of more
 * than 4 dimensions in the node's element order, which a Transpose merges
 * back to at most 4 (ShuffleNet's channel shuffle). */
typedef struct view {
    int32_t pad[4];   /* top, left, bottom, right */
    onnx_shape shape; /* ndim > 0: the value's shape */
} view;
/* A name of the ONNX graph: a poet node, or a tensor known at import. */
typedef struct value {
    char *name;
    int node;       /* poet node, or -1 */
    bool known;     /* t holds the tensor */
    tensor t;
    origin from;
    view view;      /* of the node; zero: the node as it is */
    int expanded;   /* a folded Expand of a trained tensor (ViT's class token): that tensor's value, or -1 */
} value;

/* An initializer written back from poet's weights or buffers. */
typedef struct binding {
    origin from;
    bool buffer;       /* from the buffers rather than the parameters */
    uint64_t at, n;    /* where in them */
    int64_t rows, cols; /* > 0: ONNX keeps it transposed, [rows][cols] */
} binding;

/* Where element k of a [rows][cols] tensor lies in its transpose; k itself
 * when rows is 0 (not transposed). */
static inline uint64_t transposed_at(uint64_t k, int64_t rows, int64_t cols)
{
    return rows > 0 ? (k % (uint64_t)cols) * (uint64_t)rows + k / (uint64_t)cols : k;
}

struct poet_onnx_model {
    poet_graph graph;
    float *params, *buffers;
    uint64_t n_params, n_buffers;
    binding *bind;
    int n_bind;
    uint8_t *file; /* the model as read, re-read when writing */
    size_t file_len;
    poet_onnx_summary summary;
};

void tensor_free(tensor *t);
/* Reads a TensorProto; refuses types and layouts poet does not read. */
poet_status tensor_from_proto(const Onnx__TensorProto *p, tensor *t, const char *what, poet_err *err);
int64_t tensor_int(const tensor *t, uint64_t k);
double tensor_real(const tensor *t, uint64_t k);

/* Folds node np, all of whose inputs are known (in[] in its input order,
 * NULL for an absent optional input), into out. POET_ERR_UNSUPPORTED for an
 * op it cannot fold. */
typedef struct fold_input {
    const tensor *t;
    const onnx_shape *shape; /* an activation's shape: only Shape reads it */
} fold_input;

poet_status fold_node(const Onnx__NodeProto *np, const fold_input *in, int n_in, tensor *out, poet_err *err);

/* Whether np is the op named; its name (or its first output's) for
 * messages; the one-line refusal of np, naming it, its op and why. */
bool onnx_is_op(const Onnx__NodeProto *np, const char *op);
const char *onnx_node_label(const Onnx__NodeProto *np);
poet_status onnx_refuse(const Onnx__NodeProto *np, const char *why, poet_err *err);

/* Reshape's target for an input of in_dims (0 copies, -1 infers). */
poet_status reshape_target(const Onnx__NodeProto *np, const int64_t *in_dims, int in_ndim, const tensor *shape,
                           int64_t *dims, int *ndim, poet_err *err);
/* What Squeeze or Unsqueeze make of in_dims (axes from the input, or NULL). */
poet_status squeeze_dims(const Onnx__NodeProto *np, const int64_t *in_dims, int in_ndim, const tensor *axes,
                         int64_t *dims, int *ndim, poet_err *err);

/* Attribute lookups. */
const Onnx__AttributeProto *attr_find(const Onnx__NodeProto *np, const char *name);
int64_t attr_int(const Onnx__NodeProto *np, const char *name, int64_t dflt);
/* An integer attribute (dflt where absent) that must lie in [lo, hi]:
 * false where it does not. Where poet keeps one in 32 bits, this is the
 * check before the narrowing, which would otherwise wrap 2^32 to 0. */
bool attr_int_in(const Onnx__NodeProto *np, const char *name, int64_t dflt, int64_t lo, int64_t hi, int64_t *out);
float attr_float(const Onnx__NodeProto *np, const char *name, float dflt);
/* Whether string attribute name (dflt where absent) is want. */
bool attr_is(const Onnx__NodeProto *np, const char *name, const char *dflt, const char *want);
/* The ints of an attribute; *n = -1 when absent. */
const int64_t *attr_ints(const Onnx__NodeProto *np, const char *name, int *n);

#endif
