/* Random convolutions and the plain loops that define their sums (the
 * order docs/device.md states), checked against the kernels bit for bit:
 * shared by test_device on the host and poet-conv-check.elf on the
 * emulated board, whose kernels take other paths. Freestanding. */
#ifndef POET_TESTS_CONV_CASES_H
#define POET_TESTS_CONV_CASES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "../src/device/kernels.h"

static uint64_t rng;
static int rnd(int lo, int hi) { return lo + (int)((rng = rng * 6364136223846793005ull + 1442695040888963407ull) >> 33) % (hi - lo + 1); }

typedef struct conv_case {
    int N, C, H, W, F, KH, KW, SH, SW, PT, PL, PB, PR, DH, DW, G, OH, OW;
} conv_case;

/* Element (n, c, h, w) of an NCHW tensor, and filter tap (f, c, kh, kw). */
#define X_AT(c_, n, ch, h, w) ((((n) * (c_)->C + (ch)) * (c_)->H + (h)) * (c_)->W + (w))
#define Y_AT(c_, n, f, h, w) ((((n) * (c_)->F + (f)) * (c_)->OH + (h)) * (c_)->OW + (w))
#define W_AT(c_, f, ch, kh, kw) ((((f) * ((c_)->C / (c_)->G) + (ch)) * (c_)->KH + (kh)) * (c_)->KW + (kw))

/* The input element filter tap (kh, kw) of output (oh, ow) reads, or false
 * where it falls in the padding. */
static bool tap(const conv_case *c, int oh, int ow, int kh, int kw, int *ih, int *iw)
{
    *ih = oh * c->SH - c->PT + kh * c->DH, *iw = ow * c->SW - c->PL + kw * c->DW;
    return *ih >= 0 && *ih < c->H && *iw >= 0 && *iw < c->W;
}

static void ref_forward(const conv_case *c, const float *x, const float *w, float *y)
{
    int cg = c->C / c->G, fg = c->F / c->G, ih, iw;
    const float *bias = w + c->F * cg * c->KH * c->KW;
    for (int n = 0; n < c->N; n++)
        for (int f = 0; f < c->F; f++)
            for (int oh = 0; oh < c->OH; oh++)
                for (int ow = 0; ow < c->OW; ow++) {
                    float a = bias[f];
                    for (int ch = 0; ch < cg; ch++)
                        for (int kh = 0; kh < c->KH; kh++)
                            for (int kw = 0; kw < c->KW; kw++)
                                if (tap(c, oh, ow, kh, kw, &ih, &iw))
                                    a += w[W_AT(c, f, ch, kh, kw)] * x[X_AT(c, n, f / fg * cg + ch, ih, iw)];
                    y[Y_AT(c, n, f, oh, ow)] = a;
                }
}

/* The input gradient as kernels.c defines it: for each element, the output
 * positions that read it ascending, each adding its sum over its group's
 * filters. */
static void ref_input_grad(const conv_case *c, const float *dy, const float *w, float *dx)
{
    int cg = c->C / c->G, fg = c->F / c->G, ih, iw;
    for (size_t i = 0; i < (size_t)(c->N * c->C * c->H * c->W); i++) dx[i] = 0.0f;
    for (int n = 0; n < c->N; n++)
        for (int oh = 0; oh < c->OH; oh++)
            for (int ow = 0; ow < c->OW; ow++)
                for (int ch = 0; ch < c->C; ch++)
                    for (int kh = 0; kh < c->KH; kh++)
                        for (int kw = 0; kw < c->KW; kw++) {
                            if (!tap(c, oh, ow, kh, kw, &ih, &iw)) continue;
                            float inner = 0.0f;
                            for (int f = ch / cg * fg; f < (ch / cg + 1) * fg; f++)
                                inner += dy[Y_AT(c, n, f, oh, ow)] * w[W_AT(c, f, ch % cg, kh, kw)];
                            dx[X_AT(c, n, ch, ih, iw)] += inner;
                        }
}

static void ref_weight_grad(const conv_case *c, const float *dy, const float *x, float *gw)
{
    int cg = c->C / c->G, fg = c->F / c->G, ih, iw;
    for (int f = 0; f < c->F; f++)
        for (int ch = 0; ch < cg; ch++)
            for (int kh = 0; kh < c->KH; kh++)
                for (int kw = 0; kw < c->KW; kw++) {
                    float a = 0.0f;
                    for (int n = 0; n < c->N; n++)
                        for (int oh = 0; oh < c->OH; oh++)
                            for (int ow = 0; ow < c->OW; ow++)
                                if (tap(c, oh, ow, kh, kw, &ih, &iw))
                                    a += dy[Y_AT(c, n, f, oh, ow)] * x[X_AT(c, n, f / fg * cg + ch, ih, iw)];
                    gw[W_AT(c, f, ch, kh, kw)] = a;
                }
}

/* The largest shapes random_conv draws: images, channels and filters a
 * group, height and width. */
typedef struct conv_limits {
    int n, per_group, hw;
} conv_limits;

/* Random padding within the kernel, the input no smaller than the
 * window, and the output's shape. */
