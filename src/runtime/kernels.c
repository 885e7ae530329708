/* Reference float32 kernels. Layouts: images NCHW; conv weights [F][C][K][K]
 * then bias [F]; linear weights [out][in] then bias [out]; batch norm and
 * layer norm gamma then beta; running statistics mean then variance.
 * Sums accumulate in double in a fixed order, so results do not depend on
 * where a tensor lives or how often it was recomputed. */
#define _POSIX_C_SOURCE 200809L
#include "kernels.h"

#include <math.h>
#include <string.h>

#include "../graph/ops.h"
#include "util.h"

enum { BN_MOMENTUM_PCT = 10 };
static const double NORM_EPS = 1e-5;

static const poet_node *node_in(const kernel_ctx *c, int i) { return &c->g->nodes[c->n->inputs[i]]; }
static const poet_node *fwd_of(const kernel_ctx *c) { return &c->g->nodes[c->n->fwd]; }
static int64_t numel(const poet_node *n) { return (int64_t)poet_shape_numel(&n->shape); }

grad_reads kernel_grad_reads(const kernel_ctx *c)
{
    grad_reads r = {0};
    const poet_node *f = fwd_of(c);
    const op_def *d = op_get(f->op);
    int k = 0;
    if (!d->seeds_grad) r.dy = c->in[k++];
    unsigned m = d->reads[c->n->wrt < 0 ? 0 : c->n->wrt];
    if (m & READ_IN0) r.x0 = c->in[k++];
    if (m & READ_IN1) r.x1 = c->in[k++];
    if (m & READ_OUT) r.y = c->in[k++];
    return r;
}

uint64_t kernel_fan_in(const poet_graph *g, const poet_node *n)
{
    const poet_node *x = &g->nodes[n->inputs[0]];
    if (n->op == POET_OP_CONV2D) return (uint64_t)x->shape.dim[1] * (uint64_t)n->attrs.kernel * (uint64_t)n->attrs.kernel;
    if (n->op == POET_OP_LINEAR) return (uint64_t)x->shape.dim[1];
    return 1;
}

/* A dot product in eight fixed lanes: the compiler can vectorise it, and
 * the order of additions never depends on where the data lies. */
static float dot(const float *a, const float *b, int64_t n)
{
    float l[8] = {0};
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        for (int k = 0; k < 8; k++) l[k] += a[i + k] * b[i + k];
    float tail = 0;
    for (; i < n; i++) tail += a[i] * b[i];
    return ((l[0] + l[1]) + (l[2] + l[3])) + ((l[4] + l[5]) + (l[6] + l[7])) + tail;
}

static float dot_strided(const float *a, int64_t stride, const float *b, int64_t n)
{
    if (stride == 1) return dot(a, b, n);
    float s = 0;
    for (int64_t i = 0; i < n; i++) s += a[i * stride] * b[i];
    return s;
}

/* y[i * stride] += a * x[i] */
static void axpy_strided(float *y, int64_t stride, float a, const float *x, int64_t n)
{
    if (stride == 1) {
        for (int64_t i = 0; i < n; i++) y[i] += a * x[i];
        return;
    }
    for (int64_t i = 0; i < n; i++) y[i * stride] += a * x[i];
}

/* y[i] += a * x[i * stride] */
static void axpy_gather(float *y, float a, const float *x, int64_t stride, int64_t n)
{
    if (stride == 1) {
        for (int64_t i = 0; i < n; i++) y[i] += a * x[i];
        return;
    }
    for (int64_t i = 0; i < n; i++) y[i] += a * x[i * stride];
}

/* ---- convolution ---- */

typedef struct conv_dims {
    int64_t N, C, H, W, F, K, S, P, OH, OW;
} conv_dims;

static conv_dims conv_dims_of(const poet_node *conv, const poet_node *x)
{
    return (conv_dims){x->shape.dim[0], x->shape.dim[1], x->shape.dim[2], x->shape.dim[3], conv->attrs.features,
                       conv->attrs.kernel, conv->attrs.stride, conv->attrs.pad, conv->shape.dim[2], conv->shape.dim[3]};
}

/* Output columns [lo, hi) whose input column ow*S - P + k lies in [0, W). */
static void valid_range(int64_t W, int64_t OW, int64_t S, int64_t P, int64_t k, int64_t *lo, int64_t *hi)
{
    int64_t a = P - k, b = W - 1 + P - k;
    *lo = a <= 0 ? 0 : (a + S - 1) / S;
    *hi = b < 0 ? 0 : b / S + 1;
    if (*hi > OW) *hi = OW;
    if (*lo > *hi) *lo = *hi;
}

