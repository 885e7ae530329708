/* The device library on the host: its hashes and math against references,
 * the convolutions the same bits whatever their chunking and equal to plain
 * loops, the device image checked byte by byte, the memory handed over, and
 * transfers that complete late (as DMA does). Property tests print their
 * seed; give one as the first argument to replay it. */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "../src/base/hash.h"
#include "../src/device/kernels.h"
#include "../src/base/mathf.h"
#include "check.h"
#include "conv_cases.h"
#include "graphs.h"
#include "rtutil.h"


/* ---- hashes ---- */

static void test_hashes(void)
{
    static const char *abc = "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad";
    static const char *empty = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";
    char hex[65];
    poet_sha256_hex("abc", 3, hex);
    CHECK_MSG(strcmp(hex, abc) == 0, "sha256(abc) = %s", hex);
    poet_sha256_hex("", 0, hex);
    CHECK_MSG(strcmp(hex, empty) == 0, "sha256() = %s", hex);
    unsigned char buf[1000];
    for (int i = 0; i < 1000; i++) buf[i] = (unsigned char)(i * 7 + 3);
    for (size_t n = 0; n <= 1000; n += 111)
        CHECK_MSG(crc32_update(0, buf, n) == (uint32_t)crc32(0L, buf, (uInt)n), "crc32 of %zu bytes differs from zlib's", n);
}

/* ---- math ---- */

static void test_math(void)
{
    double worst[4] = {0};
    for (int i = 0; i <= 200000; i++) {
        float x = -20.0f + 40.0f * (float)i / 200000.0f, y = 1e-6f + 50.0f * (float)i / 200000.0f;
        double e = fabs(poet_expf(x) - exp(x)) / exp(x), t = fabs(poet_tanhf(x) - tanh(x));
        double l = fabs(log(y)) > 1e-3 ? fabs(poet_logf(y) - log(y)) / fabs(log(y)) : 0, r = fabs(poet_erff(x) - erf(x));
        worst[0] = e > worst[0] ? e : worst[0], worst[1] = l > worst[1] ? l : worst[1];
        worst[2] = t > worst[2] ? t : worst[2], worst[3] = r > worst[3] ? r : worst[3];
    }
    CHECK_MSG(worst[0] < 3e-7 && worst[1] < 3e-7 && worst[2] < 3e-7 && worst[3] < 5e-7,
              "largest errors: exp %.3g (relative), log %.3g (relative), tanh %.3g, erf %.3g", worst[0], worst[1],
              worst[2], worst[3]);
    CHECK(poet_expf(-200.0f) == 0.0f && isinf(poet_expf(200.0f)) && isinf(poet_logf(0.0f)) && isnan(poet_logf(-1.0f)));
    CHECK(poet_tanhf(30.0f) == 1.0f && poet_tanhf(-30.0f) == -1.0f && poet_erff(10.0f) == 1.0f && poet_tanhf(0.0f) == 0.0f);
    CHECK(poet_expf(1e-30f) == 1.0f && poet_logf(1.0f) == 0.0f);
}

/* ---- convolutions: chunking changes no bit, plain loops give the same bits ---- */


