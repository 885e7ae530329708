/* The device library's kernels: softmax along an axis, the loss, and attention (kernel_ops.h: the
 * order of operations). */
#include "kernel_ops.h"

/* ---- softmax along an axis, and the loss ---- */

/* A line of D elements `stride` apart: the sums of sum8, in the same lanes. */
static float line_sum8(const float *a, idx n, idx stride)
{
    if (stride == 1) return kernel_sum8(a, n);
    float l[8] = {0}, tail = 0;
    idx i = 0;
    for (; i + 8 <= n; i += 8)
        for (int k = 0; k < 8; k++) l[k] += a[(i + k) * stride];
    for (; i < n; i++) tail += a[i * stride];
    return kernel_lanes_total(l, tail);
}

static float line_dot8(const float *a, const float *b, idx n, idx stride)
{
    if (stride == 1) return kernel_dot8(a, b, n);
    float l[8] = {0}, tail = 0;
    idx i = 0;
    for (; i + 8 <= n; i += 8)
        for (int k = 0; k < 8; k++) l[k] += a[(i + k) * stride] * b[(i + k) * stride];
    for (; i < n; i++) tail += a[i * stride] * b[i * stride];
    return kernel_lanes_total(l, tail);
}

static float line_max(const float *x, idx D, idx stride)
{
    float mx = x[0];
    for (idx j = 1; j < D; j++) mx = x[j * stride] > mx ? x[j * stride] : mx;
    return mx;
}

static void softmax_line(const float *x, idx D, idx stride, float *y)
{
    float mx = line_max(x, D, stride);
    for (idx j = 0; j < D; j++) y[j * stride] = poet_expf(x[j * stride] - mx);
    float inv = 1.0f / line_sum8(y, D, stride);
    for (idx j = 0; j < D; j++) y[j * stride] *= inv;
}

void kernel_softmax_forward(const kernel_ctx *c)
{
    idx outer, D, inner;
    kernel_around_axis(c->n, c->n->attrs.axis, &outer, &D, &inner);
    for (idx o = 0; o < outer; o++)
        for (idx i = 0; i < inner; i++) softmax_line(c->in[0] + o * D * inner + i, D, inner, c->out + o * D * inner + i);
}

void kernel_softmax_backward(const kernel_ctx *c)
{
    grad_reads g = grad_reads_of(c);
    idx outer, D, inner;
    kernel_around_axis(fwd_of(c), fwd_of(c)->attrs.axis, &outer, &D, &inner);
    for (idx o = 0; o < outer; o++)
        for (idx i = 0; i < inner; i++) {
            idx at = o * D * inner + i;
            const float *y = g.y + at, *dy = g.dy + at;
            float s = line_dot8(dy, y, D, inner);
            for (idx j = 0; j < D; j++) c->out[at + j * inner] = y[j * inner] * (dy[j * inner] - s);
        }
}

/* Per row: log-sum-exp of the logits minus the labelled logit. */
void kernel_softmax_ce_forward(const kernel_ctx *c)
{
    const knode *x = node_in(c, 0);
    idx R = x->dim[0], D = x->dim[1];
    for (idx r = 0; r < R; r++) {
        const float *xr = c->in[0] + r * D;
        float mx = line_max(xr, D, 1), s = 0.0f;
        for (idx j = 0; j < D; j++) s += poet_expf(xr[j] - mx);
        c->out[r] = (mx + poet_logf(s)) - xr[c->labels[r]];
    }
}

/* Gradient of the mean loss over rows. */
void kernel_softmax_ce_backward(const kernel_ctx *c)
{
    grad_reads g = grad_reads_of(c);
    const knode *x = fwd_in(c, 0);
    idx R = x->dim[0], D = x->dim[1];
    for (idx r = 0; r < R; r++) {
        float *dx = c->out + r * D;
        softmax_line(g.x0 + r * D, D, 1, dx);
        dx[c->labels[r]] -= 1.0f;
        for (idx j = 0; j < D; j++) dx[j] /= (float)R;
    }
}

/* ---- attention: Q, K, V, context [B*S, H*Dh]; scores, probabilities [B, H, S, S] ---- */

typedef struct attn_dims {
    idx B, H, S, Dh;
} attn_dims;