static void conv_forward(const kernel_ctx *c)
{
    conv_dims d = conv_dims_of(c->n, node_in(c, 0));
    const float *x = c->in[0], *w = c->params, *bias = c->params + d.F * d.C * d.K * d.K;
    for (int64_t n = 0; n < d.N; n++)
        for (int64_t f = 0; f < d.F; f++) {
            float *o = c->out + (n * d.F + f) * d.OH * d.OW;
            for (int64_t i = 0; i < d.OH * d.OW; i++) o[i] = bias[f];
            for (int64_t ch = 0; ch < d.C; ch++)
                for (int64_t kh = 0; kh < d.K; kh++)
                    for (int64_t kw = 0; kw < d.K; kw++) {
                        float wv = w[((f * d.C + ch) * d.K + kh) * d.K + kw];
                        int64_t lo, hi;
                        valid_range(d.W, d.OW, d.S, d.P, kw, &lo, &hi);
                        for (int64_t oh = 0; oh < d.OH; oh++) {
                            int64_t ih = oh * d.S - d.P + kh;
                            if (ih < 0 || ih >= d.H) continue;
                            const float *xr = x + ((n * d.C + ch) * d.H + ih) * d.W - d.P + kw;
                            axpy_gather(o + oh * d.OW + lo, wv, xr + lo * d.S, d.S, hi - lo);
                        }
                    }
        }
}

static void conv_backward(const kernel_ctx *c)
{
    const poet_node *f0 = fwd_of(c);
    grad_reads r = kernel_grad_reads(c);
    conv_dims d = conv_dims_of(f0, &c->g->nodes[f0->inputs[0]]);
    const float *w = c->params;
    if (c->n->wrt == 0) {
        memset(c->out, 0, (size_t)(d.N * d.C * d.H * d.W) * sizeof(float));
        for (int64_t n = 0; n < d.N; n++)
            for (int64_t f = 0; f < d.F; f++)
                for (int64_t ch = 0; ch < d.C; ch++)
                    for (int64_t kh = 0; kh < d.K; kh++)
                        for (int64_t kw = 0; kw < d.K; kw++) {
                            float wv = w[((f * d.C + ch) * d.K + kh) * d.K + kw];
                            int64_t lo, hi;
                            valid_range(d.W, d.OW, d.S, d.P, kw, &lo, &hi);
                            for (int64_t oh = 0; oh < d.OH; oh++) {
                                int64_t ih = oh * d.S - d.P + kh;
                                if (ih < 0 || ih >= d.H) continue;
                                float *xr = c->out + ((n * d.C + ch) * d.H + ih) * d.W - d.P + kw;
                                const float *g = r.dy + ((n * d.F + f) * d.OH + oh) * d.OW;
                                axpy_strided(xr + lo * d.S, d.S, wv, g + lo, hi - lo);
                            }
                        }
    }
    if (!c->grads) return;
    float *dw = c->grads, *db = c->grads + d.F * d.C * d.K * d.K;
    for (int64_t f = 0; f < d.F; f++) {
        for (int64_t ch = 0; ch < d.C; ch++)
            for (int64_t kh = 0; kh < d.K; kh++)
                for (int64_t kw = 0; kw < d.K; kw++) {
                    int64_t lo, hi;
                    valid_range(d.W, d.OW, d.S, d.P, kw, &lo, &hi);
                    double s = 0;
                    for (int64_t n = 0; n < d.N; n++)
                        for (int64_t oh = 0; oh < d.OH; oh++) {
                            int64_t ih = oh * d.S - d.P + kh;
                            if (ih < 0 || ih >= d.H) continue;
                            const float *xr = r.x0 + ((n * d.C + ch) * d.H + ih) * d.W - d.P + kw;
                            const float *g = r.dy + ((n * d.F + f) * d.OH + oh) * d.OW;
                            s += dot_strided(xr + lo * d.S, d.S, g + lo, hi - lo);
                        }
                    dw[((f * d.C + ch) * d.K + kh) * d.K + kw] = (float)s;
                }
        double s = 0;
        for (int64_t n = 0; n < d.N; n++)
            for (int64_t i = 0; i < d.OH * d.OW; i++) s += r.dy[(n * d.F + f) * d.OH * d.OW + i];
        db[f] = (float)s;
    }
}

