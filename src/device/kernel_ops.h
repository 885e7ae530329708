/* Internal: what the kernel files of the device library share (each op
 * family's kernels: conv.c, gemm.c, norm.c, linear.c, pool.c,
 * elementwise.c, movement.c, softmax.c; kernels.c dispatches), and the
 * order of operations every kernel keeps.
 *
 * Layouts: images NCHW; conv weights
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
#ifndef POET_SRC_DEVICE_KERNEL_OPS_H
#define POET_SRC_DEVICE_KERNEL_OPS_H

#include <string.h>

#include "kernels.h"
#include "../base/mathf.h"

typedef ptrdiff_t idx; /* 32 bits on a microcontroller, 64 on the host */

static inline const knode *node_in(const kernel_ctx *c, int i) { return &c->nodes[c->n->inputs[i]]; }
static inline const knode *fwd_of(const kernel_ctx *c) { return &c->nodes[c->n->fwd]; }
static inline const knode *fwd_in(const kernel_ctx *c, int i) { return &c->nodes[fwd_of(c)->inputs[i]]; }
static inline idx knode_numel(const knode *n) { return (idx)n->numel; }
static inline idx last_dim(const knode *n) { return n->dim[n->ndim - 1]; }

/* What a grad node's inputs are. */
typedef struct grad_reads {
    const float *dy, *x0, *x1, *y;
    const float *mask; /* a relu's bits, 32 a float's storage */
} grad_reads;

static inline grad_reads grad_reads_of(const kernel_ctx *c)
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

/* sums in eight fixed lanes */

static inline float kernel_lanes_total(const float l[8], float tail)
{
    return ((l[0] + l[1]) + (l[2] + l[3])) + ((l[4] + l[5]) + (l[6] + l[7])) + tail;
}

static inline float kernel_dot8(const float *a, const float *b, idx n)
{
    float l[8] = {0}, tail = 0;
    idx i = 0;
    for (; i + 8 <= n; i += 8)
        for (int k = 0; k < 8; k++) l[k] += a[i + k] * b[i + k];
    for (; i < n; i++) tail += a[i] * b[i];
    return kernel_lanes_total(l, tail);
}

static inline float kernel_sum8(const float *a, idx n)
{
    float l[8] = {0}, tail = 0;
    idx i = 0;
    for (; i + 8 <= n; i += 8)
        for (int k = 0; k < 8; k++) l[k] += a[i + k];
    for (; i < n; i++) tail += a[i];
    return kernel_lanes_total(l, tail);
}

/* sum8 of (a[i] - mean)^2 */
static inline float kernel_sqdev8(const float *a, float mean, idx n)
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
    return kernel_lanes_total(l, tail);
}

/* sum8 of dy[i] * ((x[i] - mean) * inv) */
static inline float kernel_dot_xhat8(const float *dy, const float *x, float mean, float inv, idx n)
{
    float l[8] = {0}, tail = 0;
    idx i = 0;
    for (; i + 8 <= n; i += 8)
        for (int k = 0; k < 8; k++) l[k] += dy[i + k] * ((x[i + k] - mean) * inv);
    for (; i < n; i++) tail += dy[i] * ((x[i] - mean) * inv);
    return kernel_lanes_total(l, tail);
}


/* H and W of a window's tensor: [N, C, L] is [N, C, 1, L] (1-d windows). */
static inline idx height(const knode *x) { return x->ndim == 3 ? 1 : x->dim[2]; }
static inline idx width(const knode *x) { return x->dim[x->ndim - 1]; }
/* The channels a layer's weight gradient reads (the channel_select after
 * it, ratio:R), or NULL: all. */
