/* The device library's convolutions without im2col (conv_plane.h): grouped
 * ones summing their windows directly, and on a Cortex-M dense ones from
 * a zero-padded plane of the input in the workspace, in register tiles
 * with a kernel row of Thumb-2 a block. Every sum in the order kernel_ops.h
 * states, so the bits are im2col's. */
#include "conv_plane.h"

/* ---- grouped convolutions: direct loops ----
 * A group's few filters leave im2col's product no register tile to fill
 * (a depthwise layer's group has one filter and nine terms a sum, so the
 * product ran its scalar edge loop, with an im2col per group: about 100
 * instructions a multiply-add on the M4). Each sum is taken directly in
 * the order the product over the patches takes it: the bias or +0, then
 * (channel, kh, kw) ascending, a tap outside the image adding w x 0; the
 * same bits. */

/* The kernel columns [lo, hi) whose input column ow*SW - PL + kw*DW lies in [0, W). */
static void kw_range(conv_dims d, idx ow, idx *lo, idx *hi)
{
    idx a = d.PL - ow * d.SW, b = d.W - 1 + d.PL - ow * d.SW;
    *lo = a <= 0 ? 0 : (a + d.DW - 1) / d.DW;
    *hi = b < 0 ? 0 : b / d.DW + 1;
    if (*hi > d.KW) *hi = d.KW;
    if (*lo > *hi) *lo = *hi;
}

static bool row_in(conv_dims d, idx ih) { return ih >= 0 && ih < d.H; }

/* The sum of output (oh, ow) of the filter wf over the group's channels xg, from init. */
static float window_sum(const float *xg, const float *wf, conv_dims d, idx oh, idx ow, float init)
{
    float s = init;
    idx lo, hi;
    kw_range(d, ow, &lo, &hi);
    for (idx c = 0; c < d.CG; c++)
        for (idx kh = 0; kh < d.KH; kh++, wf += d.KW) {
            idx ih = oh * d.SH - d.PT + kh * d.DH, in = row_in(d, ih), a = in ? lo : d.KW, b = in ? hi : d.KW, kw = 0;
            const float *xr = xg + (c * d.H + (in ? ih : 0)) * d.W + ow * d.SW - d.PL;
            for (; kw < a; kw++) s += wf[kw] * 0.0f;
            for (; kw < b; kw++) s += wf[kw] * xr[kw * d.DW];
            for (; kw < d.KW; kw++) s += wf[kw] * 0.0f;
        }
    return s;
}

/* Four outputs of row oh from ow, their windows inside the image: four
 * chains side by side. */
static void window_sums4(const float *xg, const float *wf, conv_dims d, idx oh, idx ow, float init, float *y)
{
    float s0 = init, s1 = init, s2 = init, s3 = init;
    const idx sw = d.SW;
    for (idx c = 0; c < d.CG; c++)
        for (idx kh = 0; kh < d.KH; kh++) {
            const float *xr = xg + (c * d.H + oh * d.SH - d.PT + kh * d.DH) * d.W + ow * sw - d.PL;
            for (idx kw = 0; kw < d.KW; kw++, xr += d.DW) {
                float w = *wf++;
                s0 += w * xr[0], s1 += w * xr[sw], s2 += w * xr[2 * sw], s3 += w * xr[3 * sw];
            }
        }
    y[0] = s0, y[1] = s1, y[2] = s2, y[3] = s3;
}

/* Whether every window of output row oh lies inside the image's rows. */
static bool row_inside(conv_dims d, idx oh)
{
    idx top = oh * d.SH - d.PT;
    return top >= 0 && top + (d.KH - 1) * d.DH < d.H;
}

/* A band of `rows` output rows reads a band of the group's channels,
 * zero-padded so that every window lies inside: the dims of that plane
 * (its own padding 0, its OH the band's rows), and the floats it takes.
 * padded_dims: the band of every row. */
static idx band_height(conv_dims d, idx rows) { return (rows - 1) * d.SH + (d.KH - 1) * d.DH + 1; }