/* ---- batch norm (training: batch statistics; inference: running) ---- */

typedef struct plane_dims {
    int64_t N, C, HW;
} plane_dims;

static plane_dims planes_of(const poet_node *x)
{
    return (plane_dims){x->shape.dim[0], x->shape.dim[1], x->shape.dim[2] * x->shape.dim[3]};
}

static void channel_stats(const float *x, plane_dims d, int64_t ch, double *mean, double *var)
{
    double s = 0, q = 0, m = (double)(d.N * d.HW);
    for (int64_t n = 0; n < d.N; n++)
        for (int64_t i = 0; i < d.HW; i++) s += x[(n * d.C + ch) * d.HW + i];
    *mean = s / m;
    for (int64_t n = 0; n < d.N; n++)
        for (int64_t i = 0; i < d.HW; i++) {
            double v = x[(n * d.C + ch) * d.HW + i] - *mean;
            q += v * v;
        }
    *var = q / m;
}

static void batchnorm_forward(const kernel_ctx *c)
{
    plane_dims d = planes_of(node_in(c, 0));
    const float *x = c->in[0], *gamma = c->params, *beta = c->params + d.C;
    double m = (double)(d.N * d.HW);
    for (int64_t ch = 0; ch < d.C; ch++) {
        double mean, var;
        if (c->training) {
            channel_stats(x, d, ch, &mean, &var);
            if (c->running_out) {
                double mom = BN_MOMENTUM_PCT / 100.0, unbiased = m > 1 ? var * m / (m - 1) : var;
                c->running_out[ch] = (float)((1 - mom) * c->running[ch] + mom * mean);
                c->running_out[d.C + ch] = (float)((1 - mom) * c->running[d.C + ch] + mom * unbiased);
            }
        } else {
            mean = c->running[ch];
            var = c->running[d.C + ch];
        }
        double inv = 1.0 / sqrt(var + NORM_EPS);
        for (int64_t n = 0; n < d.N; n++)
            for (int64_t i = 0; i < d.HW; i++) {
                int64_t k = (n * d.C + ch) * d.HW + i;
                c->out[k] = (float)((x[k] - mean) * inv * gamma[ch] + beta[ch]);
            }
    }
}

static void batchnorm_backward(const kernel_ctx *c)
{
    const poet_node *f0 = fwd_of(c);
    grad_reads r = kernel_grad_reads(c);
    plane_dims d = planes_of(&c->g->nodes[f0->inputs[0]]);
    const float *gamma = c->params;
    double m = (double)(d.N * d.HW);
    for (int64_t ch = 0; ch < d.C; ch++) {
        double mean, var, sdy = 0, sdyx = 0;
        channel_stats(r.x0, d, ch, &mean, &var);
        double inv = 1.0 / sqrt(var + NORM_EPS);
        for (int64_t n = 0; n < d.N; n++)
            for (int64_t i = 0; i < d.HW; i++) {
                int64_t k = (n * d.C + ch) * d.HW + i;
                sdy += r.dy[k];
                sdyx += r.dy[k] * (r.x0[k] - mean) * inv;
            }
        if (c->n->wrt == 0)
            for (int64_t n = 0; n < d.N; n++)
                for (int64_t i = 0; i < d.HW; i++) {
                    int64_t k = (n * d.C + ch) * d.HW + i;
                    double xhat = (r.x0[k] - mean) * inv;
                    c->out[k] = (float)(gamma[ch] * inv * (r.dy[k] - sdy / m - xhat * sdyx / m));
                }
        if (c->grads) {
            c->grads[ch] = (float)sdyx;
            c->grads[d.C + ch] = (float)sdy;
        }
    }
}

/* ---- layer norm over the last dimension ---- */

static void row_stats(const float *x, int64_t D, double *mean, double *inv)
{
    double s = 0, q = 0;
    for (int64_t j = 0; j < D; j++) s += x[j];
    *mean = s / (double)D;
    for (int64_t j = 0; j < D; j++) q += (x[j] - *mean) * (x[j] - *mean);
    *inv = 1.0 / sqrt(q / (double)D + NORM_EPS);
}

