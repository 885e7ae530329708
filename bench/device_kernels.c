/* The convolution kernels on the Cortex-M4F: instructions per multiply-add
 * of poet's kernels (forward; backward = input and weight gradients) beside
 * a plain reference loop that computes the same sums in the same order, so
 * that the outputs are also compared bit for bit. Runs as a firmware on
 * QEMU's netduinoplus2 under -icount shift=0 (bench/device.py); shapes are
 * those of cnn_digits at batch 8.
 *
 * Then ReLU's, ReLU6's (clip) and hard-swish's forward and backward over the 4096
 * elements of an 8x8x8 activation at batch 8, and the backward of a masked
 * ReLU, beside plain loops with the same expressions.
 *
 * Prints one line per shape and kernel: "conv CxHxW->F kernel insn_per_mac"
 * and "elem OP-N kernel insn_per_element". */
#include <stdint.h>
#include <string.h>

#include "board.h"
#include "kernels.h"
#include "semihost.h"

enum { N = 8, MAX_IN = N * 8 * 8 * 8, MAX_OUT = N * 8 * 8 * 8, MAX_W = 16 * 16 * 9 + 16, MAX_WORK = 8 * 9 * 64 };

static float x[MAX_IN], y[MAX_OUT], y_ref[MAX_OUT], dy[MAX_OUT], dx[MAX_IN], dx_ref[MAX_IN];
static float w[MAX_W], gw[MAX_W], gw_ref[MAX_W], work[MAX_WORK];

typedef struct shape {
    int C, H, F;
} shape;

static const shape SHAPES[] = {{1, 8, 8}, {8, 8, 8}, {8, 4, 16}, {16, 4, 16}}; /* 3x3, stride 1, padding 1 */

static char line[160];
static int used;

static void put(const char *s)
{
    while (*s && used < (int)sizeof line - 2) line[used++] = *s++;
    line[used] = 0;
}

static void put_num(uint64_t v, int decimals) /* v is scaled by 10^decimals */
{
    char d[24];
    int k = 0;
    for (int i = 0; i < decimals || v || k <= decimals; i++, v /= 10) {
        if (i == decimals && decimals) d[k++] = '.';
        d[k++] = (char)('0' + v % 10);
    }
    while (k) line[used++] = d[--k];
    line[used] = 0;
}

static void flush(void)
{
    put("\n");
    sh_puts(line);
    used = 0;
}

/* ---- the reference loops: the sums of the kernels in src/device/, written plainly ---- */

static void ref_forward(const shape *s)
{
    int C = s->C, H = s->H, F = s->F, K = 3;
    const float *bias = w + F * C * K * K;
    for (int n = 0; n < N; n++)
        for (int f = 0; f < F; f++)
            for (int oh = 0; oh < H; oh++)
                for (int ow = 0; ow < H; ow++) {
                    float a = bias[f];
                    for (int c = 0; c < C; c++)
                        for (int kh = 0; kh < K; kh++)
                            for (int kw = 0; kw < K; kw++) {
                                int ih = oh - 1 + kh, iw = ow - 1 + kw;
                                if (ih >= 0 && ih < H && iw >= 0 && iw < H)
                                    a += w[((f * C + c) * K + kh) * K + kw] * x[((n * C + c) * H + ih) * H + iw];
                            }
                    y_ref[((n * F + f) * H + oh) * H + ow] = a;
                }
}

static void ref_backward(const shape *s)
{
    int C = s->C, H = s->H, F = s->F, K = 3;
    for (int n = 0; n < N; n++) /* input gradient: output positions ascending, filters inside */
        for (int c = 0; c < C; c++)
            for (int ih = 0; ih < H; ih++)
                for (int iw = 0; iw < H; iw++) {
                    float t = 0.0f;
                    for (int oh = 0; oh < H; oh++)
                        for (int ow = 0; ow < H; ow++) {
                            int kh = ih - oh + 1, kw = iw - ow + 1;
                            if (kh < 0 || kh >= K || kw < 0 || kw >= K) continue;
                            float inner = 0.0f;
                            for (int f = 0; f < F; f++)
                                inner += dy[((n * F + f) * H + oh) * H + ow] * w[((f * C + c) * K + kh) * K + kw];
                            t += inner;
                        }
                    dx_ref[((n * C + c) * H + ih) * H + iw] = t;
                }
    for (int f = 0; f < F; f++) /* weight gradient: one chain over (n, oh, ow) */
        for (int c = 0; c < C; c++)
            for (int kh = 0; kh < K; kh++)
                for (int kw = 0; kw < K; kw++) {
                    float a = 0.0f;
                    for (int n = 0; n < N; n++)
                        for (int oh = 0; oh < H; oh++)
                            for (int ow = 0; ow < H; ow++) {
                                int ih = oh - 1 + kh, iw = ow - 1 + kw;
                                if (ih >= 0 && ih < H && iw >= 0 && iw < H)
                                    a += dy[((n * F + f) * H + oh) * H + ow] * x[((n * C + c) * H + ih) * H + iw];
                            }
                    gw_ref[((f * C + c) * K + kh) * K + kw] = a;
                }
}