static conv_dims band_dims(conv_dims d, idx rows)
{
    conv_dims p = d;
    p.H = band_height(d, rows), p.W = (d.OW - 1) * d.SW + (d.KW - 1) * d.DW + 1;
    p.PT = p.PL = 0, p.C = d.CG, p.OH = rows;
    return p;
}

static conv_dims padded_dims(conv_dims d) { return band_dims(d, d.OH); }

static size_t padded_floats(conv_dims p) { return (size_t)(p.CG * p.H * p.W); }

/* The most output rows whose band fits in `floats` (at most OH), or 0. */
static idx band_rows(conv_dims d, size_t floats)
{
    size_t row = (size_t)(d.CG * band_dims(d, 1).W), first = (size_t)band_height(d, 1);
    if (!row || floats / row < first) return 0;
    idx rows = (idx)((floats / row - first) / (size_t)d.SH) + 1;
    return rows < d.OH ? rows : d.OH;
}

/* Of an image row, the columns a plane of dims p holds (from column PL of
 * the plane's row): no more than the image's width, nor than the plane
 * has right of its padding. */
static idx plane_span(conv_dims d, conv_dims p) { return d.PL >= p.W ? 0 : (p.W - d.PL < d.W ? p.W - d.PL : d.W); }

/* The band of dims p from output row oh0, from the group's channels xg:
 * its zeros are the taps outside the image. */
static void pad_band(const float *xg, conv_dims d, conv_dims p, idx oh0, float *plane)
{
    memset(plane, 0, padded_floats(p) * sizeof(float));
    idx span = plane_span(d, p);
    for (idx c = 0; c < d.CG; c++)
        for (idx r = 0; r < p.H; r++) {
            idx ih = oh0 * d.SH - d.PT + r;
            if (row_in(d, ih) && span) memcpy(plane + (c * p.H + r) * p.W + d.PL, xg + (c * d.H + ih) * d.W, (size_t)span * sizeof(float));
        }
}

/* The inverse of pad_band over every row: the image's part of the plane, and 0 where
 * the image reaches past what any window reads. */
static void unpad_group(const float *plane, conv_dims d, conv_dims p, float *xg)
{
    idx span = plane_span(d, p);
    for (idx c = 0; c < d.CG; c++)
        for (idx ih = 0; ih < d.H; ih++) {
            float *row = xg + (c * d.H + ih) * d.W;
            idx have = ih + d.PT < p.H ? span : 0;
            if (have) memcpy(row, plane + (c * p.H + ih + d.PT) * p.W + d.PL, (size_t)have * sizeof(float));
            memset(row + have, 0, (size_t)(d.W - have) * sizeof(float));
        }
}

/* s[i][j] += w_i x_j: one tap of four filters at four positions; filters
 * 0 and 1's weights at wa, 2 and 3's at wb (pack_filters4's panels). */
#define TAP4X4(s, wa, wb, x0, x1, x2, x3)                                                                 \
    for (int i_ = 0; i_ < 4; i_++) {                                                                     \
        float w_ = i_ < 2 ? (wa)[i_] : (wb)[i_ - 2];                                                     \
        s[i_][0] += w_ * (x0), s[i_][1] += w_ * (x1), s[i_][2] += w_ * (x2), s[i_][3] += w_ * (x3);       \
    }

/* Three taps of a kernel row at stride 1 (x: six inputs in a row), four
 * filters (wa, wb: their panels at the row's first tap) at four positions.
 * On a Cortex-M4 each pair of filters is one block of instructions: a load
 * of the six inputs, one of each tap's two weights, and a multiply and an
 * add a product (never fused: the same bits as everywhere else), where GCC
 * spills the sixteen sums. */