static void layernorm_forward(const kernel_ctx *c)
{
    const poet_node *x = node_in(c, 0);
    int64_t R = x->shape.dim[0], D = x->shape.dim[1];
    const float *gamma = c->params, *beta = c->params + D;
    for (int64_t r = 0; r < R; r++) {
        const float *xr = c->in[0] + r * D;
        double mean, inv;
        row_stats(xr, D, &mean, &inv);
        for (int64_t j = 0; j < D; j++) c->out[r * D + j] = (float)((xr[j] - mean) * inv * gamma[j] + beta[j]);
    }
}

static void layernorm_backward(const kernel_ctx *c)
{
    const poet_node *f0 = fwd_of(c);
    grad_reads g = kernel_grad_reads(c);
    const poet_node *x = &c->g->nodes[f0->inputs[0]];
    int64_t R = x->shape.dim[0], D = x->shape.dim[1];
    const float *gamma = c->params;
    if (c->grads) memset(c->grads, 0, (size_t)(2 * D) * sizeof(float));
    for (int64_t r = 0; r < R; r++) {
        const float *xr = g.x0 + r * D, *dy = g.dy + r * D;
        double mean, inv, a = 0, b = 0;
        row_stats(xr, D, &mean, &inv);
        for (int64_t j = 0; j < D; j++) {
            double xhat = (xr[j] - mean) * inv, dxhat = dy[j] * gamma[j];
            a += dxhat;
            b += dxhat * xhat;
            if (c->grads) {
                c->grads[j] += (float)(dy[j] * xhat);
                c->grads[D + j] += dy[j];
            }
        }
        if (c->n->wrt == 0)
            for (int64_t j = 0; j < D; j++) {
                double xhat = (xr[j] - mean) * inv;
                c->out[r * D + j] = (float)(inv * (dy[j] * gamma[j] - a / (double)D - xhat * b / (double)D));
            }
    }
}

/* ---- linear: y = x W^T + b ---- */

static void linear_forward(const kernel_ctx *c)
{
    const poet_node *x = node_in(c, 0);
    int64_t R = x->shape.dim[0], I = x->shape.dim[1], O = c->n->attrs.features;
    const float *w = c->params, *bias = c->params + O * I;
    for (int64_t r = 0; r < R; r++)
        for (int64_t o = 0; o < O; o++) {
            c->out[r * O + o] = dot(c->in[0] + r * I, w + o * I, I) + bias[o];
        }
}

static void linear_backward(const kernel_ctx *c)
{
    const poet_node *f0 = fwd_of(c);
    grad_reads g = kernel_grad_reads(c);
    const poet_node *x = &c->g->nodes[f0->inputs[0]];
    int64_t R = x->shape.dim[0], I = x->shape.dim[1], O = f0->attrs.features;
    const float *w = c->params;
    if (c->n->wrt == 0)
        for (int64_t r = 0; r < R; r++) {
            float *dx = c->out + r * I;
            memset(dx, 0, (size_t)I * sizeof(float));
            for (int64_t o = 0; o < O; o++) {
                float gy = g.dy[r * O + o];
                const float *wr = w + o * I;
                for (int64_t i = 0; i < I; i++) dx[i] += gy * wr[i];
            }
        }
    if (!c->grads) return;
    float *dw = c->grads, *db = c->grads + O * I;
    memset(c->grads, 0, (size_t)(O * I + O) * sizeof(float));
    for (int64_t r = 0; r < R; r++)
        for (int64_t o = 0; o < O; o++) {
            float gy = g.dy[r * O + o];
            const float *xr = g.x0 + r * I;
            float *dwr = dw + o * I;
            for (int64_t i = 0; i < I; i++) dwr[i] += gy * xr[i];
            db[o] += gy;
        }
}

/* ---- pools ---- */

typedef struct pool_dims {
    int64_t N, C, H, W, K, S, OH, OW;
} pool_dims;

static pool_dims pool_dims_of(const poet_node *pool, const poet_node *x)
{
    return (pool_dims){x->shape.dim[0], x->shape.dim[1], x->shape.dim[2],    x->shape.dim[3],
                       pool->attrs.kernel, pool->attrs.stride, pool->shape.dim[2], pool->shape.dim[3]};
}

/* Index (within the plane) of the first maximum of window (oh, ow). */
static int64_t window_argmax(const float *plane, pool_dims d, int64_t oh, int64_t ow)
{
    int64_t best = oh * d.S * d.W + ow * d.S;
    for (int64_t kh = 0; kh < d.K; kh++)
        for (int64_t kw = 0; kw < d.K; kw++) {
            int64_t k = (oh * d.S + kh) * d.W + ow * d.S + kw;
            if (plane[k] > plane[best]) best = k;
        }
    return best;
}

