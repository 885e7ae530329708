/* The device library's kernels: elementwise ops with one input, dropout, and those with two operands broadcast as NumPy does (kernel_ops.h: the
 * order of operations). */
#include "kernel_ops.h"

/* ---- elementwise with one input ---- */

/* The dropout mask is a function of (step seed, node, element), so a
 * recomputation and the backward regenerate it instead of storing it. */
static float dropout_scale(const kernel_ctx *c, int node, idx i, float p)
{
    uint64_t h = mix64(c->dropout_seed ^ mix64((uint64_t)node) ^ ((uint64_t)i * 0xD1B54A32D192ED03ull));
    float u = (float)(h >> 40) / 16777216.0f;
    return u < p ? 0.0f : 1.0f / (1.0f - p);
}

static const float GELU_C = 0.797884560802865f;     /* sqrt(2 / pi) */
static const float SQRT_HALF = 0.707106781186548f;  /* 1 / sqrt(2) */
static const float TWO_BY_SQRT_PI = 1.12837916709551f;

static float clampf(float x, float lo, float hi) { return x < lo ? lo : x > hi ? hi : x; }

/* y = f(x) for the ops computed element by element; inlined into a loop
 * per op, the op a constant there (kernel_unary_run_forward). */
static inline __attribute__((always_inline)) float unary_forward(int op, const poet_attrs *a, float x)
{
    switch (op) {
    case POET_OP_RELU: return x > 0 ? x : 0.0f;
    case POET_OP_SIGMOID: return 1.0f / (1.0f + poet_expf(-x));
    case POET_OP_TANH: return poet_tanhf(x);
    case POET_OP_ERF: return poet_erff(x);
    case POET_OP_HARDSIGMOID: return clampf(a->alpha * x + a->beta, 0.0f, 1.0f);
    case POET_OP_HARDSWISH: return x * clampf(x + 3.0f, 0.0f, 6.0f) / 6.0f;
    case POET_OP_CLIP: return clampf(x, a->alpha, a->beta);
    case POET_OP_LEAKY_RELU: return x > 0 ? x : a->alpha * x;
    case POET_OP_SOFTPLUS: return x > 20.0f ? x : poet_logf(1.0f + poet_expf(x)); /* PyTorch's threshold */
    case POET_OP_ELU: return x > 0 ? x : a->alpha * (poet_expf(x) - 1.0f);
    default: /* gelu */
        if (a->flags & POET_ATTR_GELU_ERF) return 0.5f * x * (1.0f + poet_erff(x * SQRT_HALF));
        return 0.5f * x * (1.0f + poet_tanhf(GELU_C * (x + 0.044715f * x * x * x)));
    }
}

/* dx from dy and what the op reads (x, or y for relu, sigmoid, tanh). */
static inline __attribute__((always_inline)) float unary_backward(int op, const poet_attrs *a, float dy, float x,
                                                                  float y)
{
    switch (op) {
    case POET_OP_RELU: return y > 0 ? dy : 0.0f;
    case POET_OP_SIGMOID: return dy * (y * (1.0f - y));
    case POET_OP_TANH: return dy * (1.0f - y * y);
    case POET_OP_ERF: return dy * (TWO_BY_SQRT_PI * poet_expf(-(x * x)));
    case POET_OP_HARDSIGMOID: {
        float v = a->alpha * x + a->beta;
        return v > 0.0f && v < 1.0f ? dy * a->alpha : 0.0f;
    }
    case POET_OP_HARDSWISH: return x < -3.0f ? 0.0f : x <= 3.0f ? dy * (x / 3.0f + 0.5f) : dy;
    case POET_OP_CLIP: return x > a->alpha && x < a->beta ? dy : 0.0f; /* hardtanh's: relu6 exports as clip */
    case POET_OP_LEAKY_RELU: return x > 0 ? dy : a->alpha * dy;
    case POET_OP_SOFTPLUS: return x > 20.0f ? dy : dy / (1.0f + poet_expf(-x));
    case POET_OP_ELU: return x > 0 ? dy : dy * a->alpha * poet_expf(x);
    default: /* gelu */
        if (a->flags & POET_ATTR_GELU_ERF) {
            float cdf = 0.5f * (1.0f + poet_erff(x * SQRT_HALF)), pdf = 0.5f * TWO_BY_SQRT_PI * SQRT_HALF * poet_expf(-0.5f * x * x);
            return dy * (cdf + x * pdf);
        }
        float t = poet_tanhf(GELU_C * (x + 0.044715f * x * x * x));
        float d = 0.5f * (1.0f + t) + 0.5f * x * (1.0f - t * t) * GELU_C * (1.0f + 3.0f * 0.044715f * x * x);
        return dy * d;
    }
}