#if defined(__ARM_ARCH_7EM__) && defined(__ARM_FP)
#define MA(tmp, w, x, acc) "vmul.f32 " tmp ", " w ", " x "\n\tvadd.f32 %[" acc "], %[" acc "], " tmp "\n\t"
#define FILTER(w, r, xa, xb, xc, xd) MA("s26", w, xa, r "0") MA("s27", w, xb, r "1") MA("s26", w, xc, r "2") MA("s27", w, xd, r "3")
#define TAP(xa, xb, xc, xd) "vldmia %[w]!, {s22-s23}\n\t" FILTER("s22", "a0", xa, xb, xc, xd) FILTER("s23", "a1", xa, xb, xc, xd)
static inline __attribute__((always_inline)) void row3_pair(float *s0, float *s1, const float *x, const float *w)
{
    __asm__ volatile("vldmia %[x], {s16-s21}\n\t" TAP("s16", "s17", "s18", "s19") TAP("s17", "s18", "s19", "s20")
                         TAP("s18", "s19", "s20", "s21")
                     : [a00] "+t"(s0[0]), [a01] "+t"(s0[1]), [a02] "+t"(s0[2]), [a03] "+t"(s0[3]),
                       [a10] "+t"(s1[0]), [a11] "+t"(s1[1]), [a12] "+t"(s1[2]), [a13] "+t"(s1[3]), [w] "+r"(w)
                     : [x] "r"(x)
                     : "s16", "s17", "s18", "s19", "s20", "s21", "s22", "s23", "s26", "s27", "memory");
}
#undef TAP
#undef FILTER
#undef MA
static inline __attribute__((always_inline)) void row3(float s[4][4], const float *x, const float *wa, const float *wb)
{
    row3_pair(s[0], s[1], x, wa);
    row3_pair(s[2], s[3], x, wb);
}
#else
static inline void row3(float s[4][4], const float *x, const float *wa, const float *wb)
{
    for (int kw = 0; kw < 3; kw++) TAP4X4(s, wa + 2 * kw, wb + 2 * kw, x[kw], x[kw + 1], x[kw + 2], x[kw + 3]);
}
#endif

/* Every kernel row of three taps, channel by channel (row_step: from one
 * row of the window to the next; channel_step: from one channel's plane to
 * the next), kept apart so that the sums stay in registers. */
static void rows3(float s[4][4], const float *x, const float *wa, const float *wb, idx channels, idx kh, idx row_step,
                  idx channel_step)
{
    if (kh == 3) { /* a 3x3 kernel: a channel's three rows without a loop */
        for (const float *end = x + channels * channel_step; x < end; x += channel_step, wa += 18, wb += 18) {
            row3(s, x, wa, wb);
            row3(s, x + row_step, wa + 6, wb + 6);
            row3(s, x + 2 * row_step, wa + 12, wb + 12);
        }
        return;
    }
    for (idx c = 0; c < channels; c++, x += channel_step)
        for (idx r = 0; r < kh; r++, wa += 6, wb += 6) row3(s, x + r * row_step, wa, wb);
}

/* Four filters' outputs (oh, ow..ow+3) from a padded plane: sixteen
 * chains side by side, each input read once for the four filters. w4
 * holds the filters' weights as pack_filters4 lays them out. A row of
 * three taps at stride 1 reads six inputs, not twelve. */
static void window_tile4x4(const float *plane, const float *w4, conv_dims p, idx oh, idx ow, const float *init,
                           float *y)
{
    float s[4][4];
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < 4; j++) s[i][j] = init[i];
    const idx sw = p.SW;
    const float *wa = w4, *wb = w4 + 2 * p.KK, *x = plane + oh * p.SH * p.W + ow * sw;
    if (p.KW == 3 && p.SW == 1 && p.DW == 1) {
        rows3(s, x, wa, wb, p.CG, p.KH, p.DH * p.W, p.H * p.W);
    } else {
        for (idx c = 0; c < p.CG; c++)
            for (idx kh = 0; kh < p.KH; kh++, wa += 2 * p.KW, wb += 2 * p.KW) {
                const float *xr = x + (c * p.H + kh * p.DH) * p.W;
                for (idx kw = 0; kw < p.KW; kw++, xr += p.DW)
                    TAP4X4(s, wa + 2 * kw, wb + 2 * kw, xr[0], xr[sw], xr[2 * sw], xr[3 * sw]);
            }
    }
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < 4; j++) y[i * p.PP + j] = s[i][j];
}

/* Filters f..f+3's weights (w: four rows of kk) as two panels, tap by
 * tap: filters 0 and 1, then 2 and 3. */