static void pool_forward(const kernel_ctx *c, bool max)
{
    pool_dims d = pool_dims_of(c->n, node_in(c, 0));
    for (int64_t p = 0; p < d.N * d.C; p++) {
        const float *plane = c->in[0] + p * d.H * d.W;
        float *o = c->out + p * d.OH * d.OW;
        for (int64_t oh = 0; oh < d.OH; oh++)
            for (int64_t ow = 0; ow < d.OW; ow++) {
                if (max) {
                    o[oh * d.OW + ow] = plane[window_argmax(plane, d, oh, ow)];
                    continue;
                }
                float s = 0;
                for (int64_t kh = 0; kh < d.K; kh++)
                    for (int64_t kw = 0; kw < d.K; kw++) s += plane[(oh * d.S + kh) * d.W + ow * d.S + kw];
                o[oh * d.OW + ow] = s / (float)(d.K * d.K);
            }
    }
}

static void pool_backward(const kernel_ctx *c, bool max)
{
    const poet_node *f0 = fwd_of(c);
    grad_reads g = kernel_grad_reads(c);
    pool_dims d = pool_dims_of(f0, &c->g->nodes[f0->inputs[0]]);
    memset(c->out, 0, (size_t)(d.N * d.C * d.H * d.W) * sizeof(float));
    for (int64_t p = 0; p < d.N * d.C; p++) {
        float *dx = c->out + p * d.H * d.W;
        const float *dy = g.dy + p * d.OH * d.OW;
        for (int64_t oh = 0; oh < d.OH; oh++)
            for (int64_t ow = 0; ow < d.OW; ow++) {
                float gy = dy[oh * d.OW + ow];
                if (max) {
                    dx[window_argmax(g.x0 + p * d.H * d.W, d, oh, ow)] += gy;
                    continue;
                }
                for (int64_t kh = 0; kh < d.K; kh++)
                    for (int64_t kw = 0; kw < d.K; kw++)
                        dx[(oh * d.S + kh) * d.W + ow * d.S + kw] += gy / (float)(d.K * d.K);
            }
    }
}

static void global_avgpool_forward(const kernel_ctx *c)
{
    plane_dims d = planes_of(node_in(c, 0));
    for (int64_t p = 0; p < d.N * d.C; p++) {
        double s = 0;
        for (int64_t i = 0; i < d.HW; i++) s += c->in[0][p * d.HW + i];
        c->out[p] = (float)(s / (double)d.HW);
    }
}

static void global_avgpool_backward(const kernel_ctx *c)
{
    plane_dims d = planes_of(&c->g->nodes[fwd_of(c)->inputs[0]]);
    grad_reads g = kernel_grad_reads(c);
    for (int64_t p = 0; p < d.N * d.C; p++)
        for (int64_t i = 0; i < d.HW; i++) c->out[p * d.HW + i] = g.dy[p] / (float)d.HW;
}

/* ---- elementwise ---- */

/* The second input of an add may have fewer channels (zero-padded). */
static void add_forward(const kernel_ctx *c)
{
    const poet_node *a = node_in(c, 0), *b = node_in(c, 1);
    int64_t total = numel(a), nb = numel(b);
    if (nb == total) {
        for (int64_t i = 0; i < total; i++) c->out[i] = c->in[0][i] + c->in[1][i];
        return;
    }
    int64_t N = a->shape.dim[0], per_a = total / N, per_b = nb / N;
    for (int64_t n = 0; n < N; n++)
        for (int64_t i = 0; i < per_a; i++)
            c->out[n * per_a + i] = c->in[0][n * per_a + i] + (i < per_b ? c->in[1][n * per_b + i] : 0.0f);
}

/* Gradient of the zero-padded input of an add: a slice of dY. */
static void add_backward(const kernel_ctx *c)
{
    const poet_node *f0 = fwd_of(c), *x = &c->g->nodes[f0->inputs[c->n->wrt]];
    grad_reads g = kernel_grad_reads(c);
    int64_t N = f0->shape.dim[0], per_y = numel(f0) / N, per_x = numel(x) / N;
    for (int64_t n = 0; n < N; n++) memcpy(c->out + n * per_x, g.dy + n * per_y, (size_t)per_x * sizeof(float));
}

/* The dropout mask is a function of (step seed, node, element), so a
 * recomputation and the backward regenerate it instead of storing it. */