/* ---- poet's kernels on the same data ---- */

static void graph_of(const shape *s, knode nodes[3])
{
    int C = s->C, H = s->H, F = s->F;
    memset(nodes, 0, 3 * sizeof *nodes);
    nodes[0] = (knode){.op = POET_OP_INPUT, .ndim = 4, .dim = {N, C, H, H}, .numel = (uint32_t)(N * C * H * H), .fwd = -1};
    nodes[1] = (knode){.op = POET_OP_CONV2D, .n_inputs = 1, .inputs = {0}, .ndim = 4, .dim = {N, F, H, H},
                       .numel = (uint32_t)(N * F * H * H), .attrs = {.features = F, .kh = 3, .kw = 3, .sh = 1, .sw = 1, .pt = 1, .pl = 1, .pb = 1,
                                                             .pr = 1, .dh = 1, .dw = 1, .groups = 1},
                       .params = (uint32_t)(F * C * 9 + F), .fwd = -1};
    nodes[2] = (knode){.op = POET_OP_GRAD, .n_inputs = 2, .inputs = {1, 0}, .fwd = 1, .wrt = 0, .ndim = 4,
                       .dim = {N, C, H, H}, .numel = (uint32_t)(N * C * H * H), .params = nodes[1].params,
                       .reads = KR_DY | KR_IN0};
}

static uint64_t insn_per_kilotick;

static uint64_t milli_insn_per_mac(uint64_t ticks, uint64_t macs) { return ticks * insn_per_kilotick / macs; }

static bool same(const float *a, const float *b, int n) { return memcmp(a, b, (size_t)n * sizeof *a) == 0; }

static void report(const shape *s, const char *kernel, uint64_t ticks, uint64_t macs, bool equal)
{
    put("conv ");
    put_num((uint64_t)s->C, 0), put("x"), put_num((uint64_t)s->H, 0), put("x"), put_num((uint64_t)s->H, 0);
    put("->"), put_num((uint64_t)s->F, 0), put(" "), put(kernel), put(" ");
    put_num(milli_insn_per_mac(ticks, macs), 3);
    put(equal ? " same-bits" : " DIFFERENT-BITS");
    flush();
}

static int bench_shape(const shape *s, size_t work_floats, const char *tag)
{
    knode nodes[3];
    graph_of(s, nodes);
    int in = N * s->C * s->H * s->H, out = N * s->F * s->H * s->H, nw = s->F * s->C * 9 + s->F;
    for (int i = 0; i < in; i++) x[i] = (float)((i * 37) % 101) / 101.0f - 0.5f;
    for (int i = 0; i < out; i++) dy[i] = (float)((i * 53) % 97) / 97.0f - 0.5f;
    for (int i = 0; i < nw; i++) w[i] = (float)((i * 29) % 89) / 89.0f - 0.5f;
    kernel_ctx f = {.nodes = nodes, .n = &nodes[1], .in = {x}, .out = y, .params = w, .bias = w + s->F * s->C * 9,
                    .work = work, .work_floats = work_floats, .training = true};
    kernel_ctx b = {.nodes = nodes, .n = &nodes[2], .in = {dy, x}, .out = dx, .params = w, .grad_w = gw, .grad_b = gw + s->F * s->C * 9,
                    .work = work, .work_floats = work_floats, .training = true};
    uint64_t macs = (uint64_t)out * (uint64_t)s->C * 9, t0 = board_ticks();
    kernel_run(&f);
    uint64_t t1 = board_ticks();
    kernel_run(&b);
    uint64_t t2 = board_ticks();
    ref_forward(s);
    uint64_t t3 = board_ticks();
    ref_backward(s);
    uint64_t t4 = board_ticks();
    bool fwd_same = same(y, y_ref, out), bwd_same = same(dx, dx_ref, in) && same(gw, gw_ref, nw - s->F);
    char name[32] = "poet-forward-";
    strcat(name, tag);
    report(s, name, t1 - t0, macs, fwd_same);
    strcpy(name, "poet-backward-"), strcat(name, tag);
    report(s, name, t2 - t1, 2 * macs, bwd_same);
    report(s, "reference-forward", t3 - t2, macs, fwd_same);
    report(s, "reference-backward", t4 - t3, 2 * macs, bwd_same);
    return fwd_same && bwd_same ? 0 : 1;
}

/* ---- elementwise ops: instructions per element ---- */

static void report_elem(const char *op, const char *kernel, uint64_t ticks, bool equal)
{
    put("elem "), put(op), put("-4096 "), put(kernel), put(" ");
    put_num(ticks * insn_per_kilotick / (uint64_t)MAX_OUT, 3);
    put(equal ? " same-bits" : " DIFFERENT-BITS");
    flush();
}

static uint32_t mask_words[MAX_OUT / 32];

