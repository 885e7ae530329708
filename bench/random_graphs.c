/* Random training graphs for the planner benchmark (bench/random_graphs.py):
 * models of five shapes built from poet's own ops, differentiated by its
 * autodiff and costed on a device profile, so that the planner meets the
 * structures people train rather than the reference set it was tuned on.
 *
 * usage: poet-random-graph KIND SEED DEVICE OUT.json
 *   KIND: residual (ResNet-like blocks with skip adds), branch (Inception-like
 *   branches merged by concat), attention (transformer encoder blocks, some without
 *   their feed-forward half), unet
 *   (an encoder-decoder whose long skips are concatenated), dag (a random
 *   DAG of linear and elementwise ops on vectors). The same KIND and SEED
 *   give the same graph on every device. Prints the training graph's node
 *   count on stdout. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "poet/poet.h"

static uint64_t rng_state;

static uint32_t rnd(uint32_t n) /* uniform in [0, n) (n small: the modulo bias is negligible) */
{
    rng_state += 0x9e3779b97f4a7c15ull; /* splitmix64 */
    uint64_t z = rng_state;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return (uint32_t)((z ^ (z >> 31)) % n);
}

static int pick(int lo, int hi) { return lo + (int)rnd((uint32_t)(hi - lo + 1)); }

static int op1(poet_graph *g, poet_op op, int x, poet_attrs a) { return poet_graph_add(g, op, &x, 1, &a, NULL); }

static int input(poet_graph *g, poet_attrs shape) { return poet_graph_add(g, POET_OP_INPUT, NULL, 0, &shape, NULL); }

static int op2(poet_graph *g, poet_op op, int x, int y, poet_attrs a)
{
    int in[2] = {x, y};
    return poet_graph_add(g, op, in, 2, &a, NULL);
}

static int conv(poet_graph *g, int x, int cout, int k, int stride)
{
    return op1(g, POET_OP_CONV2D, x, (poet_attrs){.features = cout, .kernel = k, .stride = stride, .pad = k / 2});
}

static int conv_bn_relu(poet_graph *g, int x, int cout, int k, int stride)
{
    int y = conv(g, x, cout, k, stride);
    if (rnd(2)) y = op1(g, POET_OP_BATCHNORM2D, y, (poet_attrs){0});
    return op1(g, POET_OP_RELU, y, (poet_attrs){0});
}

static int image(poet_graph *g, int c, int hw)
{
    return input(g, (poet_attrs){.ndim = 4, .dim = {g->batch, c, hw, hw}});
}

static int head(poet_graph *g, int x)
{
    int p = op1(g, POET_OP_GLOBAL_AVGPOOL, x, (poet_attrs){0});
    return op1(g, POET_OP_LINEAR, op1(g, POET_OP_FLATTEN, p, (poet_attrs){0}), (poet_attrs){.features = 10});
}

static int residual(poet_graph *g)
{
    int c = 4 * pick(2, 6), hw = 4 * pick(2, 4);
    int x = conv_bn_relu(g, image(g, 3, hw), c, 3, 1);
    for (int b = pick(2, 5); b > 0; b--) {
        bool down = hw > 4 && rnd(3) == 0;
        int cout = down ? 2 * c : c, stride = down ? 2 : 1;
        int y = conv(g, conv_bn_relu(g, x, cout, 3, stride), cout, 3, 1);
        int skip = down ? conv(g, x, cout, 1, 2) : x;
        x = op1(g, POET_OP_RELU, op2(g, POET_OP_ADD, y, skip, (poet_attrs){0}), (poet_attrs){0});
        c = cout, hw = down ? hw / 2 : hw;
    }
    return head(g, x);
}