static float dropout_scale(const kernel_ctx *c, int node, int64_t i, float p)
{
    uint64_t h = rt_mix64(c->dropout_seed ^ rt_mix64((uint64_t)node) ^ ((uint64_t)i * 0xD1B54A32D192ED03ull));
    float u = (float)(h >> 40) / 16777216.0f;
    return u < p ? 0.0f : 1.0f / (1.0f - p);
}

static void dropout_forward(const kernel_ctx *c)
{
    int64_t total = numel(c->n);
    for (int64_t i = 0; i < total; i++)
        c->out[i] = c->training ? c->in[0][i] * dropout_scale(c, c->n->inputs[0], i, c->n->attrs.p) : c->in[0][i];
}

static void dropout_backward(const kernel_ctx *c)
{
    const poet_node *f0 = fwd_of(c);
    grad_reads g = kernel_grad_reads(c);
    int64_t total = numel(f0);
    for (int64_t i = 0; i < total; i++) c->out[i] = g.dy[i] * dropout_scale(c, f0->inputs[0], i, f0->attrs.p);
}

static const double GELU_C = 0.7978845608028654; /* sqrt(2 / pi) */

static void gelu_forward(const kernel_ctx *c)
{
    int64_t total = numel(c->n);
    for (int64_t i = 0; i < total; i++) {
        double x = c->in[0][i];
        c->out[i] = (float)(0.5 * x * (1.0 + tanh(GELU_C * (x + 0.044715 * x * x * x))));
    }
}

static void gelu_backward(const kernel_ctx *c)
{
    grad_reads g = kernel_grad_reads(c);
    int64_t total = numel(c->n);
    for (int64_t i = 0; i < total; i++) {
        double x = g.x0[i], t = tanh(GELU_C * (x + 0.044715 * x * x * x));
        double d = 0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * GELU_C * (1.0 + 3.0 * 0.044715 * x * x);
        c->out[i] = (float)(g.dy[i] * d);
    }
}

/* ---- softmax over the last dimension, and the loss ---- */

static int64_t last_dim(const poet_node *n) { return n->shape.dim[n->shape.ndim - 1]; }

static void softmax_row(const float *x, int64_t D, float *y)
{
    double mx = x[0], s = 0;
    for (int64_t j = 1; j < D; j++) mx = x[j] > mx ? x[j] : mx;
    for (int64_t j = 0; j < D; j++) s += exp(x[j] - mx);
    for (int64_t j = 0; j < D; j++) y[j] = (float)(exp(x[j] - mx) / s);
}

static void softmax_forward(const kernel_ctx *c)
{
    int64_t D = last_dim(c->n), R = numel(c->n) / D;
    for (int64_t r = 0; r < R; r++) softmax_row(c->in[0] + r * D, D, c->out + r * D);
}

static void softmax_backward(const kernel_ctx *c)
{
    grad_reads g = kernel_grad_reads(c);
    int64_t D = last_dim(c->n), R = numel(c->n) / D;
    for (int64_t r = 0; r < R; r++) {
        const float *y = g.y + r * D, *dy = g.dy + r * D;
        double s = 0;
        for (int64_t j = 0; j < D; j++) s += (double)dy[j] * y[j];
        for (int64_t j = 0; j < D; j++) c->out[r * D + j] = (float)(y[j] * (dy[j] - s));
    }
}

/* Per row: log-sum-exp of the logits minus the labelled logit. */
static void softmax_ce_forward(const kernel_ctx *c)
{
    const poet_node *x = node_in(c, 0);
    int64_t R = x->shape.dim[0], D = x->shape.dim[1];
    for (int64_t r = 0; r < R; r++) {
        const float *xr = c->in[0] + r * D;
        double mx = xr[0], s = 0;
        for (int64_t j = 1; j < D; j++) mx = xr[j] > mx ? xr[j] : mx;
        for (int64_t j = 0; j < D; j++) s += exp(xr[j] - mx);
        c->out[r] = (float)(mx + log(s) - xr[c->labels[r]]);
    }
}

/* Gradient of the mean loss over rows. */
static void softmax_ce_backward(const kernel_ctx *c)
{
    grad_reads g = kernel_grad_reads(c);
    const poet_node *x = &c->g->nodes[fwd_of(c)->inputs[0]];
    int64_t R = x->shape.dim[0], D = x->shape.dim[1];
    for (int64_t r = 0; r < R; r++) {
        float *dx = c->out + r * D;
        softmax_row(g.x0 + r * D, D, dx);
        dx[c->labels[r]] -= 1.0f;
        for (int64_t j = 0; j < D; j++) dx[j] /= (float)R;
    }
}

