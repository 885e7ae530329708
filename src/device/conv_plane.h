/* Internal: the convolution kernels' shapes, shared by conv.c (im2col
 * over chunks, and the dispatch) and conv_plane.c (the kernels without
 * im2col: grouped ones directly, dense ones on a Cortex-M from a padded
 * plane). kernel_ops.h states the order of operations; both files keep
 * it. Freestanding. */
#ifndef POET_SRC_DEVICE_CONV_PLANE_H
#define POET_SRC_DEVICE_CONV_PLANE_H

#include "kernel_ops.h"

typedef struct conv_dims {
    idx N, C, H, W, F, KH, KW, SH, SW, PT, PL, DH, DW, G, OH, OW;
    idx CG, FG; /* channels and filters per group */
    idx KK, PP; /* reduction length (C/G)*KH*KW; output positions per image */
} conv_dims;

/* A 1x1 convolution with stride 1 and no padding reads its input as its
 * column matrix: no im2col. */
static inline bool conv_direct(conv_dims d) { return d.KH == 1 && d.KW == 1 && d.SH == 1 && d.SW == 1 && d.PT == 0 && d.PL == 0; }

static inline bool conv_grouped(conv_dims d) { return d.G > 1; }

/* Output columns [lo, hi) whose input column ow*SW - PL + kw*DW lies in [0, W). */
static inline void valid_range(conv_dims d, idx kw, idx *lo, idx *hi)
{
    idx a = d.PL - kw * d.DW, b = d.W - 1 + d.PL - kw * d.DW;
    *lo = a <= 0 ? 0 : (a + d.SW - 1) / d.SW;
    *hi = b < 0 ? 0 : b / d.SW + 1;
    if (*hi > d.OW) *hi = d.OW;
    if (*lo > *hi) *lo = *hi;
}

/* Grouped convolutions, each sum taken directly (conv_plane.c). */
void kernel_conv_grouped_forward(const kernel_ctx *c, conv_dims d, const float *bias);
void kernel_conv_grouped_backward_input(const kernel_ctx *c, conv_dims d, const float *dy);
void kernel_conv_grouped_backward_params(const kernel_ctx *c, conv_dims d, const float *dy, const float *x, float *dw);

/* Whether the workspace holds the group's zero-padded input plane (for
 * the forward pass and the weight gradient), and with it the packed
 * weights the input gradient reads. */
bool kernel_conv_plane_fits(const kernel_ctx *c, conv_dims d);
bool kernel_conv_plane_dx_fits(const kernel_ctx *c, conv_dims d);
/* The forward pass, the weight gradient (dw: all of it) and the input
 * gradient (stride 1 along rows) from padded planes. */
void kernel_conv_plane_forward(const kernel_ctx *c, conv_dims d, const float *bias);
void kernel_conv_plane_backward_params(const kernel_ctx *c, conv_dims d, const float *dy, const float *x, float *dw);
void kernel_conv_plane_backward_input(const kernel_ctx *c, conv_dims d, const float *dy);

#endif