static void pack_filters4(const float *w, idx kk, float *w4)
{
    float *pa = w4, *pb = w4 + 2 * kk;
    for (idx k = 0; k < kk; k++, pa += 2, pb += 2)
        pa[0] = w[k], pa[1] = w[kk + k], pb[0] = w[2 * kk + k], pb[1] = w[3 * kk + k];
}

/* Every output from padded bands of each group in the workspace, with,
 * where they fit, four filters' packed weights (all of them once, where
 * that leaves the band its rows): four filters by four positions at a
 * time, then four positions of a filter. */
void kernel_conv_plane_forward(const kernel_ctx *c, conv_dims d, const float *bias)
{
    size_t block = 4 * (size_t)d.KK, blocks = (size_t)(d.G * (d.FG / 4)), work = c->work_floats;
    idx rows = band_rows(d, work >= block ? work - block : 0);
    bool tiles = rows > 0;
    bool packed_once = tiles && work >= blocks * block && band_rows(d, work - blocks * block) == rows;
    if (!tiles) rows = band_rows(d, work);
    conv_dims p = band_dims(d, rows);
    float *w4 = c->work + padded_floats(p);
    for (size_t b = 0; packed_once && b < blocks; b++)
        pack_filters4(c->params + ((idx)b / (d.FG / 4) * d.FG + (idx)b % (d.FG / 4) * 4) * d.KK, d.KK, w4 + b * block);
    for (idx n = 0; n < d.N; n++)
        for (idx gr = 0; gr < d.G; gr++)
            for (idx oh0 = 0; oh0 < d.OH; oh0 += rows) {
                p = band_dims(d, d.OH - oh0 < rows ? d.OH - oh0 : rows);
                pad_band(c->in[0] + (n * d.C + gr * d.CG) * d.H * d.W, d, p, oh0, c->work);
                idx f = gr * d.FG, end = (gr + 1) * d.FG;
                for (; tiles && f + 4 <= end; f += 4) {
                    float init[4];
                    for (int i = 0; i < 4; i++) init[i] = bias ? bias[f + i] : 0.0f;
                    float *y = c->out + (n * d.F + f) * d.PP + oh0 * d.OW;
                    float *wb = w4 + (packed_once ? (size_t)(gr * (d.FG / 4) + (f - gr * d.FG) / 4) * block : 0);
                    if (!packed_once) pack_filters4(c->params + f * d.KK, d.KK, wb);
                    for (idx oh = 0; oh < p.OH; oh++, y += d.OW) {
                        idx ow = 0;
                        for (; ow + 4 <= d.OW; ow += 4) window_tile4x4(c->work, wb, p, oh, ow, init, y + ow);
                        for (; ow < d.OW; ow++)
                            for (int i = 0; i < 4; i++)
                                y[i * d.PP + ow] = window_sum(c->work, c->params + (f + i) * d.KK, p, oh, ow, init[i]);
                    }
                }
                for (; f < end; f++) {
                    const float *wf = c->params + f * d.KK;
                    float init = bias ? bias[f] : 0.0f, *y = c->out + (n * d.F + f) * d.PP + oh0 * d.OW;
                    for (idx oh = 0; oh < p.OH; oh++, y += d.OW) {
                        idx ow = 0;
                        for (; ow + 4 <= d.OW; ow += 4) window_sums4(c->work, wf, p, oh, ow, init, y + ow);
                        for (; ow < d.OW; ow++) y[ow] = window_sum(c->work, wf, p, oh, ow, init);
                    }
                }
            }
}

bool kernel_conv_plane_fits(const kernel_ctx *c, conv_dims d) { return band_rows(d, c->work_floats) > 0; }

