/* The device library's kernels: convolution: im2col over chunks of output
 * positions, per group, or the kernels of conv_plane.c where they serve;
 * and the workspace it needs (kernel_ops.h: the order of operations). */
#include "conv_plane.h"

/* ---- convolution: im2col over chunks of output positions, per group ---- */

static conv_dims conv_dims_of(const knode *conv, const knode *x)
{
    const poet_attrs *a = &conv->attrs;
    conv_dims d = {x->dim[0], x->dim[1], height(x), width(x), a->features, a->kh, a->kw, a->sh, a->sw, a->pt, a->pl,
                   a->dh, a->dw, a->groups, height(conv), width(conv), 0, 0, 0, 0};
    d.CG = d.C / d.G, d.FG = d.F / d.G;
    d.KK = d.CG * d.KH * d.KW;
    d.PP = d.OH * d.OW;
    return d;
}

/* Whether a dense convolution (not 1x1) reads its padded plane from the
 * workspace rather than im2col columns: on a Cortex-M the plane's tiles do
 * without the gathers; on x86 the product's wide tiles are faster. The
 * sums are the same either way. */
#if defined(__x86_64__)
enum { DENSE_FROM_PLANE = 0 };
#else
enum { DENSE_FROM_PLANE = 1 };
#endif

/* ... for this one: not 1x1 (no im2col to save), and at stride 1 along
 * rows, where the tiles read a row's inputs together (at stride 2 the
 * product is as fast). */
static bool dense_from_plane(conv_dims d) { return DENSE_FROM_PLANE && !conv_direct(d) && d.SW == 1; }

static bool conv_has_bias(const knode *conv) { return !(conv->attrs.flags & POET_ATTR_NO_BIAS); }

/* Output positions per chunk that the workspace holds (at least one). */
static idx conv_chunk(const kernel_ctx *c, conv_dims d)
{
    idx chunk = (idx)(c->work_floats / (size_t)d.KK);
    return chunk < 1 ? 1 : chunk > d.PP ? d.PP : chunk;
}


/* The patches of output positions [p0, p0 + np) of one image and group (x
 * points at the group's first channel): element (k, j) goes to
 * out[k * sk + j * sj]; zero where the window leaves the image. sk = np,
 * sj = 1 lays them out as columns; sk = 1, sj = KK as rows. */
static void gather_patches(const float *x, conv_dims d, idx p0, idx np, float *out, idx sk, idx sj)
{
    for (idx c = 0; c < d.CG; c++)
        for (idx kh = 0; kh < d.KH; kh++)
            for (idx kw = 0; kw < d.KW; kw++) {
                idx k = (c * d.KH + kh) * d.KW + kw, lo, hi;
                valid_range(d, kw, &lo, &hi);
                float *o = out + k * sk;
                for (idx p = p0, end = p0 + np; p < end;) { /* the part of one output row in the chunk */
                    idx oh = p / d.OW, ow = p % d.OW, n = end - p < d.OW - ow ? end - p : d.OW - ow;
                    idx ih = oh * d.SH - d.PT + kh * d.DH, a = lo > ow ? lo : ow, b = hi < ow + n ? hi : ow + n;
                    float *row = o + (p - p0) * sj - ow * sj;
                    if (ih < 0 || ih >= d.H) a = b = ow + n;
                    const float *xr = x + (c * d.H + ih) * d.W - d.PL + kw * d.DW;
                    for (idx q = ow; q < a; q++) row[q * sj] = 0.0f;
                    for (idx q = a; q < b; q++) row[q * sj] = xr[q * d.SW];
                    for (idx q = b > a ? b : a; q < ow + n; q++) row[q * sj] = 0.0f;
                    p += n;
                }
            }
}

/* dx += rows[j][k] at each patch element inside the image, j then k
 * ascending (dx points at the group's first channel). */
