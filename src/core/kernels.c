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

#include "mathf.h"

typedef ptrdiff_t idx; /* 32 bits on a microcontroller, 64 on the host */

enum { BN_MOMENTUM_PCT = 10 };
static const float NORM_EPS = 1e-5f;

static const knode *node_in(const kernel_ctx *c, int i) { return &c->nodes[c->n->inputs[i]]; }
static const knode *fwd_of(const kernel_ctx *c) { return &c->nodes[c->n->fwd]; }
static const knode *fwd_in(const kernel_ctx *c, int i) { return &c->nodes[fwd_of(c)->inputs[i]]; }
static idx numel(const knode *n) { return (idx)n->numel; }

/* What a grad node's inputs are. */
typedef struct grad_reads {
    const float *dy, *x0, *x1, *y;
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

/* ---- convolution: im2col over chunks of output positions ---- */

typedef struct conv_dims {
    idx N, C, H, W, F, K, S, P, OH, OW;
    idx KK, PP; /* reduction length C*K*K; output positions per image */
} conv_dims;

static conv_dims conv_dims_of(const knode *conv, const knode *x)
{
    conv_dims d = {x->dim[0], x->dim[1], x->dim[2], x->dim[3], conv->features, conv->kernel,
                   conv->stride, conv->pad, conv->dim[2], conv->dim[3], 0, 0};
    d.KK = d.C * d.K * d.K;
    d.PP = d.OH * d.OW;
    return d;
}

/* Output positions per chunk that the workspace holds (at least one). */
static idx conv_chunk(const kernel_ctx *c, conv_dims d)
{
    idx chunk = (idx)(c->work_floats / (size_t)d.KK);
    return chunk < 1 ? 1 : chunk > d.PP ? d.PP : chunk;
}

/* Output columns [lo, hi) whose input column ow*S - P + kw lies in [0, W). */
static void valid_range(conv_dims d, idx kw, idx *lo, idx *hi)
{
    idx a = d.P - kw, b = d.W - 1 + d.P - kw;
    *lo = a <= 0 ? 0 : (a + d.S - 1) / d.S;
    *hi = b < 0 ? 0 : b / d.S + 1;
    if (*hi > d.OW) *hi = d.OW;
    if (*lo > *hi) *lo = *hi;
}

/* The patches of output positions [p0, p0 + np) of one image: element
 * (k, j) goes to out[k * sk + j * sj]; zero where the window leaves the
 * image. sk = np, sj = 1 lays them out as columns; sk = 1, sj = KK as rows. */
static void gather_patches(const float *x, conv_dims d, idx p0, idx np, float *out, idx sk, idx sj)
{
    for (idx c = 0; c < d.C; c++)
        for (idx kh = 0; kh < d.K; kh++)
            for (idx kw = 0; kw < d.K; kw++) {
                idx k = (c * d.K + kh) * d.K + kw, lo, hi;
                valid_range(d, kw, &lo, &hi);
                float *o = out + k * sk;
                for (idx p = p0, end = p0 + np; p < end;) { /* the part of one output row in the chunk */
                    idx oh = p / d.OW, ow = p % d.OW, n = end - p < d.OW - ow ? end - p : d.OW - ow;
                    idx ih = oh * d.S - d.P + kh, a = lo > ow ? lo : ow, b = hi < ow + n ? hi : ow + n;
                    float *row = o + (p - p0) * sj - ow * sj;
                    if (ih < 0 || ih >= d.H) a = b = ow + n;
                    const float *xr = x + (c * d.H + ih) * d.W - d.P + kw;
                    for (idx q = ow; q < a; q++) row[q * sj] = 0.0f;
                    for (idx q = a; q < b; q++) row[q * sj] = xr[q * d.S];
                    for (idx q = b > a ? b : a; q < ow + n; q++) row[q * sj] = 0.0f;
                    p += n;
                }
            }
}

/* The one product the convolutions are made of: for i < ni,
 *   c[i][v] = init + sum over r < nr, ascending, of a[i*ai + r*ar] * b[r*ldb + v]
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
    idx ldb, nr;
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
            for (idx r = 0; r < g->nr; r++) s += g->a[i * g->ai + r * g->ar] * g->b[r * g->ldb + v];
            g->c[i * g->ldc + v] = s;
        }
}

static void gemm(const gemm_args *g, idx ni, idx nv)
{
    idx rows = ni / MR * MR, wide = nv / (WIDE * VL) * (WIDE * VL), narrow = nv / VL * VL;
    for (idx i = 0; i < rows; i += MR) {
        for (idx v = 0; v < wide; v += WIDE * VL) gemm_tile_wide(g, i, v);
        if (wide < narrow) gemm_tile_narrow(g, i, wide);
    }
    if (rows < ni) gemm_edge(g, rows, ni - rows, 0, narrow);
    if (narrow < nv) gemm_edge(g, 0, ni, narrow, nv - narrow);
}

static void conv_forward(const kernel_ctx *c)
{
    conv_dims d = conv_dims_of(c->n, node_in(c, 0));
    bool direct = d.K == 1 && d.S == 1 && d.P == 0; /* the input is its own column matrix */
    idx chunk = conv_chunk(c, d);
    for (idx n = 0; n < d.N; n++) {
        const float *x = c->in[0] + n * d.C * d.H * d.W;
        for (idx p0 = 0; p0 < d.PP; p0 += chunk) {
            idx np = d.PP - p0 < chunk ? d.PP - p0 : chunk;
            if (!direct) gather_patches(x, d, p0, np, c->work, np, 1);
            /* out[f][p] = bias[f] + sum over k of w[f][k] col[k][p] */
            gemm_args g = {c->params, d.KK, 1, direct ? x + p0 : c->work, direct ? d.PP : np, d.KK,
                           c->out + n * d.F * d.PP + p0, d.PP, c->params + d.F * d.KK, false};
            gemm(&g, d.F, np);
        }
    }
}

