/* The device library's kernels: linear layers, y = x W^T + b over the last dimension, the channel_select of ratio:R, and matmul (kernel_ops.h: the
 * order of operations). */
#include "kernel_ops.h"

/* ---- linear: y = x W^T + b over the last dimension ---- */

void kernel_linear_forward(const kernel_ctx *c)
{
    const knode *x = node_in(c, 0);
    idx I = last_dim(x), R = knode_numel(x) / I, O = c->n->attrs.features;
    bool bias = !(c->n->attrs.flags & POET_ATTR_NO_BIAS);
    const float *w = c->params, *b = c->bias;
    for (idx r = 0; r < R; r++)
        for (idx o = 0; o < O; o++) {
            float s = kernel_dot8(c->in[0] + r * I, w + o * I, I);
            c->out[r * O + o] = bias ? s + b[o] : s;
        }
}

void kernel_linear_backward(const kernel_ctx *c)
{
    grad_reads g = grad_reads_of(c);
    const knode *f0 = fwd_of(c), *x = fwd_in(c, 0);
    idx I = last_dim(x), R = knode_numel(x) / I, O = f0->attrs.features;
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
void kernel_channel_select_forward(const kernel_ctx *c)
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

void kernel_matmul_forward(const kernel_ctx *c)
{
    mm_dims d = mm_dims_of(c->n, node_in(c, 0), node_in(c, 1));
    for (idx i = 0, t = 0; i < d.lead[0]; i++)
        for (idx j = 0; j < d.lead[1]; j++, t++) {
            gemm_args g = {c->in[0] + i * d.sa[0] + j * d.sa[1], d.K, 1, c->in[1] + i * d.sb[0] + j * d.sb[1], d.N, 1,
                           d.K, c->out + t * d.M * d.N, d.N, NULL, false};
            kernel_gemm(&g, d.M, d.N);
        }
}

/* dA = dY B^T and dB = A^T dY, each summed over the batches it was
 * broadcast across, in batch order. */
void kernel_matmul_backward(const kernel_ctx *c)
{
    const knode *f = fwd_of(c);
    grad_reads r = grad_reads_of(c);
    mm_dims d = mm_dims_of(f, fwd_in(c, 0), fwd_in(c, 1));
    bool wrt_a = c->n->wrt == 0;
    memset(c->out, 0, (size_t)knode_numel(c->n) * sizeof(float));
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
            kernel_gemm(&g, wrt_a ? d.M : d.K, wrt_a ? d.K : d.N);
        }
}