/* The ops above but gelu, which is the default. Each runs a loop of its
 * own: a switch per element costs the M4 more than a cheap op does
 * (BENCHMARKS.md). */
#define UNARY_OPS(X)                                                                                              \
    X(POET_OP_RELU) X(POET_OP_SIGMOID) X(POET_OP_TANH) X(POET_OP_ERF) X(POET_OP_HARDSIGMOID) X(POET_OP_HARDSWISH) \
    X(POET_OP_CLIP) X(POET_OP_LEAKY_RELU) X(POET_OP_SOFTPLUS) X(POET_OP_ELU)

void kernel_unary_run_forward(const kernel_ctx *c)
{
    idx total = knode_numel(c->n);
    const float *x = c->in[0];
    float *y = c->out;
    const poet_attrs attrs = c->n->attrs, *a = &attrs; /* a copy: stores to y cannot change it */
    switch (c->n->op) {
#define FORWARD(OP)                                                                                               \
    case OP:                                                                                                      \
        for (idx i = 0; i < total; i++) y[i] = unary_forward(OP, a, x[i]);                                        \
        break;
        UNARY_OPS(FORWARD)
#undef FORWARD
    default:
        for (idx i = 0; i < total; i++) y[i] = unary_forward(POET_OP_GELU, a, x[i]);
    }
}

static uint32_t mask_word(const float *words, idx w)
{
    uint32_t bits;
    memcpy(&bits, words + w, sizeof bits);
    return bits;
}

void kernel_relu_mask_forward(const kernel_ctx *c)
{
    const float *y = c->in[0];
    idx total = knode_numel(node_in(c, 0));
    for (idx w = 0; w * 32 < total; w++) {
        uint32_t bits = 0;
        for (idx i = w * 32; i < total && i < w * 32 + 32; i++) bits |= (uint32_t)(y[i] > 0) << (i % 32);
        memcpy(c->out + w, &bits, sizeof bits);
    }
}

void kernel_unary_run_backward(const kernel_ctx *c)
{
    grad_reads g = grad_reads_of(c);
    const knode *f = fwd_of(c);
    const poet_attrs attrs = f->attrs, *a = &attrs; /* a copy: stores to dx cannot change it */
    idx total = knode_numel(c->n);
    float *dx = c->out;
    const float *dy = g.dy, *xs = g.x0, *ys = g.y;
    if (g.mask) { /* a masked relu: dy where the bit is set */
        for (idx w = 0; w * 32 < total; w++) {
            uint32_t bits = mask_word(g.mask, w);
            idx end = total - w * 32 < 32 ? total : w * 32 + 32;
            for (idx i = w * 32; i < end; i++, bits >>= 1) dx[i] = bits & 1 ? dy[i] : 0.0f;
        }
        return;
    }
    switch (f->op) {
#define BACKWARD(OP)                                                                                              \
    case OP:                                                                                                      \
        for (idx i = 0; i < total; i++) dx[i] = unary_backward(OP, a, dy[i], xs ? xs[i] : 0.0f, ys ? ys[i] : 0.0f); \
        break;
        UNARY_OPS(BACKWARD)
#undef BACKWARD
    default:
        for (idx i = 0; i < total; i++) dx[i] = unary_backward(POET_OP_GELU, a, dy[i], xs ? xs[i] : 0.0f, ys ? ys[i] : 0.0f);
    }
}

void kernel_dropout_forward(const kernel_ctx *c)
{
    idx total = knode_numel(c->n);
    for (idx i = 0; i < total; i++)
        c->out[i] = c->training ? c->in[0][i] * dropout_scale(c, c->n->inputs[0], i, c->n->attrs.p) : c->in[0][i];
}

void kernel_dropout_backward(const kernel_ctx *c)
{
    const knode *f0 = fwd_of(c);
    grad_reads g = grad_reads_of(c);
    idx total = knode_numel(f0);
    for (idx i = 0; i < total; i++) c->out[i] = g.dy[i] * dropout_scale(c, f0->inputs[0], i, f0->attrs.p);
}

/* ---- elementwise with two operands, broadcast as NumPy does ---- */