static void scatter_patches(const float *rows, conv_dims d, idx p0, idx np, float *dx)
{
    idx oh = p0 / d.OW, ow = p0 % d.OW;
    for (idx j = 0; j < np; j++) {
        const float *r = rows + j * d.KK;
        for (idx c = 0; c < d.CG; c++)
            for (idx kh = 0; kh < d.KH; kh++) {
                idx ih = oh * d.SH - d.PT + kh * d.DH;
                if (ih < 0 || ih >= d.H) continue;
                float *xr = dx + (c * d.H + ih) * d.W;
                for (idx kw = 0; kw < d.KW; kw++) {
                    idx iw = ow * d.SW - d.PL + kw * d.DW;
                    if (iw >= 0 && iw < d.W) xr[iw] += r[(c * d.KH + kh) * d.KW + kw];
                }
            }
        if (++ow == d.OW) ow = 0, oh++;
    }
}

void kernel_conv_forward(const kernel_ctx *c)
{
    conv_dims d = conv_dims_of(c->n, node_in(c, 0));
    const float *bias = conv_has_bias(c->n) ? c->bias : NULL;
    if (conv_grouped(d)) {
        kernel_conv_grouped_forward(c, d, bias);
        return;
    }
    bool direct = conv_direct(d);
    if (dense_from_plane(d) && kernel_conv_plane_fits(c, d)) {
        kernel_conv_plane_forward(c, d, bias);
        return;
    }
    idx chunk = conv_chunk(c, d);
    for (idx n = 0; n < d.N; n++)
        for (idx gr = 0; gr < d.G; gr++) {
            const float *x = c->in[0] + (n * d.C + gr * d.CG) * d.H * d.W;
            for (idx p0 = 0; p0 < d.PP; p0 += chunk) {
                idx np = d.PP - p0 < chunk ? d.PP - p0 : chunk;
                if (!direct) gather_patches(x, d, p0, np, c->work, np, 1);
                /* out[f][p] = bias[f] + sum over k of w[f][k] col[k][p] */
                gemm_args g = {c->params + gr * d.FG * d.KK, d.KK, 1, direct ? x + p0 : c->work, direct ? d.PP : np, 1,
                               d.KK, c->out + (n * d.F + gr * d.FG) * d.PP + p0, d.PP, bias ? bias + gr * d.FG : NULL,
                               false};
                kernel_gemm(&g, d.FG, np);
            }
        }
}

static void conv_backward_input(const kernel_ctx *c, conv_dims d, const float *dy)
{
    if (conv_grouped(d)) {
        kernel_conv_grouped_backward_input(c, d, dy);
        return;
    }
    /* its tiles are four channels wide: with fewer, the product's scatter is faster */
    if (dense_from_plane(d) && d.CG >= 4 && kernel_conv_plane_dx_fits(c, d)) {
        kernel_conv_plane_backward_input(c, d, dy);
        return;
    }
    idx chunk = conv_chunk(c, d);
    memset(c->out, 0, (size_t)(d.N * d.C * d.H * d.W) * sizeof(float));
    for (idx n = 0; n < d.N; n++)
        for (idx gr = 0; gr < d.G; gr++)
            for (idx p0 = 0; p0 < d.PP; p0 += chunk) {
                idx np = d.PP - p0 < chunk ? d.PP - p0 : chunk;
                /* rows[p][k] = sum over f of dy[f][p] w[f][k], from +0 */
                gemm_args g = {dy + (n * d.F + gr * d.FG) * d.PP + p0, 1, d.PP, c->params + gr * d.FG * d.KK, d.KK, 1,
                               d.FG, c->work, d.KK, NULL, false};
                kernel_gemm(&g, np, d.KK);
                scatter_patches(c->work, d, p0, np, c->out + (n * d.C + gr * d.CG) * d.H * d.W);
            }
}


/* With a channel_select after the layer (ratio:R), x is its copy of the
 * channels the weights train on and dw holds only their gradients, row by
 * row: the sums of the dense gradient, in the same order. */