static inline const knode *selected_of(const kernel_ctx *c)
{
    return c->n->reads & KR_MASK ? &c->nodes[c->n->fwd + 1] : NULL;
}
typedef struct plane_dims {
    idx N, C, HW;
} plane_dims;
/* [N, C, ...]: a plane is one image's channel. */
static inline plane_dims planes_of(const knode *x)
{
    return (plane_dims){x->dim[0], x->dim[1], (idx)x->numel / ((idx)x->dim[0] * x->dim[1])};
}
/* Elements before the axis, along it, and after it. */
static inline void kernel_around_axis(const knode *x, int axis, idx *outer, idx *along, idx *inner)
{
    *outer = 1, *inner = 1, *along = x->dim[axis];
    for (int i = 0; i < axis; i++) *outer *= x->dim[i];
    for (int i = axis + 1; i < x->ndim; i++) *inner *= x->dim[i];
}
static inline void kernel_copy_forward(const kernel_ctx *c, const float *src)
{
    memcpy(c->out, src, (size_t)knode_numel(c->n) * sizeof(float));
}

/* The one product the convolutions and matmul are made of: for i < ni,
 *   c[i][v] = init + sum over r < nr, ascending, of a[i*ai + r*ar] * b[r*ldb + v*bs]
 * for v < nv, where init is bias[i] (bias given), c's old value (accumulate)
 * or +0. Only independent outputs run side by side (rows of c, lanes of a
 * vector), so each output's sum keeps its order on every platform. */
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
void kernel_gemm(const gemm_args *g, idx ni, idx nv);

/* each family's kernels */
void kernel_attn_context_backward(const kernel_ctx *c);
void kernel_attn_context_forward(const kernel_ctx *c);
void kernel_attn_scores_backward(const kernel_ctx *c);
void kernel_attn_scores_forward(const kernel_ctx *c);
void kernel_batchnorm_backward(const kernel_ctx *c);
void kernel_batchnorm_forward(const kernel_ctx *c);
void kernel_binary_backward(const kernel_ctx *c);
void kernel_binary_forward(const kernel_ctx *c);
void kernel_channel_select_forward(const kernel_ctx *c);
void kernel_concat_backward(const kernel_ctx *c);
void kernel_concat_forward(const kernel_ctx *c);
void kernel_conv_backward(const kernel_ctx *c);
void kernel_conv_forward(const kernel_ctx *c);
void kernel_dropout_backward(const kernel_ctx *c);
void kernel_dropout_forward(const kernel_ctx *c);
void kernel_global_avgpool_backward(const kernel_ctx *c);
void kernel_global_avgpool_forward(const kernel_ctx *c);
void kernel_layernorm_backward(const kernel_ctx *c);
void kernel_layernorm_forward(const kernel_ctx *c);
void kernel_linear_backward(const kernel_ctx *c);
void kernel_linear_forward(const kernel_ctx *c);
void kernel_matmul_backward(const kernel_ctx *c);
void kernel_matmul_forward(const kernel_ctx *c);
void kernel_pool_backward(const kernel_ctx *c, bool max);
void kernel_pool_forward(const kernel_ctx *c, bool max);
void kernel_pool_index_forward(const kernel_ctx *c);
void kernel_prelu_backward(const kernel_ctx *c);
void kernel_prelu_forward(const kernel_ctx *c);
void kernel_relu_mask_forward(const kernel_ctx *c);
void kernel_slice_backward(const kernel_ctx *c);
void kernel_slice_forward(const kernel_ctx *c);
void kernel_softmax_backward(const kernel_ctx *c);
void kernel_softmax_ce_backward(const kernel_ctx *c);
void kernel_softmax_ce_forward(const kernel_ctx *c);
void kernel_softmax_forward(const kernel_ctx *c);
void kernel_transpose_backward(const kernel_ctx *c);
void kernel_transpose_forward(const kernel_ctx *c);
void kernel_unary_run_backward(const kernel_ctx *c);
void kernel_unary_run_forward(const kernel_ctx *c);
void kernel_upsample2d_backward(const kernel_ctx *c);
void kernel_upsample2d_forward(const kernel_ctx *c);

#endif