void kernel_conv_grouped_forward(const kernel_ctx *c, conv_dims d, const float *bias)
{
    if (kernel_conv_plane_fits(c, d)) {
        kernel_conv_plane_forward(c, d, bias);
        return;
    }
    idx lo, hi, lo_last, hi_last; /* output columns whose windows lie inside: every kw's range */
    valid_range(d, 0, &lo, &hi);
    valid_range(d, d.KW - 1, &lo_last, &hi_last);
    lo = lo > lo_last ? lo : lo_last, hi = hi < hi_last ? hi : hi_last;
    for (idx n = 0; n < d.N; n++)
        for (idx f = 0; f < d.F; f++) {
            const float *xg = c->in[0] + (n * d.C + f / d.FG * d.CG) * d.H * d.W, *wf = c->params + f * d.KK;
            float init = bias ? bias[f] : 0.0f, *y = c->out + (n * d.F + f) * d.PP;
            for (idx oh = 0; oh < d.OH; oh++, y += d.OW) {
                idx ow = 0;
                if (row_inside(d, oh) && lo < hi) {
                    for (; ow < lo; ow++) y[ow] = window_sum(xg, wf, d, oh, ow, init);
                    for (; ow + 4 <= hi; ow += 4) window_sums4(xg, wf, d, oh, ow, init, y + ow);
                }
                for (; ow < d.OW; ow++) y[ow] = window_sum(xg, wf, d, oh, ow, init);
            }
        }
}

/* dx += (+0 + the sum over the group's filters of dy x w) at each tap
 * inside the image, output positions ascending, then (channel, kh, kw):
 * scatter_patches' order over the product's rows. */
void kernel_conv_grouped_backward_input(const kernel_ctx *c, conv_dims d, const float *dy)
{
    memset(c->out, 0, (size_t)(d.N * d.C * d.H * d.W) * sizeof(float));
    for (idx n = 0; n < d.N; n++)
        for (idx gr = 0; gr < d.G; gr++) {
            const float *dyg = dy + (n * d.F + gr * d.FG) * d.PP, *wg = c->params + gr * d.FG * d.KK;
            float *dxg = c->out + (n * d.C + gr * d.CG) * d.H * d.W;
            for (idx p = 0; p < d.PP; p++) {
                idx oh = p / d.OW, ow = p % d.OW, lo, hi;
                kw_range(d, ow, &lo, &hi);
                for (idx ch = 0; ch < d.CG; ch++)
                    for (idx kh = 0; kh < d.KH; kh++) {
                        idx ih = oh * d.SH - d.PT + kh * d.DH;
                        if (!row_in(d, ih)) continue;
                        float *xr = dxg + (ch * d.H + ih) * d.W + ow * d.SW - d.PL;
                        const float *wk = wg + (ch * d.KH + kh) * d.KW;
                        if (d.FG == 1) { /* depthwise: one filter, its dy once */
                            float v = dyg[p];
                            for (idx kw = lo; kw < hi; kw++) xr[kw * d.DW] += 0.0f + v * wk[kw];
                            continue;
                        }
                        for (idx kw = lo; kw < hi; kw++) {
                            float r = 0.0f;
                            for (idx f = 0; f < d.FG; f++) r += dyg[f * d.PP + p] * wk[f * d.KK + kw];
                            xr[kw * d.DW] += r;
                        }
                    }
            }
        }
}

/* The weight gradients of four filters (dy: the first one's at the band's
 * first row, filters PP apart) at a kernel row of three taps at stride 1
 * (x: the row of the band for its first output row), added to s: twelve
 * chains over the band's output positions ascending (p.OH rows), the
 * row's inputs slid along, each read once. */
static void dw_row3_4(float s[4][3], const float *x, idx row_step, const float *dy, conv_dims d)
{
    for (idx oh = 0; oh < d.OH; oh++, x += row_step, dy += d.OW) {
        const float *d0 = dy, *d1 = dy + d.PP, *d2 = dy + 2 * d.PP, *d3 = dy + 3 * d.PP;
        float xa = x[0], xb = x[1];
        for (idx ow = 0; ow < d.OW; ow++) {
            float xc = x[ow + 2], v[4] = {d0[ow], d1[ow], d2[ow], d3[ow]};
            for (int i = 0; i < 4; i++) s[i][0] += v[i] * xa, s[i][1] += v[i] * xb, s[i][2] += v[i] * xc;
            xa = xb, xb = xc;
        }
    }
}

/* Filters f..f+3's gradients at every kernel row of their group, from
 * the band p of image n's plane (dy: at the band's first row), by
 * dw_row3_4. */
