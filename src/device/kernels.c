/* The float32 kernels (see kernels.h). Layouts: images NCHW; conv weights
 * [F][C][K][K] then bias [F]; linear weights [out][in] then bias [out];
 * batch and layer norm gamma then beta; running statistics mean then
 * variance.
 *
 * The sequence of operations behind each output (docs/device.md):
 * - conv2d: bias, then + w * x for (c, kh, kw) ascending over the zero-padded
 *   input. Adding a padded zero changes nothing, since a sum that starts
 *   from a bias or from +0 is never -0.
 * - conv2d weight gradient: +0, then + dy * x over (n, oh, ow) ascending;
 *   bias gradient: the sum over n of each plane's sum8.
 * - conv2d input gradient: +0, then for the output positions p that read
 *   the element, ascending, + (the sum over f ascending, from +0, of
 *   w * dy[f][p]).
 * - sums over a plane or a row: sum8, eight lanes (element i in lane i % 8)
 *   combined as ((l0+l1)+(l2+l3))+((l4+l5)+(l6+l7)), then the tail.
 * Everything else is written out below in the one order it runs. */
#include "kernels.h"

#include <string.h>

#include "../base/mathf.h"

typedef ptrdiff_t idx; /* 32 bits on a microcontroller, 64 on the host */


static const knode *node_in(const kernel_ctx *c, int i) { return &c->nodes[c->n->inputs[i]]; }
static const knode *fwd_of(const kernel_ctx *c) { return &c->nodes[c->n->fwd]; }
static const knode *fwd_in(const kernel_ctx *c, int i) { return &c->nodes[fwd_of(c)->inputs[i]]; }
static idx numel(const knode *n) { return (idx)n->numel; }
static idx last_dim(const knode *n) { return n->dim[n->ndim - 1]; }

/* What a grad node's inputs are. */
typedef struct grad_reads {
    const float *dy, *x0, *x1, *y;
    const float *mask; /* a relu's bits, 32 a float's storage */
} grad_reads;

static grad_reads reads_of(const kernel_ctx *c)
{
    grad_reads r = {0};
    int k = 0;
    uint32_t m = c->n->reads;
    if (m & KR_DY) r.dy = c->in[k++];
    if (m & KR_IN0) r.x0 = c->in[k++];
    if (m & KR_IN1) r.x1 = c->in[k++];
    if (m & KR_OUT) r.y = c->in[k++];
    if (m & KR_MASK) r.mask = c->in[k++];
    return r;
}

/* ---- sums in eight fixed lanes ---- */

static float lanes_total(const float l[8], float tail)
{
    return ((l[0] + l[1]) + (l[2] + l[3])) + ((l[4] + l[5]) + (l[6] + l[7])) + tail;
}

static float dot8(const float *a, const float *b, idx n)
{
    float l[8] = {0}, tail = 0;
    idx i = 0;
    for (; i + 8 <= n; i += 8)
        for (int k = 0; k < 8; k++) l[k] += a[i + k] * b[i + k];
    for (; i < n; i++) tail += a[i] * b[i];
    return lanes_total(l, tail);
}

static float sum8(const float *a, idx n)
{
    float l[8] = {0}, tail = 0;
    idx i = 0;
    for (; i + 8 <= n; i += 8)
        for (int k = 0; k < 8; k++) l[k] += a[i + k];
    for (; i < n; i++) tail += a[i];
    return lanes_total(l, tail);
}

/* sum8 of (a[i] - mean)^2 */
static float sqdev8(const float *a, float mean, idx n)
{
    float l[8] = {0}, tail = 0;
    idx i = 0;
    for (; i + 8 <= n; i += 8)
        for (int k = 0; k < 8; k++) {
            float v = a[i + k] - mean;
            l[k] += v * v;
        }
    for (; i < n; i++) {
        float v = a[i] - mean;
        tail += v * v;
    }
    return lanes_total(l, tail);
}

/* sum8 of dy[i] * ((x[i] - mean) * inv) */
static float dot_xhat8(const float *dy, const float *x, float mean, float inv, idx n)
{
    float l[8] = {0}, tail = 0;
    idx i = 0;
    for (; i + 8 <= n; i += 8)
        for (int k = 0; k < 8; k++) l[k] += dy[i + k] * ((x[i + k] - mean) * inv);
    for (; i < n; i++) tail += dy[i] * ((x[i] - mean) * inv);
    return lanes_total(l, tail);
}

/* ---- convolution: im2col over chunks of output positions, per group ---- */

typedef struct conv_dims {
    idx N, C, H, W, F, KH, KW, SH, SW, PT, PL, DH, DW, G, OH, OW;
    idx CG, FG; /* channels and filters per group */
    idx KK, PP; /* reduction length (C/G)*KH*KW; output positions per image */
} conv_dims;

/* H and W of a window's tensor: [N, C, L] is [N, C, 1, L] (1-d windows). */
static idx height(const knode *x) { return x->ndim == 3 ? 1 : x->dim[2]; }
static idx width(const knode *x) { return x->dim[x->ndim - 1]; }

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

static bool conv_has_bias(const knode *conv) { return !(conv->attrs.flags & POET_ATTR_NO_BIAS); }

/* A 1x1 convolution with stride 1 and no padding reads its input as its
 * column matrix: no im2col. */
static bool conv_direct(conv_dims d) { return d.KH == 1 && d.KW == 1 && d.SH == 1 && d.SW == 1 && d.PT == 0 && d.PL == 0; }

/* Output positions per chunk that the workspace holds (at least one). */
static idx conv_chunk(const kernel_ctx *c, conv_dims d)
{
    idx chunk = (idx)(c->work_floats / (size_t)d.KK);
    return chunk < 1 ? 1 : chunk > d.PP ? d.PP : chunk;
}