static void test_conv_chunking(uint64_t seed)
{
    rng = seed;
    int bad = 0, cases = 200;
    for (int t = 0; t < cases; t++) {
        conv_case c = t % 2 ? common_conv((conv_limits){3, 4, 11}) : random_conv((conv_limits){3, 4, 11});
        knode nodes[3];
        conv_nodes(&c, nodes);
        size_t nx = nodes[0].numel, ny = nodes[1].numel, nw = nodes[1].params;
        size_t kk = (size_t)(c.C / c.G * c.KH * c.KW), pp = (size_t)(c.OH * c.OW);
        size_t chunks[] = {1, 3, 7, pp};
        conv_buffers b = {malloc(nx * 4), malloc(nw * 4), malloc(ny * 4), malloc(ny * 4), malloc(ny * 4), malloc(nx * 4),
                          malloc(nx * 4), malloc(nw * 4), malloc(nw * 4),
                          malloc(kk * (pp > 7 ? pp : 7) * 4)}; /* work_floats is the workspace there is */
        conv_case_fill(&c, nodes, &b);
        for (int k = 0; k < 4; k++) {
            const char *what = conv_case_differs(&c, nodes, &b, kk * chunks[k]);
            if (what && bad++ < 3)
                fprintf(stderr, "conv N%d C%d %dx%d F%d G%d K%dx%d S%dx%d D%dx%d P%d,%d,%d,%d, chunk %zu: %s\n", c.N,
                        c.C, c.H, c.W, c.F, c.G, c.KH, c.KW, c.SH, c.SW, c.DH, c.DW, c.PT, c.PL, c.PB, c.PR, chunks[k], what);
        }
        free(b.x), free(b.w), free(b.dy), free(b.y), free(b.yr), free(b.dx), free(b.dxr), free(b.gw), free(b.gwr), free(b.work);
    }
    CHECK_MSG(bad == 0, "%d of %d convolutions (x 4 chunk sizes) differ from the plain loops (seed %llu)", bad, cases,
              (unsigned long long)seed);
    printf("conv: %d random shapes (groups, dilations, strides, uneven padding), 4 chunk sizes each, same bits as "
           "plain loops (seed %llu)\n", cases,
           (unsigned long long)seed);
}

/* ---- the device image ---- */

typedef struct exported {
    poet_graph g;
    rig r;
    uint8_t *img;
    size_t len;
} exported;

static bool export_graph(exported *e, int graph, const char *planner, double fraction)
{
    memset(e, 0, sizeof *e);
    poet_err err = {0};
    if (test_graph_build(graph, &e->g, &err)) return false;
    rig_start(&e->r, &e->g, planner, fraction, NULL, poet_optimizer_default(POET_OPT_SGD), 3);
    if (!e->r.ok) return false;
    poet_export_options o = {poet_optimizer_default(POET_OPT_SGD), 3, 2, NULL, NULL, POET_FROZEN_IN_RAM, false};
    return !poet_export_image(&e->g, &e->r.p, &e->r.plan.schedule, &o, &e->img, &e->len, &err);
}

static void exported_free(exported *e)
{
    free(e->img);
    rig_free(&e->r);
    poet_graph_free(&e->g);
}

static void *aligned_copy(const void *src, size_t len)
{
    void *p = aligned_alloc(8, (len + 7) / 8 * 8);
    if (p) memcpy(p, src, len);
    return p;
}

static void test_image_checks(void)
{
    exported e;
    CHECK_MSG(export_graph(&e, 0, "paging", 0.5), "export");
    if (!e.img) return;
    uint8_t *img = aligned_copy(e.img, e.len);
    poet_dev_memory need;
    poet_err err = {0};
    CHECK_MSG(!poet_dev_inspect(img, e.len, &need, &err), "inspect: %s", err.msg);
    CHECK(poet_dev_image_length(img) == e.len);
    int undetected = 0;
    for (size_t i = 0; i < e.len; i++) { /* every single corrupted byte is refused */
        img[i] ^= 0x5a;
        if (!poet_dev_inspect(img, e.len, &need, NULL)) undetected++;
        img[i] ^= 0x5a;
    }
    CHECK_MSG(undetected == 0, "%d of %zu corrupted bytes went unnoticed", undetected, e.len);
    CHECK(poet_dev_inspect(img, e.len - 1, &need, &err) == POET_ERR_PARSE && strstr(err.msg, "truncated"));
    CHECK(poet_dev_inspect(img, 100, &need, &err) == POET_ERR_PARSE);
    uint8_t *odd = malloc(e.len + 1);
    memcpy(odd + 1, img, e.len);
    CHECK(poet_dev_inspect(odd + 1, e.len, &need, &err) == POET_ERR_INVALID && strstr(err.msg, "aligned"));
    free(odd);
    /* memory: too little is refused with what it needs */
    poet_dev_inspect(img, e.len, &need, NULL);
    void *mem = aligned_alloc(8, (size_t)need.total_bytes);
    poet_dev *d = NULL;
    CHECK(poet_dev_open(img, e.len, mem, (size_t)need.total_bytes - 8, NULL, NULL, &d, &err) == POET_ERR_LIMIT &&
          strstr(err.msg, "needs"));
    if (need.storage_bytes)
        CHECK(poet_dev_open(img, e.len, mem, (size_t)need.total_bytes, NULL, NULL, &d, &err) == POET_ERR_INVALID &&
              strstr(err.msg, "storage"));
    free(mem);
    free(img);
    exported_free(&e);
}

