/* Partial training masks and deep partial updating: the masked optimizer
 * step, the server's selection and rewind, and patches applied on a
 * separate device copy, refused whole when anything is off. */
#include <math.h>
#include <stdlib.h>

#include <zlib.h>

#include "check.h"
#include "rtutil.h"

enum { BATCH = 8 };

static bool same_bits(const float *a, const float *b, uint64_t n) { return n == 0 || memcmp(a, b, 4 * n) == 0; }

/* ---- the masked optimizer step ---- */

static void test_mask(poet_optimizer_kind kind)
{
    poet_graph g;
    poet_err err = {0};
    CHECK(!poet_zoo_build("cnn_digits", BATCH, &g, &err));
    rig a, b;
    rig_start(&a, &g, "keep-all", 0, NULL, poet_optimizer_default(kind), 3);
    rig_start(&b, &g, "keep-all", 0, NULL, poet_optimizer_default(kind), 3);
    CHECK(a.ok && b.ok);
    if (!a.ok || !b.ok) return;
    uint64_t n;
    const float *w0 = poet_dev_weights(poet_engine_device(a.e), &n);
    float *before = malloc(4 * n), *x = malloc(4 * 64 * BATCH);
    uint8_t *mask = calloc(n / 8 + 1, 1), *ones = malloc(n / 8 + 1);
    memset(ones, 0xff, n / 8 + 1);
    memcpy(before, w0, 4 * n);
    uint64_t s = 17, trained = 0;
    for (uint64_t i = 0; i < n; i++)
        if (rt_uniform(&s) > 0.4f) mask[i / 8] |= (uint8_t)(1u << (i % 8)), trained++;
    poet_dev_set_train_mask(poet_engine_device(a.e), mask);
    poet_dev_set_train_mask(poet_engine_device(b.e), ones);
    int32_t y[BATCH];
    for (int step = 0; step < 3; step++) {
        double la, lb;
        rt_batch(&g, 100 + (uint64_t)step, x, y);
        CHECK(!poet_engine_step(a.e, x, y, &la, &err) && !poet_engine_step(b.e, x, y, &lb, &err));
    }
    const float *w = poet_dev_weights(poet_engine_device(a.e), &n);
    uint64_t outside_changed = 0, inside_changed = 0;
    for (uint64_t i = 0; i < n; i++) {
        bool in = mask[i / 8] >> (i % 8) & 1, changed = memcmp(&w[i], &before[i], 4) != 0;
        outside_changed += !in && changed, inside_changed += in && changed;
    }
    CHECK_MSG(outside_changed == 0, "%llu weights outside the mask changed", (unsigned long long)outside_changed);
    CHECK_MSG(inside_changed > trained / 2, "%llu of %llu masked weights changed", (unsigned long long)inside_changed,
              (unsigned long long)trained);
    /* a mask of every parameter trains exactly as no mask */
    rig c;
    rig_start(&c, &g, "keep-all", 0, NULL, poet_optimizer_default(kind), 3);
    for (int step = 0; c.ok && step < 3; step++) {
        double l;
        rt_batch(&g, 100 + (uint64_t)step, x, y);
        CHECK(!poet_engine_step(c.e, x, y, &l, &err));
    }
    char hb[65], hc[65];
    poet_dev_weights_sha256(poet_engine_device(b.e), hb);
    poet_dev_weights_sha256(poet_engine_device(c.e), hc);
    CHECK(c.ok && strcmp(hb, hc) == 0);
    rig_free(&a), rig_free(&b), rig_free(&c);
    free(before), free(x), free(mask), free(ones);
    poet_graph_free(&g);
}

/* ---- the server ---- */

typedef struct served {
    poet_graph g;
    rig r;
    poet_update_server *s;
} served;

static bool serve_mixed(served *v, const char *model, poet_update_method m, double k, bool reinit, bool always,
                        double share)
{
    poet_err err = {0};
    memset(v, 0, sizeof *v);
    if (poet_zoo_build(model, BATCH, &v->g, &err)) return false;
    rig_start(&v->r, &v->g, "keep-all", 0, NULL, poet_optimizer_default(POET_OPT_SGD), 5);
    if (!v->r.ok) return false;
    poet_engine_config cfg = {&v->g, &v->r.p, &v->r.plan.schedule, NULL, poet_optimizer_default(POET_OPT_SGD), 5, 0,
                              NULL, NULL, POET_FROZEN_IN_RAM, false};
    poet_update_options o = {m, k, 2, reinit, 9, always, share};
    if (poet_update_server_new(&cfg, &o, &v->s, &err)) {
        fprintf(stderr, "server: %s\n", err.msg);
        return false;
    }
    return true;
}