/* ---- attention: Q, K, V, context [B*S, H*Dh]; scores, probabilities [B, H, S, S] ---- */

typedef struct attn_dims {
    int64_t B, H, S, Dh;
} attn_dims;

static attn_dims attn_dims_of(const poet_node *op, const poet_node *qkv)
{
    int64_t S = op->attrs.seq, H = op->attrs.heads;
    return (attn_dims){qkv->shape.dim[0] / S, H, S, qkv->shape.dim[1] / H};
}

/* Element (b, s, h, e) of a [B*S, H*Dh] tensor. */
static int64_t tok(attn_dims d, int64_t b, int64_t s, int64_t h, int64_t e)
{
    return (b * d.S + s) * d.H * d.Dh + h * d.Dh + e;
}

static int64_t sq(attn_dims d, int64_t b, int64_t h, int64_t i, int64_t j)
{
    return ((b * d.H + h) * d.S + i) * d.S + j;
}

static void attn_scores_forward(const kernel_ctx *c)
{
    attn_dims d = attn_dims_of(c->n, node_in(c, 0));
    float scale = (float)(1.0 / sqrt((double)d.Dh));
    for (int64_t b = 0; b < d.B; b++)
        for (int64_t h = 0; h < d.H; h++)
            for (int64_t i = 0; i < d.S; i++)
                for (int64_t j = 0; j < d.S; j++) {
                    float s = 0;
                    for (int64_t e = 0; e < d.Dh; e++) s += c->in[0][tok(d, b, i, h, e)] * c->in[1][tok(d, b, j, h, e)];
                    c->out[sq(d, b, h, i, j)] = s * scale;
                }
}

/* dQ = dS K / sqrt(Dh) (wrt 0, reads K); dK = dS^T Q / sqrt(Dh) (wrt 1, reads Q). */
static void attn_scores_backward(const kernel_ctx *c)
{
    const poet_node *f0 = fwd_of(c);
    grad_reads g = kernel_grad_reads(c);
    attn_dims d = attn_dims_of(f0, &c->g->nodes[f0->inputs[0]]);
    float scale = (float)(1.0 / sqrt((double)d.Dh));
    bool wrt_q = c->n->wrt == 0;
    const float *other = wrt_q ? g.x1 : g.x0;
    for (int64_t b = 0; b < d.B; b++)
        for (int64_t h = 0; h < d.H; h++)
            for (int64_t i = 0; i < d.S; i++)
                for (int64_t e = 0; e < d.Dh; e++) {
                    float s = 0;
                    for (int64_t j = 0; j < d.S; j++)
                        s += (wrt_q ? g.dy[sq(d, b, h, i, j)] : g.dy[sq(d, b, h, j, i)]) * other[tok(d, b, j, h, e)];
                    c->out[tok(d, b, i, h, e)] = s * scale;
                }
}

static void attn_context_forward(const kernel_ctx *c)
{
    attn_dims d = attn_dims_of(c->n, node_in(c, 1));
    const float *p = c->in[0], *v = c->in[1];
    for (int64_t b = 0; b < d.B; b++)
        for (int64_t h = 0; h < d.H; h++)
            for (int64_t i = 0; i < d.S; i++)
                for (int64_t e = 0; e < d.Dh; e++) {
                    float s = 0;
                    for (int64_t j = 0; j < d.S; j++) s += p[sq(d, b, h, i, j)] * v[tok(d, b, j, h, e)];
                    c->out[tok(d, b, i, h, e)] = s;
                }
}

/* dP = dC V^T (wrt 0, reads V); dV = P^T dC (wrt 1, reads P). */
static void attn_context_backward(const kernel_ctx *c)
{
    const poet_node *f0 = fwd_of(c);
    grad_reads g = kernel_grad_reads(c);
    attn_dims d = attn_dims_of(f0, &c->g->nodes[f0->inputs[1]]);
    for (int64_t b = 0; b < d.B; b++)
        for (int64_t h = 0; h < d.H; h++) {
            if (c->n->wrt == 0) {
                for (int64_t i = 0; i < d.S; i++)
                    for (int64_t j = 0; j < d.S; j++) {
                        float s = 0;
                        for (int64_t e = 0; e < d.Dh; e++) s += g.dy[tok(d, b, i, h, e)] * g.x1[tok(d, b, j, h, e)];
                        c->out[sq(d, b, h, i, j)] = s;
                    }
                continue;
            }
            for (int64_t j = 0; j < d.S; j++)
                for (int64_t e = 0; e < d.Dh; e++) {
                    float s = 0;
                    for (int64_t i = 0; i < d.S; i++) s += g.x0[sq(d, b, h, i, j)] * g.dy[tok(d, b, i, h, e)];
                    c->out[tok(d, b, j, h, e)] = s;
                }
        }
}