/* The image's CRC made right again after a test changed its bytes (the
 * CRC is little-endian, as the image is and these hosts are). */
static void reseal(uint8_t *img, size_t len)
{
    uint32_t crc = (uint32_t)crc32(0L, img, (uInt)(len - 4));
    memcpy(img + len - 4, &crc, 4);
}

/* An image of mlp_digits trained on half of each layer's input channels
 * (ratio:0.5), so that it carries channel lists. */
static bool export_ratio_image(uint8_t **img, size_t *len)
{
    poet_graph g;
    poet_err err = {0};
    *img = NULL;
    if (poet_zoo_build("mlp_digits", 8, &g, &err)) return false;
    if (poet_graph_set_trainable(&g, "ratio:0.5", &err)) {
        poet_graph_free(&g);
        return false;
    }
    rig r;
    rig_start(&r, &g, "keep-all", 0, NULL, poet_optimizer_default(POET_OPT_SGD), 3);
    poet_export_options o = {poet_optimizer_default(POET_OPT_SGD), 3, 2, NULL, NULL, POET_FROZEN_IN_RAM, false};
    bool ok = r.ok && !poet_export_image(&g, &r.p, &r.plan.schedule, &o, img, len, &err);
    rig_free(&r);
    poet_graph_free(&g);
    return ok;
}

/* A channel list entry outside the layer's input, however large, is refused
 * even with the image's CRC made right: the kernels index by it. */
static void test_channel_list_checks(void)
{
    uint8_t *image = NULL, *img;
    size_t len = 0;
    CHECK_MSG(export_ratio_image(&image, &len), "export ratio:0.5");
    if (!image || !(img = aligned_copy(image, len))) {
        free(image);
        return;
    }
    const img_header *h = (const img_header *)(const void *)img;
    CHECK_MSG(h->channels_at != 0, "ratio:0.5 image without channel lists");
    /* the last entry of a list: the ascending order its neighbours must keep holds for any value above them */
    uint64_t listed = knode_channels_listed((const knode *)(const void *)(img + h->nodes_at), h->n_forward);
    const uint32_t bad[] = {0x80000000u, 0xffffffffu, 1u << 20};
    int refused = 0;
    poet_dev_memory need;
    poet_err err = {0};
    for (size_t b = 0; listed && b < sizeof bad / sizeof *bad; b++) {
        uint32_t *entry = (uint32_t *)(void *)(img + h->channels_at) + (listed - 1), was = *entry;
        *entry = bad[b];
        reseal(img, len);
        refused += poet_dev_inspect(img, len, &need, &err) == POET_ERR_PARSE && strstr(err.msg, "its channels");
        *entry = was;
    }
    CHECK_MSG(refused == 3, "%d of 3 channel lists out of range refused", refused);
    free(img);
    free(image);
}

/* The first compute of the training program whose output buffer can be
 * moved onto the buffer of its first input, live then: its index, or -1. */
