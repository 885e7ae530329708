/* Parameter homes (knode.home): frozen tensors read in place from the
 * image train to the bits of the same model with every parameter in RAM,
 * under random schedules; the image is never written; the RAM they save
 * is exactly their bytes; states, saved models and images that would
 * write them, or that home a trained tensor in flash, are refused. The
 * fused update (KI_UPDATE) gives the same bits again in one layer's
 * gradients of RAM, and refuses the split step. */
#define _POSIX_C_SOURCE 200809L
#include <inttypes.h>
#include <time.h>

#include "check.h"
#include "rtutil.h"
#include "../src/base/hash.h"
#include "../src/device/image.h"

enum { BATCH = 8, STEPS = 3 };

static poet_engine *engine_for(const poet_graph *g, const rig *r, poet_frozen_home frozen, bool fused)
{
    poet_err err = {0};
    poet_engine *e = NULL;
    poet_engine_config cfg = {g, &r->p, &r->plan.schedule, NULL, poet_optimizer_default(POET_OPT_ADAM), 11, 0, NULL,
                              NULL, frozen, fused};
    if (poet_engine_new(&cfg, &e, &err)) fprintf(stderr, "engine: %s\n", err.msg);
    return e;
}

/* The device's figure for the image (what poet_dev_open needs) is the one
 * the host predicts from the graph and the placed arena alone
 * (poet_export_memory: what fit and --budget ram plan with). */
static void check_memory(const poet_engine *e, const poet_graph *g, const rig *r, poet_frozen_home frozen, bool fused,
                         const char *what)
{
    size_t len;
    const uint8_t *img = poet_engine_image(e, &len);
    poet_dev_memory need, predicted;
    poet_err err = {0};
    poet_export_options o = {poet_optimizer_default(POET_OPT_ADAM), 11, 0, NULL, NULL, frozen, fused};
    CHECK_MSG(!poet_dev_inspect(img, len, &need, &err) &&
                  !poet_export_memory(g, &o, r->sim.placed_peak_bytes, &predicted, &err) &&
                  predicted.total_bytes == need.total_bytes && predicted.persistent_bytes == need.persistent_bytes &&
                  predicted.flash_bytes == need.flash_bytes,
              "%s (frozen in %s%s): the device needs %" PRIu64 " B, the host predicts %" PRIu64 " B %s", what,
              frozen == POET_FROZEN_IN_FLASH ? "flash" : "RAM", fused ? ", fused" : "", need.total_bytes,
              predicted.total_bytes, err.msg);
}

static bool train(poet_engine *e, const poet_graph *g, char sha[65])
{
    uint64_t n = poet_shape_numel(&g->nodes[0].shape);
    float *x = malloc(n * sizeof *x);
    int32_t y[BATCH];
    poet_err err = {0};
    bool ok = x != NULL;
    for (int s = 0; s < STEPS && ok; s++) {
        double loss;
        rt_batch(g, 500 + (uint64_t)s, x, y);
        ok = !poet_engine_step(e, x, y, &loss, &err);
        if (!ok) fprintf(stderr, "step %d: %s\n", s, err.msg);
    }
    poet_dev_weights_sha256(poet_engine_device(e), sha);
    free(x);
    return ok;
}

/* Where the first parameter homed in flash lies in the parameter vector,
 * from the image's records; false when none is. */
static bool first_in_flash(const poet_engine *e, uint64_t *at)
{
    size_t len;
    const uint8_t *img = poet_engine_image(e, &len);
    const img_header *h = (const img_header *)(const void *)img;
    const knode *nodes = (const knode *)(const void *)(img + h->nodes_at);
    for (uint32_t v = 0; v < h->n_forward; v++)
        for (int part = 0; part < 2; part++) {
            uint64_t count;
            knode_part(&nodes[v], part, at, &count);
            if (count && nodes[v].home[part] == KHOME_FLASH) return true;
        }
    return false;
}

/* A state (or a whole vector) whose frozen weights differ is refused; the
 * same state with them as they are loads. */