static bool serve(served *v, const char *model, poet_update_method m, double k, bool reinit, bool always)
{
    return serve_mixed(v, model, m, k, reinit, always, 0.5);
}

static void unserve(served *v)
{
    poet_update_server_free(v->s);
    rig_free(&v->r);
    poet_graph_free(&v->g);
}

/* The server pairs every weight with its gradient: a graph with frozen
 * parameters (--train) has fewer gradients, and is refused. */
static void test_frozen_refused(void)
{
    served v = {0};
    poet_err err = {0};
    CHECK(!poet_zoo_build("mlp_digits", BATCH, &v.g, &err) && !poet_graph_set_trainable(&v.g, "last:1", &err));
    rig_start(&v.r, &v.g, "keep-all", 0, NULL, poet_optimizer_default(POET_OPT_SGD), 5);
    poet_engine_config cfg = {&v.g, &v.r.p, &v.r.plan.schedule, NULL, poet_optimizer_default(POET_OPT_SGD), 5, 0,
                              NULL, NULL, POET_FROZEN_IN_RAM, false};
    poet_update_options o = {POET_UPDATE_DPU, 0.1, 2, false, 9, false, 0.5};
    CHECK(v.r.ok && poet_update_server_new(&cfg, &o, &v.s, &err) && strstr(err.msg, "every parameter must train") &&
          !v.s);
    unserve(&v);
}

/* Validation: the last 40 of the 200 examples; round r trains on the first n. */
static poet_status round_on(served *v, const poet_dataset *d, int n, uint8_t **patch, size_t *len,
                            poet_update_report *rep)
{
    static int idx[200];
    for (int i = 0; i < 200; i++) idx[i] = i;
    poet_err err = {0};
    poet_status st = poet_update_round(v->s, d, idx, n, idx + 160, 40, patch, len, rep, &err);
    if (st) fprintf(stderr, "round: %s\n", err.msg);
    return st;
}

static const int ROUNDS[] = {40, 60, 90, 120};
enum { N_ROUNDS = 4 };

static void test_k1_is_full(const poet_dataset *d)
{
    served f, p;
    CHECK(serve(&f, "mlp_digits", POET_UPDATE_FULL, 1, false, false));
    CHECK(serve(&p, "mlp_digits", POET_UPDATE_DPU, 1, false, false));
    for (int r = 0; r < N_ROUNDS && f.s && p.s; r++) {
        uint8_t *a, *b;
        size_t la, lb;
        poet_update_report ra, rb;
        CHECK(!round_on(&f, d, ROUNDS[r], &a, &la, &ra) && !round_on(&p, d, ROUNDS[r], &b, &lb, &rb));
        CHECK(rb.sent && rb.changed == rb.weights && la == lb && a && b && memcmp(a, b, la) == 0);
        uint64_t n, m;
        const float *wf = poet_update_deployed(f.s, &n), *wp = poet_update_deployed(p.s, &m);
        CHECK(n == m && same_bits(wf, wp, n));
        free(a), free(b);
    }
    unserve(&f), unserve(&p);
}

/* DPU's metric with the whole share on the global contribution ranks as
 * GCPU does: the same patches and models, bit for bit; a share outside
 * [0, 1] is refused. */
static void test_global_share(const poet_dataset *d)
{
    served g, p, bad;
    CHECK(serve(&g, "mlp_digits", POET_UPDATE_GLOBAL, 0.05, false, true));
    CHECK(serve_mixed(&p, "mlp_digits", POET_UPDATE_DPU, 0.05, false, true, 1));
    for (int r = 0; r < N_ROUNDS && g.s && p.s; r++) {
        uint8_t *a, *b;
        size_t la, lb;
        poet_update_report ra, rb;
        CHECK(!round_on(&g, d, ROUNDS[r], &a, &la, &ra) && !round_on(&p, d, ROUNDS[r], &b, &lb, &rb));
        CHECK(ra.changed == rb.changed && la == lb && a && b && memcmp(a, b, la) == 0);
        free(a), free(b);
    }
    unserve(&g), unserve(&p);
    for (int k = 0; k < 2; k++) {
        CHECK(!serve_mixed(&bad, "mlp_digits", POET_UPDATE_DPU, 0.05, false, true, k ? 1.5 : NAN) && !bad.s);
        unserve(&bad);
    }
}