static void dw_block3(conv_dims d, conv_dims p, const float *plane, const float *dy, idx n, idx f, float *dw)
{
    for (idx ch = 0; ch < d.CG; ch++)
        for (idx kh = 0; kh < d.KH; kh++) {
            float s[4][3];
            float *at = dw + f * d.KK + (ch * d.KH + kh) * 3;
            for (int i = 0; i < 4; i++)
                for (int kw = 0; kw < 3; kw++) s[i][kw] = at[i * d.KK + kw];
            dw_row3_4(s, plane + (ch * p.H + kh * d.DH) * p.W, d.SH * p.W, dy + (n * d.F + f) * d.PP, p);
            for (int i = 0; i < 4; i++)
                for (int kw = 0; kw < 3; kw++) at[i * d.KK + kw] = s[i][kw];
        }
}

/* dw from padded bands per image and group: four filters by a kernel row
 * of three taps at stride 1, else a filter by four taps, each chain over
 * images, then bands, then the band's positions, ascending. */
void kernel_conv_plane_backward_params(const kernel_ctx *c, conv_dims d, const float *dy, const float *x, float *dw)
{
    const float *plane = c->work;
    bool rows3 = d.KW == 3 && d.SW == 1 && d.DW == 1;
    idx rows = band_rows(d, c->work_floats);
    memset(dw, 0, (size_t)(d.F * d.KK) * sizeof(float));
    for (idx n = 0; n < d.N; n++)
        for (idx gr = 0; gr < d.G; gr++)
            for (idx oh0 = 0; oh0 < d.OH; oh0 += rows) {
                conv_dims p = band_dims(d, d.OH - oh0 < rows ? d.OH - oh0 : rows);
                pad_band(x + (n * d.C + gr * d.CG) * d.H * d.W, d, p, oh0, c->work);
                const float *dyb = dy + oh0 * d.OW;
                idx f = gr * d.FG;
                for (; rows3 && f + 4 <= (gr + 1) * d.FG; f += 4) dw_block3(d, p, plane, dyb, n, f, dw);
                for (; f < (gr + 1) * d.FG; f++)
                    for (idx k0 = 0; k0 < d.KK; k0 += 4) {
                        idx off[4] = {0, 0, 0, 0}, nk = d.KK - k0 < 4 ? d.KK - k0 : 4;
                        float s[4] = {0, 0, 0, 0};
                        for (idx j = 0; j < nk; j++) {
                            idx k = k0 + j, ch = k / (d.KH * d.KW), kh = k / d.KW % d.KH, kw = k % d.KW;
                            off[j] = (ch * p.H + kh * d.DH) * p.W + kw * d.DW, s[j] = dw[f * d.KK + k];
                        }
                        const float *dyr = dyb + (n * d.F + f) * d.PP;
                        for (idx oh = 0; oh < p.OH; oh++, dyr += d.OW)
                            for (idx ow = 0, b = oh * d.SH * p.W; ow < d.OW; ow++, b += d.SW) {
                                float v = dyr[ow];
                                s[0] += v * plane[off[0] + b], s[1] += v * plane[off[1] + b];
                                s[2] += v * plane[off[2] + b], s[3] += v * plane[off[3] + b];
                            }
                        for (idx j = 0; j < nk; j++) dw[f * d.KK + k0 + j] = s[j];
                    }
            }
}

