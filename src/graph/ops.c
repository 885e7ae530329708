/* The op registry. FLOPs follow POET's conventions (poet/power_computation.py
 * in the original code) so that costs of zoo models equal the reference
 * instances'; docs/graph.md lists each formula and where it departs from an
 * exact count. */
#include "ops.h"

#include <string.h>

static const poet_node *in(const poet_graph *g, const poet_node *n, int i)
{
    return &g->nodes[n->inputs[i]];
}

static poet_status need_rank(const poet_node *n, const poet_node *x, int rank, poet_err *err)
{
    if (x->shape.ndim != rank)
        return poet_fail(err, POET_ERR_INVALID, "node '%s' (%s) needs a %d-d input, '%s' is %d-d",
                         n->name, op_get(n->op)->name, rank, x->name, x->shape.ndim);
    return POET_OK;
}

static void set_shape(poet_node *n, int ndim, const int64_t *dim)
{
    n->shape.ndim = ndim;
    for (int i = 0; i < POET_MAX_DIMS; i++) n->shape.dim[i] = i < ndim ? dim[i] : 0;
}

static double numel_d(const poet_shape *s)
{
    return (double)poet_shape_numel(s);
}

static poet_status infer_input(const poet_graph *g, poet_node *n, poet_err *err)
{
    (void)g;
    const poet_shape *s = &n->attrs.shape;
    if (s->ndim < 1 || s->ndim > POET_MAX_DIMS)
        return poet_fail(err, POET_ERR_INVALID, "input '%s' needs 1 to %d dimensions", n->name, POET_MAX_DIMS);
    for (int i = 0; i < s->ndim; i++)
        if (s->dim[i] <= 0) return poet_fail(err, POET_ERR_INVALID, "input '%s' has a dimension <= 0", n->name);
    n->shape = *s;
    n->flops = 0;
    return POET_OK;
}

static poet_status check_window(const poet_node *n, int64_t h, int64_t w, poet_err *err)
{
    const poet_attrs *a = &n->attrs;
    if (a->kernel <= 0 || a->stride <= 0 || a->pad < 0)
        return poet_fail(err, POET_ERR_INVALID, "node '%s': kernel and stride must be > 0, padding >= 0", n->name);
    if (h + 2 * a->pad < a->kernel || w + 2 * a->pad < a->kernel)
        return poet_fail(err, POET_ERR_INVALID, "node '%s': kernel %d larger than its %lldx%lld input", n->name,
                         a->kernel, (long long)h, (long long)w);
    return POET_OK;
}

static int64_t window_out(int64_t size, const poet_attrs *a)
{
    return (size + 2 * a->pad - a->kernel) / a->stride + 1;
}

static poet_status infer_conv2d(const poet_graph *g, poet_node *n, poet_err *err)
{
    const poet_node *x = in(g, n, 0);
    const poet_attrs *a = &n->attrs;
    poet_status st = need_rank(n, x, 4, err);
    if (st) return st;
    if (a->features <= 0) return poet_fail(err, POET_ERR_INVALID, "conv2d '%s' needs output channels > 0", n->name);
    if ((st = check_window(n, x->shape.dim[2], x->shape.dim[3], err))) return st;
    int64_t d[4] = {x->shape.dim[0], a->features, window_out(x->shape.dim[2], a), window_out(x->shape.dim[3], a)};
    set_shape(n, 4, d);
    int64_t cin = x->shape.dim[1];
    n->params = (uint64_t)a->features * (uint64_t)cin * (uint64_t)a->kernel * (uint64_t)a->kernel + (uint64_t)a->features;
    /* POET: 2 * K^2 * numel(input) * C_out + numel(output); exact for stride 1
     * with "same" padding, 4x an exact count for stride 2. */
    n->flops = 2.0 * a->kernel * a->kernel * numel_d(&x->shape) * a->features + numel_d(&n->shape);
    return POET_OK;
}

static poet_status infer_batchnorm2d(const poet_graph *g, poet_node *n, poet_err *err)
{
    const poet_node *x = in(g, n, 0);
    poet_status st = need_rank(n, x, 4, err);
    if (st) return st;
    n->shape = x->shape;
    n->params = 2 * (uint64_t)x->shape.dim[1];  /* gamma, beta */
    n->buffers = 2 * (uint64_t)x->shape.dim[1]; /* running mean, variance */
    n->flops = 2.0 * numel_d(&x->shape);
    return POET_OK;
}