/* Output columns [lo, hi) whose input column ow*SW - PL + kw*DW lies in [0, W). */
static void valid_range(conv_dims d, idx kw, idx *lo, idx *hi)
{
    idx a = d.PL - kw * d.DW, b = d.W - 1 + d.PL - kw * d.DW;
    *lo = a <= 0 ? 0 : (a + d.SW - 1) / d.SW;
    *hi = b < 0 ? 0 : b / d.SW + 1;
    if (*hi > d.OW) *hi = d.OW;
    if (*lo > *hi) *lo = *hi;
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

/* The one product the convolutions and matmul are made of: for i < ni,
 *   c[i][v] = init + sum over r < nr, ascending, of a[i*ai + r*ar] * b[r*ldb + v*bs]
 * for v < nv, where init is bias[i] (bias given), c's old value (accumulate)
 * or +0. Only independent outputs run side by side (rows of c, lanes of a
 * vector), so each output's sum keeps its order on every platform. */
#if defined(__x86_64__)
enum { VL = 8, WIDE = 2 }; /* floats per vector: AVX2 (or two SSE registers); vectors in a wide tile */
#else
enum { VL = 4, WIDE = 1 }; /* a Cortex-M without SIMD */
#endif
typedef float vec __attribute__((vector_size(VL * sizeof(float))));
typedef float vecu __attribute__((vector_size(VL * sizeof(float)), aligned(4), may_alias)); /* unaligned */
enum { MR = 4 }; /* rows of a register tile */

typedef struct gemm_args {
    const float *a;
    idx ai, ar;
    const float *b;
    idx ldb, bs, nr;
    float *c;
    idx ldc;
    const float *bias; /* or NULL */
    bool accumulate;
} gemm_args;

static float init_of(const gemm_args *g, idx i, idx v)
{
    return g->bias ? g->bias[i] : g->accumulate ? g->c[i * g->ldc + v] : 0.0f;
}

/* A register tile of MR rows by MV vectors of columns, for MV = WIDE and 1.
 * With SIMD the columns are GCC vectors; without (a Cortex-M4), plain
 * floats that GCC keeps in the 32 single-precision registers, as it does
 * not for vectors it has to emulate. */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define GEMM_TARGETS __attribute__((target_clones("avx2", "default")))
#else
#define GEMM_TARGETS
#endif
#if defined(__x86_64__)
typedef vec lanes;
#define LOAD_LANES(p) (*(const vecu *)(p))
#define STORE_LANES(p, v) (*(vecu *)(p) = (v))
#define MULADD_LANES(acc, s, b) ((acc) += (s) * (b))
#else
typedef struct lanes {
    float l[VL];
} lanes;
static inline lanes load_lanes(const float *p)
{
    lanes v;
    for (int l = 0; l < VL; l++) v.l[l] = p[l];
    return v;
}
#define LOAD_LANES(p) load_lanes(p)
#define STORE_LANES(p, v) memcpy((p), (v).l, sizeof(v).l)
#define MULADD_LANES(acc, s, b)                                                                                  \
    do {                                                                                                         \
        for (int l_ = 0; l_ < VL; l_++) (acc).l[l_] += (s) * (b).l[l_];                                         \
    } while (0)
#endif
#define DEFINE_GEMM_TILE(name, MV)                                                                 \
    GEMM_TARGETS static void name(const gemm_args *g, idx i0, idx v0)                              \
    {                                                                                              \
        lanes acc[MR][MV];                                                                         \
        for (int i = 0; i < MR; i++)                                                               \
            for (int v = 0; v < MV; v++) {                                                         \
                float init[VL];                                                                    \
                for (int l = 0; l < VL; l++) init[l] = init_of(g, i0 + i, v0 + VL * v + l);        \
                acc[i][v] = LOAD_LANES(init);                                                      \
            }                                                                                      \
        const float *restrict a = g->a + i0 * g->ai, *restrict b = g->b + v0;                      \
        const idx ai = g->ai, ar = g->ar, ldb = g->ldb, nr = g->nr;                                \
        for (idx r = 0; r < nr; r++) {                                                             \
            lanes bv[MV];                                                                          \
            for (int v = 0; v < MV; v++) bv[v] = LOAD_LANES(b + r * ldb + VL * v);                 \
            for (int i = 0; i < MR; i++) {                                                         \
                float s = a[i * ai + r * ar];                                                      \
                for (int v = 0; v < MV; v++) MULADD_LANES(acc[i][v], s, bv[v]);                    \
            }                                                                                      \
        }                                                                                          \
        for (int i = 0; i < MR; i++)                                                               \
            for (int v = 0; v < MV; v++) STORE_LANES(g->c + (i0 + i) * g->ldc + v0 + VL * v, acc[i][v]); \
    }
DEFINE_GEMM_TILE(gemm_tile_wide, WIDE)
DEFINE_GEMM_TILE(gemm_tile_narrow, 1)

static void gemm_edge(const gemm_args *g, idx i0, idx ni, idx v0, idx nv)
{
    for (idx i = i0; i < i0 + ni; i++)
        for (idx v = v0; v < v0 + nv; v++) {
            float s = init_of(g, i, v);
            for (idx r = 0; r < g->nr; r++) s += g->a[i * g->ai + r * g->ar] * g->b[r * g->ldb + v * g->bs];
            g->c[i * g->ldc + v] = s;
        }
}

static void gemm(const gemm_args *g, idx ni, idx nv)
{
    idx rows = g->bs == 1 ? ni / MR * MR : 0, wide = nv / (WIDE * VL) * (WIDE * VL), narrow = nv / VL * VL;
    for (idx i = 0; i < rows; i += MR) {
        for (idx v = 0; v < wide; v += WIDE * VL) gemm_tile_wide(g, i, v);
        if (wide < narrow) gemm_tile_narrow(g, i, wide);
    }
    if (rows < ni) gemm_edge(g, rows, ni - rows, 0, g->bs == 1 ? narrow : nv);
    if (g->bs == 1 && narrow < nv) gemm_edge(g, 0, ni, narrow, nv - narrow);
}

static void conv_forward(const kernel_ctx *c)
{
    conv_dims d = conv_dims_of(c->n, node_in(c, 0));
    const float *bias = conv_has_bias(c->n) ? c->params + d.F * d.KK : NULL;
    bool direct = conv_direct(d);
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
                gemm(&g, d.FG, np);
            }
        }
}