static int branch(poet_graph *g)
{
    int c = 4 * pick(2, 5), hw = 4 * pick(2, 4);
    int x = conv_bn_relu(g, image(g, 3, hw), c, 3, 1);
    for (int s = pick(1, 3); s > 0; s--) {
        int arms[4], n = pick(2, 4);
        for (int a = 0; a < n; a++) {
            int k = 1 + 2 * (int)rnd(3);
            arms[a] = a == 3 ? conv(g, op1(g, POET_OP_MAXPOOL2D, x, (poet_attrs){.kernel = 3, .stride = 1, .pad = 1}), c / 2, 1, 1)
                             : conv_bn_relu(g, k > 1 ? conv(g, x, c / 2, 1, 1) : x, c / 2, k, 1);
        }
        x = poet_graph_add(g, POET_OP_CONCAT, arms, n, &(poet_attrs){.axis = 1}, NULL);
        c = n * (c / 2);
    }
    return head(g, x);
}

static int attention(poet_graph *g)
{
    int heads = pick(1, 4), hidden = heads * 4 * pick(2, 6), seq = 4 * pick(2, 8);
    poet_attrs at = {.heads = heads, .seq = seq}, none = {0};
    int x = input(g, (poet_attrs){.ndim = 2, .dim = {g->batch * seq, hidden}});
    for (int b = pick(1, 2); b > 0; b--) {
        int q = op1(g, POET_OP_LINEAR, x, (poet_attrs){.features = hidden});
        int k = op1(g, POET_OP_LINEAR, x, (poet_attrs){.features = hidden});
        int v = op1(g, POET_OP_LINEAR, x, (poet_attrs){.features = hidden});
        int p = op1(g, POET_OP_SOFTMAX, op2(g, POET_OP_ATTN_SCORES, q, k, at), (poet_attrs){.axis = -1});
        int o = op1(g, POET_OP_LINEAR, op2(g, POET_OP_ATTN_CONTEXT, p, v, at), (poet_attrs){.features = hidden});
        int h = op1(g, POET_OP_LAYERNORM, op2(g, POET_OP_ADD, x, o, none), none);
        x = h;
        if (rnd(3) == 0) continue; /* attention only */
        int f = op1(g, rnd(2) ? POET_OP_GELU : POET_OP_RELU, op1(g, POET_OP_LINEAR, h, (poet_attrs){.features = 4 * hidden}), none);
        x = op1(g, POET_OP_LAYERNORM, op2(g, POET_OP_ADD, h, op1(g, POET_OP_LINEAR, f, (poet_attrs){.features = hidden}), none), none);
    }
    return op1(g, POET_OP_LINEAR, x, (poet_attrs){.features = 10});
}

/* Up-sampling is a convolution to four times the channels reshaped to twice
 * the height and width: a pixel shuffle's memory and FLOPs. */
static int unet(poet_graph *g)
{
    int c = 4 * pick(1, 3), hw = 8 * pick(1, 3), levels = pick(1, 3), skips[3], ch[3];
    int x = conv_bn_relu(g, image(g, 3, hw), c, 3, 1);
    for (int l = 0; l < levels; l++) {
        skips[l] = x, ch[l] = c;
        x = conv_bn_relu(g, x, 2 * c, 3, 2);
        c *= 2, hw /= 2;
    }
    for (int l = levels - 1; l >= 0; l--) {
        int up = conv(g, x, 4 * ch[l], 1, 1);
        hw *= 2;
        up = op1(g, POET_OP_RESHAPE, up, (poet_attrs){.ndim = 4, .dim = {g->batch, ch[l], hw, hw}});
        int in[2] = {up, skips[l]};
        x = conv_bn_relu(g, poet_graph_add(g, POET_OP_CONCAT, in, 2, &(poet_attrs){.axis = 1}, NULL), ch[l], 3, 1);
        c = ch[l];
    }
    return head(g, x);
}

/* Each node reads one or two earlier ones (mostly recent ones); the nodes
 * nobody reads are summed into the output, so every node reaches the loss. */