/* After a round exactly k*I weights differ from the deployed ones (for
 * pruning: exactly k*I are not zero). */
static void test_rewind_count(const poet_dataset *d, poet_update_method m)
{
    served v;
    CHECK(serve(&v, "mlp_digits", m, 0.05, false, true));
    uint64_t n, I = 0;
    float *old = malloc(4 * poet_graph_param_count(&v.g));
    uint8_t *is_w = malloc(poet_graph_param_count(&v.g));
    for (int r = 0; r < N_ROUNDS && v.s; r++) {
        memcpy(old, poet_update_deployed(v.s, &n), 4 * n);
        uint8_t *patch;
        size_t len;
        poet_update_report rep;
        CHECK(!round_on(&v, d, ROUNDS[r], &patch, &len, &rep));
        free(patch);
        const float *w = poet_update_deployed(v.s, &n);
        I = rep.weights;
        if (r == 0) continue; /* deployed whole */
        uint64_t differ = 0, nonzero = 0, k = (uint64_t)llround(0.05 * (double)I);
        poet_dev_update_weights(poet_engine_device(v.r.e), is_w);
        for (uint64_t i = 0; i < n; i++)
            if (is_w[i]) differ += memcmp(&w[i], &old[i], 4) != 0, nonzero += w[i] != 0.0f;
        CHECK_MSG(rep.changed == k, "%s picked %llu of %llu", poet_update_method_name(m), (unsigned long long)rep.changed,
                  (unsigned long long)I);
        if (m == POET_UPDATE_PRUNE)
            CHECK_MSG(nonzero == k, "prune: %llu weights not zero, want %llu", (unsigned long long)nonzero,
                      (unsigned long long)k);
        else
            CHECK_MSG(differ == k, "%s: %llu weights differ, want %llu", poet_update_method_name(m),
                      (unsigned long long)differ, (unsigned long long)k);
    }
    free(old), free(is_w);
    unserve(&v);
}

/* A device of the server's image, in its own memory. */
typedef struct device {
    uint64_t *image, *memory;
    size_t image_len;
    poet_dev *d;
} device;

static bool device_open(device *x, const poet_update_server *s)
{
    poet_err err = {0};
    const uint8_t *img = poet_update_image(s, &x->image_len);
    x->image = malloc(x->image_len + 8);
    memcpy(x->image, img, x->image_len);
    poet_dev_memory need;
    if (poet_dev_inspect(x->image, x->image_len, &need, &err)) return false;
    x->memory = malloc(need.total_bytes + 8);
    return !poet_dev_open(x->image, x->image_len, x->memory, need.total_bytes, NULL, NULL, &x->d, &err);
}

static void device_close(device *x) { free(x->image), free(x->memory); }

static bool device_matches(const device *x, const poet_update_server *s)
{
    uint64_t n, m, ns, ms;
    const float *w = poet_dev_weights(x->d, &n), *st = poet_dev_state(x->d, &ns);
    const float *ws = poet_update_deployed(s, &m), *sts = poet_update_deployed_state(s, &ms);
    return n == m && ns == ms && same_bits(w, ws, n) && same_bits(st, sts, ns);
}

/* Every round's patch, applied on a separate copy, gives the server's
 * model bit for bit: positions kept, re-created from a seed, or zeroed. */
static void test_patch_reproduces(const poet_dataset *d, const char *model, poet_update_method m, bool reinit)
{
    served v;
    device x = {0};
    CHECK(serve(&v, model, m, 0.05, reinit, true) && device_open(&x, v.s));
    int reinits = 0;
    for (int r = 0; r < N_ROUNDS && x.d; r++) {
        uint8_t *patch;
        size_t len;
        poet_update_report rep;
        poet_err err = {0};
        CHECK(!round_on(&v, d, ROUNDS[r], &patch, &len, &rep));
        reinits += rep.reinit;
        poet_dev_patch_info info;
        CHECK(patch && !poet_dev_patch_check(x.d, patch, len, &info, &err));
        CHECK(info.changed == rep.changed && info.round == (uint32_t)rep.round);
        CHECK_MSG(!poet_dev_patch_apply(x.d, patch, len, &err), "%s", err.msg);
        CHECK_MSG(device_matches(&x, v.s), "%s %s round %d: the device differs from the server", model,
                  poet_update_method_name(m), rep.round);
        free(patch);
    }
    CHECK(reinits == (reinit ? 1 : 0));
    device_close(&x);
    unserve(&v);
}