static long overlap_target(const uint8_t *img, uint32_t *onto)
{
    const img_header *h = (const img_header *)(const void *)img;
    const knode *nodes = (const knode *)(const void *)(img + h->nodes_at);
    const kinstr *code = (const kinstr *)(const void *)(img + h->train.instr_at);
    const kbuffer *buf = (const kbuffer *)(const void *)(img + h->train.buffers_at);
    int32_t *live = malloc(sizeof *live * h->n_nodes);
    long found = -1;
    for (uint32_t v = 0; v < h->n_nodes; v++) live[v] = -1;
    for (uint32_t k = 0; k < h->train.n_instr && found < 0; k++) {
        const kinstr *in = &code[k];
        const knode *n = &nodes[in->node];
        if (in->op == KI_COMPUTE && n->n_inputs && live[n->inputs[0]] >= 0 && buf[in->buffer].bytes &&
            buf[live[n->inputs[0]]].offset + buf[in->buffer].bytes <= h->train.arena_bytes) {
            found = (long)k;
            *onto = (uint32_t)live[n->inputs[0]];
        }
        if (in->op == KI_COMPUTE || in->op == KI_PAGEIN) live[in->node] = (int32_t)in->buffer;
        if (in->op == KI_FREE) live[in->node] = -1;
    }
    free(live);
    return found;
}

/* A program that writes a node over a tensor in RAM is refused when the
 * image is opened (inspect passes it: only a replay sees it). */
static void test_overlap_refused(void)
{
    exported e;
    CHECK_MSG(export_graph(&e, 0, "keep-all", 0), "export");
    uint8_t *img = e.img ? aligned_copy(e.img, e.len) : NULL;
    uint32_t onto = 0;
    long k = img ? overlap_target(img, &onto) : -1;
    CHECK_MSG(k >= 0, "no compute whose output could be moved onto its input");
    if (k >= 0) {
        const img_header *h = (const img_header *)(const void *)img;
        kinstr *in = (kinstr *)(void *)(img + h->train.instr_at) + k;
        kbuffer *buf = (kbuffer *)(void *)(img + h->train.buffers_at);
        buf[in->buffer].offset = buf[onto].offset;
        reseal(img, e.len);
        poet_dev_memory need;
        poet_err err = {0};
        CHECK_MSG(!poet_dev_inspect(img, e.len, &need, &err), "inspect: %s", err.msg);
        void *mem = aligned_alloc(8, (size_t)(need.total_bytes + 7) / 8 * 8);
        poet_dev *d = NULL;
        CHECK_MSG(poet_dev_open(img, e.len, mem, (size_t)need.total_bytes, NULL, NULL, &d, &err) == POET_ERR_INVALID &&
                      strstr(err.msg, "is placed over node") && !d,
                  "a node written over its input: %s", err.msg);
        free(mem);
    }
    free(img);
    exported_free(&e);
}

/* ---- storage whose transfers complete only when waited for, newest first ---- */

enum { QUEUE = 64 };

typedef struct late_store {
    uint8_t *bytes;
    struct {
        bool write;
        uint64_t offset;
        void *ram;
        size_t n;
    } q[QUEUE];
    long started, done;
} late_store;

static void late_do(late_store *s, long t)
{
    int k = (int)(t % QUEUE);
    if (s->q[k].write)
        memcpy(s->bytes + s->q[k].offset, s->q[k].ram, s->q[k].n);
    else
        memcpy(s->q[k].ram, s->bytes + s->q[k].offset, s->q[k].n);
}

/* Completes transfers [done, until) in reverse order, as several DMA
 * channels might: only waiting orders them. */
static void late_complete_until(late_store *s, long until)
{
    for (long t = until - 1; t >= s->done; t--) late_do(s, t);
    if (until > s->done) s->done = until;
}

static poet_status late_start(void *ctx, bool write, uint64_t offset, void *ram, size_t n, long *ticket, poet_err *err)
{
    late_store *s = ctx;
    (void)err;
    if (s->started - s->done == QUEUE) late_complete_until(s, s->done + 1);
    int k = (int)(s->started % QUEUE);
    s->q[k].write = write, s->q[k].offset = offset, s->q[k].ram = ram, s->q[k].n = n;
    *ticket = s->started++;
    return POET_OK;
}

static poet_status late_wait(void *ctx, long ticket, poet_err *err)
{
    late_store *s = ctx;
    (void)err;
    late_complete_until(s, ticket < 0 ? s->started : ticket + 1);
    return POET_OK;
}

static poet_status late_sync(void *ctx, poet_err *err)
{
    (void)ctx, (void)err;
    return POET_OK;
}