static void conv_backward_input(const kernel_ctx *c, conv_dims d, const float *dy)
{
    idx chunk = conv_chunk(c, d);
    memset(c->out, 0, (size_t)(d.N * d.C * d.H * d.W) * sizeof(float));
    for (idx n = 0; n < d.N; n++)
        for (idx gr = 0; gr < d.G; gr++)
            for (idx p0 = 0; p0 < d.PP; p0 += chunk) {
                idx np = d.PP - p0 < chunk ? d.PP - p0 : chunk;
                /* rows[p][k] = sum over f of dy[f][p] w[f][k], from +0 */
                gemm_args g = {dy + (n * d.F + gr * d.FG) * d.PP + p0, 1, d.PP, c->params + gr * d.FG * d.KK, d.KK, 1,
                               d.FG, c->work, d.KK, NULL, false};
                gemm(&g, np, d.KK);
                scatter_patches(c->work, d, p0, np, c->out + (n * d.C + gr * d.CG) * d.H * d.W);
            }
}

/* The channels a layer's weight gradient reads (the channel_select after
 * it, ratio:R), or NULL: all. */
static const knode *selected_of(const kernel_ctx *c)
{
    return c->n->reads & KR_MASK ? &c->nodes[c->n->fwd + 1] : NULL;
}

/* With a channel_select after the layer (ratio:R), x is its copy of the
 * channels the weights train on and dw holds only their gradients, row by
 * row: the sums of the dense gradient, in the same order. */
static void conv_backward_params(const kernel_ctx *c, conv_dims d, const grad_reads *r)
{
    float *dw = c->grad_w;
    const knode *sel = selected_of(c);
    const float *dy = r->dy, *x = sel ? r->mask : r->x0;
    conv_dims k = d; /* the channels x holds */
    if (sel) k.C = k.CG = sel->attrs.features, k.KK = k.CG * d.KH * d.KW;
    idx chunk = conv_chunk(c, k);
    if (dw) memset(dw, 0, (size_t)(d.F * k.KK) * sizeof(float));
    for (idx n = 0; dw && n < d.N; n++)
        for (idx gr = 0; gr < d.G; gr++)
            for (idx p0 = 0; p0 < d.PP; p0 += chunk) {
                idx np = d.PP - p0 < chunk ? d.PP - p0 : chunk;
                gather_patches(x + (n * k.C + gr * k.CG) * d.H * d.W, k, p0, np, c->work, 1, k.KK);
                /* dw[f][k] += sum over p of dy[f][p] row[p][k] */
                gemm_args g = {dy + (n * d.F + gr * d.FG) * d.PP + p0, d.PP, 1, c->work, k.KK, 1, np,
                               dw + gr * d.FG * k.KK, k.KK, NULL, true};
                gemm(&g, d.FG, k.KK);
            }
    float *db = c->grad_b;
    if (!db) return;
    for (idx f = 0; f < d.F; f++) {
        float s = 0.0f;
        for (idx n = 0; n < d.N; n++) s += sum8(dy + (n * d.F + f) * d.PP, d.PP);
        db[f] = s;
    }
}

static void conv_backward(const kernel_ctx *c)
{
    grad_reads r = reads_of(c);
    conv_dims d = conv_dims_of(fwd_of(c), fwd_in(c, 0));
    if (c->n->wrt == 0) conv_backward_input(c, d, r.dy);
    conv_backward_params(c, d, &r);
}

/* ---- batch norm (training: batch statistics; inference: running) ---- */

typedef struct plane_dims {
    idx N, C, HW;
} plane_dims;

/* [N, C, ...]: a plane is one image's channel. */
static plane_dims planes_of(const knode *x)
{
    return (plane_dims){x->dim[0], x->dim[1], (idx)x->numel / ((idx)x->dim[0] * x->dim[1])};
}

/* Mean and biased variance of channel ch: planes summed in n order. */
static void channel_stats(const float *x, plane_dims d, idx ch, float *mean, float *var)
{
    float s = 0.0f, q = 0.0f, m = (float)(d.N * d.HW);
    for (idx n = 0; n < d.N; n++) s += sum8(x + (n * d.C + ch) * d.HW, d.HW);
    *mean = s / m;
    for (idx n = 0; n < d.N; n++) q += sqdev8(x + (n * d.C + ch) * d.HW, *mean, d.HW);
    *var = q / m;
}