/* A patch that is corrupt, truncated, made for other weights or another
 * model is refused and changes nothing. */
static void test_patch_refused(const poet_dataset *d)
{
    served v, other;
    device x = {0}, fresh = {0}, cnn = {0};
    CHECK(serve(&v, "mlp_digits", POET_UPDATE_DPU, 0.05, false, true) && device_open(&x, v.s) &&
          device_open(&fresh, v.s));
    CHECK(serve(&other, "cnn_digits", POET_UPDATE_DPU, 0.05, false, true) && device_open(&cnn, other.s));
    uint8_t *p1, *p2;
    size_t l1, l2;
    poet_update_report rep;
    poet_err err = {0};
    if (!x.d || !cnn.d || round_on(&v, d, 40, &p1, &l1, &rep) || round_on(&v, d, 60, &p2, &l2, &rep)) return;
    CHECK(!poet_dev_patch_apply(x.d, p1, l1, &err));
    char before[65], now[65];
    poet_dev_weights_sha256(x.d, before);
    uint8_t *bad = malloc(l2);
    long refused = 0, tries = 0;
    for (size_t i = 0; i < l2; i++)
        for (int fix_crc = 0; fix_crc < 2; fix_crc++) {
            if (fix_crc && i >= 24 && i < 28) continue; /* the round number: informational */
            memcpy(bad, p2, l2);
            bad[i] ^= (uint8_t)(1u << (i % 8));
            if (fix_crc && i < l2 - 4) {
                uint32_t crc = (uint32_t)crc32(0L, bad, (uInt)(l2 - 4));
                for (int b = 0; b < 4; b++) bad[l2 - 4 + b] = (uint8_t)(crc >> (8 * b));
            }
            tries++;
            refused += poet_dev_patch_apply(x.d, bad, l2, &err) != POET_OK;
        }
    for (size_t len = 0; len < l2; len++) tries++, refused += poet_dev_patch_apply(x.d, p2, len, &err) != POET_OK;
    poet_dev_weights_sha256(x.d, now);
    CHECK_MSG(refused == tries && strcmp(before, now) == 0, "%ld of %ld damaged patches refused", refused, tries);
    /* made for other weights: round 2 on a device that missed round 1, or twice */
    poet_dev_weights_sha256(fresh.d, before);
    CHECK(poet_dev_patch_apply(fresh.d, p2, l2, &err) != POET_OK && strstr(err.msg, "other weights"));
    poet_dev_weights_sha256(fresh.d, now);
    CHECK(strcmp(before, now) == 0);
    CHECK(!poet_dev_patch_apply(x.d, p2, l2, &err) && device_matches(&x, v.s));
    CHECK(poet_dev_patch_apply(x.d, p2, l2, &err) != POET_OK);
    /* made for another model */
    CHECK(poet_dev_patch_apply(cnn.d, p1, l1, &err) != POET_OK && strstr(err.msg, "another model"));
    free(bad), free(p1), free(p2);
    device_close(&x), device_close(&fresh), device_close(&cnn);
    unserve(&v), unserve(&other);
}

/* ---- the model store: power lost in the middle of a save ---- */

/* Storage in memory where power is lost during write number power_at: that
 * write lands half, later ones not at all. */
typedef struct flash {
    uint8_t *bytes;
    long writes, power_at;
} flash;

static poet_status flash_start(void *ctx, bool write, uint64_t at, void *ram, size_t n, long *ticket, poet_err *err)
{
    (void)err;
    flash *f = ctx;
    *ticket = 0;
    if (!write) return memcpy(ram, f->bytes + at, n), POET_OK;
    long k = f->writes++;
    if (f->power_at < 0 || k < f->power_at) memcpy(f->bytes + at, ram, n);
    else if (k == f->power_at) memcpy(f->bytes + at, ram, n / 2);
    return POET_OK;
}

static poet_status flash_wait(void *ctx, long ticket, poet_err *err) { return (void)ctx, (void)ticket, (void)err, POET_OK; }
static poet_status flash_sync(void *ctx, poet_err *err) { return (void)ctx, (void)err, POET_OK; }
static void flash_reset(void *ctx) { (void)ctx; }