static int dag(poet_graph *g)
{
    static const poet_op unary[] = {POET_OP_RELU, POET_OP_GELU, POET_OP_TANH, POET_OP_SIGMOID, POET_OP_LAYERNORM};
    int width = 8 * pick(2, 8), n = pick(6, 22), nodes[32], used[32] = {0};
    nodes[0] = input(g, (poet_attrs){.ndim = 2, .dim = {g->batch, width}});
    for (int i = 1; i < n; i++) {
        int a = i - 1 - (int)rnd((uint32_t)(i < 3 ? i : 3)), b = (int)rnd((uint32_t)i), r = (int)rnd(10);
        used[a] = 1;
        if (r < 4) {
            nodes[i] = op1(g, POET_OP_LINEAR, nodes[a], (poet_attrs){.features = width});
        } else if (r < 7 || b == a) {
            nodes[i] = op1(g, unary[rnd(5)], nodes[a], (poet_attrs){0});
        } else {
            used[b] = 1;
            nodes[i] = op2(g, r < 9 ? POET_OP_ADD : POET_OP_MUL, nodes[a], nodes[b], (poet_attrs){0});
        }
    }
    int out = nodes[n - 1];
    for (int i = 1; i < n - 1; i++)
        if (!used[i]) out = op2(g, POET_OP_ADD, out, nodes[i], (poet_attrs){0});
    return op1(g, POET_OP_LINEAR, out, (poet_attrs){.features = 10});
}

static const struct {
    const char *name;
    int (*build)(poet_graph *g);
} KINDS[] = {{"residual", residual}, {"branch", branch}, {"attention", attention}, {"unet", unet}, {"dag", dag}};

/* One model of the kind, differentiated and costed on dev. */
static poet_status draw(const char *kind, int (*build)(poet_graph *g), unsigned long long seed, const poet_profile *dev,
                        poet_instance *out, poet_err *err)
{
    char model[64];
    poet_graph g;
    snprintf(model, sizeof model, "%s_%llu", kind, seed);
    poet_status st = poet_graph_init(&g, model, pick(1, 8), err);
    if (st) return st;
    int logits = build(&g);
    int loss = poet_graph_add(&g, POET_OP_SOFTMAX_CE, &logits, 1, &(poet_attrs){0}, NULL);
    if (loss < 0) st = poet_fail(err, g.err.status, "%s", g.err.msg);
    if (!st) st = poet_graph_autodiff(&g, loss, err);
    if (!st) st = poet_instance_from_graph(&g, dev, out, err);
    poet_graph_free(&g);
    return st;
}

int main(int argc, char **argv)
{
    if (argc != 5) {
        fprintf(stderr, "usage: %s KIND SEED DEVICE OUT.json (KIND: residual, branch, attention, unet, dag)\n", argv[0]);
        return 2;
    }
    int kind = -1;
    for (int k = 0; k < (int)(sizeof KINDS / sizeof *KINDS); k++)
        if (strcmp(argv[1], KINDS[k].name) == 0) kind = k;
    char *end = NULL;
    unsigned long long seed = strtoull(argv[2], &end, 10);
    if (kind < 0 || !*argv[2] || *end) {
        fprintf(stderr, "%s: unknown kind '%s' or seed '%s'\n", argv[0], argv[1], argv[2]);
        return 2;
    }
    rng_state = seed * 0x2545f4914f6cdd1dull + (uint64_t)kind;
    poet_err err = {0};
    poet_profile dev;
    poet_instance inst = {0};
    if (poet_profile_find(argv[3], &dev, &err)) goto fail;
    /* drawn again (the generator's state runs on) until it has 10-60 nodes */
    while (inst.T < 10 || inst.T > 60) {
        poet_instance_free(&inst);
        if (draw(argv[1], KINDS[kind].build, seed, &dev, &inst, &err)) goto fail;
    }
    if (poet_instance_write_file(&inst, argv[4], &err)) goto fail;
    printf("%d\n", inst.T);
    poet_instance_free(&inst);
    return 0;
fail:
    fprintf(stderr, "%s: %s\n", argv[0], err.msg);
    return 1;
}