static void check_state(poet_engine *flash, poet_engine *ram, const char *what)
{
    poet_dev *d = poet_engine_device(flash);
    size_t len = poet_dev_state_bytes(d);
    unsigned char *s = malloc(len);
    poet_err err = {0};
    poet_dev_state_save(d, s);
    CHECK_MSG(len == poet_dev_state_bytes(poet_engine_device(ram)) && !poet_dev_state_load(poet_engine_device(ram), s, len, &err),
              "%s: the flash engine's state does not load where all is in RAM: %s", what, err.msg);
    uint64_t at = 0, count;
    CHECK_MSG(first_in_flash(flash, &at), "%s: nothing is homed in flash", what);
    const float *all = poet_dev_weights(poet_engine_device(ram), &count);
    float x;
    memcpy(&x, s + 4 * at, 4);
    CHECK_MSG(x == all[at], "%s: the state's first frozen weight is not the model's", what);
    x += 1.0f;
    memcpy(s + 4 * at, &x, 4);
    char before[65], after[65];
    poet_dev_weights_sha256(d, before);
    CHECK_MSG(poet_dev_state_load(d, s, len, &err) == POET_ERR_INVALID && strstr(err.msg, "flash"),
              "%s: a state that changes weights in flash was not refused: %s", what, err.msg);
    poet_dev_weights_sha256(d, after);
    CHECK_MSG(strcmp(before, after) == 0, "%s: a refused state changed the weights", what);
    free(s);
}

/* A saved model loads into a fresh engine with the same homes, bit for bit. */
static void check_store(poet_engine *flash, const poet_graph *g, const rig *r, const char *what)
{
    poet_storage st;
    poet_err err = {0};
    poet_dev *d = poet_engine_device(flash);
    if (poet_storage_open_memory(poet_dev_store_bytes(d), &st, &err)) {
        CHECK_MSG(false, "%s: storage: %s", what, err.msg);
        return;
    }
    poet_engine *fresh = engine_for(g, r, POET_FROZEN_IN_FLASH, false);
    char want[65], got[65] = "";
    poet_dev_weights_sha256(d, want);
    CHECK_MSG(fresh && !poet_dev_store_save(d, &st.io, 0, &err) &&
                  !poet_dev_store_load(poet_engine_device(fresh), &st.io, 0, &err),
              "%s: store: %s", what, err.msg);
    if (fresh) poet_dev_weights_sha256(poet_engine_device(fresh), got);
    CHECK_MSG(strcmp(want, got) == 0, "%s: the stored model does not load to the same weights", what);
    poet_engine_free(fresh);
    poet_storage_close(&st);
}

/* An image that homes a trained tensor in flash is refused at inspection. */
static void check_hostile_home(const poet_engine *flash, const char *what)
{
    size_t len;
    const uint8_t *img = poet_engine_image(flash, &len);
    uint8_t *bad = malloc(len);
    memcpy(bad, img, len);
    const img_header *h = (const img_header *)(const void *)bad;
    knode *nodes = (knode *)(void *)(bad + h->nodes_at);
    int trained = -1;
    for (uint32_t v = 0; v < h->n_forward && trained < 0; v++)
        if (knode_part_trained(&nodes[v], 0)) trained = (int)v;
    poet_dev_memory need;
    poet_err err = {0};
    if (trained >= 0) {
        for (uint32_t v = 0; v < h->n_nodes; v++) /* its gradient nodes carry its homes */
            if ((int)v == trained || nodes[v].fwd == trained) nodes[v].home[0] = KHOME_FLASH;
        le_put(bad + len - 4, crc32_update(0, bad, len - 4), 4);
        CHECK_MSG(poet_dev_inspect(bad, len, &need, &err) == POET_ERR_PARSE && strstr(err.msg, "trained tensor homed in flash"),
                  "%s: an image homing trained node %d in flash was not refused: %s", what, trained, err.msg);
    }
    free(bad);
}

/* The fused update: the flash engine's bits, RAM less by all gradients but
 * the largest node's, and no split step. */
static void check_fused(const poet_graph *g, const rig *r, const char *want, uint64_t persistent, const char *what)
{
    poet_engine *e = engine_for(g, r, POET_FROZEN_IN_FLASH, true);
    CHECK_MSG(e != NULL, "%s: no fused engine", what);
    if (!e) return;
    check_memory(e, g, r, POET_FROZEN_IN_FLASH, true, what);
    uint64_t largest = 0, all = 0;
    for (int v = 0; v < g->n_forward; v++) {
        uint64_t t = poet_param_trained(g->nodes[v].op, &g->nodes[v].attrs, g->nodes[v].params);
        all += t, largest = t > largest ? t : largest;
    }
    const poet_engine_stats *s = poet_engine_get_stats(e);
    CHECK_MSG(persistent - s->persistent_bytes == 4 * (all - largest), "%s: fused saves %" PRIu64 " B, not %" PRIu64,
              what, persistent - s->persistent_bytes, 4 * (all - largest));
    char got[65];
    CHECK_MSG(train(e, g, got) && strcmp(got, want) == 0, "%s: the fused update gives %s, not %s", what, got, want);
    uint64_t n = poet_shape_numel(&g->nodes[0].shape), count;
    float *x = calloc(n, sizeof *x), loss;
    int32_t y[BATCH] = {0};
    poet_err err = {0};
    CHECK_MSG(poet_dev_gradient(poet_engine_device(e), x, y, &loss, &err) == POET_ERR_UNSUPPORTED &&
                  !poet_dev_gradients(poet_engine_device(e), &count),
              "%s: the split step of a fused image was not refused", what);
    free(x);
    poet_engine_free(e);
}