/* Shapes right-aligned to four dimensions; strides 0 where an operand is broadcast. */
typedef struct bcast {
    idx dim[POET_MAX_DIMS], sa[POET_MAX_DIMS], sb[POET_MAX_DIMS];
} bcast;

static void strides_of(const int32_t *dim, int ndim, const idx *out, idx *s)
{
    idx step = 1;
    for (int i = POET_MAX_DIMS - 1; i >= 0; i--) {
        int j = ndim - POET_MAX_DIMS + i;
        idx size = j >= 0 ? dim[j] : 1;
        s[i] = size == 1 && out[i] != 1 ? 0 : step;
        step *= size;
    }
}

static bcast bcast_of(const knode *out, const int32_t *adim, int andim, const int32_t *bdim, int bndim)
{
    bcast b;
    for (int i = 0; i < POET_MAX_DIMS; i++) {
        int j = out->ndim - POET_MAX_DIMS + i;
        b.dim[i] = j >= 0 ? out->dim[j] : 1;
    }
    strides_of(adim, andim, b.dim, b.sa);
    strides_of(bdim, bndim, b.dim, b.sb);
    return b;
}

/* Calls body with the output index o and the operands' indices ia, ib, in
 * the output's row-major order. */
#define FOR_BCAST(bc, o, ia, ib, body)                                                                   \
    do {                                                                                                 \
        idx o = 0;                                                                                       \
        for (idx i0 = 0; i0 < (bc).dim[0]; i0++)                                                         \
            for (idx i1 = 0; i1 < (bc).dim[1]; i1++)                                                     \
                for (idx i2 = 0; i2 < (bc).dim[2]; i2++) {                                               \
                    idx ia = i0 * (bc).sa[0] + i1 * (bc).sa[1] + i2 * (bc).sa[2];                        \
                    idx ib = i0 * (bc).sb[0] + i1 * (bc).sb[1] + i2 * (bc).sb[2];                        \
                    for (idx i3 = 0; i3 < (bc).dim[3]; i3++, o++, ia += (bc).sa[3], ib += (bc).sb[3]) { \
                        body;                                                                            \
                    }                                                                                    \
                }                                                                                        \
    } while (0)

/* The two operands of a binary node: inputs, or an input and the node's
 * parameter or constant, in the order the op applies them. */
typedef struct operands {
    const float *a, *b;
    const int32_t *adim, *bdim;
    int andim, bndim;
    bool a_is_operand, b_is_operand; /* held by the node rather than an input */
} operands;

static operands operands_of(const knode *nodes, const knode *f, const float *in0, const float *in1,
                            const float *params, const float *consts)
{
    const knode *x = &nodes[f->inputs[0]];
    operands op = {in0, in1, x->dim, NULL, x->ndim, 0, false, false};
    if (f->n_inputs == 2) {
        const knode *y = &nodes[f->inputs[1]];
        op.bdim = y->dim, op.bndim = y->ndim;
        return op;
    }
    const float *held = f->attrs.flags & POET_ATTR_OPERAND_PARAM ? params : consts;
    if (f->attrs.flags & POET_ATTR_OPERAND_LEFT) {
        op.b = in0, op.bdim = x->dim, op.bndim = x->ndim;
        op.a = held, op.adim = f->attrs.dim, op.andim = f->attrs.ndim, op.a_is_operand = true;
    } else {
        op.b = held, op.bdim = f->attrs.dim, op.bndim = f->attrs.ndim, op.b_is_operand = true;
    }
    return op;
}

static float binary_apply(int op, float a, float b)
{
    switch (op) {
    case POET_OP_ADD: return a + b;
    case POET_OP_SUB: return a - b;
    case POET_OP_MUL: return a * b;
    default: return a / b;
    }
}

/* The channel-zero-padded add of POET's ResNet-50 (shortcut option A). */
static bool add_padded(const knode *nodes, const knode *f)
{
    if (f->op != POET_OP_ADD || f->n_inputs != 2) return false;
    const knode *a = &nodes[f->inputs[0]], *b = &nodes[f->inputs[1]];
    return a->ndim == 4 && b->ndim == 4 && b->dim[1] < a->dim[1];
}

static void add_padded_forward(const kernel_ctx *c)
{
    const knode *a = node_in(c, 0), *b = node_in(c, 1);
    idx N = a->dim[0], per_a = knode_numel(a) / N, per_b = knode_numel(b) / N;
    for (idx n = 0; n < N; n++)
        for (idx i = 0; i < per_a; i++)
            c->out[n * per_a + i] = c->in[0][n * per_a + i] + (i < per_b ? c->in[1][n * per_b + i] : 0.0f);
}

