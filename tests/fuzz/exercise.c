/* What the fuzz targets and the boundary sweep do with an input: every
 * parser that reads what users hand poet, and, for what parses, the work
 * that follows (tests/fuzz/fuzz_parsers.c says what each one exercises). */
#include "exercise.h"

#include <stdlib.h>
#include <string.h>

#include <zlib.h>

#include "../../src/runtime/data_formats.h"

void exercise_schedule(poet_schedule *s, poet_instance *g)
{
    poet_problem p;
    if (g->T && !poet_problem_init(&p, g, s->budget_bytes, s->runtime_factor, NULL)) {
        poet_sim sim;
        if (!poet_schedule_validate(&p, s, NULL)) poet_simulate(&p, s, &sim, NULL, NULL);
        poet_problem_free(&p);
    }
    uint8_t *bin = NULL;
    size_t len = 0;
    if (!poet_schedule_encode(s, &bin, &len, NULL)) {
        poet_schedule back;
        if (poet_schedule_decode(bin, len, &back, NULL) || !poet_schedule_equal(s, &back)) abort();
        poet_schedule_free(&back);
    }
    free(bin);
}

/* Storage in memory, done at once. */
static poet_status mem_start(void *ctx, bool write, uint64_t offset, void *ram, size_t bytes, long *ticket,
                             poet_err *err)
{
    (void)err;
    uint8_t *store = ctx;
    if (write)
        memcpy(store + offset, ram, bytes);
    else
        memcpy(ram, store + offset, bytes);
    *ticket = 0;
    return POET_OK;
}

static poet_status mem_wait(void *ctx, long ticket, poet_err *err)
{
    (void)ctx, (void)ticket, (void)err;
    return POET_OK;
}

static poet_status mem_sync(void *ctx, poet_err *err)
{
    (void)ctx, (void)err;
    return POET_OK;
}

static void mem_reset(void *ctx) { (void)ctx; }

enum { FUZZ_MEMORY_CAP = 256 << 10 }; /* images that need more are only checked, not run */

image_verdict exercise_device_image(const uint8_t *data, size_t size, bool fix_crc)
{
    uint64_t *image = malloc(size / 8 + 1 > 0 ? (size / 8 + 1) * 8 : 8); /* 8-byte aligned */
    if (!image) return IMAGE_REFUSED;
    memcpy(image, data, size);
    uint8_t *bytes = (uint8_t *)image;
    if (fix_crc && size >= 24 + 4) {
        for (int i = 0; i < 8; i++) bytes[16 + i] = (uint8_t)((uint64_t)size >> (8 * i)); /* the declared length */
        uint32_t crc = (uint32_t)crc32(0L, bytes, (uInt)(size - 4));
        for (int i = 0; i < 4; i++) bytes[size - 4 + i] = (uint8_t)(crc >> (8 * i));
    }
    poet_dev_memory need;
    image_verdict v = IMAGE_REFUSED;
    if (!poet_dev_inspect(image, size, &need, NULL)) v = IMAGE_CHECKED;
    if (v && need.total_bytes <= FUZZ_MEMORY_CAP && need.storage_bytes <= FUZZ_MEMORY_CAP) {
        void *memory = aligned_alloc(8, (size_t)need.total_bytes + 8);
        uint8_t *store = calloc(1, (size_t)need.storage_bytes + 1);
        poet_dev_storage st = {POET_DEV_STORAGE_VERSION, store, need.storage_bytes, mem_start, mem_wait, mem_sync, mem_reset};
        poet_dev *d = NULL;
        if (memory && store && !poet_dev_open(image, size, memory, (size_t)need.total_bytes, &st, NULL, &d, NULL)) {
            float *x, loss;
            int32_t *y;
            int rows, classes, correct;
            uint64_t per;
            v = IMAGE_OPENED;
            poet_dev_batch_shape(d, &rows, &per, &classes);
            poet_dev_batch_buffers(d, &x, &y);
            memset(x, 0, (size_t)rows * (size_t)per * sizeof *x);
            memset(y, 0, (size_t)rows * sizeof *y);
            if (!poet_dev_step(d, x, y, &loss, NULL) && !poet_dev_eval(d, x, y, rows, &loss, &correct, NULL)) v = IMAGE_RAN;
        }
        free(memory);
        free(store);
    }
    free(image);
    return v;
}

/* The device patches are checked against: mlp_digits at batch 8, keep-all,
 * SGD, seed 1 (corpus/patch.bin is a patch for it), opened once. */
/* A profile that parsed prices a graph to finite costs (a calibration's
 * per-op costs included). */
static void price_with(const poet_profile *dev)
{
    static poet_graph g;
    static bool built;
    if (!built && poet_zoo_build("cnn_digits", 2, &g, NULL)) return;
    built = true;
    poet_instance inst;
    if (poet_instance_from_graph(&g, dev, &inst, NULL)) return;
    for (int v = 0; v < inst.T; v++)
        if (!(inst.nodes[v].time_s >= 0 && inst.nodes[v].time_s < 1e300 && inst.nodes[v].compute_j >= 0)) abort();
    poet_instance_free(&inst);
}