/* ---- dispatch ---- */

static void copy_forward(const kernel_ctx *c, const float *src)
{
    memcpy(c->out, src, (size_t)numel(c->n) * sizeof(float));
}

static void grad_sum(const kernel_ctx *c)
{
    int64_t total = numel(c->n);
    copy_forward(c, c->in[0]);
    for (int k = 1; k < c->n->n_inputs; k++)
        for (int64_t i = 0; i < total; i++) c->out[i] += c->in[k][i];
}

static void relu_forward(const kernel_ctx *c)
{
    int64_t total = numel(c->n);
    for (int64_t i = 0; i < total; i++) c->out[i] = c->in[0][i] > 0 ? c->in[0][i] : 0.0f;
}

static void relu_backward(const kernel_ctx *c)
{
    grad_reads g = kernel_grad_reads(c);
    int64_t total = numel(c->n);
    for (int64_t i = 0; i < total; i++) c->out[i] = g.y[i] > 0 ? g.dy[i] : 0.0f;
}

static bool backward(const kernel_ctx *c)
{
    switch (fwd_of(c)->op) {
    case POET_OP_CONV2D: conv_backward(c); return true;
    case POET_OP_BATCHNORM2D: batchnorm_backward(c); return true;
    case POET_OP_RELU: relu_backward(c); return true;
    case POET_OP_MAXPOOL2D: pool_backward(c, true); return true;
    case POET_OP_AVGPOOL2D: pool_backward(c, false); return true;
    case POET_OP_GLOBAL_AVGPOOL: global_avgpool_backward(c); return true;
    case POET_OP_ADD: add_backward(c); return true;
    case POET_OP_LINEAR: linear_backward(c); return true;
    case POET_OP_DROPOUT: dropout_backward(c); return true;
    case POET_OP_SOFTMAX_CE: softmax_ce_backward(c); return true;
    case POET_OP_LAYERNORM: layernorm_backward(c); return true;
    case POET_OP_GELU: gelu_backward(c); return true;
    case POET_OP_SOFTMAX: softmax_backward(c); return true;
    case POET_OP_ATTN_SCORES: attn_scores_backward(c); return true;
    case POET_OP_ATTN_CONTEXT: attn_context_backward(c); return true;
    default: return false;
    }
}

bool kernel_run(const kernel_ctx *c)
{
    switch (c->n->op) {
    case POET_OP_INPUT: copy_forward(c, c->batch_x); return true;
    case POET_OP_CONV2D: conv_forward(c); return true;
    case POET_OP_BATCHNORM2D: batchnorm_forward(c); return true;
    case POET_OP_RELU: relu_forward(c); return true;
    case POET_OP_MAXPOOL2D: pool_forward(c, true); return true;
    case POET_OP_AVGPOOL2D: pool_forward(c, false); return true;
    case POET_OP_GLOBAL_AVGPOOL: global_avgpool_forward(c); return true;
    case POET_OP_ADD: add_forward(c); return true;
    case POET_OP_FLATTEN: copy_forward(c, c->in[0]); return true;
    case POET_OP_LINEAR: linear_forward(c); return true;
    case POET_OP_DROPOUT: dropout_forward(c); return true;
    case POET_OP_SOFTMAX_CE: softmax_ce_forward(c); return true;
    case POET_OP_LAYERNORM: layernorm_forward(c); return true;
    case POET_OP_GELU: gelu_forward(c); return true;
    case POET_OP_SOFTMAX: softmax_forward(c); return true;
    case POET_OP_ATTN_SCORES: attn_scores_forward(c); return true;
    case POET_OP_ATTN_CONTEXT: attn_context_forward(c); return true;
    case POET_OP_GRAD: return backward(c);
    case POET_OP_GRAD_SUM: grad_sum(c); return true;
    default: return false;
    }
}