static void late_reset(void *ctx)
{
    late_store *s = ctx;
    s->done = s->started;
}

/* Trains 4 steps of test graph `graph` under planner at fraction with late
 * transfers; false when that schedule pages nothing. */
static bool late_run(int graph, const char *planner, double fraction, char sha[65])
{
    exported e;
    poet_dev_memory need;
    if (!export_graph(&e, graph, planner, fraction) || poet_dev_inspect(e.img, e.len, &need, NULL) || !need.storage_bytes) {
        exported_free(&e);
        return false;
    }
    late_store s = {.bytes = calloc(1, (size_t)need.storage_bytes + 1)};
    poet_dev_storage st = {POET_DEV_STORAGE_VERSION, &s, need.storage_bytes, late_start, late_wait, late_sync, late_reset};
    void *mem = aligned_alloc(8, (size_t)need.total_bytes);
    poet_dev *d = NULL;
    poet_err err = {0};
    CHECK_MSG(!poet_dev_open(e.img, e.len, mem, (size_t)need.total_bytes, &st, NULL, &d, &err), "%s", err.msg);
    uint64_t n = poet_shape_numel(&e.g.nodes[0].shape);
    float *x = malloc(n * sizeof *x), loss;
    int32_t y[64];
    for (int k = 0; d && k < 4; k++) {
        rt_batch(&e.g, 100 + (uint64_t)k, x, y);
        CHECK_MSG(!poet_dev_step(d, x, y, &loss, &err), "%s", err.msg);
    }
    if (d) poet_dev_weights_sha256(d, sha);
    free(x), free(mem), free(s.bytes);
    exported_free(&e);
    return true;
}

static void keep_all_run(int graph, char sha[65])
{
    poet_graph g;
    rig r;
    poet_err err = {0};
    if (test_graph_build(graph, &g, &err)) return;
    rig_start(&r, &g, "keep-all", 0, NULL, poet_optimizer_default(POET_OPT_SGD), 3);
    uint64_t n = poet_shape_numel(&g.nodes[0].shape);
    float *x = malloc(n * sizeof *x);
    int32_t y[64];
    double l;
    for (int k = 0; r.ok && k < 4; k++) {
        rt_batch(&g, 100 + (uint64_t)k, x, y);
        poet_engine_step(r.e, x, y, &l, &err);
    }
    if (r.ok) poet_dev_weights_sha256(poet_engine_device(r.e), sha);
    free(x);
    rig_free(&r);
    poet_graph_free(&g);
}

/* Training with transfers that land late, and out of order, gives keep-all's
 * bits under every paging schedule tried: poet waits for a page-out before
 * reusing its buffer and for page-ins before reading. */
static void test_late_transfers(void)
{
    static const char *planners[] = {"paging", "hybrid", "portfolio"};
    static const double fractions[] = {0.25, 0.4, 0.6};
    int paged = 0;
    for (int graph = 0; graph < N_TEST_GRAPHS; graph++) {
        char keep[65] = "";
        keep_all_run(graph, keep);
        for (int p = 0; p < 3; p++)
            for (int f = 0; f < 3; f++) {
                char late[65] = "";
                if (!late_run(graph, planners[p], fractions[f], late)) continue;
                paged++;
                CHECK_MSG(strcmp(late, keep) == 0, "%s under %s at %.0f%% with late transfers: %.16s, keep-all %.16s",
                          test_graph_name(graph), planners[p], 100 * fractions[f], late, keep);
            }
    }
    CHECK_MSG(paged >= 5, "only %d of the schedules tried page", paged);
    printf("late transfers: %d paging schedules trained to keep-all's bits\n", paged);
}

int main(int argc, char **argv)
{
    uint64_t seed = argc > 1 ? strtoull(argv[1], NULL, 10) : 20261203;
    test_hashes();
    test_math();
    test_conv_chunking(seed);
    test_image_checks();
    test_channel_list_checks();
    test_overlap_refused();
    test_late_transfers();
    return check_report();
}