static conv_case conv_finish(conv_case c)
{
    c.PT = rnd(0, c.KH - 1), c.PB = rnd(0, c.KH - 1), c.PL = rnd(0, c.KW - 1), c.PR = rnd(0, c.KW - 1);
    int eh = c.DH * (c.KH - 1) + 1, ew = c.DW * (c.KW - 1) + 1;
    if (c.H + c.PT + c.PB < eh) c.H = eh;
    if (c.W + c.PL + c.PR < ew) c.W = ew;
    c.OH = (c.H + c.PT + c.PB - eh) / c.SH + 1, c.OW = (c.W + c.PL + c.PR - ew) / c.SW + 1;
    return c;
}

static conv_case random_conv(conv_limits lim)
{
    conv_case c = {rnd(1, lim.n), 0, rnd(1, lim.hw), rnd(1, lim.hw), 0, rnd(1, 5), rnd(1, 5), rnd(1, 3), rnd(1, 3),
                   0, 0, 0, 0, rnd(1, 2), rnd(1, 2), rnd(1, 3), 0, 0};
    c.C = c.G * rnd(1, lim.per_group), c.F = c.G * rnd(1, lim.per_group);
    return conv_finish(c);
}

/* A 3x3 convolution at stride 1 with four filters a group (the kernels'
 * fastest paths), padded at random. */
static conv_case common_conv(conv_limits lim)
{
    conv_case c = {rnd(1, lim.n), 0, rnd(1, lim.hw), rnd(1, lim.hw), 0, 3, 3, 1, 1, 0, 0, 0, 0, 1, 1, rnd(1, 3), 0, 0};
    c.C = c.G * rnd(1, lim.per_group), c.F = c.G * 4;
    return conv_finish(c);
}

static void conv_nodes(const conv_case *c, knode n[3])
{
    memset(n, 0, 3 * sizeof *n);
    n[0] = (knode){.op = POET_OP_INPUT, .ndim = 4, .dim = {c->N, c->C, c->H, c->W}, .fwd = -1};
    n[0].numel = (uint32_t)(c->N * c->C * c->H * c->W);
    n[1] = (knode){.op = POET_OP_CONV2D, .n_inputs = 1, .inputs = {0}, .ndim = 4, .dim = {c->N, c->F, c->OH, c->OW},
                   .fwd = -1};
    n[1].attrs = (poet_attrs){.features = c->F, .kh = c->KH, .kw = c->KW, .sh = c->SH, .sw = c->SW, .pt = c->PT,
                              .pl = c->PL, .pb = c->PB, .pr = c->PR, .dh = c->DH, .dw = c->DW, .groups = c->G};
    n[1].numel = (uint32_t)(c->N * c->F * c->OH * c->OW);
    n[1].params = (uint32_t)(c->F * (c->C / c->G) * c->KH * c->KW + c->F);
    n[2] = n[0];
    n[2].op = POET_OP_GRAD, n[2].n_inputs = 2, n[2].inputs[0] = 1, n[2].inputs[1] = 0, n[2].fwd = 1, n[2].wrt = 0;
    n[2].params = n[1].params, n[2].reads = KR_DY | KR_IN0;
}


static bool same_bits(const float *a, const float *b, size_t n) { return memcmp(a, b, n * sizeof *a) == 0; }

/* A case's tensors: its input, weights (bias last) and output gradient,
 * the kernels' results and the plain loops'. */
typedef struct conv_buffers {
    float *x, *w, *dy, *y, *yr, *dx, *dxr, *gw, *gwr, *work;
} conv_buffers;

/* Random values for case c, and what the plain loops make of them. */
static void conv_case_fill(const conv_case *c, const knode nodes[3], const conv_buffers *b)
{
    size_t nx = nodes[0].numel, ny = nodes[1].numel, nw = nodes[1].params;
    for (size_t i = 0; i < nx; i++) b->x[i] = (float)rnd(-1000, 1000) / 700.0f;
    for (size_t i = 0; i < nw; i++) b->w[i] = (float)rnd(-1000, 1000) / 900.0f;
    for (size_t i = 0; i < ny; i++) b->dy[i] = (float)rnd(-1000, 1000) / 800.0f;
    ref_forward(c, b->x, b->w, b->yr);
    ref_input_grad(c, b->dy, b->w, b->dxr);
    ref_weight_grad(c, b->dy, b->x, b->gwr);
}

/* The kernels on case c with work_floats of workspace: NULL where they
 * give the plain loops' bits, else the part that differs. */
static const char *conv_case_differs(const conv_case *c, const knode nodes[3], const conv_buffers *b, size_t work_floats)
{
    size_t nx = nodes[0].numel, ny = nodes[1].numel, nw = nodes[1].params;
    kernel_ctx f = {.nodes = nodes, .n = &nodes[1], .in = {b->x}, .out = b->y, .params = b->w, .bias = b->w + nw - (size_t)c->F,
                    .work = b->work, .work_floats = work_floats, .training = true};
    kernel_ctx g = {.nodes = nodes, .n = &nodes[2], .in = {b->dy, b->x}, .out = b->dx, .params = b->w, .grad_w = b->gw,
                    .grad_b = b->gw + nw - (size_t)c->F, .work = b->work, .work_floats = work_floats, .training = true};
    kernel_run(&f), kernel_run(&g);
    return !same_bits(b->y, b->yr, ny) ? "forward" : !same_bits(b->dx, b->dxr, nx) ? "input gradient"
           : !same_bits(b->gw, b->gwr, nw - (size_t)c->F) ? "weight gradient" : NULL;
}

#endif