static void batchnorm_forward(const kernel_ctx *c)
{
    plane_dims d = planes_of(node_in(c, 0));
    const float *x = c->in[0], *gamma = c->params, *beta = c->params + d.C;
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

static void batchnorm_backward(const kernel_ctx *c)
{
    grad_reads r = reads_of(c);
    plane_dims d = planes_of(fwd_in(c, 0));
    const float *gamma = c->params;
    float m = (float)(d.N * d.HW), eps = fwd_of(c)->attrs.eps;
    bool running = fwd_of(c)->attrs.flags & POET_ATTR_BN_EVAL;
    for (idx ch = 0; ch < d.C; ch++) {
        float mean = 0.0f, var = 0.0f, inv = 0.0f, sdy = 0.0f, sdyx = 0.0f;
        for (idx n = 0; n < d.N; n++) sdy += sum8(r.dy + (n * d.C + ch) * d.HW, d.HW);
        if (running)
            mean = c->running[ch], var = c->running[d.C + ch];
        else if (r.x0) /* not read where only beta trains */
            channel_stats(r.x0, d, ch, &mean, &var);
        inv = 1.0f / poet_sqrtf(var + eps);
        for (idx n = 0; r.x0 && n < d.N; n++)
            sdyx += dot_xhat8(r.dy + (n * d.C + ch) * d.HW, r.x0 + (n * d.C + ch) * d.HW, mean, inv, d.HW);
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
    *mean = sum8(x, D) / (float)D;
    *inv = 1.0f / poet_sqrtf(sqdev8(x, *mean, D) / (float)D + eps);
}

static void layernorm_forward(const kernel_ctx *c)
{
    const knode *x = node_in(c, 0);
    idx D = last_dim(x), R = numel(x) / D;
    bool affine = !(c->n->attrs.flags & POET_ATTR_NO_AFFINE);
    const float *gamma = c->params, *beta = c->params + D;
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

static void layernorm_backward(const kernel_ctx *c)
{
    grad_reads g = reads_of(c);
    const knode *f0 = fwd_of(c), *x = fwd_in(c, 0);
    idx D = last_dim(x), R = numel(x) / D;
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

/* ---- linear: y = x W^T + b over the last dimension ---- */

static void linear_forward(const kernel_ctx *c)
{
    const knode *x = node_in(c, 0);
    idx I = last_dim(x), R = numel(x) / I, O = c->n->attrs.features;
    bool bias = !(c->n->attrs.flags & POET_ATTR_NO_BIAS);
    const float *w = c->params, *b = c->params + O * I;
    for (idx r = 0; r < R; r++)
        for (idx o = 0; o < O; o++) {
            float s = dot8(c->in[0] + r * I, w + o * I, I);
            c->out[r * O + o] = bias ? s + b[o] : s;
        }
}

static void linear_backward(const kernel_ctx *c)
{
    grad_reads g = reads_of(c);
    const knode *f0 = fwd_of(c), *x = fwd_in(c, 0);
    idx I = last_dim(x), R = numel(x) / I, O = f0->attrs.features;
    const float *w = c->params;
    if (c->n->wrt == 0)
        for (idx r = 0; r < R; r++) {
            float *dx = c->out + r * I;
            memset(dx, 0, (size_t)I * sizeof(float));
            for (idx o = 0; o < O; o++) {
                float gy = g.dy[r * O + o];
                const float *wr = w + o * I;
                for (idx i = 0; i < I; i++) dx[i] += gy * wr[i];
            }
        }
    /* with a channel_select after it (ratio:R): the S features its weights train on, and their gradients */
    const knode *sel = selected_of(c);
    idx S = sel ? sel->attrs.features : I;
    const float *xs = sel ? g.mask : g.x0;
    float *dw = c->grad_w, *db = c->grad_b;
    if (dw) memset(dw, 0, (size_t)(S * O) * sizeof(float));
    if (db) memset(db, 0, (size_t)O * sizeof(float));
    if (!dw && !db) return;
    for (idx r = 0; r < R; r++)
        for (idx o = 0; o < O; o++) {
            float gy = g.dy[r * O + o];
            if (dw) {
                const float *xr = xs + r * S;
                float *dwr = dw + o * S;
                for (idx i = 0; i < S; i++) dwr[i] += gy * xr[i];
            }
            if (db) db[o] += gy;
        }
}

/* The listed channels of the input, in their order. */
static void channel_select_forward(const kernel_ctx *c)
{
    const knode *x = node_in(c, 0);
    idx axis = c->n->attrs.axis, C = x->dim[axis], S = c->n->attrs.features, outer = 1, inner = 1;
    for (idx i = 0; i < axis; i++) outer *= x->dim[i];
    for (idx i = axis + 1; i < x->ndim; i++) inner *= x->dim[i];
    const uint32_t *list = c->channels + c->n->attrs.start;
    for (idx o = 0; o < outer; o++)
        for (idx j = 0; j < S; j++)
            memcpy(c->out + (o * S + j) * inner, c->in[0] + (o * C + (idx)list[j]) * inner, (size_t)inner * sizeof(float));
}

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

static void pool_forward(const kernel_ctx *c, bool max)
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
static void pool_index_forward(const kernel_ctx *c)
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

static void pool_backward(const kernel_ctx *c, bool max)
{
    grad_reads g = reads_of(c);
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

static void global_avgpool_forward(const kernel_ctx *c)
{
    plane_dims d = planes_of(node_in(c, 0));
    for (idx p = 0; p < d.N * d.C; p++) c->out[p] = sum8(c->in[0] + p * d.HW, d.HW) / (float)d.HW;
}

static void global_avgpool_backward(const kernel_ctx *c)
{
    plane_dims d = planes_of(fwd_in(c, 0));
    grad_reads g = reads_of(c);
    for (idx p = 0; p < d.N * d.C; p++)
        for (idx i = 0; i < d.HW; i++) c->out[p * d.HW + i] = g.dy[p] / (float)d.HW;
}

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

/* y = f(x) for the ops computed element by element. */
static float unary_forward(const knode *n, float x)
{
    const poet_attrs *a = &n->attrs;
    switch (n->op) {
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
static float unary_backward(const knode *f, float dy, float x, float y)
{
    const poet_attrs *a = &f->attrs;
    switch (f->op) {
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

static void unary_run_forward(const kernel_ctx *c)
{
    idx total = numel(c->n);
    for (idx i = 0; i < total; i++) c->out[i] = unary_forward(c->n, c->in[0][i]);
}

static uint32_t mask_word(const float *words, idx w)
{
    uint32_t bits;
    memcpy(&bits, words + w, sizeof bits);
    return bits;
}

static void relu_mask_forward(const kernel_ctx *c)
{
    const float *y = c->in[0];
    idx total = numel(node_in(c, 0));
    for (idx w = 0; w * 32 < total; w++) {
        uint32_t bits = 0;
        for (idx i = w * 32; i < total && i < w * 32 + 32; i++) bits |= (uint32_t)(y[i] > 0) << (i % 32);
        memcpy(c->out + w, &bits, sizeof bits);
    }
}

static void unary_run_backward(const kernel_ctx *c)
{
    grad_reads g = reads_of(c);
    const knode *f = fwd_of(c);
    idx total = numel(c->n);
    if (g.mask) { /* a masked relu: dy where the bit is set */
        for (idx i = 0; i < total; i++) c->out[i] = mask_word(g.mask, i / 32) >> (i % 32) & 1 ? g.dy[i] : 0.0f;
        return;
    }
    for (idx i = 0; i < total; i++) c->out[i] = unary_backward(f, g.dy[i], g.x0 ? g.x0[i] : 0.0f, g.y ? g.y[i] : 0.0f);
}

static void dropout_forward(const kernel_ctx *c)
{
    idx total = numel(c->n);
    for (idx i = 0; i < total; i++)
        c->out[i] = c->training ? c->in[0][i] * dropout_scale(c, c->n->inputs[0], i, c->n->attrs.p) : c->in[0][i];
}

static void dropout_backward(const kernel_ctx *c)
{
    const knode *f0 = fwd_of(c);
    grad_reads g = reads_of(c);
    idx total = numel(f0);
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
    idx N = a->dim[0], per_a = numel(a) / N, per_b = numel(b) / N;
    for (idx n = 0; n < N; n++)
        for (idx i = 0; i < per_a; i++)
            c->out[n * per_a + i] = c->in[0][n * per_a + i] + (i < per_b ? c->in[1][n * per_b + i] : 0.0f);
}

static void binary_forward(const kernel_ctx *c)
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

static void binary_backward(const kernel_ctx *c)
{
    const knode *f = fwd_of(c);
    grad_reads g = reads_of(c);
    if (add_padded(c->nodes, f)) { /* the padded input's gradient: a slice of dY */
        const knode *x = fwd_in(c, c->n->wrt);
        idx N = f->dim[0], per_y = numel(f) / N, per_x = numel(x) / N;
        for (idx n = 0; n < N; n++) memcpy(c->out + n * per_x, g.dy + n * per_y, (size_t)per_x * sizeof(float));
        return;
    }
    /* the inputs the gradient does not read are not needed by its formula */
    operands p = operands_of(c->nodes, f, g.x0, g.x1, c->params, c->running);
    bcast bc = bcast_of(f, p.adim, p.andim, p.bdim, p.bndim);
    if (c->n->wrt >= 0) {
        bool of_a = f->n_inputs == 2 ? c->n->wrt == 0 : !p.a_is_operand;
        binary_grad_of(f, &p, g.dy, of_a, bc, c->out, numel(c->n));
    }
    if (c->grad_w) binary_grad_of(f, &p, g.dy, p.a_is_operand, bc, c->grad_w, (idx)f->params);
}

/* prelu: x above 0, slope x below; the slope's gradient sums x dY below 0
 * over where it was broadcast, in the output's order */
static void prelu_forward(const kernel_ctx *c)
{
    const knode *x = node_in(c, 0);
    const float *in = c->in[0], *slope = c->params;
    bcast bc = bcast_of(c->n, x->dim, x->ndim, c->n->attrs.dim, c->n->attrs.ndim);
    FOR_BCAST(bc, o, ia, ib, c->out[o] = in[ia] > 0 ? in[ia] : slope[ib] * in[ia]);
}

static void prelu_backward(const kernel_ctx *c)
{
    const knode *f = fwd_of(c), *x = fwd_in(c, 0);
    grad_reads g = reads_of(c);
    const float *slope = c->params;
    bcast bc = bcast_of(f, x->dim, x->ndim, f->attrs.dim, f->attrs.ndim);
    if (c->n->wrt >= 0) FOR_BCAST(bc, o, ia, ib, c->out[ia] = g.x0[ia] > 0 ? g.dy[o] : slope[ib] * g.dy[o]);
    if (!c->grad_w) return;
    memset(c->grad_w, 0, (size_t)f->params * sizeof(float));
    FOR_BCAST(bc, o, ia, ib, c->grad_w[ib] += g.x0[ia] > 0 ? 0.0f : g.x0[ia] * g.dy[o]);
}

/* ---- matmul: [..., M, K] x [..., K, N], leading dimensions broadcast ---- */

typedef struct mm_dims {
    idx M, K, N, batches;
    idx lead[2], sa[2], sb[2]; /* leading dimensions (up to two) and each operand's batch strides */
} mm_dims;

static mm_dims mm_dims_of(const knode *y, const knode *a, const knode *b)
{
    mm_dims d = {a->dim[a->ndim - 2], a->dim[a->ndim - 1], b->dim[b->ndim - 1], 1, {1, 1}, {0, 0}, {0, 0}};
    int lead = y->ndim - 2;
    idx step_a = d.M * d.K, step_b = d.K * d.N;
    for (int i = 1; i >= 0; i--) {
        int j = lead - 2 + i, ja = a->ndim - 2 - 2 + i, jb = b->ndim - 2 - 2 + i;
        d.lead[i] = j >= 0 ? y->dim[j] : 1;
        idx da = ja >= 0 ? a->dim[ja] : 1, db = jb >= 0 ? b->dim[jb] : 1;
        d.sa[i] = da == 1 ? 0 : step_a, d.sb[i] = db == 1 ? 0 : step_b;
        step_a *= da, step_b *= db;
    }
    d.batches = d.lead[0] * d.lead[1];
    return d;
}

static void matmul_forward(const kernel_ctx *c)
{
    mm_dims d = mm_dims_of(c->n, node_in(c, 0), node_in(c, 1));
    for (idx i = 0, t = 0; i < d.lead[0]; i++)
        for (idx j = 0; j < d.lead[1]; j++, t++) {
            gemm_args g = {c->in[0] + i * d.sa[0] + j * d.sa[1], d.K, 1, c->in[1] + i * d.sb[0] + j * d.sb[1], d.N, 1,
                           d.K, c->out + t * d.M * d.N, d.N, NULL, false};
            gemm(&g, d.M, d.N);
        }
}

/* dA = dY B^T and dB = A^T dY, each summed over the batches it was
 * broadcast across, in batch order. */
static void matmul_backward(const kernel_ctx *c)
{
    const knode *f = fwd_of(c);
    grad_reads r = reads_of(c);
    mm_dims d = mm_dims_of(f, fwd_in(c, 0), fwd_in(c, 1));
    bool wrt_a = c->n->wrt == 0;
    memset(c->out, 0, (size_t)numel(c->n) * sizeof(float));
    for (idx i = 0, t = 0; i < d.lead[0]; i++)
        for (idx j = 0; j < d.lead[1]; j++, t++) {
            const float *dy = r.dy + t * d.M * d.N;
            gemm_args g;
            if (wrt_a) /* dA[m][k] += sum over n of dY[m][n] B[k][n] */
                g = (gemm_args){dy, d.N, 1, r.x1 + i * d.sb[0] + j * d.sb[1], 1, d.N, d.N,
                                c->out + i * d.sa[0] + j * d.sa[1], d.K, NULL, true};
            else /* dB[k][n] += sum over m of A[m][k] dY[m][n] */
                g = (gemm_args){r.x0 + i * d.sa[0] + j * d.sa[1], 1, d.K, dy, d.N, 1, d.M,
                                c->out + i * d.sb[0] + j * d.sb[1], d.N, NULL, true};
            gemm(&g, wrt_a ? d.M : d.K, wrt_a ? d.K : d.N);
        }
}

/* ---- data movement ---- */

static void copy_forward(const kernel_ctx *c, const float *src)
{
    memcpy(c->out, src, (size_t)numel(c->n) * sizeof(float));
}

/* Right-aligned four-dimensional strides of a tensor. */
static void strides4(const knode *x, idx s[POET_MAX_DIMS])
{
    idx step = 1;
    for (int i = x->ndim - 1; i >= 0; i--) s[i] = step, step *= x->dim[i];
}

/* Walks y = transpose(x) in y's order: forward (yv set) copies x into y,
 * backward copies y's gradient yo into x's, xo. */
static void transpose_walk(const knode *y, const knode *x, const int32_t *perm, float *yv, const float *xv, float *xo,
                           const float *yo)
{
    idx sx[POET_MAX_DIMS] = {0}, dim[POET_MAX_DIMS] = {1, 1, 1, 1}, step[POET_MAX_DIMS] = {0};
    strides4(x, sx);
    int r = y->ndim, off = POET_MAX_DIMS - r;
    for (int i = 0; i < r; i++) dim[off + i] = y->dim[i], step[off + i] = sx[perm[i]];
    idx o = 0;
    for (idx i0 = 0; i0 < dim[0]; i0++)
        for (idx i1 = 0; i1 < dim[1]; i1++)
            for (idx i2 = 0; i2 < dim[2]; i2++)
                for (idx i3 = 0, at = i0 * step[0] + i1 * step[1] + i2 * step[2]; i3 < dim[3]; i3++, o++, at += step[3]) {
                    if (yv) yv[o] = xv[at]; /* forward */
                    else xo[at] = yo[o];    /* backward: each element once */
                }
}

static void transpose_forward(const kernel_ctx *c)
{
    transpose_walk(c->n, node_in(c, 0), c->n->attrs.perm, c->out, c->in[0], NULL, NULL);
}

static void transpose_backward(const kernel_ctx *c)
{
    const knode *f = fwd_of(c);
    transpose_walk(f, fwd_in(c, 0), f->attrs.perm, NULL, NULL, c->out, reads_of(c).dy);
}

/* Elements before the axis, along it, and after it. */
static void around_axis(const knode *x, int axis, idx *outer, idx *along, idx *inner)
{
    *outer = 1, *inner = 1, *along = x->dim[axis];
    for (int i = 0; i < axis; i++) *outer *= x->dim[i];
    for (int i = axis + 1; i < x->ndim; i++) *inner *= x->dim[i];
}

/* A concat's parameter operand (ViT's class token) lies first or last
 * along the axis, broadcast over the axes before it: how long it is (0
 * where there is none), where it starts, and where the inputs start. */
static idx concat_operand(const knode *f, idx total, idx *at, idx *inputs_at)
{
    idx len = f->attrs.flags & POET_ATTR_OPERAND_PARAM ? f->attrs.dim[f->attrs.axis] : 0;
    bool left = f->attrs.flags & POET_ATTR_OPERAND_LEFT;
    *at = left ? 0 : total - len, *inputs_at = left ? len : 0;
    return len;
}

static void concat_forward(const kernel_ctx *c)
{
    idx outer, total, inner, op_at, at;
    around_axis(c->n, c->n->attrs.axis, &outer, &total, &inner);
    idx op_len = concat_operand(c->n, total, &op_at, &at);
    for (int j = 0; j < c->n->n_inputs; j++) {
        idx o2, len, i2;
        around_axis(node_in(c, j), c->n->attrs.axis, &o2, &len, &i2);
        for (idx o = 0; o < outer; o++)
            memcpy(c->out + (o * total + at) * inner, c->in[j] + o * len * inner, (size_t)(len * inner) * sizeof(float));
        at += len;
    }
    for (idx o = 0; o < outer && op_len; o++)
        memcpy(c->out + (o * total + op_at) * inner, c->params, (size_t)(op_len * inner) * sizeof(float));
}

static void concat_backward(const kernel_ctx *c)
{
    const knode *f = fwd_of(c);
    idx outer, total, inner, len = 0, o2, i2, op_at, at;
    around_axis(f, f->attrs.axis, &outer, &total, &inner);
    idx op_len = concat_operand(f, total, &op_at, &at);
    const float *dy = reads_of(c).dy;
    for (int j = 0; j <= c->n->wrt; j++) {
        at += len;
        around_axis(fwd_in(c, j), f->attrs.axis, &o2, &len, &i2);
    }
    for (idx o = 0; o < outer && c->n->wrt >= 0; o++)
        memcpy(c->out + o * len * inner, dy + (o * total + at) * inner, (size_t)(len * inner) * sizeof(float));
    if (!c->grad_w || !op_len) return;
    /* the operand's gradient: its slice of dY summed over where it was broadcast */
    memset(c->grad_w, 0, (size_t)(op_len * inner) * sizeof(float));
    for (idx o = 0; o < outer; o++)
        for (idx k = 0; k < op_len * inner; k++) c->grad_w[k] += dy[(o * total + op_at) * inner + k];
}

/* upsample2d: output (y, x) is input (y / sh, x / sw) of the same plane; the
 * input's gradient sums its sh x sw block of dY, row by row */
static void upsample2d_forward(const kernel_ctx *c)
{
    const knode *x = node_in(c, 0);
    idx planes = (idx)x->dim[0] * x->dim[1], H = x->dim[2], W = x->dim[3], sh = c->n->attrs.sh, sw = c->n->attrs.sw;
    for (idx p = 0; p < planes; p++)
        for (idx y = 0; y < H * sh; y++)
            for (idx u = 0; u < W * sw; u++)
                c->out[(p * H * sh + y) * W * sw + u] = c->in[0][(p * H + y / sh) * W + u / sw];
}

static void upsample2d_backward(const kernel_ctx *c)
{
    const knode *f = fwd_of(c), *x = fwd_in(c, 0);
    idx planes = (idx)x->dim[0] * x->dim[1], H = x->dim[2], W = x->dim[3], sh = f->attrs.sh, sw = f->attrs.sw;
    const float *dy = reads_of(c).dy;
    for (idx p = 0; p < planes; p++)
        for (idx i = 0; i < H; i++)
            for (idx j = 0; j < W; j++) {
                float s = 0.0f;
                for (idx a = 0; a < sh; a++)
                    for (idx b = 0; b < sw; b++) s += dy[(p * H * sh + i * sh + a) * W * sw + j * sw + b];
                c->out[(p * H + i) * W + j] = s;
            }
}

static void slice_forward(const kernel_ctx *c)
{
    idx outer, size, inner, len = c->n->attrs.end - c->n->attrs.start;
    around_axis(node_in(c, 0), c->n->attrs.axis, &outer, &size, &inner);
    for (idx o = 0; o < outer; o++)
        memcpy(c->out + o * len * inner, c->in[0] + (o * size + c->n->attrs.start) * inner,
               (size_t)(len * inner) * sizeof(float));
}

static void slice_backward(const kernel_ctx *c)
{
    const knode *f = fwd_of(c);
    idx outer, size, inner, len = f->attrs.end - f->attrs.start;
    around_axis(fwd_in(c, 0), f->attrs.axis, &outer, &size, &inner);
    const float *dy = reads_of(c).dy;
    memset(c->out, 0, (size_t)numel(c->n) * sizeof(float));
    for (idx o = 0; o < outer; o++)
        memcpy(c->out + (o * size + f->attrs.start) * inner, dy + o * len * inner, (size_t)(len * inner) * sizeof(float));
}

/* ---- softmax along an axis, and the loss ---- */

/* A line of D elements `stride` apart: the sums of sum8, in the same lanes. */
static float line_sum8(const float *a, idx n, idx stride)
{
    if (stride == 1) return sum8(a, n);
    float l[8] = {0}, tail = 0;
    idx i = 0;
    for (; i + 8 <= n; i += 8)
        for (int k = 0; k < 8; k++) l[k] += a[(i + k) * stride];
    for (; i < n; i++) tail += a[i * stride];
    return lanes_total(l, tail);
}

static float line_dot8(const float *a, const float *b, idx n, idx stride)
{
    if (stride == 1) return dot8(a, b, n);
    float l[8] = {0}, tail = 0;
    idx i = 0;
    for (; i + 8 <= n; i += 8)
        for (int k = 0; k < 8; k++) l[k] += a[(i + k) * stride] * b[(i + k) * stride];
    for (; i < n; i++) tail += a[i * stride] * b[i * stride];
    return lanes_total(l, tail);
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

static void softmax_forward(const kernel_ctx *c)
{
    idx outer, D, inner;
    around_axis(c->n, c->n->attrs.axis, &outer, &D, &inner);
    for (idx o = 0; o < outer; o++)
        for (idx i = 0; i < inner; i++) softmax_line(c->in[0] + o * D * inner + i, D, inner, c->out + o * D * inner + i);
}

static void softmax_backward(const kernel_ctx *c)
{
    grad_reads g = reads_of(c);
    idx outer, D, inner;
    around_axis(fwd_of(c), fwd_of(c)->attrs.axis, &outer, &D, &inner);
    for (idx o = 0; o < outer; o++)
        for (idx i = 0; i < inner; i++) {
            idx at = o * D * inner + i;
            const float *y = g.y + at, *dy = g.dy + at;
            float s = line_dot8(dy, y, D, inner);
            for (idx j = 0; j < D; j++) c->out[at + j * inner] = y[j * inner] * (dy[j * inner] - s);
        }
}

/* Per row: log-sum-exp of the logits minus the labelled logit. */
static void softmax_ce_forward(const kernel_ctx *c)
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
static void softmax_ce_backward(const kernel_ctx *c)
{
    grad_reads g = reads_of(c);
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

static void attn_scores_forward(const kernel_ctx *c)
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
static void attn_scores_backward(const kernel_ctx *c)
{
    grad_reads g = reads_of(c);
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

static void attn_context_forward(const kernel_ctx *c)
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
static void attn_context_backward(const kernel_ctx *c)
{
    grad_reads g = reads_of(c);
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

/* ---- dispatch ---- */

static void grad_sum(const kernel_ctx *c)
{
    idx total = numel(c->n);
    copy_forward(c, c->in[0]);
    for (int k = 1; k < c->n->n_inputs; k++)
        for (idx i = 0; i < total; i++) c->out[i] += c->in[k][i];
}

static void input_forward(const kernel_ctx *c) { copy_forward(c, c->batch_x); }
static void pass_forward(const kernel_ctx *c) { copy_forward(c, c->in[0]); }
static void maxpool_forward(const kernel_ctx *c) { pool_forward(c, true); }
static void maxpool_backward(const kernel_ctx *c) { pool_backward(c, true); }
static void avgpool_forward(const kernel_ctx *c) { pool_forward(c, false); }
static void avgpool_backward(const kernel_ctx *c) { pool_backward(c, false); }

typedef void (*kernel_fn)(const kernel_ctx *);

/* Each forward op's kernels, forward and backward, in one row, so that an op
 * joins in one place. No backward kernel: flatten and reshape pass dY on as
 * it is (the training graph has no grad node for them). */
static const struct {
    kernel_fn forward, backward;
} kernels[POET_OP_COUNT] = {
    [POET_OP_INPUT] = {input_forward, NULL},
    [POET_OP_CONV2D] = {conv_forward, conv_backward},
    [POET_OP_BATCHNORM2D] = {batchnorm_forward, batchnorm_backward},
    [POET_OP_MAXPOOL2D] = {maxpool_forward, maxpool_backward},
    [POET_OP_AVGPOOL2D] = {avgpool_forward, avgpool_backward},
    [POET_OP_GLOBAL_AVGPOOL] = {global_avgpool_forward, global_avgpool_backward},
    [POET_OP_ADD] = {binary_forward, binary_backward},
    [POET_OP_SUB] = {binary_forward, binary_backward},
    [POET_OP_MUL] = {binary_forward, binary_backward},
    [POET_OP_DIV] = {binary_forward, binary_backward},
    [POET_OP_FLATTEN] = {pass_forward, NULL},
    [POET_OP_RESHAPE] = {pass_forward, NULL},
    [POET_OP_LINEAR] = {linear_forward, linear_backward},
    [POET_OP_DROPOUT] = {dropout_forward, dropout_backward},
    [POET_OP_SOFTMAX_CE] = {softmax_ce_forward, softmax_ce_backward},
    [POET_OP_LAYERNORM] = {layernorm_forward, layernorm_backward},
    [POET_OP_SOFTMAX] = {softmax_forward, softmax_backward},
    [POET_OP_ATTN_SCORES] = {attn_scores_forward, attn_scores_backward},
    [POET_OP_ATTN_CONTEXT] = {attn_context_forward, attn_context_backward},
    [POET_OP_MATMUL] = {matmul_forward, matmul_backward},
    [POET_OP_TRANSPOSE] = {transpose_forward, transpose_backward},
    [POET_OP_CONCAT] = {concat_forward, concat_backward},
    [POET_OP_SLICE] = {slice_forward, slice_backward},
    [POET_OP_UPSAMPLE2D] = {upsample2d_forward, upsample2d_backward},
    [POET_OP_RELU] = {unary_run_forward, unary_run_backward},
    [POET_OP_RELU_MASK] = {relu_mask_forward, NULL},
    [POET_OP_CHANNEL_SELECT] = {channel_select_forward, NULL},
    [POET_OP_POOL_INDEX] = {pool_index_forward, NULL},
    [POET_OP_GELU] = {unary_run_forward, unary_run_backward},
    [POET_OP_SIGMOID] = {unary_run_forward, unary_run_backward},
    [POET_OP_TANH] = {unary_run_forward, unary_run_backward},
    [POET_OP_ERF] = {unary_run_forward, unary_run_backward},
    [POET_OP_HARDSIGMOID] = {unary_run_forward, unary_run_backward},
    [POET_OP_HARDSWISH] = {unary_run_forward, unary_run_backward},
    [POET_OP_CLIP] = {unary_run_forward, unary_run_backward},
    [POET_OP_LEAKY_RELU] = {unary_run_forward, unary_run_backward},
    [POET_OP_SOFTPLUS] = {unary_run_forward, unary_run_backward},
    [POET_OP_PRELU] = {prelu_forward, prelu_backward},
    [POET_OP_ELU] = {unary_run_forward, unary_run_backward},
};

/* The kernel of a node: a forward op's own, a grad node's its forward op's
 * backward, or the sum of gradient contributions. */
static kernel_fn kernel_of(const kernel_ctx *c)
{
    int op = c->n->op;
    if (op == POET_OP_GRAD_SUM) return grad_sum;
    bool grad = op == POET_OP_GRAD;
    if (grad) op = fwd_of(c)->op;
    if (op >= POET_OP_COUNT) return NULL;
    return grad ? kernels[op].backward : kernels[op].forward;
}

bool kernel_run(const kernel_ctx *c)
{
    kernel_fn run = kernel_of(c);
    if (run) run(c);
    return run != NULL;
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