/* dx += rows[j][k] at each patch element inside the image, j then k ascending. */
static void scatter_patches(const float *rows, conv_dims d, idx p0, idx np, float *dx)
{
    idx oh = p0 / d.OW, ow = p0 % d.OW;
    for (idx j = 0; j < np; j++) {
        const float *r = rows + j * d.KK;
        for (idx c = 0; c < d.C; c++)
            for (idx kh = 0; kh < d.K; kh++) {
                idx ih = oh * d.S - d.P + kh;
                if (ih < 0 || ih >= d.H) continue;
                float *xr = dx + (c * d.H + ih) * d.W;
                for (idx kw = 0; kw < d.K; kw++) {
                    idx iw = ow * d.S - d.P + kw;
                    if (iw >= 0 && iw < d.W) xr[iw] += r[(c * d.K + kh) * d.K + kw];
                }
            }
        if (++ow == d.OW) ow = 0, oh++;
    }
}

static void conv_backward_input(const kernel_ctx *c, conv_dims d, const float *dy)
{
    idx chunk = conv_chunk(c, d);
    memset(c->out, 0, (size_t)(d.N * d.C * d.H * d.W) * sizeof(float));
    for (idx n = 0; n < d.N; n++)
        for (idx p0 = 0; p0 < d.PP; p0 += chunk) {
            idx np = d.PP - p0 < chunk ? d.PP - p0 : chunk;
            /* rows[p][k] = sum over f of dy[f][p] w[f][k], from +0 */
            gemm_args g = {dy + n * d.F * d.PP + p0, 1, d.PP, c->params, d.KK, d.F, c->work, d.KK, NULL, false};
            gemm(&g, np, d.KK);
            scatter_patches(c->work, d, p0, np, c->out + n * d.C * d.H * d.W);
        }
}