static poet_dev *patch_device(void)
{
    static poet_dev *d;
    static uint64_t *image, *memory;
    if (d || image) return d;
    poet_graph g;
    poet_profile dev;
    poet_instance inst;
    poet_problem p;
    poet_plan_result plan;
    poet_dev_memory need;
    uint8_t *img = NULL;
    size_t len = 0;
    poet_plan_options po = {.threads = 1, .deterministic = true};
    poet_export_options eo = {poet_optimizer_default(POET_OPT_SGD), 1, 0, NULL, NULL, POET_FROZEN_IN_RAM, false};
    if (poet_zoo_build("mlp_digits", 8, &g, NULL)) return NULL;
    if (!poet_profile_find("m4", &dev, NULL) && !poet_instance_from_graph(&g, &dev, &inst, NULL)) {
        if (!poet_problem_init(&p, &inst, 0, 1e6, NULL)) {
            p.budget_bytes = p.keep_all_peak_bytes;
            if (!poet_plan("keep-all", &p, &po, &plan, NULL)) {
                poet_export_image(&g, &p, &plan.schedule, &eo, &img, &len, NULL);
                poet_plan_result_free(&plan);
            }
            poet_problem_free(&p);
        }
        poet_instance_free(&inst);
    }
    poet_graph_free(&g);
    image = malloc(len + 8);
    if (img && image) memcpy(image, img, len);
    free(img);
    if (image && !poet_dev_inspect(image, len, &need, NULL) && (memory = malloc(need.total_bytes + 8)))
        poet_dev_open(image, len, memory, need.total_bytes, NULL, NULL, &d, NULL);
    return d;
}

bool exercise_patch(const uint8_t *data, size_t size, bool fix_crc)
{
    poet_dev *d = patch_device();
    uint8_t *patch = malloc(size + 1);
    bool applied = false;
    if (!d || !patch) {
        free(patch);
        return false;
    }
    memcpy(patch, data, size);
    if (fix_crc && size >= 4) {
        uint32_t crc = (uint32_t)crc32(0L, patch, (uInt)(size - 4));
        for (int i = 0; i < 4; i++) patch[size - 4 + i] = (uint8_t)(crc >> (8 * i));
    }
    poet_dev_patch_info info;
    if (!poet_dev_patch_check(d, patch, size, &info, NULL)) {
        size_t n = poet_dev_state_bytes(d);
        void *keep = malloc(n);
        if (keep) { /* apply, then put the device back as it was for the next input */
            poet_dev_state_save(d, keep);
            if (poet_dev_patch_apply(d, patch, size, NULL)) abort(); /* checked, so it must apply */
            applied = true;
            poet_dev_state_load(d, keep, n, NULL);
            free(keep);
        }
    }
    free(patch);
    return applied;
}

/* An .npy's elements, an .npz's arrays and a CSV table, as poet --data reads them. */
static void exercise_data_file(const uint8_t *data, size_t size)
{
    named_file f = {"fuzz", data, size};
    nd_array a;
    volatile double sum = 0;
    if (!data_parse_npy(&f, &a, NULL))
        for (uint64_t i = 0; i < a.count && i < 4096; i++) sum += data_element(&a, i);
    uint8_t *buf[NPZ_ARRAYS] = {0};
    size_t len[NPZ_ARRAYS];
    data_read_npz(&f, buf, len, NULL);
    for (int k = 0; k < NPZ_ARRAYS; k++) {
        named_file e = {"fuzz entry", buf[k], len[k]};
        if (buf[k] && !data_parse_npy(&e, &a, NULL) && a.count) sum += data_element(&a, a.count - 1);
        free(buf[k]);
    }
    char *text = malloc(size + 1);
    if (!text) return;
    memcpy(text, data, size);
    text[size] = 0;
    table t;
    data_parse_csv(&(named_file){"fuzz", (const uint8_t *)text, size}, &t, NULL);
    free(t.x), free(t.y), free(text);
}

void exercise_parsers(const uint8_t *data, size_t size)
{
    const char *text = (const char *)data;
    poet_instance inst;
    if (!poet_instance_parse_json(text, size, &inst, NULL)) {
        poet_instance_stats st;
        poet_instance_stats_compute(&inst, &st, NULL);
        poet_instance_free(&inst);
    }
    poet_profile dev;
    if (!poet_profile_parse_json(text, size, &dev, NULL)) price_with(&dev);
    poet_schedule s;
    poet_instance g;
    if (!poet_schedule_parse_json(text, size, &s, &g, NULL)) {
        exercise_schedule(&s, &g);
        poet_schedule_free(&s);
        poet_instance_free(&g);
    }
    if (!poet_schedule_decode(data, size, &s, NULL)) poet_schedule_free(&s);
    poet_checkpoint_meta meta;
    size_t state_len;
    poet_checkpoint_parse(data, size, &meta, &state_len, NULL);
    exercise_device_image(data, size, false);
    exercise_device_image(data, size, true);
    exercise_patch(data, size, false);
    exercise_patch(data, size, true);
    poet_onnx_model *m = NULL;
    if (!poet_onnx_import_bytes(data, size, "fuzz", NULL, &m, NULL)) poet_onnx_free(m);
    exercise_data_file(data, size);
}