/* dw by the product over patches: x holds the channels of k (d's, or a
 * channel_select's). */
static void im2col_backward_params(const kernel_ctx *c, conv_dims d, conv_dims k, const float *dy, const float *x,
                                   float *dw)
{
    idx chunk = conv_chunk(c, k);
    memset(dw, 0, (size_t)(d.F * k.KK) * sizeof(float));
    for (idx n = 0; n < d.N; n++)
        for (idx gr = 0; gr < d.G; gr++)
            for (idx p0 = 0; p0 < d.PP; p0 += chunk) {
                idx np = d.PP - p0 < chunk ? d.PP - p0 : chunk;
                gather_patches(x + (n * k.C + gr * k.CG) * d.H * d.W, k, p0, np, c->work, 1, k.KK);
                /* dw[f][k] += sum over p of dy[f][p] row[p][k] */
                gemm_args g = {dy + (n * d.F + gr * d.FG) * d.PP + p0, d.PP, 1, c->work, k.KK, 1, np,
                               dw + gr * d.FG * k.KK, k.KK, NULL, true};
                kernel_gemm(&g, d.FG, k.KK);
            }
}

static void conv_backward_params(const kernel_ctx *c, conv_dims d, const grad_reads *r)
{
    float *dw = c->grad_w;
    const knode *sel = selected_of(c);
    const float *dy = r->dy, *x = sel ? r->mask : r->x0;
    conv_dims k = d; /* the channels x holds */
    if (sel) k.C = k.CG = sel->attrs.features, k.KK = k.CG * d.KH * d.KW;
    if (dw && conv_grouped(d) && !sel) kernel_conv_grouped_backward_params(c, d, dy, x, dw);
    else if (dw && !sel && dense_from_plane(d) && kernel_conv_plane_fits(c, d)) kernel_conv_plane_backward_params(c, d, dy, x, dw);
    else if (dw) im2col_backward_params(c, d, k, dy, x, dw);
    float *db = c->grad_b;
    if (!db) return;
    for (idx f = 0; f < d.F; f++) {
        float s = 0.0f;
        for (idx n = 0; n < d.N; n++) s += kernel_sum8(dy + (n * d.F + f) * d.PP, d.PP);
        db[f] = s;
    }
}

void kernel_conv_backward(const kernel_ctx *c)
{
    grad_reads r = grad_reads_of(c);
    conv_dims d = conv_dims_of(fwd_of(c), fwd_in(c, 0));
    if (c->n->wrt == 0) conv_backward_input(c, d, r.dy);
    conv_backward_params(c, d, &r);
}

/* ---- workspace ---- */

static const knode *conv_of(const knode *nodes, int v)
{
    const knode *n = &nodes[v];
    if (n->op == POET_OP_GRAD) n = &nodes[n->fwd];
    return n->op == POET_OP_CONV2D ? n : NULL;
}

static conv_dims conv_dims_at(const knode *nodes, const knode *conv)
{
    return conv_dims_of(conv, &nodes[conv->inputs[0]]);
}

uint64_t kernel_workspace_min(const knode *nodes, int v)
{
    const knode *conv = conv_of(nodes, v);
    if (!conv) return 0;
    conv_dims d = conv_dims_at(nodes, conv);
    /* a grad node's chunk of rows of KK; a forward one of columns, unless direct */
    return nodes[v].op == POET_OP_CONV2D && conv_direct(d) ? 0 : (uint64_t)d.KK;
}

uint64_t kernel_workspace_for(const knode *nodes, int v, uint64_t positions)
{
    const knode *conv = conv_of(nodes, v);
    if (!conv || !kernel_workspace_min(nodes, v)) return 0;
    conv_dims d = conv_dims_at(nodes, conv);
    uint64_t pp = (uint64_t)d.PP;
    return (uint64_t)d.KK * (positions && positions < pp ? positions : pp);
}