/* Elementwise ops with one input: FLOPs are `per_elem` per element. */
static poet_status infer_unary(const poet_graph *g, poet_node *n, double per_elem)
{
    const poet_node *x = in(g, n, 0);
    n->shape = x->shape;
    n->flops = per_elem * numel_d(&x->shape);
    return POET_OK;
}

static poet_status infer_relu(const poet_graph *g, poet_node *n, poet_err *err)
{
    (void)err;
    return infer_unary(g, n, 1.0);
}

static poet_status infer_dropout(const poet_graph *g, poet_node *n, poet_err *err)
{
    if (!(n->attrs.p >= 0.0f && n->attrs.p < 1.0f))
        return poet_fail(err, POET_ERR_INVALID, "dropout '%s' needs 0 <= p < 1", n->name);
    return infer_unary(g, n, 1.0);
}

/* GELU with the tanh approximation: about 8 operations per element. */
static poet_status infer_gelu(const poet_graph *g, poet_node *n, poet_err *err)
{
    (void)err;
    return infer_unary(g, n, 8.0);
}

/* max, subtract, exp, sum, divide */
static poet_status infer_softmax(const poet_graph *g, poet_node *n, poet_err *err)
{
    (void)err;
    return infer_unary(g, n, 5.0);
}

static poet_status infer_pool(const poet_graph *g, poet_node *n, poet_err *err)
{
    const poet_node *x = in(g, n, 0);
    const poet_attrs *a = &n->attrs;
    poet_status st = need_rank(n, x, 4, err);
    if (st) return st;
    if ((st = check_window(n, x->shape.dim[2], x->shape.dim[3], err))) return st;
    int64_t d[4] = {x->shape.dim[0], x->shape.dim[1], window_out(x->shape.dim[2], a), window_out(x->shape.dim[3], a)};
    set_shape(n, 4, d);
    n->flops = 2.0 * a->kernel * a->kernel * numel_d(&n->shape); /* POET: as if stride 1 */
    return POET_OK;
}

static poet_status infer_global_avgpool(const poet_graph *g, poet_node *n, poet_err *err)
{
    const poet_node *x = in(g, n, 0);
    poet_status st = need_rank(n, x, 4, err);
    if (st) return st;
    int64_t d[2] = {x->shape.dim[0], x->shape.dim[1]};
    set_shape(n, 2, d);
    n->flops = 2.0 * numel_d(&x->shape);
    return POET_OK;
}

static bool same_shape(const poet_shape *a, const poet_shape *b)
{
    if (a->ndim != b->ndim) return false;
    for (int i = 0; i < a->ndim; i++)
        if (a->dim[i] != b->dim[i]) return false;
    return true;
}

/* The second input may have fewer channels than the first: it is then
 * zero-padded, as in ResNet's parameter-free shortcut (option A), which
 * POET's ResNet-50 uses. */
static bool channel_padded(const poet_shape *a, const poet_shape *b)
{
    return a->ndim == 4 && b->ndim == 4 && a->dim[0] == b->dim[0] && b->dim[1] <= a->dim[1] &&
           a->dim[2] == b->dim[2] && a->dim[3] == b->dim[3];
}

static poet_status infer_add(const poet_graph *g, poet_node *n, poet_err *err)
{
    const poet_node *a = in(g, n, 0), *b = in(g, n, 1);
    if (!same_shape(&a->shape, &b->shape) && !channel_padded(&a->shape, &b->shape))
        return poet_fail(err, POET_ERR_INVALID, "add '%s': inputs '%s' and '%s' differ in shape", n->name, a->name,
                         b->name);
    n->shape = a->shape;
    n->flops = numel_d(&a->shape);
    return POET_OK;
}