void kernel_conv_grouped_backward_params(const kernel_ctx *c, conv_dims d, const float *dy, const float *x, float *dw)
{
    if (kernel_conv_plane_fits(c, d)) {
        kernel_conv_plane_backward_params(c, d, dy, x, dw);
        return;
    }
    for (idx f = 0; f < d.F; f++)
        for (idx ch = 0; ch < d.CG; ch++)
            for (idx kh = 0; kh < d.KH; kh++)
                for (idx kw = 0; kw < d.KW; kw++) {
                    float s = 0.0f;
                    idx lo, hi;
                    valid_range(d, kw, &lo, &hi);
                    for (idx n = 0; n < d.N; n++) {
                        const float *dyr = dy + (n * d.F + f) * d.PP;
                        const float *xc = x + (n * d.C + f / d.FG * d.CG + ch) * d.H * d.W;
                        for (idx oh = 0; oh < d.OH; oh++, dyr += d.OW) {
                            idx ih = oh * d.SH - d.PT + kh * d.DH, in = row_in(d, ih), a = in ? lo : d.OW, b = in ? hi : d.OW;
                            const float *xr = xc + (in ? ih : 0) * d.W - d.PL + kw * d.DW;
                            idx ow = 0;
                            for (; ow < a; ow++) s += dyr[ow] * 0.0f;
                            for (; ow < b; ow++) s += dyr[ow] * xr[ow * d.SW];
                            for (; ow < d.OW; ow++) s += dyr[ow] * 0.0f;
                        }
                    }
                    dw[f * d.KK + (ch * d.KH + kh) * d.KW + kw] = s;
                }
}

/* ---- the input gradient into a padded plane (a Cortex-M's) ----
 * dx[c][ih][iw] takes, for each output position that reads it in
 * ascending order, that position's sum over filters (from +0). A tile is
 * four channels' sums at four positions of a row, at one tap: taken tap by
 * tap with kw descending, a block of positions adds to each element in
 * the order of its positions; rows and blocks go in order. Adding into a
 * zero-padded plane and keeping its inside drops what falls in the
 * padding, as the product's scatter did: the same bits. */

/* r[i][j] = +0 + sum over nf filters of dy_f[j] w_f[i] (dy: the first
 * filter's four positions, filters dy_step apart; w4: four channels'
 * weights a filter), then dx_i[j] += r[i][j] (dx: channel 0's four
 * elements, channels dx_step apart). */
#if defined(__ARM_ARCH_7EM__) && defined(__ARM_FP)
#define MA(acc, w, x, tmp) "vmul.f32 " tmp ", " w ", " x "\n\tvadd.f32 " acc ", " acc ", " tmp "\n\t"
#define ROW(a0, a1, a2, a3, w) MA(a0, w, "s16", "s24") MA(a1, w, "s17", "s25") MA(a2, w, "s18", "s24") MA(a3, w, "s19", "s25")
#define ADD_TO_DX(a0, a1, a2, a3)                                                                                     \
    "vldmia %[dx], {s16-s19}\n\tvadd.f32 s16, s16, " a0 "\n\tvadd.f32 s17, s17, " a1 "\n\tvadd.f32 s18, s18, " a2 \
    "\n\tvadd.f32 s19, s19, " a3 "\n\tvstmia %[dx], {s16-s19}\n\tadd %[dx], %[dx], %[dxs]\n\t"
static const float ZEROS16[16];
static void dx_tile4x4(const float *dy, idx dy_step, const float *w4, idx nf, float *dx, idx dx_step)
{
    size_t dys = (size_t)dy_step * sizeof(float), dxs = (size_t)dx_step * sizeof(float);
    __asm__ volatile("vldmia %[z], {s0-s15}\n\t"
                     "1:\n\t"
                     "vldmia %[dy], {s16-s19}\n\tadd %[dy], %[dy], %[dys]\n\tvldmia %[w]!, {s20-s23}\n\t"
                     ROW("s0", "s1", "s2", "s3", "s20") ROW("s4", "s5", "s6", "s7", "s21")
                     ROW("s8", "s9", "s10", "s11", "s22") ROW("s12", "s13", "s14", "s15", "s23")
                     "subs %[nf], %[nf], #1\n\tbne 1b\n\t"
                     ADD_TO_DX("s0", "s1", "s2", "s3") ADD_TO_DX("s4", "s5", "s6", "s7")
                     ADD_TO_DX("s8", "s9", "s10", "s11") ADD_TO_DX("s12", "s13", "s14", "s15")
                     : [dy] "+r"(dy), [w] "+r"(w4), [nf] "+r"(nf), [dx] "+r"(dx)
                     : [z] "r"(ZEROS16), [dys] "r"(dys), [dxs] "r"(dxs)
                     : "s0", "s1", "s2", "s3", "s4", "s5", "s6", "s7", "s8", "s9", "s10", "s11", "s12", "s13", "s14",
                       "s15", "s16", "s17", "s18", "s19", "s20", "s21", "s22", "s23", "s24", "s25", "memory", "cc");
}
#undef ADD_TO_DX
#undef ROW
#undef MA
#else
static void dx_tile4x4(const float *dy, idx dy_step, const float *w4, idx nf, float *dx, idx dx_step)
{
    float r[4][4] = {{0}};
    for (idx f = 0; f < nf; f++, dy += dy_step, w4 += 4)
        for (int i = 0; i < 4; i++)
            for (int j = 0; j < 4; j++) r[i][j] += dy[j] * w4[i];
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < 4; j++) dx[i * dx_step + j] += r[i][j];
}
#endif

