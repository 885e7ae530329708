/* The op registry. FLOPs follow POET's conventions (poet/power_computation.py
 * in the original code) so that costs of zoo models equal the reference
 * instances'; docs/graph.md lists each formula and where it departs from an
 * exact count. */
#include "../base/broadcast.h"
#include "ops.h"

#include <string.h>

/* Freestanding, as the whole registry: the device library checks the shapes
 * of an image with it. */
uint64_t poet_shape_numel(const poet_shape *s)
{
    uint64_t n = 1;
    for (int i = 0; i < s->ndim; i++) {
        uint64_t d = s->dim[i] < 0 ? 0 : (uint64_t)s->dim[i];
        if (d && n > UINT64_MAX / d) return UINT64_MAX; /* saturate: rejected as too large */
        n *= d;
    }
    return n;
}

static const poet_node *in(const poet_graph *g, const poet_node *n, int i)
{
    return &g->nodes[n->inputs[i]];
}

static poet_status need_rank(const poet_node *n, const poet_node *x, int lo, int hi, poet_err *err)
{
    if (x->shape.ndim < lo || x->shape.ndim > hi)
        return poet_fail(err, POET_ERR_INVALID, "node '%s' (%s) needs a %d-d to %d-d input, '%s' is %d-d", n->name,
                         op_get(n->op)->name, lo, hi, x->name, x->shape.ndim);
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

static bool same_shape(const poet_shape *a, const poet_shape *b)
{
    if (a->ndim != b->ndim) return false;
    for (int i = 0; i < a->ndim; i++)
        if (a->dim[i] != b->dim[i]) return false;
    return true;
}

static poet_shape shape_of_attrs(const poet_attrs *a)
{
    poet_shape s = {a->ndim, {0}};
    for (int i = 0; i < POET_MAX_DIMS && i < a->ndim; i++) s.dim[i] = a->dim[i];
    return s;
}

static poet_status check_dims(const poet_node *n, const poet_shape *s, const char *what, poet_err *err)
{
    if (s->ndim < 1 || s->ndim > POET_MAX_DIMS)
        return poet_fail(err, POET_ERR_INVALID, "node '%s': %s needs 1 to %d dimensions", n->name, what, POET_MAX_DIMS);
    for (int i = 0; i < s->ndim; i++)
        if (s->dim[i] <= 0) return poet_fail(err, POET_ERR_INVALID, "node '%s': %s has a dimension <= 0", n->name, what);
    return POET_OK;
}

static poet_status infer_input(const poet_graph *g, poet_node *n, poet_err *err)
{
    (void)g;
    n->shape = shape_of_attrs(&n->attrs);
    n->flops = 0;
    return check_dims(n, &n->shape, "its shape", err);
}

/* ---- windows: conv2d and pools ---- */

static int64_t window_out(int64_t size, int64_t pad_lo, int64_t pad_hi, int64_t k, int64_t stride, int64_t dil)
{
    return (size + pad_lo + pad_hi - (dil * (k - 1) + 1)) / stride + 1;
}

/* A window's input as [N, C, H, W]: [N, C, L] is [N, C, 1, L] (1-d
 * convolutions and pools, over time series and audio). */
static int64_t window_h(const poet_node *x) { return x->shape.ndim == 3 ? 1 : x->shape.dim[2]; }
static int64_t window_w(const poet_node *x) { return x->shape.dim[x->shape.ndim - 1]; }

static poet_status check_window(const poet_node *n, const poet_node *x, bool pool, poet_err *err)
{
    const poet_attrs *a = &n->attrs;
    if (x->shape.ndim == 3 && (a->kh != 1 || a->pt || a->pb))
        return poet_fail(err, POET_ERR_INVALID, "node '%s': over [N, C, L] the window is 1 high, without padding above "
                         "or below", n->name);
    if (a->kh <= 0 || a->kw <= 0 || a->sh <= 0 || a->sw <= 0 || a->pt < 0 || a->pl < 0 || a->pb < 0 || a->pr < 0 ||
        a->dh <= 0 || a->dw <= 0)
        return poet_fail(err, POET_ERR_INVALID, "node '%s': kernel, stride and dilation must be > 0, padding >= 0",
                         n->name);
    if (pool && (a->dh != 1 || a->dw != 1))
        return poet_fail(err, POET_ERR_UNSUPPORTED, "node '%s': pools with dilation are not supported", n->name);
    if (pool && (a->pt >= a->kh || a->pb >= a->kh || a->pl >= a->kw || a->pr >= a->kw))
        return poet_fail(err, POET_ERR_INVALID, "node '%s': a pool's padding must be smaller than its window", n->name);
    int64_t eh = (int64_t)a->dh * (a->kh - 1) + 1, ew = (int64_t)a->dw * (a->kw - 1) + 1;
    if (window_h(x) + a->pt + a->pb < eh || window_w(x) + a->pl + a->pr < ew)
        return poet_fail(err, POET_ERR_INVALID, "node '%s': window %dx%d larger than its %lldx%lld input", n->name,
                         (int)a->kh, (int)a->kw, (long long)window_h(x), (long long)window_w(x));
    return POET_OK;
}

static void window_shape(poet_node *n, const poet_node *x, int64_t channels)
{
    const poet_attrs *a = &n->attrs;
    int64_t d[4] = {x->shape.dim[0], channels, window_out(window_h(x), a->pt, a->pb, a->kh, a->sh, a->dh),
                    window_out(window_w(x), a->pl, a->pr, a->kw, a->sw, a->dw)};
    if (x->shape.ndim == 3) d[2] = d[3]; /* [N, C, L'] */
    set_shape(n, x->shape.ndim, d);
}

static poet_status infer_conv2d(const poet_graph *g, poet_node *n, poet_err *err)
{
    const poet_node *x = in(g, n, 0);
    const poet_attrs *a = &n->attrs;
    poet_status st = need_rank(n, x, 3, 4, err);
    if (st || (st = check_window(n, x, false, err))) return st;
    int64_t cin = x->shape.dim[1], gr = a->groups;
    if (a->features <= 0 || gr <= 0 || cin % gr || a->features % gr)
        return poet_fail(err, POET_ERR_INVALID, "conv2d '%s': output channels > 0, and groups dividing %lld input "
                         "and %d output channels", n->name, (long long)cin, (int)a->features);
    if (a->end < 0 || a->end >= cin || (a->end && gr != 1))
        return poet_fail(err, POET_ERR_INVALID, "conv2d '%s': %d of its %lld input channels train", n->name,
                         (int)a->end, (long long)cin);
    window_shape(n, x, a->features);
    n->params = (uint64_t)a->features * (uint64_t)(cin / gr) * (uint64_t)a->kh * (uint64_t)a->kw +
                (a->flags & POET_ATTR_NO_BIAS ? 0u : (uint64_t)a->features);
    /* POET: 2 * K^2 * numel(input) * C_out + numel(output), each input element
     * meeting C_out / groups filters; exact for stride 1 with "same" padding,
     * 4x an exact count for stride 2. */
    n->flops = 2.0 * a->kh * a->kw * numel_d(&x->shape) * (double)(a->features / gr) + numel_d(&n->shape);
    return POET_OK;
}

static poet_status infer_pool(const poet_graph *g, poet_node *n, poet_err *err)
{
    const poet_node *x = in(g, n, 0);
    poet_status st = need_rank(n, x, 3, 4, err);
    if (st || (st = check_window(n, x, true, err))) return st;
    window_shape(n, x, x->shape.dim[1]);
    n->flops = 2.0 * n->attrs.kh * n->attrs.kw * numel_d(&n->shape); /* POET: as if stride 1 */
    return POET_OK;
}

static poet_status infer_global_avgpool(const poet_graph *g, poet_node *n, poet_err *err)
{
    const poet_node *x = in(g, n, 0);
    poet_status st = need_rank(n, x, 3, 4, err);
    if (st) return st;
    int64_t d[4] = {x->shape.dim[0], x->shape.dim[1], 1, 1};
    set_shape(n, n->attrs.flags & POET_ATTR_KEEPDIMS ? x->shape.ndim : 2, d);
    n->flops = 2.0 * numel_d(&x->shape);
    return POET_OK;
}

/* ---- normalization ---- */

static poet_status infer_batchnorm2d(const poet_graph *g, poet_node *n, poet_err *err)
{
    const poet_node *x = in(g, n, 0);
    poet_status st = need_rank(n, x, 2, 4, err);
    if (st) return st;
    n->shape = x->shape;
    n->params = 2 * (uint64_t)x->shape.dim[1];  /* gamma, beta */
    n->buffers = 2 * (uint64_t)x->shape.dim[1]; /* running mean, variance */
    n->flops = 2.0 * numel_d(&x->shape);
    return POET_OK;
}

static poet_status infer_layernorm(const poet_graph *g, poet_node *n, poet_err *err)
{
    const poet_node *x = in(g, n, 0);
    poet_status st = need_rank(n, x, 2, 4, err);
    if (st) return st;
    n->shape = x->shape;
    n->params = n->attrs.flags & POET_ATTR_NO_AFFINE ? 0 : 2 * (uint64_t)x->shape.dim[x->shape.ndim - 1];
    n->flops = 8.0 * numel_d(&x->shape); /* mean, variance, normalize, scale and shift */
    return POET_OK;
}

/* ---- elementwise with one input: FLOPs are per_elem per element ---- */

static poet_status infer_unary(const poet_graph *g, poet_node *n, double per_elem)
{
    const poet_node *x = in(g, n, 0);
    n->shape = x->shape;
    n->flops = per_elem * numel_d(&x->shape);
    return POET_OK;
}

#define UNARY(name, per_elem)                                                      \
    static poet_status infer_##name(const poet_graph *g, poet_node *n, poet_err *err) \
    {                                                                              \
        (void)err;                                                                 \
        return infer_unary(g, n, per_elem);                                        \
    }
UNARY(relu, 1.0)

/* One bit a relu output (set where it is positive), in 32-bit words. */
static poet_status infer_relu_mask(const poet_graph *g, poet_node *n, poet_err *err)
{
    const poet_node *x = in(g, n, 0);
    if (x->op != POET_OP_RELU) return poet_fail(err, POET_ERR_INVALID, "relu_mask reads a relu, not %s", poet_op_name(x->op));
    n->shape = (poet_shape){1, {(int64_t)((poet_shape_numel(&x->shape) + 31) / 32)}};
    n->flops = numel_d(&x->shape);
    return POET_OK;
}

/* A byte per max-pool output: where in its window the maximum lies. It
 * reads the pool's input and the pool (for its shape), and has the pool's
 * window attributes. */
static poet_status infer_pool_index(const poet_graph *g, poet_node *n, poet_err *err)
{
    const poet_node *pool = in(g, n, 1);
    if (pool->op != POET_OP_MAXPOOL2D || pool->attrs.kh != n->attrs.kh || pool->attrs.kw != n->attrs.kw ||
        pool->attrs.sh != n->attrs.sh || pool->attrs.sw != n->attrs.sw)
        return poet_fail(err, POET_ERR_INVALID, "pool_index reads a max pool with its window");
    if (n->attrs.kh * n->attrs.kw > 256)
        return poet_fail(err, POET_ERR_UNSUPPORTED, "pool_index: a %d x %d window has more than 256 places",
                         (int)n->attrs.kh, (int)n->attrs.kw);
    n->shape = (poet_shape){1, {(int64_t)((poet_shape_numel(&pool->shape) + 3) / 4)}};
    n->flops = numel_d(&pool->shape) * n->attrs.kh * n->attrs.kw;
    return POET_OK;
}

/* The `features` channels of its input along `axis` that a layer's weight
 * gradient reads (which ones: the image's channel list from `start`). */
static poet_status infer_channel_select(const poet_graph *g, poet_node *n, poet_err *err)
{
    const poet_node *x = in(g, n, 0);
    int axis = n->attrs.axis;
    if (axis < 1 || axis >= x->shape.ndim || n->attrs.start < 0 || n->attrs.features < 1 ||
        n->attrs.features >= x->shape.dim[axis])
        return poet_fail(err, POET_ERR_INVALID, "channel_select '%s': %d of the %lld channels of axis %d", n->name,
                         (int)n->attrs.features, axis >= 0 && axis < x->shape.ndim ? (long long)x->shape.dim[axis] : 0LL,
                         axis);
    n->shape = x->shape;
    n->shape.dim[axis] = n->attrs.features;
    n->flops = numel_d(&n->shape);
    return POET_OK;
}

UNARY(gelu, 8.0)       /* tanh or erf, and a few products */
UNARY(sigmoid, 4.0)    /* exp, add, divide, negate */
UNARY(tanh, 4.0)
UNARY(erf, 8.0)
UNARY(hardsigmoid, 3.0)
UNARY(hardswish, 4.0)
UNARY(clip, 1.0)
UNARY(leaky_relu, 2.0) /* compare, multiply */
UNARY(softplus, 8.0)   /* exp, log, add */
UNARY(elu, 5.0)
#undef UNARY

static poet_status infer_dropout(const poet_graph *g, poet_node *n, poet_err *err)
{
    if (!(n->attrs.p >= 0.0f && n->attrs.p < 1.0f))
        return poet_fail(err, POET_ERR_INVALID, "dropout '%s' needs 0 <= p < 1", n->name);
    return infer_unary(g, n, 1.0);
}

/* An axis attribute, counted from the end when negative, into [0, rank). */
static poet_status normalize_axis(poet_node *n, int rank, poet_err *err)
{
    int a = n->attrs.axis < 0 ? n->attrs.axis + rank : n->attrs.axis;
    if (a < 0 || a >= rank)
        return poet_fail(err, POET_ERR_INVALID, "node '%s': axis %d outside a %d-d tensor", n->name, (int)n->attrs.axis, rank);
    n->attrs.axis = a;
    return POET_OK;
}

/* max, subtract, exp, sum, divide */
static poet_status infer_softmax(const poet_graph *g, poet_node *n, poet_err *err)
{
    poet_status st = normalize_axis(n, in(g, n, 0)->shape.ndim, err);
    return st ? st : infer_unary(g, n, 5.0);
}

/* ---- elementwise with two operands, broadcast as NumPy does ---- */

static bool broadcast(const poet_shape *a, const poet_shape *b, poet_shape *out)
{
    for (int i = 0; i < POET_MAX_DIMS; i++) out->dim[i] = 0;
    return broadcast_dims(a->ndim, a->dim, b->ndim, b->dim, &out->ndim, out->dim);
}

/* The second input may have fewer channels than the first: it is then
 * zero-padded, as in ResNet's parameter-free shortcut (option A), which
 * POET's ResNet-50 uses. */
static bool channel_padded(const poet_shape *a, const poet_shape *b)
{
    return a->ndim == 4 && b->ndim == 4 && a->dim[0] == b->dim[0] && b->dim[1] <= a->dim[1] &&
           a->dim[2] == b->dim[2] && a->dim[3] == b->dim[3];
}

static poet_status infer_binary(const poet_graph *g, poet_node *n, poet_err *err)
{
    const poet_node *a = in(g, n, 0);
    unsigned kind = n->attrs.flags & (POET_ATTR_OPERAND_PARAM | POET_ATTR_OPERAND_CONST);
    poet_shape other;
    if (n->n_inputs == 2) {
        if (kind) return poet_fail(err, POET_ERR_INVALID, "node '%s': two inputs and an operand", n->name);
        other = in(g, n, 1)->shape;
    } else {
        if (kind != POET_ATTR_OPERAND_PARAM && kind != POET_ATTR_OPERAND_CONST)
            return poet_fail(err, POET_ERR_INVALID, "node '%s' (%s) with one input needs a parameter or a constant "
                             "operand", n->name, op_get(n->op)->name);
        other = shape_of_attrs(&n->attrs);
        poet_status st = check_dims(n, &other, "its operand", err);
        if (st) return st;
        uint64_t count = poet_shape_numel(&other);
        if (kind == POET_ATTR_OPERAND_PARAM) n->params = count;
        else n->buffers = count;
    }
    if (n->op == POET_OP_ADD && n->n_inputs == 2 && !same_shape(&a->shape, &other) && channel_padded(&a->shape, &other))
        n->shape = a->shape;
    else if (!broadcast(&a->shape, &other, &n->shape))
        return poet_fail(err, POET_ERR_INVALID, "node '%s' (%s): shapes of '%s' and its other operand do not broadcast",
                         n->name, op_get(n->op)->name, a->name);
    n->flops = numel_d(&n->shape);
    return POET_OK;
}

/* PReLU: its trained slope (the operand) broadcasts into the input, whose
 * shape it keeps. */
static poet_status infer_prelu(const poet_graph *g, poet_node *n, poet_err *err)
{
    const poet_node *x = in(g, n, 0);
    poet_shape slope = shape_of_attrs(&n->attrs), out;
    poet_status st = check_dims(n, &slope, "its slope", err);
    if (st) return st;
    if (!broadcast(&x->shape, &slope, &out) || !same_shape(&out, &x->shape))
        return poet_fail(err, POET_ERR_INVALID, "prelu '%s': its slope does not broadcast into its input", n->name);
    n->shape = x->shape;
    n->params = poet_shape_numel(&slope);
    n->flops = 2.0 * numel_d(&x->shape);
    return POET_OK;
}

/* With a trained operand one node computes the input's gradient and the
 * operand's; otherwise one node per input. */
static grad_rule binary_grad(const poet_node *n)
{
    if (n->attrs.flags & POET_ATTR_OPERAND_PARAM) return GRAD_FUSED;
    return n->op == POET_OP_ADD ? GRAD_ALIAS : GRAD_PER_INPUT;
}

/* Batch norm in training mode reads its input for dX; with its running
 * statistics dX = dY gamma / sqrt(var + eps) does not. */
static unsigned batchnorm_reads(const poet_node *n, int wrt)
{
    bool batch_stats = !(n->attrs.flags & POET_ATTR_BN_EVAL), gamma = !(n->attrs.flags & POET_ATTR_FREEZE_WEIGHTS);
    return (wrt >= 0 && batch_stats ? READ_IN0 : 0u) | (gamma ? READ_IN0 : 0u);
}

/* What each gradient reads: dY always; then, by op and operand:
 *   mul:  d/da = dY b (reads b), d/db = dY a (reads a)
 *   div:  d/da = dY / b (reads b), d/db = -(dY (a / b)) / b (reads a and b)
 *   add, sub: nothing. An operand kept in the node is always at hand. */
static unsigned binary_reads(const poet_node *n, int wrt)
{
    bool operand = n->n_inputs == 1, left = n->attrs.flags & POET_ATTR_OPERAND_LEFT,
         param = (n->attrs.flags & POET_ATTR_OPERAND_PARAM) && !(n->attrs.flags & POET_ATTR_FREEZE_WEIGHTS);
    switch (n->op) {
    case POET_OP_MUL:
        if (operand) return param ? READ_IN0 : 0u; /* the operand's gradient is dY x */
        return wrt == 0 ? READ_IN1 : READ_IN0;
    case POET_OP_DIV:
        if (operand && !left) return param ? READ_IN0 : 0u; /* x / c: dx = dY / c; dc needs x */
        if (operand) return READ_IN0;                         /* c / x: both need x */
        return wrt == 0 ? READ_IN1 : READ_IN0 | READ_IN1;
    default: return 0;
    }
}

/* ---- flatten, linear, the loss ---- */

static poet_status infer_flatten(const poet_graph *g, poet_node *n, poet_err *err)
{
    const poet_node *x = in(g, n, 0);
    if (x->shape.ndim < 2) return poet_fail(err, POET_ERR_INVALID, "flatten '%s' needs a batch dimension", n->name);
    int64_t d[2] = {x->shape.dim[0], (int64_t)(poet_shape_numel(&x->shape) / (uint64_t)x->shape.dim[0])};
    set_shape(n, 2, d);
    n->flops = numel_d(&n->shape); /* POET counts a copy */
    return POET_OK;
}

/* y = x W^T + b over the last dimension; leading dimensions are rows. */
static poet_status infer_linear(const poet_graph *g, poet_node *n, poet_err *err)
{
    const poet_node *x = in(g, n, 0);
    poet_status st = need_rank(n, x, 2, 4, err);
    if (st) return st;
    if (n->attrs.features <= 0) return poet_fail(err, POET_ERR_INVALID, "linear '%s' needs output features > 0", n->name);
    int r = x->shape.ndim;
    int64_t fin = x->shape.dim[r - 1], fout = n->attrs.features;
    if (n->attrs.end < 0 || n->attrs.end >= fin)
        return poet_fail(err, POET_ERR_INVALID, "linear '%s': %d of its %lld input features train", n->name,
                         (int)n->attrs.end, (long long)fin);
    double rows = numel_d(&x->shape) / (double)fin;
    n->shape = x->shape;
    n->shape.dim[r - 1] = fout;
    n->params = (uint64_t)(fin + (n->attrs.flags & POET_ATTR_NO_BIAS ? 0 : 1)) * (uint64_t)fout;
    /* POET: 2 * params + out_features for one row; we count every row. */
    n->flops = rows * (2.0 * (double)n->params + (double)fout);
    return POET_OK;
}

static poet_status infer_softmax_ce(const poet_graph *g, poet_node *n, poet_err *err)
{
    const poet_node *x = in(g, n, 0);
    poet_status st = need_rank(n, x, 2, 2, err);
    if (st) return st;
    int64_t d[1] = {x->shape.dim[0]}; /* one loss per row */
    set_shape(n, 1, d);
    n->flops = numel_d(&x->shape) * (double)x->shape.dim[1]; /* POET: numel(logits) * classes */
    return POET_OK;
}

/* ---- attention: Q, K, V, context are [batch * seq, heads * d]; scores and
 * probabilities are [batch, heads, seq, seq] ---- */

static poet_status attn_dims(const poet_node *n, const poet_node *x, int64_t *batch, int64_t *d, poet_err *err)
{
    const poet_attrs *a = &n->attrs;
    poet_status st = need_rank(n, x, 2, 2, err);
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
    poet_shape ps = {4, {b, n->attrs.heads, n->attrs.seq, n->attrs.seq}};
    if (!same_shape(&p->shape, &ps))
        return poet_fail(err, POET_ERR_INVALID, "attention '%s': probabilities must be [batch, heads, seq, seq]",
                         n->name);
    n->shape = v->shape;
    n->flops = 2.0 * numel_d(&p->shape) * (double)d;
    return POET_OK;
}

/* ---- matmul: [..., M, K] x [..., K, N], leading dimensions broadcast ---- */

static poet_status infer_matmul(const poet_graph *g, poet_node *n, poet_err *err)
{
    const poet_node *a = in(g, n, 0), *b = in(g, n, 1);
    poet_status st = need_rank(n, a, 2, 4, err);
    if (st || (st = need_rank(n, b, 2, 4, err))) return st;
    int ra = a->shape.ndim, rb = b->shape.ndim;
    int64_t M = a->shape.dim[ra - 2], K = a->shape.dim[ra - 1], N = b->shape.dim[rb - 1];
    if (b->shape.dim[rb - 2] != K)
        return poet_fail(err, POET_ERR_INVALID, "matmul '%s': inner dimensions %lld and %lld differ", n->name,
                         (long long)K, (long long)b->shape.dim[rb - 2]);
    poet_shape la = {ra - 2, {0}}, lb = {rb - 2, {0}}, lead;
    for (int i = 0; i < ra - 2; i++) la.dim[i] = a->shape.dim[i];
    for (int i = 0; i < rb - 2; i++) lb.dim[i] = b->shape.dim[i];
    if (!broadcast(&la, &lb, &lead))
        return poet_fail(err, POET_ERR_INVALID, "matmul '%s': leading dimensions do not broadcast", n->name);
    n->shape = lead;
    n->shape.ndim = lead.ndim + 2;
    n->shape.dim[lead.ndim] = M;
    n->shape.dim[lead.ndim + 1] = N;
    n->flops = 2.0 * numel_d(&n->shape) * (double)K;
    return POET_OK;
}

/* ---- data movement: FLOPs are one per element, POET's count for a copy ---- */

static poet_status infer_transpose(const poet_graph *g, poet_node *n, poet_err *err)
{
    const poet_node *x = in(g, n, 0);
    int r = x->shape.ndim;
    unsigned seen = 0;
    for (int i = 0; i < r; i++) {
        int p = n->attrs.perm[i];
        if (p < 0 || p >= r || (seen >> p & 1u))
            return poet_fail(err, POET_ERR_INVALID, "transpose '%s': perm is not a permutation of 0..%d", n->name, r - 1);
        seen |= 1u << p;
        n->shape.dim[i] = x->shape.dim[p];
    }
    n->shape.ndim = r;
    n->flops = numel_d(&x->shape);
    return POET_OK;
}

static poet_status infer_reshape(const poet_graph *g, poet_node *n, poet_err *err)
{
    const poet_node *x = in(g, n, 0);
    n->shape = shape_of_attrs(&n->attrs);
    poet_status st = check_dims(n, &n->shape, "its shape", err);
    if (st) return st;
    if (poet_shape_numel(&n->shape) != poet_shape_numel(&x->shape))
        return poet_fail(err, POET_ERR_INVALID, "reshape '%s': %llu elements into a shape of %llu", n->name,
                         (unsigned long long)poet_shape_numel(&x->shape), (unsigned long long)poet_shape_numel(&n->shape));
    n->flops = numel_d(&x->shape);
    return POET_OK;
}

/* A parameter concatenated with the input (POET_ATTR_OPERAND_PARAM; first
 * where POET_ATTR_OPERAND_LEFT): ViT's class token, [1, 1, D] before the
 * patches' [N, S, D]. It is broadcast over the axes before the concat's
 * and matches the input's after it. */
static poet_status concat_operand(poet_node *n, const poet_shape *x, poet_err *err)
{
    poet_shape p = shape_of_attrs(&n->attrs);
    poet_status st = check_dims(n, &p, "its parameter operand", err);
    if (st) return st;
    if (n->n_inputs != 1)
        return poet_fail(err, POET_ERR_INVALID, "concat '%s': a parameter operand beside %d inputs (one is supported)",
                         n->name, n->n_inputs);
    bool ok = p.ndim == x->ndim;
    for (int i = 0; ok && i < p.ndim; i++) ok = i == n->attrs.axis || p.dim[i] == (i < n->attrs.axis ? 1 : x->dim[i]);
    if (!ok)
        return poet_fail(err, POET_ERR_INVALID, "concat '%s': its parameter operand is not of size 1 before axis %d "
                         "and the input's size after it", n->name, (int)n->attrs.axis);
    n->shape.dim[n->attrs.axis] += p.dim[n->attrs.axis];
    n->params = poet_shape_numel(&p);
    return POET_OK;
}

static poet_status infer_concat(const poet_graph *g, poet_node *n, poet_err *err)
{
    const poet_node *x = in(g, n, 0);
    poet_status st = normalize_axis(n, x->shape.ndim, err);
    if (st) return st;
    n->shape = x->shape;
    if (n->attrs.flags & POET_ATTR_OPERAND_PARAM) st = concat_operand(n, &x->shape, err);
    for (int j = 1; !st && j < n->n_inputs; j++) {
        const poet_shape *s = &in(g, n, j)->shape;
        bool ok = s->ndim == x->shape.ndim;
        for (int i = 0; ok && i < s->ndim; i++) ok = i == n->attrs.axis || s->dim[i] == x->shape.dim[i];
        if (!ok) return poet_fail(err, POET_ERR_INVALID, "concat '%s': inputs differ off axis %d", n->name, (int)n->attrs.axis);
        n->shape.dim[n->attrs.axis] += s->dim[n->attrs.axis];
    }
    n->flops = numel_d(&n->shape);
    return st;
}

/* With a parameter operand one node computes the input's gradient and the
 * parameter's; otherwise one node per input. */
static grad_rule concat_grad(const poet_node *n)
{
    return n->attrs.flags & POET_ATTR_OPERAND_PARAM ? GRAD_FUSED : GRAD_PER_INPUT;
}

/* [N, C, H, W] to [N, C, H sh, W sw], each element repeated (ONNX's Resize
 * and Upsample, nearest, by whole factors: the decoders of U-Nets and FPNs) */
static poet_status infer_upsample2d(const poet_graph *g, poet_node *n, poet_err *err)
{
    const poet_node *x = in(g, n, 0);
    if (x->shape.ndim != 4)
        return poet_fail(err, POET_ERR_INVALID, "upsample2d '%s': its input is not [N, C, H, W]", n->name);
    if (n->attrs.sh < 1 || n->attrs.sw < 1 || n->attrs.sh > 64 || n->attrs.sw > 64)
        return poet_fail(err, POET_ERR_INVALID, "upsample2d '%s': factors %d x %d (1 to 64 each)", n->name,
                         (int)n->attrs.sh, (int)n->attrs.sw);
    n->shape = x->shape;
    n->shape.dim[2] *= n->attrs.sh, n->shape.dim[3] *= n->attrs.sw;
    n->flops = numel_d(&n->shape);
    return POET_OK;
}

static poet_status infer_slice(const poet_graph *g, poet_node *n, poet_err *err)
{
    const poet_node *x = in(g, n, 0);
    poet_status st = normalize_axis(n, x->shape.ndim, err);
    if (st) return st;
    int64_t size = x->shape.dim[n->attrs.axis];
    if (n->attrs.start < 0 || n->attrs.start >= n->attrs.end || n->attrs.end > size)
        return poet_fail(err, POET_ERR_INVALID, "slice '%s': [%d, %d) outside 0..%lld", n->name, (int)n->attrs.start,
                         (int)n->attrs.end, (long long)size);
    n->shape = x->shape;
    n->shape.dim[n->attrs.axis] = n->attrs.end - n->attrs.start;
    n->flops = numel_d(&n->shape);
    return POET_OK;
}

static const op_def OPS[POET_OP_COUNT] = {
    [POET_OP_INPUT] = {"input", 0, 0, infer_input, GRAD_NONE, {0, 0}, false, NULL, NULL},
    /* dX = W^T dY needs no X; dW does */
    [POET_OP_CONV2D] = {"conv2d", 1, 1, infer_conv2d, GRAD_FUSED, {0, 0, READ_IN0}, false, NULL, NULL},
    [POET_OP_BATCHNORM2D] = {"batchnorm2d", 1, 1, infer_batchnorm2d, GRAD_FUSED, {READ_IN0, 0}, false, NULL, batchnorm_reads},
    [POET_OP_RELU] = {"relu", 1, 1, infer_relu, GRAD_PER_INPUT, {READ_OUT, 0}, false, NULL, NULL},
    [POET_OP_RELU_MASK] = {"relu_mask", 1, 1, infer_relu_mask, GRAD_NONE, {0, 0}, false, NULL, NULL},
    [POET_OP_POOL_INDEX] = {"pool_index", 2, 2, infer_pool_index, GRAD_NONE, {0, 0}, false, NULL, NULL},
    [POET_OP_CHANNEL_SELECT] = {"channel_select", 1, 1, infer_channel_select, GRAD_NONE, {0, 0}, false, NULL, NULL},
    [POET_OP_MAXPOOL2D] = {"maxpool2d", 1, 1, infer_pool, GRAD_PER_INPUT, {READ_IN0, 0}, false, NULL, NULL},
    [POET_OP_AVGPOOL2D] = {"avgpool2d", 1, 1, infer_pool, GRAD_PER_INPUT, {0, 0}, false, NULL, NULL},
    [POET_OP_GLOBAL_AVGPOOL] = {"global_avgpool", 1, 1, infer_global_avgpool, GRAD_PER_INPUT, {0, 0}, false, NULL, NULL},
    [POET_OP_ADD] = {"add", 1, 2, infer_binary, GRAD_ALIAS, {0, 0}, false, binary_grad, binary_reads},
    [POET_OP_FLATTEN] = {"flatten", 1, 1, infer_flatten, GRAD_ALIAS, {0, 0}, false, NULL, NULL},
    [POET_OP_LINEAR] = {"linear", 1, 1, infer_linear, GRAD_FUSED, {0, 0, READ_IN0}, false, NULL, NULL},
    /* the mask is regenerated from the step's seed, so backward reads only dY */
    [POET_OP_DROPOUT] = {"dropout", 1, 1, infer_dropout, GRAD_PER_INPUT, {0, 0}, false, NULL, NULL},
    [POET_OP_SOFTMAX_CE] = {"softmax_ce", 1, 1, infer_softmax_ce, GRAD_PER_INPUT, {READ_IN0, 0}, true, NULL, NULL},
    [POET_OP_LAYERNORM] = {"layernorm", 1, 1, infer_layernorm, GRAD_FUSED, {READ_IN0, 0, READ_IN0}, false, NULL, NULL},
    [POET_OP_GELU] = {"gelu", 1, 1, infer_gelu, GRAD_PER_INPUT, {READ_IN0, 0}, false, NULL, NULL},
    [POET_OP_SOFTMAX] = {"softmax", 1, 1, infer_softmax, GRAD_PER_INPUT, {READ_OUT, 0}, false, NULL, NULL},
    /* dQ = dS K, dK = dS^T Q */
    [POET_OP_ATTN_SCORES] = {"attn_scores", 2, 2, infer_attn_scores, GRAD_PER_INPUT, {READ_IN1, READ_IN0}, false, NULL, NULL},
    /* dP = dC V^T, dV = P^T dC */
    [POET_OP_ATTN_CONTEXT] = {"attn_context", 2, 2, infer_attn_context, GRAD_PER_INPUT, {READ_IN1, READ_IN0}, false, NULL,
                              NULL},
    [POET_OP_GRAD] = {"grad", 1, POET_MAX_INPUTS, NULL, GRAD_NONE, {0, 0}, false, NULL, NULL},
    [POET_OP_GRAD_SUM] = {"grad_sum", 2, POET_MAX_INPUTS, NULL, GRAD_NONE, {0, 0}, false, NULL, NULL},
    [POET_OP_SUB] = {"sub", 1, 2, infer_binary, GRAD_PER_INPUT, {0, 0}, false, binary_grad, binary_reads},
    [POET_OP_MUL] = {"mul", 1, 2, infer_binary, GRAD_PER_INPUT, {0, 0}, false, binary_grad, binary_reads},
    [POET_OP_DIV] = {"div", 1, 2, infer_binary, GRAD_PER_INPUT, {0, 0}, false, binary_grad, binary_reads},
    /* dA = dY B^T, dB = A^T dY */
    [POET_OP_MATMUL] = {"matmul", 2, 2, infer_matmul, GRAD_PER_INPUT, {READ_IN1, READ_IN0}, false, NULL, NULL},
    [POET_OP_SIGMOID] = {"sigmoid", 1, 1, infer_sigmoid, GRAD_PER_INPUT, {READ_OUT, 0}, false, NULL, NULL},
    [POET_OP_TANH] = {"tanh", 1, 1, infer_tanh, GRAD_PER_INPUT, {READ_OUT, 0}, false, NULL, NULL},
    [POET_OP_ERF] = {"erf", 1, 1, infer_erf, GRAD_PER_INPUT, {READ_IN0, 0}, false, NULL, NULL},
    [POET_OP_HARDSIGMOID] = {"hardsigmoid", 1, 1, infer_hardsigmoid, GRAD_PER_INPUT, {READ_IN0, 0}, false, NULL, NULL},
    [POET_OP_HARDSWISH] = {"hardswish", 1, 1, infer_hardswish, GRAD_PER_INPUT, {READ_IN0, 0}, false, NULL, NULL},
    [POET_OP_CLIP] = {"clip", 1, 1, infer_clip, GRAD_PER_INPUT, {READ_IN0, 0}, false, NULL, NULL},
    [POET_OP_TRANSPOSE] = {"transpose", 1, 1, infer_transpose, GRAD_PER_INPUT, {0, 0}, false, NULL, NULL},
    [POET_OP_RESHAPE] = {"reshape", 1, 1, infer_reshape, GRAD_ALIAS, {0, 0}, false, NULL, NULL},
    [POET_OP_CONCAT] = {"concat", 1, POET_MAX_INPUTS, infer_concat, GRAD_PER_INPUT, {0, 0}, false, concat_grad, NULL},
    [POET_OP_SLICE] = {"slice", 1, 1, infer_slice, GRAD_PER_INPUT, {0, 0}, false, NULL, NULL},
    [POET_OP_UPSAMPLE2D] = {"upsample2d", 1, 1, infer_upsample2d, GRAD_PER_INPUT, {0, 0}, false, NULL, NULL},
    [POET_OP_LEAKY_RELU] = {"leaky_relu", 1, 1, infer_leaky_relu, GRAD_PER_INPUT, {READ_IN0, 0}, false, NULL, NULL},
    [POET_OP_SOFTPLUS] = {"softplus", 1, 1, infer_softplus, GRAD_PER_INPUT, {READ_IN0, 0}, false, NULL, NULL},
    [POET_OP_PRELU] = {"prelu", 1, 1, infer_prelu, GRAD_FUSED, {READ_IN0, 0, READ_IN0}, false, NULL, NULL},
    [POET_OP_ELU] = {"elu", 1, 1, infer_elu, GRAD_PER_INPUT, {READ_IN0, 0}, false, NULL, NULL},
};

const op_def *op_get(poet_op op)
{
    return (unsigned)op < POET_OP_COUNT ? &OPS[op] : NULL;
}

grad_rule op_grad_rule(const poet_node *n)
{
    const op_def *d = op_get(n->op);
    return d->grad_of ? d->grad_of(n) : d->grad;
}

unsigned op_reads(const poet_node *n, int wrt)
{
    const op_def *d = op_get(n->op);
    if (n->attrs.flags & POET_ATTR_COMPACT_READ) return READ_MASK; /* what it read, kept compact in the next node */
    if (d->reads_of) return d->reads_of(n, wrt);
    unsigned input = wrt >= 0 ? d->reads[wrt == 1 ? 1 : 0] : 0u;
    return input | (n->attrs.flags & POET_ATTR_FREEZE_WEIGHTS ? 0u : d->reads[WEIGHT_READS]);
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
