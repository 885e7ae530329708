/* The device library's kernels: pools: windows over padding that counts as absent (max) or as zero (average) (kernel_ops.h: the
 * order of operations). */
#include "kernel_ops.h"

/* ---- pools: windows over padding that counts as absent (max) or as zero (average) ---- */

typedef struct pool_dims {
    idx N, C, H, W, KH, KW, SH, SW, PT, PL, OH, OW;
    bool count_pad;
} pool_dims;

static pool_dims pool_dims_of(const knode *pool, const knode *x)
{
    const poet_attrs *a = &pool->attrs;
    return (pool_dims){x->dim[0], x->dim[1], height(x), width(x), a->kh, a->kw, a->sh, a->sw, a->pt, a->pl,
                       height(pool), width(pool), (a->flags & POET_ATTR_COUNT_PAD) != 0};
}

/* The window of output (oh, ow) clipped to the image: rows [h0, h1), columns [w0, w1). */
typedef struct window {
    idx h0, h1, w0, w1;
} window;

static window window_at(pool_dims d, idx oh, idx ow)
{
    idx h0 = oh * d.SH - d.PT, w0 = ow * d.SW - d.PL;
    window w = {h0 < 0 ? 0 : h0, h0 + d.KH > d.H ? d.H : h0 + d.KH, w0 < 0 ? 0 : w0, w0 + d.KW > d.W ? d.W : w0 + d.KW};
    return w;
}

/* Index (within the plane) of the window's first maximum. */
static idx window_argmax(const float *plane, pool_dims d, window w)
{
    idx best = w.h0 * d.W + w.w0;
    for (idx h = w.h0; h < w.h1; h++)
        for (idx x = w.w0; x < w.w1; x++)
            if (plane[h * d.W + x] > plane[best]) best = h * d.W + x;
    return best;
}

static float window_area(pool_dims d, window w)
{
    return d.count_pad ? (float)(d.KH * d.KW) : (float)((w.h1 - w.h0) * (w.w1 - w.w0));
}

void kernel_pool_forward(const kernel_ctx *c, bool max)
{
    pool_dims d = pool_dims_of(c->n, node_in(c, 0));
    for (idx p = 0; p < d.N * d.C; p++) {
        const float *plane = c->in[0] + p * d.H * d.W;
        float *o = c->out + p * d.OH * d.OW;
        for (idx oh = 0; oh < d.OH; oh++)
            for (idx ow = 0; ow < d.OW; ow++) {
                window w = window_at(d, oh, ow);
                if (max) {
                    o[oh * d.OW + ow] = plane[window_argmax(plane, d, w)];
                    continue;
                }
                float s = 0.0f;
                for (idx h = w.h0; h < w.h1; h++)
                    for (idx x = w.w0; x < w.w1; x++) s += plane[h * d.W + x];
                o[oh * d.OW + ow] = s / window_area(d, w);
            }
    }
}

/* The argmax of each max-pool output as a byte: its place in the window
 * (row within it x KW + column), found as the forward pass finds it. */
void kernel_pool_index_forward(const kernel_ctx *c)
{
    pool_dims d = pool_dims_of(node_in(c, 1), node_in(c, 0));
    uint8_t *out = (uint8_t *)c->out;
    for (idx p = 0; p < d.N * d.C; p++) {
        const float *plane = c->in[0] + p * d.H * d.W;
        for (idx oh = 0; oh < d.OH; oh++)
            for (idx ow = 0; ow < d.OW; ow++) {
                window w = window_at(d, oh, ow);
                idx best = window_argmax(plane, d, w), h = best / d.W, x = best % d.W;
                out[(p * d.OH + oh) * d.OW + ow] = (uint8_t)((h - w.h0) * d.KW + (x - w.w0));
            }
    }
}

void kernel_pool_backward(const kernel_ctx *c, bool max)
{
    grad_reads g = grad_reads_of(c);
    pool_dims d = pool_dims_of(fwd_of(c), fwd_in(c, 0));
    const uint8_t *index = (const uint8_t *)g.mask;
    memset(c->out, 0, (size_t)(d.N * d.C * d.H * d.W) * sizeof(float));
    for (idx p = 0; p < d.N * d.C; p++) {
        float *dx = c->out + p * d.H * d.W;
        const float *dy = g.dy + p * d.OH * d.OW;
        for (idx oh = 0; oh < d.OH; oh++)
            for (idx ow = 0; ow < d.OW; ow++) {
                window w = window_at(d, oh, ow);
                float gy = dy[oh * d.OW + ow];
                if (max && index) {
                    idx k = index[(p * d.OH + oh) * d.OW + ow];
                    dx[(w.h0 + k / d.KW) * d.W + w.w0 + k % d.KW] += gy;
                    continue;
                }
                if (max) {
                    dx[window_argmax(g.x0 + p * d.H * d.W, d, w)] += gy;
                    continue;
                }
                float share = gy / window_area(d, w);
                for (idx h = w.h0; h < w.h1; h++)
                    for (idx x = w.w0; x < w.w1; x++) dx[h * d.W + x] += share;
            }
    }
}

void kernel_global_avgpool_forward(const kernel_ctx *c)
{
    plane_dims d = planes_of(node_in(c, 0));
    for (idx p = 0; p < d.N * d.C; p++) c->out[p] = kernel_sum8(c->in[0] + p * d.HW, d.HW) / (float)d.HW;
}

void kernel_global_avgpool_backward(const kernel_ctx *c)
{
    plane_dims d = planes_of(fwd_in(c, 0));
    grad_reads g = grad_reads_of(c);
    for (idx p = 0; p < d.N * d.C; p++)
        for (idx i = 0; i < d.HW; i++) c->out[p * d.HW + i] = g.dy[p] / (float)d.HW;
}