static int settings_run;

/* One random setting (planner, budget) of spec; a baseline may find no
 * schedule, and then nothing is checked. */
static void check_spec(const char *spec, uint64_t *rng)
{
    poet_graph g;
    poet_err err = {0};
    if (poet_zoo_build("cnn_digits", BATCH, &g, &err) || poet_graph_set_trainable(&g, spec, &err)) {
        CHECK_MSG(false, "%s: %s", spec, err.msg);
        return;
    }
    static const char *planners[] = {"keep-all", "chen-sqrt", "remat-dtr", "paging", "hybrid", "fast"};
    *rng = mix64(*rng);
    const char *planner = planners[*rng % 6];
    double fraction = 0.3 + 0.7 * (double)(*rng >> 11) / 9007199254740992.0;
    char what[128];
    snprintf(what, sizeof what, "%s, %s at %.2f", spec, planner, fraction);
    rig r;
    rig_start(&r, &g, planner, fraction, NULL, poet_optimizer_default(POET_OPT_ADAM), 11);
    poet_engine_free(r.e), r.e = NULL;
    poet_engine *ram = r.ok ? engine_for(&g, &r, POET_FROZEN_IN_RAM, false) : NULL;
    poet_engine *flash = r.ok ? engine_for(&g, &r, POET_FROZEN_IN_FLASH, false) : NULL;
    CHECK_MSG(!r.ok || (ram && flash), "%s: no engines", what); /* a baseline may find no schedule */
    settings_run += ram && flash;
    if (ram && flash) {
        poet_dev *d = poet_engine_device(flash);
        size_t len;
        const uint8_t *img = poet_engine_image(flash, &len);
        uint8_t *copy = malloc(len);
        memcpy(copy, img, len);
        uint64_t frozen = poet_dev_flash_params(d), count;
        CHECK_MSG(frozen == poet_graph_param_count(&g) - poet_graph_trained_count(&g),
                  "%s: %" PRIu64 " parameters in flash; %" PRIu64 " do not train", what, frozen,
                  poet_graph_param_count(&g) - poet_graph_trained_count(&g));
        const poet_engine_stats *sr = poet_engine_get_stats(ram), *sf = poet_engine_get_stats(flash);
        CHECK_MSG(sr->persistent_bytes - sf->persistent_bytes == 4 * frozen, "%s: RAM saved %" PRIu64 " for %" PRIu64
                  " bytes in flash", what, sr->persistent_bytes - sf->persistent_bytes, 4 * frozen);
        CHECK(poet_dev_weights(d, &count) == NULL && count == poet_graph_param_count(&g));
        char a[65], b[65];
        bool ok = train(ram, &g, a) && train(flash, &g, b);
        CHECK_MSG(ok && strcmp(a, b) == 0, "%s: flash homes give %s, all in RAM %s", what, b, a);
        CHECK_MSG(memcmp(copy, img, len) == 0, "%s: training wrote the image", what);
        float *all = malloc(4 * count);
        poet_dev_weights_copy(d, all);
        CHECK_MSG(memcmp(all, poet_dev_weights(poet_engine_device(ram), &count), 4 * count) == 0,
                  "%s: the gathered weights differ", what);
        free(all), free(copy);
        check_memory(ram, &g, &r, POET_FROZEN_IN_RAM, false, what);
        check_memory(flash, &g, &r, POET_FROZEN_IN_FLASH, false, what);
        check_state(flash, ram, what);
        check_store(flash, &g, &r, what);
        check_hostile_home(flash, what);
        check_fused(&g, &r, a, sf->persistent_bytes, what);
    }
    poet_engine_free(ram), poet_engine_free(flash);
    rig_free(&r);
    poet_graph_free(&g);
}

int main(int argc, char **argv)
{
    uint64_t seed = argc > 1 ? strtoull(argv[1], NULL, 10) : (uint64_t)time(NULL);
    printf("test_homes: seed %" PRIu64 " (test_homes SEED repeats it)\n", seed);
    static const char *specs[] = {"last:2", "biases", "last:1+frozen-bn", "biases+frozen-bn+masks"};
    for (int round = 0; round < 2; round++)
        for (size_t k = 0; k < sizeof specs / sizeof *specs; k++) {
            int before = settings_run;
            for (int draw = 0; draw < 8 && settings_run == before; draw++) check_spec(specs[k], &seed);
        }
    CHECK_MSG(settings_run == 8, "only %d of 8 specs and rounds found a schedule in 8 draws", settings_run);
    return check_report();
}