static void conv_backward_params(const kernel_ctx *c, conv_dims d, const float *dy, const float *x)
{
    float *dw = c->grads, *db = c->grads + d.F * d.KK;
    idx chunk = conv_chunk(c, d);
    memset(dw, 0, (size_t)(d.F * d.KK) * sizeof(float));
    for (idx n = 0; n < d.N; n++)
        for (idx p0 = 0; p0 < d.PP; p0 += chunk) {
            idx np = d.PP - p0 < chunk ? d.PP - p0 : chunk;
            gather_patches(x + n * d.C * d.H * d.W, d, p0, np, c->work, 1, d.KK);
            /* dw[f][k] += sum over p of dy[f][p] row[p][k] */
            gemm_args g = {dy + n * d.F * d.PP + p0, d.PP, 1, c->work, d.KK, np, dw, d.KK, NULL, true};
            gemm(&g, d.F, d.KK);
        }
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
    if (c->grads) conv_backward_params(c, d, r.dy, r.x0);
}

/* ---- batch norm (training: batch statistics; inference: running) ---- */

typedef struct plane_dims {
    idx N, C, HW;
} plane_dims;

static plane_dims planes_of(const knode *x) { return (plane_dims){x->dim[0], x->dim[1], x->dim[2] * x->dim[3]}; }

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
    float m = (float)(d.N * d.HW), mom = (float)BN_MOMENTUM_PCT / 100.0f;
    for (idx ch = 0; ch < d.C; ch++) {
        float mean, var;
        if (c->training) {
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
        float scale = gamma[ch] / poet_sqrtf(var + NORM_EPS), shift = beta[ch];
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
    float m = (float)(d.N * d.HW);
    for (idx ch = 0; ch < d.C; ch++) {
        float mean, var, sdy = 0.0f, sdyx = 0.0f;
        channel_stats(r.x0, d, ch, &mean, &var);
        float inv = 1.0f / poet_sqrtf(var + NORM_EPS);
        for (idx n = 0; n < d.N; n++) {
            idx at = (n * d.C + ch) * d.HW;
            sdy += sum8(r.dy + at, d.HW);
            sdyx += dot_xhat8(r.dy + at, r.x0 + at, mean, inv, d.HW);
        }
        if (c->n->wrt == 0) {
            float a = gamma[ch] * inv, mdy = sdy / m, mdyx = sdyx / m;
            for (idx n = 0; n < d.N; n++) {
                idx at = (n * d.C + ch) * d.HW;
                for (idx i = 0; i < d.HW; i++)
                    c->out[at + i] = a * ((r.dy[at + i] - mdy) - ((r.x0[at + i] - mean) * inv) * mdyx);
            }
        }
        if (c->grads) {
            c->grads[ch] = sdyx;
            c->grads[d.C + ch] = sdy;
        }
    }
}

/* ---- layer norm over the last dimension ---- */

static void row_stats(const float *x, idx D, float *mean, float *inv)
{
    *mean = sum8(x, D) / (float)D;
    *inv = 1.0f / poet_sqrtf(sqdev8(x, *mean, D) / (float)D + NORM_EPS);
}

static void layernorm_forward(const kernel_ctx *c)
{
    const knode *x = node_in(c, 0);
    idx R = x->dim[0], D = x->dim[1];
    const float *gamma = c->params, *beta = c->params + D;
    for (idx r = 0; r < R; r++) {
        const float *xr = c->in[0] + r * D;
        float mean, inv;
        row_stats(xr, D, &mean, &inv);
        for (idx j = 0; j < D; j++) c->out[r * D + j] = (xr[j] - mean) * inv * gamma[j] + beta[j];
    }
}

static void layernorm_backward(const kernel_ctx *c)
{
    grad_reads g = reads_of(c);
    const knode *x = fwd_in(c, 0);
    idx R = x->dim[0], D = x->dim[1];
    const float *gamma = c->params;
    if (c->grads) memset(c->grads, 0, (size_t)(2 * D) * sizeof(float));
    for (idx r = 0; r < R; r++) {
        const float *xr = g.x0 + r * D, *dy = g.dy + r * D;
        float mean, inv, a = 0.0f, b = 0.0f;
        row_stats(xr, D, &mean, &inv);
        for (idx j = 0; j < D; j++) {
            float xhat = (xr[j] - mean) * inv, dxhat = dy[j] * gamma[j];
            a += dxhat;
            b += dxhat * xhat;
            if (c->grads) {
                c->grads[j] += dy[j] * xhat;
                c->grads[D + j] += dy[j];
            }
        }
        if (c->n->wrt == 0) {
            float ma = a / (float)D, mb = b / (float)D;
            for (idx j = 0; j < D; j++) {
                float xhat = (xr[j] - mean) * inv;
                c->out[r * D + j] = inv * ((dy[j] * gamma[j] - ma) - xhat * mb);
            }
        }
    }
}

/* ---- linear: y = x W^T + b ---- */

static void linear_forward(const kernel_ctx *c)
{
    const knode *x = node_in(c, 0);
    idx R = x->dim[0], I = x->dim[1], O = c->n->features;
    const float *w = c->params, *bias = c->params + O * I;
    for (idx r = 0; r < R; r++)
        for (idx o = 0; o < O; o++) c->out[r * O + o] = dot8(c->in[0] + r * I, w + o * I, I) + bias[o];
}

static void linear_backward(const kernel_ctx *c)
{
    grad_reads g = reads_of(c);
    const knode *x = fwd_in(c, 0);
    idx R = x->dim[0], I = x->dim[1], O = fwd_of(c)->features;
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
    if (!c->grads) return;
    float *dw = c->grads, *db = c->grads + O * I;
    memset(c->grads, 0, (size_t)((I + 1) * O) * sizeof(float));
    for (idx r = 0; r < R; r++)
        for (idx o = 0; o < O; o++) {
            float gy = g.dy[r * O + o];
            const float *xr = g.x0 + r * I;
            float *dwr = dw + o * I;
            for (idx i = 0; i < I; i++) dwr[i] += gy * xr[i];
            db[o] += gy;
        }
}

/* ---- pools ---- */

typedef struct pool_dims {
    idx N, C, H, W, K, S, OH, OW;
} pool_dims;

static pool_dims pool_dims_of(const knode *pool, const knode *x)
{
    return (pool_dims){x->dim[0], x->dim[1], x->dim[2], x->dim[3], pool->kernel, pool->stride, pool->dim[2], pool->dim[3]};
}

/* Index (within the plane) of the first maximum of window (oh, ow). */
static idx window_argmax(const float *plane, pool_dims d, idx oh, idx ow)
{
    idx best = oh * d.S * d.W + ow * d.S;
    for (idx kh = 0; kh < d.K; kh++)
        for (idx kw = 0; kw < d.K; kw++) {
            idx k = (oh * d.S + kh) * d.W + ow * d.S + kw;
            if (plane[k] > plane[best]) best = k;
        }
    return best;
}

static void pool_forward(const kernel_ctx *c, bool max)
{
    pool_dims d = pool_dims_of(c->n, node_in(c, 0));
    float area = (float)(d.K * d.K);
    for (idx p = 0; p < d.N * d.C; p++) {
        const float *plane = c->in[0] + p * d.H * d.W;
        float *o = c->out + p * d.OH * d.OW;
        for (idx oh = 0; oh < d.OH; oh++)
            for (idx ow = 0; ow < d.OW; ow++) {
                if (max) {
                    o[oh * d.OW + ow] = plane[window_argmax(plane, d, oh, ow)];
                    continue;
                }
                float s = 0.0f;
                for (idx kh = 0; kh < d.K; kh++)
                    for (idx kw = 0; kw < d.K; kw++) s += plane[(oh * d.S + kh) * d.W + ow * d.S + kw];
                o[oh * d.OW + ow] = s / area;
            }
    }
}

static void pool_backward(const kernel_ctx *c, bool max)
{
    grad_reads g = reads_of(c);
    pool_dims d = pool_dims_of(fwd_of(c), fwd_in(c, 0));
    float area = (float)(d.K * d.K);
    memset(c->out, 0, (size_t)(d.N * d.C * d.H * d.W) * sizeof(float));
    for (idx p = 0; p < d.N * d.C; p++) {
        float *dx = c->out + p * d.H * d.W;
        const float *dy = g.dy + p * d.OH * d.OW;
        for (idx oh = 0; oh < d.OH; oh++)
            for (idx ow = 0; ow < d.OW; ow++) {
                float gy = dy[oh * d.OW + ow];
                if (max) {
                    dx[window_argmax(g.x0 + p * d.H * d.W, d, oh, ow)] += gy;
                    continue;
                }
                for (idx kh = 0; kh < d.K; kh++)
                    for (idx kw = 0; kw < d.K; kw++) dx[(oh * d.S + kh) * d.W + ow * d.S + kw] += gy / area;
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

/* ---- elementwise ---- */

/* The second input of an add may have fewer channels (zero-padded). */
static void add_forward(const kernel_ctx *c)
{
    const knode *a = node_in(c, 0), *b = node_in(c, 1);
    idx total = numel(a), nb = numel(b);
    if (nb == total) {
        for (idx i = 0; i < total; i++) c->out[i] = c->in[0][i] + c->in[1][i];
        return;
    }
    idx N = a->dim[0], per_a = total / N, per_b = nb / N;
    for (idx n = 0; n < N; n++)
        for (idx i = 0; i < per_a; i++)
            c->out[n * per_a + i] = c->in[0][n * per_a + i] + (i < per_b ? c->in[1][n * per_b + i] : 0.0f);
}

/* Gradient of the zero-padded input of an add: a slice of dY. */
static void add_backward(const kernel_ctx *c)
{
    const knode *f0 = fwd_of(c), *x = fwd_in(c, c->n->wrt);
    grad_reads g = reads_of(c);
    idx N = f0->dim[0], per_y = numel(f0) / N, per_x = numel(x) / N;
    for (idx n = 0; n < N; n++) memcpy(c->out + n * per_x, g.dy + n * per_y, (size_t)per_x * sizeof(float));
}

/* The dropout mask is a function of (step seed, node, element), so a
 * recomputation and the backward regenerate it instead of storing it. */
static float dropout_scale(const kernel_ctx *c, int node, idx i, float p)
{
    uint64_t h = rt_mix64(c->dropout_seed ^ rt_mix64((uint64_t)node) ^ ((uint64_t)i * 0xD1B54A32D192ED03ull));
    float u = (float)(h >> 40) / 16777216.0f;
    return u < p ? 0.0f : 1.0f / (1.0f - p);
}

static void dropout_forward(const kernel_ctx *c)
{
    idx total = numel(c->n);
    for (idx i = 0; i < total; i++)
        c->out[i] = c->training ? c->in[0][i] * dropout_scale(c, c->n->inputs[0], i, c->n->p) : c->in[0][i];
}

static void dropout_backward(const kernel_ctx *c)
{
    const knode *f0 = fwd_of(c);
    grad_reads g = reads_of(c);
    idx total = numel(f0);
    for (idx i = 0; i < total; i++) c->out[i] = g.dy[i] * dropout_scale(c, f0->inputs[0], i, f0->p);
}

static const float GELU_C = 0.797884560802865f; /* sqrt(2 / pi) */

static void gelu_forward(const kernel_ctx *c)
{
    idx total = numel(c->n);
    for (idx i = 0; i < total; i++) {
        float x = c->in[0][i];
        c->out[i] = 0.5f * x * (1.0f + poet_tanhf(GELU_C * (x + 0.044715f * x * x * x)));
    }
}

static void gelu_backward(const kernel_ctx *c)
{
    grad_reads g = reads_of(c);
    idx total = numel(c->n);
    for (idx i = 0; i < total; i++) {
        float x = g.x0[i], t = poet_tanhf(GELU_C * (x + 0.044715f * x * x * x));
        float d = 0.5f * (1.0f + t) + 0.5f * x * (1.0f - t * t) * GELU_C * (1.0f + 3.0f * 0.044715f * x * x);
        c->out[i] = g.dy[i] * d;
    }
}

/* ---- softmax over the last dimension, and the loss ---- */

static idx last_dim(const knode *n) { return n->dim[n->ndim - 1]; }

static float row_max(const float *x, idx D)
{
    float mx = x[0];
    for (idx j = 1; j < D; j++) mx = x[j] > mx ? x[j] : mx;
    return mx;
}

static void softmax_row(const float *x, idx D, float *y)
{
    float mx = row_max(x, D);
    for (idx j = 0; j < D; j++) y[j] = poet_expf(x[j] - mx);
    float inv = 1.0f / sum8(y, D);
    for (idx j = 0; j < D; j++) y[j] *= inv;
}

static void softmax_forward(const kernel_ctx *c)
{
    idx D = last_dim(c->n), R = numel(c->n) / D;
    for (idx r = 0; r < R; r++) softmax_row(c->in[0] + r * D, D, c->out + r * D);
}

static void softmax_backward(const kernel_ctx *c)
{
    grad_reads g = reads_of(c);
    idx D = last_dim(c->n), R = numel(c->n) / D;
    for (idx r = 0; r < R; r++) {
        const float *y = g.y + r * D, *dy = g.dy + r * D;
        float s = dot8(dy, y, D);
        for (idx j = 0; j < D; j++) c->out[r * D + j] = y[j] * (dy[j] - s);
    }
}

/* Per row: log-sum-exp of the logits minus the labelled logit. */
static void softmax_ce_forward(const kernel_ctx *c)
{
    const knode *x = node_in(c, 0);
    idx R = x->dim[0], D = x->dim[1];
    for (idx r = 0; r < R; r++) {
        const float *xr = c->in[0] + r * D;
        float mx = row_max(xr, D), s = 0.0f;
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
        softmax_row(g.x0 + r * D, D, dx);
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
    idx S = op->seq, H = op->heads;
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

static void copy_forward(const kernel_ctx *c, const float *src)
{
    memcpy(c->out, src, (size_t)numel(c->n) * sizeof(float));
}

static void grad_sum(const kernel_ctx *c)
{
    idx total = numel(c->n);
    copy_forward(c, c->in[0]);
    for (int k = 1; k < c->n->n_inputs; k++)
        for (idx i = 0; i < total; i++) c->out[i] += c->in[k][i];
}

static void relu_forward(const kernel_ctx *c)
{
    idx total = numel(c->n);
    for (idx i = 0; i < total; i++) c->out[i] = c->in[0][i] > 0 ? c->in[0][i] : 0.0f;
}

static void relu_backward(const kernel_ctx *c)
{
    grad_reads g = reads_of(c);
    idx total = numel(c->n);
    for (idx i = 0; i < total; i++) c->out[i] = g.y[i] > 0 ? g.dy[i] : 0.0f;
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
    bool direct = nodes[v].op == POET_OP_CONV2D && d.K == 1 && d.S == 1 && d.P == 0;
    return direct ? 0 : (uint64_t)d.KK;
}

uint64_t kernel_workspace_for(const knode *nodes, int v, uint64_t positions)
{
    const knode *conv = conv_of(nodes, v);
    if (!conv || !kernel_workspace_min(nodes, v)) return 0;
    conv_dims d = conv_dims_at(nodes, conv);
    uint64_t pp = (uint64_t)d.PP;
    return (uint64_t)d.KK * (positions && positions < pp ? positions : pp);
}