static poet_status infer_flatten(const poet_graph *g, poet_node *n, poet_err *err)
{
    const poet_node *x = in(g, n, 0);
    if (x->shape.ndim < 2) return poet_fail(err, POET_ERR_INVALID, "flatten '%s' needs a batch dimension", n->name);
    int64_t d[2] = {x->shape.dim[0], (int64_t)(poet_shape_numel(&x->shape) / (uint64_t)x->shape.dim[0])};
    set_shape(n, 2, d);
    n->flops = numel_d(&n->shape); /* POET counts a copy */
    return POET_OK;
}

static poet_status infer_linear(const poet_graph *g, poet_node *n, poet_err *err)
{
    const poet_node *x = in(g, n, 0);
    poet_status st = need_rank(n, x, 2, err);
    if (st) return st;
    if (n->attrs.features <= 0) return poet_fail(err, POET_ERR_INVALID, "linear '%s' needs output features > 0", n->name);
    int64_t rows = x->shape.dim[0], fin = x->shape.dim[1], fout = n->attrs.features;
    int64_t d[2] = {rows, fout};
    set_shape(n, 2, d);
    n->params = (uint64_t)(fin + 1) * (uint64_t)fout;
    /* POET: 2 * params + out_features for one row; we count every row. */
    n->flops = (double)rows * (2.0 * (double)n->params + (double)fout);
    return POET_OK;
}

static poet_status infer_softmax_ce(const poet_graph *g, poet_node *n, poet_err *err)
{
    const poet_node *x = in(g, n, 0);
    poet_status st = need_rank(n, x, 2, err);
    if (st) return st;
    int64_t d[1] = {x->shape.dim[0]}; /* one loss per row */
    set_shape(n, 1, d);
    n->flops = numel_d(&x->shape) * (double)x->shape.dim[1]; /* POET: numel(logits) * classes */
    return POET_OK;
}

static poet_status infer_layernorm(const poet_graph *g, poet_node *n, poet_err *err)
{
    const poet_node *x = in(g, n, 0);
    poet_status st = need_rank(n, x, 2, err);
    if (st) return st;
    n->shape = x->shape;
    n->params = 2 * (uint64_t)x->shape.dim[1];
    n->flops = 8.0 * numel_d(&x->shape); /* mean, variance, normalize, scale and shift */
    return POET_OK;
}

/* Attention tensors: Q, K, V, context are [batch * seq, heads * d];
 * scores and probabilities are [batch, heads, seq, seq]. */
static poet_status attn_dims(const poet_node *n, const poet_node *x, int64_t *batch, int64_t *d, poet_err *err)
{
    const poet_attrs *a = &n->attrs;
    poet_status st = need_rank(n, x, 2, err);
    if (st) return st;
    if (a->heads <= 0 || a->seq <= 0 || x->shape.dim[0] % a->seq || x->shape.dim[1] % a->heads)
        return poet_fail(err, POET_ERR_INVALID, "attention '%s': rows must divide by seq and features by heads",
                         n->name);
    *batch = x->shape.dim[0] / a->seq;
    *d = x->shape.dim[1] / a->heads;
    return POET_OK;
}

static poet_status infer_attn_scores(const poet_graph *g, poet_node *n, poet_err *err)
{
    const poet_node *q = in(g, n, 0), *k = in(g, n, 1);
    int64_t b = 0, d = 0;
    poet_status st = attn_dims(n, q, &b, &d, err);
    if (st) return st;
    if (!same_shape(&q->shape, &k->shape))
        return poet_fail(err, POET_ERR_INVALID, "attention '%s': Q and K differ in shape", n->name);
    int64_t s = n->attrs.seq, dim[4] = {b, n->attrs.heads, s, s};
    set_shape(n, 4, dim);
    n->flops = 2.0 * numel_d(&n->shape) * (double)d + numel_d(&n->shape); /* matmul + scale */
    return POET_OK;
}

static poet_status infer_attn_context(const poet_graph *g, poet_node *n, poet_err *err)
{
    const poet_node *p = in(g, n, 0), *v = in(g, n, 1);
    int64_t b = 0, d = 0;
    poet_status st = attn_dims(n, v, &b, &d, err);
    if (st) return st;
    int64_t want[4] = {b, n->attrs.heads, n->attrs.seq, n->attrs.seq};
    poet_shape ps = {4, {want[0], want[1], want[2], want[3]}};
    if (!same_shape(&p->shape, &ps))
        return poet_fail(err, POET_ERR_INVALID, "attention '%s': probabilities must be [batch, heads, seq, seq]",
                         n->name);
    n->shape = v->shape;
    n->flops = 2.0 * numel_d(&p->shape) * (double)d;
    return POET_OK;
}