static float clamp6(float v) { return v < 0.0f ? 0.0f : v > 6.0f ? 6.0f : v; }

/* op forward and backward through kernel_run, then the plain loops. */
static int bench_elem(poet_op op, const char *name, bool masked)
{
    knode nodes[4];
    memset(nodes, 0, sizeof nodes);
    knode act = {.op = POET_OP_INPUT, .ndim = 4, .dim = {N, 8, 8, 8}, .numel = MAX_OUT, .fwd = -1};
    nodes[0] = act;
    nodes[1] = act, nodes[1].op = op, nodes[1].n_inputs = 1, nodes[1].inputs[0] = 0;
    nodes[1].attrs.alpha = 0.0f, nodes[1].attrs.beta = 6.0f; /* clip's: relu6 */
    nodes[2] = act, nodes[2].op = POET_OP_GRAD, nodes[2].n_inputs = 2, nodes[2].fwd = 1, nodes[2].wrt = 0;
    bool reads_y = op == POET_OP_RELU; /* clip and hardswish read x */
    nodes[2].inputs[0] = 1, nodes[2].inputs[1] = reads_y ? 1 : 0;
    nodes[2].reads = KR_DY | (masked ? KR_MASK : reads_y ? KR_OUT : KR_IN0);
    for (int i = 0; i < MAX_OUT; i++) x[i] = (float)((i * 37) % 101) / 12.0f - 4.0f, dy[i] = (float)((i * 53) % 97) / 97.0f;
    for (int k = 0; k < MAX_OUT / 32; k++) {
        uint32_t bits = 0;
        for (int i = 0; i < 32; i++) bits |= (uint32_t)(x[k * 32 + i] > 0) << i;
        mask_words[k] = bits;
    }
    kernel_ctx f = {.nodes = nodes, .n = &nodes[1], .in = {x}, .out = y, .training = true};
    const float *second = masked ? (const float *)(const void *)mask_words : reads_y ? y : x;
    kernel_ctx b = {.nodes = nodes, .n = &nodes[2], .in = {dy, second}, .out = dx, .training = true};
    uint64_t t0 = board_ticks();
    kernel_run(&f);
    uint64_t t1 = board_ticks();
    kernel_run(&b);
    uint64_t t2 = board_ticks();
    for (int i = 0; i < MAX_OUT; i++)
        y_ref[i] = op == POET_OP_RELU ? (x[i] > 0 ? x[i] : 0.0f)
                   : op == POET_OP_CLIP ? clamp6(x[i])
                                        : x[i] * clamp6(x[i] + 3.0f) / 6.0f;
    uint64_t t3 = board_ticks();
    for (int i = 0; i < MAX_OUT; i++)
        dx_ref[i] = masked ? (mask_words[i / 32] >> (i % 32) & 1 ? dy[i] : 0.0f)
                    : op == POET_OP_RELU ? (y_ref[i] > 0 ? dy[i] : 0.0f)
                    : op == POET_OP_CLIP ? (x[i] > 0.0f && x[i] < 6.0f ? dy[i] : 0.0f)
                                         : (x[i] < -3.0f ? 0.0f : x[i] <= 3.0f ? dy[i] * (x[i] / 3.0f + 0.5f) : dy[i]);
    uint64_t t4 = board_ticks();
    bool fs = same(y, y_ref, MAX_OUT), bs = same(dx, dx_ref, MAX_OUT);
    if (!masked) report_elem(name, "poet-forward", t1 - t0, fs);
    report_elem(name, masked ? "poet-backward-masked" : "poet-backward", t2 - t1, bs);
    if (!masked) report_elem(name, "reference-forward", t3 - t2, fs);
    report_elem(name, masked ? "reference-backward-masked" : "reference-backward", t4 - t3, bs);
    return fs && bs ? 0 : 1;
}

int main(void)
{
    uint64_t t0 = board_ticks();
    uint32_t turns = 200000;
    __asm__ volatile("1: subs %0, %0, #1\n\tbne 1b" : "+r"(turns)::"cc"); /* two instructions a turn */
    insn_per_kilotick = 400000ull * 1000 / (board_ticks() - t0);
    int bad = 0;
    for (size_t i = 0; i < sizeof SHAPES / sizeof *SHAPES; i++) {
        size_t kk = (size_t)SHAPES[i].C * 9;
        bad += bench_shape(&SHAPES[i], kk, "min");          /* one output position per chunk */
        bad += bench_shape(&SHAPES[i], kk * 16, "16");      /* sixteen */
        bad += bench_shape(&SHAPES[i], MAX_WORK, "full");   /* as many as fit */
    }
    bad += bench_elem(POET_OP_RELU, "relu", false);
    bad += bench_elem(POET_OP_RELU, "relu", true);
    bad += bench_elem(POET_OP_CLIP, "clip", false);
    bad += bench_elem(POET_OP_HARDSWISH, "hardswish", false);
    return bad ? 1 : 0;
}