/* Channels cb..cb+3's weights of the group's filters, tap by tap, filter
 * by filter, four to a filter: what dx_tile4x4 reads. */
static void pack_channels4(const float *wg, conv_dims d, idx cb, float *w4)
{
    for (idx t = 0; t < d.KH * d.KW; t++)
        for (idx f = 0; f < d.FG; f++)
            for (int i = 0; i < 4; i++) *w4++ = wg[f * d.KK + (cb + i) * d.KH * d.KW + t];
}

/* One position's contributions, its sum over filters from +0 a tap, for
 * channels [c0, c1) of the group (a block's leftovers). */
static void dx_position(conv_dims d, conv_dims p, const float *dyp, const float *wg, idx c0, idx c1, idx oh, idx ow,
                        float *dxp)
{
    for (idx ch = c0; ch < c1; ch++)
        for (idx kh = 0; kh < d.KH; kh++)
            for (idx kw = 0; kw < d.KW; kw++) {
                float r = 0.0f;
                for (idx f = 0; f < d.FG; f++) r += dyp[f * d.PP] * wg[f * d.KK + (ch * d.KH + kh) * d.KW + kw];
                dxp[(ch * p.H + oh * d.SH + kh * d.DH) * p.W + ow * d.SW + kw * d.DW] += r;
            }
}

bool kernel_conv_plane_dx_fits(const kernel_ctx *c, conv_dims d)
{
    return padded_floats(padded_dims(d)) + 4 * (size_t)(d.FG * d.KH * d.KW) <= c->work_floats;
}

void kernel_conv_plane_backward_input(const kernel_ctx *c, conv_dims d, const float *dy)
{
    conv_dims p = padded_dims(d);
    float *dxp = c->work, *w4 = c->work + padded_floats(p);
    idx blocks = d.CG / 4 * 4;
    for (idx n = 0; n < d.N; n++)
        for (idx gr = 0; gr < d.G; gr++) {
            const float *dyg = dy + (n * d.F + gr * d.FG) * d.PP, *wg = c->params + gr * d.FG * d.KK;
            memset(dxp, 0, padded_floats(p) * sizeof(float));
            for (idx cb = 0; cb < blocks; cb += 4) { /* channel blocks apart: they add to different elements */
                pack_channels4(wg, d, cb, w4);
                for (idx oh = 0; oh < d.OH; oh++) {
                    idx ow = 0;
                    for (; ow + 4 <= d.OW; ow += 4)
                        for (idx kh = 0; kh < d.KH; kh++)
                            for (idx kw = d.KW - 1; kw >= 0; kw--)
                                dx_tile4x4(dyg + oh * d.OW + ow, d.PP, w4 + (kh * d.KW + kw) * d.FG * 4, d.FG,
                                           dxp + (cb * p.H + oh * d.SH + kh * d.DH) * p.W + ow + kw * d.DW, p.H * p.W);
                    for (; ow < d.OW; ow++) dx_position(d, p, dyg + oh * d.OW + ow, wg, cb, cb + 4, oh, ow, dxp);
                }
            }
            for (idx oh = 0; blocks < d.CG && oh < d.OH; oh++)
                for (idx ow = 0; ow < d.OW; ow++) dx_position(d, p, dyg + oh * d.OW + ow, wg, blocks, d.CG, oh, ow, dxp);
            unpad_group(dxp, d, p, c->out + (n * d.C + gr * d.CG) * d.H * d.W);
        }
}

