/* The device library's kernels: batch norm (training: batch statistics; inference: running) and layer norm over the last dimension (kernel_ops.h: the
 * order of operations). */
#include "kernel_ops.h"

/* ---- batch norm (training: batch statistics; inference: running) ---- */



/* Mean and biased variance of channel ch: planes summed in n order. */
static void channel_stats(const float *x, plane_dims d, idx ch, float *mean, float *var)
{
    float s = 0.0f, q = 0.0f, m = (float)(d.N * d.HW);
    for (idx n = 0; n < d.N; n++) s += kernel_sum8(x + (n * d.C + ch) * d.HW, d.HW);
    *mean = s / m;
    for (idx n = 0; n < d.N; n++) q += kernel_sqdev8(x + (n * d.C + ch) * d.HW, *mean, d.HW);
    *var = q / m;
}

void kernel_batchnorm_forward(const kernel_ctx *c)
{
    plane_dims d = planes_of(node_in(c, 0));
    const float *x = c->in[0], *gamma = c->params, *beta = c->bias;
    float m = (float)(d.N * d.HW), mom = c->n->attrs.momentum, eps = c->n->attrs.eps;
    for (idx ch = 0; ch < d.C; ch++) {
        float mean, var;
        if (c->training && !(c->n->attrs.flags & POET_ATTR_BN_EVAL)) {
            channel_stats(x, d, ch, &mean, &var);
            if (c->running_out) {
                float unbiased = m > 1 ? var * m / (m - 1.0f) : var;
                c->running_out[ch] = (1.0f - mom) * c->running[ch] + mom * mean;
                c->running_out[d.C + ch] = (1.0f - mom) * c->running[d.C + ch] + mom * unbiased;
            }
        } else {
            mean = c->running[ch];
            var = c->running[d.C + ch];
        }
        float scale = gamma[ch] / poet_sqrtf(var + eps), shift = beta[ch];
        for (idx n = 0; n < d.N; n++) {
            const float *xp = x + (n * d.C + ch) * d.HW;
            float *yp = c->out + (n * d.C + ch) * d.HW;
            for (idx i = 0; i < d.HW; i++) yp[i] = (xp[i] - mean) * scale + shift;
        }
    }
}

void kernel_batchnorm_backward(const kernel_ctx *c)
{
    grad_reads r = grad_reads_of(c);
    plane_dims d = planes_of(fwd_in(c, 0));
    const float *gamma = c->params;
    float m = (float)(d.N * d.HW), eps = fwd_of(c)->attrs.eps;
    bool running = fwd_of(c)->attrs.flags & POET_ATTR_BN_EVAL;
    for (idx ch = 0; ch < d.C; ch++) {
        float mean = 0.0f, var = 0.0f, inv = 0.0f, sdy = 0.0f, sdyx = 0.0f;
        for (idx n = 0; n < d.N; n++) sdy += kernel_sum8(r.dy + (n * d.C + ch) * d.HW, d.HW);
        if (running)
            mean = c->running[ch], var = c->running[d.C + ch];
        else if (r.x0) /* not read where only beta trains */
            channel_stats(r.x0, d, ch, &mean, &var);
        inv = 1.0f / poet_sqrtf(var + eps);
        for (idx n = 0; r.x0 && n < d.N; n++)
            sdyx += kernel_dot_xhat8(r.dy + (n * d.C + ch) * d.HW, r.x0 + (n * d.C + ch) * d.HW, mean, inv, d.HW);
        if (c->n->wrt == 0 && running) { /* the statistics are constants: dX = dY gamma inv */
            float a = gamma[ch] * inv;
            for (idx n = 0; n < d.N; n++)
                for (idx i = 0; i < d.HW; i++) c->out[(n * d.C + ch) * d.HW + i] = a * r.dy[(n * d.C + ch) * d.HW + i];
        } else if (c->n->wrt == 0) {
            float a = gamma[ch] * inv, mdy = sdy / m, mdyx = sdyx / m;
            for (idx n = 0; n < d.N; n++) {
                idx at = (n * d.C + ch) * d.HW;
                for (idx i = 0; i < d.HW; i++)
                    c->out[at + i] = a * ((r.dy[at + i] - mdy) - ((r.x0[at + i] - mean) * inv) * mdyx);
            }
        }
        if (c->grad_w) c->grad_w[ch] = sdyx;
        if (c->grad_b) c->grad_b[ch] = sdy;
    }
}

/* ---- layer norm over the last dimension ---- */

static void row_stats(const float *x, idx D, float eps, float *mean, float *inv)
{
    *mean = kernel_sum8(x, D) / (float)D;
    *inv = 1.0f / poet_sqrtf(kernel_sqdev8(x, *mean, D) / (float)D + eps);
}

void kernel_layernorm_forward(const kernel_ctx *c)
{
    const knode *x = node_in(c, 0);
    idx D = last_dim(x), R = knode_numel(x) / D;
    bool affine = !(c->n->attrs.flags & POET_ATTR_NO_AFFINE);
    const float *gamma = c->params, *beta = c->bias;
    for (idx r = 0; r < R; r++) {
        const float *xr = c->in[0] + r * D;
        float mean, inv;
        row_stats(xr, D, c->n->attrs.eps, &mean, &inv);
        for (idx j = 0; j < D; j++) {
            float xhat = (xr[j] - mean) * inv;
            c->out[r * D + j] = affine ? xhat * gamma[j] + beta[j] : xhat;
        }
    }
}

void kernel_layernorm_backward(const kernel_ctx *c)
{
    grad_reads g = grad_reads_of(c);
    const knode *f0 = fwd_of(c), *x = fwd_in(c, 0);
    idx D = last_dim(x), R = knode_numel(x) / D;
    bool affine = !(f0->attrs.flags & POET_ATTR_NO_AFFINE);
    const float *gamma = c->params;
    if (c->grad_w) memset(c->grad_w, 0, (size_t)D * sizeof(float));
    if (c->grad_b) memset(c->grad_b, 0, (size_t)D * sizeof(float));
    if (!g.x0) { /* only beta trains */
        for (idx r = 0; r < R; r++)
            for (idx j = 0; j < D; j++) c->grad_b[j] += g.dy[r * D + j];
        return;
    }
    for (idx r = 0; r < R; r++) {
        const float *xr = g.x0 + r * D, *dy = g.dy + r * D;
        float mean, inv, a = 0.0f, b = 0.0f;
        row_stats(xr, D, f0->attrs.eps, &mean, &inv);
        for (idx j = 0; j < D; j++) {
            float xhat = (xr[j] - mean) * inv, dxhat = affine ? dy[j] * gamma[j] : dy[j];
            a += dxhat;
            b += dxhat * xhat;
            if (c->grad_w) c->grad_w[j] += dy[j] * xhat;
            if (c->grad_b) c->grad_b[j] += dy[j];
        }
        if (c->n->wrt == 0) {
            float ma = a / (float)D, mb = b / (float)D;
            for (idx j = 0; j < D; j++) {
                float xhat = (xr[j] - mean) * inv, dxhat = affine ? dy[j] * gamma[j] : dy[j];
                c->out[r * D + j] = inv * ((dxhat - ma) - xhat * mb);
            }
        }
    }
}