static const op_def OPS[POET_OP_COUNT] = {
    [POET_OP_INPUT] = {"input", 0, 0, infer_input, GRAD_NONE, {0, 0}, false},
    [POET_OP_CONV2D] = {"conv2d", 1, 1, infer_conv2d, GRAD_FUSED, {READ_IN0, 0}, false},
    [POET_OP_BATCHNORM2D] = {"batchnorm2d", 1, 1, infer_batchnorm2d, GRAD_FUSED, {READ_IN0, 0}, false},
    [POET_OP_RELU] = {"relu", 1, 1, infer_relu, GRAD_PER_INPUT, {READ_OUT, 0}, false},
    [POET_OP_MAXPOOL2D] = {"maxpool2d", 1, 1, infer_pool, GRAD_PER_INPUT, {READ_IN0, 0}, false},
    [POET_OP_AVGPOOL2D] = {"avgpool2d", 1, 1, infer_pool, GRAD_PER_INPUT, {0, 0}, false},
    [POET_OP_GLOBAL_AVGPOOL] = {"global_avgpool", 1, 1, infer_global_avgpool, GRAD_PER_INPUT, {0, 0}, false},
    [POET_OP_ADD] = {"add", 2, 2, infer_add, GRAD_ALIAS, {0, 0}, false},
    [POET_OP_FLATTEN] = {"flatten", 1, 1, infer_flatten, GRAD_ALIAS, {0, 0}, false},
    [POET_OP_LINEAR] = {"linear", 1, 1, infer_linear, GRAD_FUSED, {READ_IN0, 0}, false},
    /* the mask is regenerated from the step's seed, so backward reads only dY */
    [POET_OP_DROPOUT] = {"dropout", 1, 1, infer_dropout, GRAD_PER_INPUT, {0, 0}, false},
    [POET_OP_SOFTMAX_CE] = {"softmax_ce", 1, 1, infer_softmax_ce, GRAD_PER_INPUT, {READ_IN0, 0}, true},
    [POET_OP_LAYERNORM] = {"layernorm", 1, 1, infer_layernorm, GRAD_FUSED, {READ_IN0, 0}, false},
    [POET_OP_GELU] = {"gelu", 1, 1, infer_gelu, GRAD_PER_INPUT, {READ_IN0, 0}, false},
    [POET_OP_SOFTMAX] = {"softmax", 1, 1, infer_softmax, GRAD_PER_INPUT, {READ_OUT, 0}, false},
    /* dQ = dS K, dK = dS^T Q */
    [POET_OP_ATTN_SCORES] = {"attn_scores", 2, 2, infer_attn_scores, GRAD_PER_INPUT, {READ_IN1, READ_IN0}, false},
    /* dP = dC V^T, dV = P^T dC */
    [POET_OP_ATTN_CONTEXT] = {"attn_context", 2, 2, infer_attn_context, GRAD_PER_INPUT, {READ_IN1, READ_IN0}, false},
    [POET_OP_GRAD] = {"grad", 1, POET_MAX_INPUTS, NULL, GRAD_NONE, {0, 0}, false},
    [POET_OP_GRAD_SUM] = {"grad_sum", 2, POET_MAX_INPUTS, NULL, GRAD_NONE, {0, 0}, false},
};

const op_def *op_get(poet_op op)
{
    return (unsigned)op < POET_OP_COUNT ? &OPS[op] : NULL;
}

const char *poet_op_name(poet_op op)
{
    const op_def *d = op_get(op);
    return d ? d->name : "?";
}

poet_op poet_op_from_name(const char *name)
{
    for (int i = 0; i < POET_OP_COUNT; i++)
        if (name && strcmp(OPS[i].name, name) == 0) return (poet_op)i;
    return POET_OP_COUNT;
}

bool poet_op_grad_is_alias(poet_op op)
{
    const op_def *d = op_get(op);
    return d && d->grad == GRAD_ALIAS;
}