void kernel_binary_forward(const kernel_ctx *c)
{
    if (add_padded(c->nodes, c->n)) {
        add_padded_forward(c);
        return;
    }
    operands p = operands_of(c->nodes, c->n, c->in[0], c->in[1], c->params, c->running);
    bcast bc = bcast_of(c->n, p.adim, p.andim, p.bdim, p.bndim);
    int op = c->n->op;
    FOR_BCAST(bc, o, ia, ib, c->out[o] = binary_apply(op, p.a[ia], p.b[ib]));
}

/* The gradient of one operand, summed over where it was broadcast: +0,
 * then the terms in the output's row-major order. */
static void binary_grad_of(const knode *f, const operands *p, const float *dy, bool of_a, bcast bc, float *out,
                           idx out_numel)
{
    memset(out, 0, (size_t)out_numel * sizeof(float));
    switch (f->op) {
    case POET_OP_ADD: FOR_BCAST(bc, o, ia, ib, out[of_a ? ia : ib] += dy[o]); break;
    case POET_OP_SUB: FOR_BCAST(bc, o, ia, ib, out[of_a ? ia : ib] += of_a ? dy[o] : -dy[o]); break;
    case POET_OP_MUL: FOR_BCAST(bc, o, ia, ib, out[of_a ? ia : ib] += dy[o] * (of_a ? p->b[ib] : p->a[ia])); break;
    default: /* div: d/da = dy / b; d/db = -(dy (a / b)) / b */
        FOR_BCAST(bc, o, ia, ib, out[of_a ? ia : ib] += of_a ? dy[o] / p->b[ib] : -(dy[o] * (p->a[ia] / p->b[ib])) / p->b[ib]);
    }
}

void kernel_binary_backward(const kernel_ctx *c)
{
    const knode *f = fwd_of(c);
    grad_reads g = grad_reads_of(c);
    if (add_padded(c->nodes, f)) { /* the padded input's gradient: a slice of dY */
        const knode *x = fwd_in(c, c->n->wrt);
        idx N = f->dim[0], per_y = knode_numel(f) / N, per_x = knode_numel(x) / N;
        for (idx n = 0; n < N; n++) memcpy(c->out + n * per_x, g.dy + n * per_y, (size_t)per_x * sizeof(float));
        return;
    }
    /* the inputs the gradient does not read are not needed by its formula */
    operands p = operands_of(c->nodes, f, g.x0, g.x1, c->params, c->running);
    bcast bc = bcast_of(f, p.adim, p.andim, p.bdim, p.bndim);
    if (c->n->wrt >= 0) {
        bool of_a = f->n_inputs == 2 ? c->n->wrt == 0 : !p.a_is_operand;
        binary_grad_of(f, &p, g.dy, of_a, bc, c->out, knode_numel(c->n));
    }
    if (c->grad_w) binary_grad_of(f, &p, g.dy, p.a_is_operand, bc, c->grad_w, (idx)f->params);
}

/* prelu: x above 0, slope x below; the slope's gradient sums x dY below 0
 * over where it was broadcast, in the output's order */
void kernel_prelu_forward(const kernel_ctx *c)
{
    const knode *x = node_in(c, 0);
    const float *in = c->in[0], *slope = c->params;
    bcast bc = bcast_of(c->n, x->dim, x->ndim, c->n->attrs.dim, c->n->attrs.ndim);
    FOR_BCAST(bc, o, ia, ib, c->out[o] = in[ia] > 0 ? in[ia] : slope[ib] * in[ia]);
}

void kernel_prelu_backward(const kernel_ctx *c)
{
    const knode *f = fwd_of(c), *x = fwd_in(c, 0);
    grad_reads g = grad_reads_of(c);
    const float *slope = c->params;
    bcast bc = bcast_of(f, x->dim, x->ndim, f->attrs.dim, f->attrs.ndim);
    if (c->n->wrt >= 0) FOR_BCAST(bc, o, ia, ib, c->out[ia] = g.x0[ia] > 0 ? g.dy[o] : slope[ib] * g.dy[o]);
    if (!c->grad_w) return;
    memset(c->grad_w, 0, (size_t)f->params * sizeof(float));
    FOR_BCAST(bc, o, ia, ib, c->grad_w[ib] += g.x0[ia] > 0 ? 0.0f : g.x0[ia] * g.dy[o]);
}

