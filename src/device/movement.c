/* The device library's kernels: data movement: copies, transposes, concat, upsampling, slices (kernel_ops.h: the
 * order of operations). */
#include "kernel_ops.h"

/* ---- data movement ---- */


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

void kernel_transpose_forward(const kernel_ctx *c)
{
    transpose_walk(c->n, node_in(c, 0), c->n->attrs.perm, c->out, c->in[0], NULL, NULL);
}

void kernel_transpose_backward(const kernel_ctx *c)
{
    const knode *f = fwd_of(c);
    transpose_walk(f, fwd_in(c, 0), f->attrs.perm, NULL, NULL, c->out, grad_reads_of(c).dy);
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

void kernel_concat_forward(const kernel_ctx *c)
{
    idx outer, total, inner, op_at, at;
    kernel_around_axis(c->n, c->n->attrs.axis, &outer, &total, &inner);
    idx op_len = concat_operand(c->n, total, &op_at, &at);
    for (int j = 0; j < c->n->n_inputs; j++) {
        idx o2, len, i2;
        kernel_around_axis(node_in(c, j), c->n->attrs.axis, &o2, &len, &i2);
        for (idx o = 0; o < outer; o++)
            memcpy(c->out + (o * total + at) * inner, c->in[j] + o * len * inner, (size_t)(len * inner) * sizeof(float));
        at += len;
    }
    for (idx o = 0; o < outer && op_len; o++)
        memcpy(c->out + (o * total + op_at) * inner, c->params, (size_t)(op_len * inner) * sizeof(float));
}

void kernel_concat_backward(const kernel_ctx *c)
{
    const knode *f = fwd_of(c);
    idx outer, total, inner, len = 0, o2, i2, op_at, at;
    kernel_around_axis(f, f->attrs.axis, &outer, &total, &inner);
    idx op_len = concat_operand(f, total, &op_at, &at);
    const float *dy = grad_reads_of(c).dy;
    for (int j = 0; j <= c->n->wrt; j++) {
        at += len;
        kernel_around_axis(fwd_in(c, j), f->attrs.axis, &o2, &len, &i2);
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
void kernel_upsample2d_forward(const kernel_ctx *c)
{
    const knode *x = node_in(c, 0);
    idx planes = (idx)x->dim[0] * x->dim[1], H = x->dim[2], W = x->dim[3], sh = c->n->attrs.sh, sw = c->n->attrs.sw;
    for (idx p = 0; p < planes; p++)
        for (idx y = 0; y < H * sh; y++)
            for (idx u = 0; u < W * sw; u++)
                c->out[(p * H * sh + y) * W * sw + u] = c->in[0][(p * H + y / sh) * W + u / sw];
}

void kernel_upsample2d_backward(const kernel_ctx *c)
{
    const knode *f = fwd_of(c), *x = fwd_in(c, 0);
    idx planes = (idx)x->dim[0] * x->dim[1], H = x->dim[2], W = x->dim[3], sh = f->attrs.sh, sw = f->attrs.sw;
    const float *dy = grad_reads_of(c).dy;
    for (idx p = 0; p < planes; p++)
        for (idx i = 0; i < H; i++)
            for (idx j = 0; j < W; j++) {
                float s = 0.0f;
                for (idx a = 0; a < sh; a++)
                    for (idx b = 0; b < sw; b++) s += dy[(p * H * sh + i * sh + a) * W * sw + j * sw + b];
                c->out[(p * H + i) * W + j] = s;
            }
}

void kernel_slice_forward(const kernel_ctx *c)
{
    idx outer, size, inner, len = c->n->attrs.end - c->n->attrs.start;
    kernel_around_axis(node_in(c, 0), c->n->attrs.axis, &outer, &size, &inner);
    for (idx o = 0; o < outer; o++)
        memcpy(c->out + o * len * inner, c->in[0] + (o * size + c->n->attrs.start) * inner,
               (size_t)(len * inner) * sizeof(float));
}

void kernel_slice_backward(const kernel_ctx *c)
{
    const knode *f = fwd_of(c);
    idx outer, size, inner, len = f->attrs.end - f->attrs.start;
    kernel_around_axis(fwd_in(c, 0), f->attrs.axis, &outer, &size, &inner);
    const float *dy = grad_reads_of(c).dy;
    memset(c->out, 0, (size_t)knode_numel(c->n) * sizeof(float));
    for (idx o = 0; o < outer; o++)
        memcpy(c->out + (o * size + f->attrs.start) * inner, dy + o * len * inner, (size_t)(len * inner) * sizeof(float));
}