static attn_dims attn_dims_of(const knode *op, const knode *qkv)
{
    idx S = op->attrs.seq, H = op->attrs.heads;
    return (attn_dims){qkv->dim[0] / S, H, S, qkv->dim[1] / H};
}

/* Element (b, s, h, e) of a [B*S, H*Dh] tensor. */
static idx tok(attn_dims d, idx b, idx s, idx h, idx e) { return (b * d.S + s) * d.H * d.Dh + h * d.Dh + e; }
static idx sq(attn_dims d, idx b, idx h, idx i, idx j) { return ((b * d.H + h) * d.S + i) * d.S + j; }

void kernel_attn_scores_forward(const kernel_ctx *c)
{
    attn_dims d = attn_dims_of(c->n, node_in(c, 0));
    float scale = 1.0f / poet_sqrtf((float)d.Dh);
    for (idx b = 0; b < d.B; b++)
        for (idx h = 0; h < d.H; h++)
            for (idx i = 0; i < d.S; i++)
                for (idx j = 0; j < d.S; j++) {
                    float s = 0.0f;
                    for (idx e = 0; e < d.Dh; e++) s += c->in[0][tok(d, b, i, h, e)] * c->in[1][tok(d, b, j, h, e)];
                    c->out[sq(d, b, h, i, j)] = s * scale;
                }
}

/* dQ = dS K / sqrt(Dh) (wrt 0, reads K); dK = dS^T Q / sqrt(Dh) (wrt 1, reads Q). */
void kernel_attn_scores_backward(const kernel_ctx *c)
{
    grad_reads g = grad_reads_of(c);
    attn_dims d = attn_dims_of(fwd_of(c), fwd_in(c, 0));
    float scale = 1.0f / poet_sqrtf((float)d.Dh);
    bool wrt_q = c->n->wrt == 0;
    const float *other = wrt_q ? g.x1 : g.x0;
    for (idx b = 0; b < d.B; b++)
        for (idx h = 0; h < d.H; h++)
            for (idx i = 0; i < d.S; i++)
                for (idx e = 0; e < d.Dh; e++) {
                    float s = 0.0f;
                    for (idx j = 0; j < d.S; j++)
                        s += (wrt_q ? g.dy[sq(d, b, h, i, j)] : g.dy[sq(d, b, h, j, i)]) * other[tok(d, b, j, h, e)];
                    c->out[tok(d, b, i, h, e)] = s * scale;
                }
}

void kernel_attn_context_forward(const kernel_ctx *c)
{
    attn_dims d = attn_dims_of(c->n, node_in(c, 1));
    const float *p = c->in[0], *v = c->in[1];
    for (idx b = 0; b < d.B; b++)
        for (idx h = 0; h < d.H; h++)
            for (idx i = 0; i < d.S; i++)
                for (idx e = 0; e < d.Dh; e++) {
                    float s = 0.0f;
                    for (idx j = 0; j < d.S; j++) s += p[sq(d, b, h, i, j)] * v[tok(d, b, j, h, e)];
                    c->out[tok(d, b, i, h, e)] = s;
                }
}

/* dP = dC V^T (wrt 0, reads V); dV = P^T dC (wrt 1, reads P). */
void kernel_attn_context_backward(const kernel_ctx *c)
{
    grad_reads g = grad_reads_of(c);
    attn_dims d = attn_dims_of(fwd_of(c), fwd_in(c, 1));
    for (idx b = 0; b < d.B; b++)
        for (idx h = 0; h < d.H; h++) {
            if (c->n->wrt == 0) {
                for (idx i = 0; i < d.S; i++)
                    for (idx j = 0; j < d.S; j++) {
                        float s = 0.0f;
                        for (idx e = 0; e < d.Dh; e++) s += g.dy[tok(d, b, i, h, e)] * g.x1[tok(d, b, j, h, e)];
                        c->out[sq(d, b, h, i, j)] = s;
                    }
                continue;
            }
            for (idx j = 0; j < d.S; j++)
                for (idx e = 0; e < d.Dh; e++) {
                    float s = 0.0f;
                    for (idx i = 0; i < d.S; i++) s += g.x0[sq(d, b, h, i, j)] * g.dy[tok(d, b, i, h, e)];
                    c->out[tok(d, b, j, h, e)] = s;
                }
        }
}