static void test_store_power_loss(const poet_dataset *d, const char *model)
{
    served v;
    device x = {0}, y = {0};
    CHECK(serve(&v, model, POET_UPDATE_DPU, 0.05, false, true) && device_open(&x, v.s));
    if (!x.d) return;
    uint64_t at = 64, cap = at + poet_dev_store_bytes(x.d);
    flash f = {calloc(1, cap), 0, -1};
    uint8_t *saved = malloc(cap);
    poet_dev_storage st = {POET_DEV_STORAGE_VERSION, &f, cap, flash_start, flash_wait, flash_sync, flash_reset};
    poet_err err = {0};
    char old[65], now[65], got[65];
    CHECK(device_open(&y, v.s) && poet_dev_store_load(y.d, &st, at, &err) == POET_ERR_NOT_FOUND);
    CHECK(!poet_dev_store_save(x.d, &st, at, &err));
    long tried = 0, ok = 0, writes = 0;
    for (int r = 0; r < N_ROUNDS; r++) {
        uint8_t *patch;
        size_t len;
        poet_update_report rep;
        poet_dev_weights_sha256(x.d, old);
        if (round_on(&v, d, ROUNDS[r], &patch, &len, &rep) || poet_dev_patch_apply(x.d, patch, len, &err)) break;
        free(patch);
        poet_dev_weights_sha256(x.d, now);
        memcpy(saved, f.bytes, cap);
        for (long k = 0;; k++) { /* power lost in write k of the save; k = all of them: none lost */
            memcpy(f.bytes, saved, cap);
            f.writes = 0, f.power_at = k;
            CHECK(!poet_dev_store_save(x.d, &st, at, &err));
            bool complete = f.writes <= k;
            writes = f.writes;
            f.power_at = -1;
            device_close(&y);
            CHECK(device_open(&y, v.s) && !poet_dev_store_load(y.d, &st, at, &err));
            poet_dev_weights_sha256(y.d, got);
            tried++;
            ok += strcmp(got, complete ? now : old) == 0 && (!complete || device_matches(&y, v.s));
            if (complete) break;
        }
    }
    CHECK_MSG(tried > 3 && ok == tried, "%s: %ld of %ld power losses left the old or the new model (%ld writes a save)",
              model, ok, tried, writes);
    /* a flipped bit in the newest slot's body: the one before it is loaded */
    uint64_t slot = poet_dev_store_bytes(x.d) / 2, seq0, seq1;
    memcpy(&seq0, f.bytes + at + 16, 8), memcpy(&seq1, f.bytes + at + slot + 16, 8);
    f.bytes[at + (seq1 > seq0 ? slot : 0) + 40] ^= 4;
    device_close(&y);
    CHECK(device_open(&y, v.s) && !poet_dev_store_load(y.d, &st, at, &err));
    poet_dev_weights_sha256(y.d, got);
    CHECK_MSG(strcmp(got, old) == 0, "%s: a corrupt newest slot was not passed over", model);
    st.capacity_bytes = cap - 1;
    CHECK(poet_dev_store_save(x.d, &st, at, &err) == POET_ERR_LIMIT);
    free(f.bytes), free(saved);
    device_close(&x), device_close(&y);
    unserve(&v);
}

int main(void)
{
    test_mask(POET_OPT_SGD);
    test_mask(POET_OPT_ADAM);
    test_frozen_refused();
    poet_dataset d;
    rt_fake_digits(&d, 200, 20);
    test_k1_is_full(&d);
    test_global_share(&d);
    for (int m = POET_UPDATE_DPU; m < POET_UPDATE_METHODS; m++)
        if (m != POET_UPDATE_RANDOM) test_rewind_count(&d, (poet_update_method)m);
    test_patch_reproduces(&d, "mlp_digits", POET_UPDATE_DPU, false);
    test_patch_reproduces(&d, "mlp_digits", POET_UPDATE_RANDOM, true);
    test_patch_reproduces(&d, "cnn_digits", POET_UPDATE_PRUNE, false);
    test_patch_reproduces(&d, "cnn_digits", POET_UPDATE_GLOBAL, true);
    test_patch_refused(&d);
    test_store_power_loss(&d, "mlp_digits");
    test_store_power_loss(&d, "cnn_digits");
    poet_dataset_free(&d);
    return check_report();
}
