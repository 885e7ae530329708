/* Every integer field of a device image, a checkpoint, a binary schedule
 * and a patch, set in turn to each boundary value (tests/fuzz/fields.h)
 * with the CRC made right: the readers must refuse what does not add up
 * and run what they accept without reading or writing out of bounds (the
 * sanitizer build of this test is what sees an overflow). A checkpoint
 * changed in any field must be refused by the run it would resume.
 *
 * With a directory argument, writes instead the device-image cases for the
 * firmware (tests/device.sh runs them on the emulated board):
 * image.bin (the image), cases.bin (u32 count, then per case u32 offset,
 * u32 width, u64 value, u32 CRC-32 of the changed image) and expected.txt
 * (per case the host's inspect status and memory total). */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "fuzz/exercise.h"
#include "fuzz/fields.h"
#include "rtutil.h"

/* cnn_digits at batch 1, planned to recompute and page (42% of its keep-all
 * peak, runtime factor 1.2), under the optimizer given. */
static bool plan_cnn(const char *train, int batch, rig *r, poet_graph *g, poet_optimizer opt)
{
    poet_err err = {0};
    if (poet_zoo_build("cnn_digits", batch, g, &err) || (train && poet_graph_set_trainable(g, train, &err))) {
        fprintf(stderr, "boundaries: %s\n", err.msg);
        return false;
    }
    rig_start(r, g, "hybrid", 0.42, NULL, opt, 7);
    return r->ok;
}

/* ---- device images ---- */

typedef struct image_sweep {
    long mutants, refused, accepted;
    FILE *cases, *expected; /* only write the firmware's cases: every header field, and of each kind of record
                             * the first (each costs the board an inspection, and a step where accepted) */
    long n_cases;
} image_sweep;

static void write_case(image_sweep *w, const field *f, uint64_t value, const uint8_t *m, size_t len)
{
    uint64_t *aligned = malloc(len + 8);
    poet_dev_memory need = {0};
    memcpy(aligned, m, len);
    poet_status st = poet_dev_inspect(aligned, len, &need, NULL);
    uint32_t at = (uint32_t)f->at, width = (uint32_t)f->width, crc;
    memcpy(&crc, m + len - 4, 4);
    fwrite(&at, 4, 1, w->cases), fwrite(&width, 4, 1, w->cases), fwrite(&value, 8, 1, w->cases);
    fwrite(&crc, 4, 1, w->cases);
    fprintf(w->expected, "%ld %s=%llu inspect %d total %llu\n", w->n_cases++, f->name, (unsigned long long)value,
            (int)st, st ? 0ull : (unsigned long long)need.total_bytes);
    free(aligned);
}

static void on_image(void *ctx, const field *f, uint64_t value, const uint8_t *m, size_t len)
{
    image_sweep *w = ctx;
    if (w->cases) {
        if (f->record == 0) write_case(w, f, value, m, len);
        return;
    }
    image_verdict v = exercise_device_image(m, len, false);
    w->mutants++, w->refused += v == IMAGE_REFUSED, w->accepted += v != IMAGE_REFUSED;
    if (getenv("POET_BOUNDARIES_VERBOSE") && v != IMAGE_REFUSED)
        printf("  accepted: %s at %zu = %llu (%s)\n", f->name, f->at, (unsigned long long)value,
               v == IMAGE_RAN ? "ran" : "checked");
}

static void sweep_image(const uint8_t *img, size_t len, const char *what, image_sweep *w)
{
    CHECK_MSG(exercise_device_image(img, len, false) == IMAGE_RAN, "%s: the unchanged image does not run", what);
    long n = fields_sweep(KIND_IMAGE, img, len, on_image, w);
    CHECK_MSG(n > 1000, "%s: %ld mutants", what, n);
    if (!w->cases) {
        printf("%s: %ld mutants: %ld refused, %ld accepted (and run where they fit)\n", what, n, w->refused,
               w->accepted);
        CHECK(w->refused > 0 && w->accepted > 0);
    }
}

static void test_images(const char *dir)
{
    image_sweep w = {0};
    char path[4096];
    rig r;
    poet_graph g;
    if (!plan_cnn(NULL, 1, &r, &g, poet_optimizer_default(POET_OPT_SGD))) {
        CHECK_MSG(false, "no image to mutate");
        return;
    }
    size_t len;
    const uint8_t *img = poet_engine_image(r.e, &len);
    if (dir) {
        snprintf(path, sizeof path, "%s/image.bin", dir);
        FILE *f = fopen(path, "wb");
        CHECK(f && fwrite(img, 1, len, f) == len);
        if (f) fclose(f);
        snprintf(path, sizeof path, "%s/cases.bin", dir);
        w.cases = fopen(path, "wb");
        snprintf(path, sizeof path, "%s/expected.txt", dir);
        w.expected = fopen(path, "w");
        CHECK(w.cases && w.expected);
        uint32_t zero = 0;
        if (!w.cases || !w.expected) return;
        fwrite(&zero, 4, 1, w.cases); /* the count, written at the end */
    }
    sweep_image(img, len, "device image (cnn_digits, SGD, recomputes and pages)", &w);
    rig_free(&r);
    poet_graph_free(&g);
    if (w.cases) {
        uint32_t count = (uint32_t)w.n_cases;
        fseek(w.cases, 0, SEEK_SET);
        fwrite(&count, 4, 1, w.cases);
        fclose(w.cases);
        fclose(w.expected);
        printf("wrote %ld device-image cases for the firmware to %s\n", w.n_cases, dir);
        return;
    }
    /* channel lists and Adam's second moment: a partly trained layer */
    image_sweep w2 = {0};
    if (plan_cnn("last:2+ratio:0.5", 2, &r, &g, poet_optimizer_default(POET_OPT_ADAM))) {
        img = poet_engine_image(r.e, &len);
        sweep_image(img, len, "device image (cnn_digits, Adam, last:2+ratio:0.5)", &w2);
    } else {
        CHECK_MSG(false, "no partly trained image to mutate");
    }
    rig_free(&r);
    poet_graph_free(&g);
}

/* ---- checkpoints ---- */

typedef struct resume_case {
    const poet_graph *g;
    const poet_dataset *d;
    const char *path;
} resume_case;

/* Resumes from the checkpoint at c->path to step 6; the weights' SHA-256
 * into sha where it ran. */
static poet_status resume(const resume_case *c, char sha[65], poet_err *err)
{
    rig r;
    rig_start(&r, c->g, "hybrid", 0.42, NULL, poet_optimizer_default(POET_OPT_SGD), 7);
    if (!r.ok) return poet_fail(err, POET_ERR_INVALID, "no engine");
    poet_train_options o = {0, 6, c->path, 4, true, NULL, NULL, false};
    poet_train_report rep;
    poet_status st = poet_train(r.e, c->d, &o, &rep, err);
    if (!st) poet_dev_weights_sha256(poet_engine_device(r.e), sha);
    rig_free(&r);
    return st;
}

static bool write_bytes(const char *path, const uint8_t *p, size_t n)
{
    FILE *f = fopen(path, "wb");
    bool ok = f && fwrite(p, 1, n, f) == n;
    if (f) fclose(f);
    return ok;
}

typedef struct checkpoint_sweep {
    const resume_case *c;
    long refused;
} checkpoint_sweep;

static void on_checkpoint(void *ctx, const field *f, uint64_t value, const uint8_t *m, size_t len)
{
    checkpoint_sweep *w = ctx;
    poet_checkpoint_meta meta;
    size_t state;
    poet_checkpoint_parse(m, len, &meta, &state, NULL); /* on its own, too */
    CHECK(write_bytes(w->c->path, m, len));
    char sha[65];
    poet_status st = resume(w->c, sha, NULL);
    w->refused += st != POET_OK;
    CHECK_MSG(st != POET_OK, "a checkpoint with %s = %llu resumed", f->name, (unsigned long long)value);
}

static void test_checkpoints(void)
{
    poet_graph g;
    poet_err err = {0};
    CHECK(!poet_zoo_build("cnn_digits", 2, &g, &err));
    poet_dataset d;
    rt_fake_digits(&d, 40, 4); /* 20 batches an epoch */
    char dir[] = "/tmp/poet-boundaries-XXXXXX", path[64];
    CHECK(mkdtemp(dir) != NULL);
    snprintf(path, sizeof path, "%s/c.poet", dir);
    resume_case c = {&g, &d, path};
    char whole[65] = "", resumed[65] = "";
    {
        rig r;
        rig_start(&r, &g, "hybrid", 0.42, NULL, poet_optimizer_default(POET_OPT_SGD), 7);
        poet_train_options o = {0, 5, path, 4, false, NULL, NULL, false}; /* a checkpoint at step 4 */
        poet_train_report rep;
        CHECK_MSG(r.ok && !poet_train(r.e, &d, &o, &rep, &err), "%s", err.msg);
        rig_free(&r);
    }
    char *data = NULL;
    size_t len = 0;
    CHECK(!poet_read_file(path, &data, &len, &err));
    uint8_t *orig = malloc(len);
    memcpy(orig, data, len);
    free(data);
    /* the unchanged checkpoint resumes to the uninterrupted run's weights */
    {
        rig r;
        rig_start(&r, &g, "hybrid", 0.42, NULL, poet_optimizer_default(POET_OPT_SGD), 7);
        poet_train_options o = {0, 6, NULL, 4, false, NULL, NULL, false};
        poet_train_report rep;
        CHECK(r.ok && !poet_train(r.e, &d, &o, &rep, &err));
        if (r.ok) poet_dev_weights_sha256(poet_engine_device(r.e), whole);
        rig_free(&r);
    }
    CHECK_MSG(!resume(&c, resumed, &err) && strcmp(whole, resumed) == 0, "the unchanged checkpoint: %s", err.msg);
    checkpoint_sweep w = {&c, 0};
    long n = fields_sweep(KIND_CHECKPOINT, orig, len, on_checkpoint, &w);
    printf("checkpoint: %ld mutants: %ld refused by the run they would resume\n", n, w.refused);
    CHECK(n > 100 && w.refused == n);
    free(orig);
    unlink(path);
    rmdir(dir);
    poet_dataset_free(&d);
    poet_graph_free(&g);
}

/* ---- binary schedules ---- */

typedef struct schedule_sweep {
    const rig *r;
    const poet_graph *g;
    long refused, valid;
} schedule_sweep;

/* A mutant that decodes is exercised; one that is valid for the graph must
 * also build, place and export. */
static void on_schedule(void *ctx, const field *f, uint64_t value, const uint8_t *m, size_t len)
{
    schedule_sweep *w = ctx;
    poet_schedule s;
    (void)f, (void)value;
    if (poet_schedule_decode(m, len, &s, NULL)) {
        w->refused++;
        return;
    }
    poet_instance none = {0};
    exercise_schedule(&s, &none);
    poet_problem p;
    if (!poet_problem_init(&p, &w->r->inst, s.budget_bytes, s.runtime_factor, NULL)) {
        if (!poet_schedule_validate(&p, &s, NULL)) {
            uint8_t *img = NULL;
            size_t img_len = 0;
            poet_err err = {0};
            poet_export_options o = {poet_optimizer_default(POET_OPT_SGD), 7, 0, NULL, NULL, POET_FROZEN_IN_RAM, false};
            CHECK_MSG(!poet_export_image(w->g, &p, &s, &o, &img, &img_len, &err), "%s", err.msg);
            free(img);
            w->valid++;
        }
        poet_problem_free(&p);
    }
    poet_schedule_free(&s);
}

static void test_schedules(void)
{
    rig r;
    poet_graph g;
    if (!plan_cnn(NULL, 2, &r, &g, poet_optimizer_default(POET_OPT_SGD))) {
        CHECK_MSG(false, "no schedule to mutate");
        return;
    }
    poet_err err = {0};
    uint8_t *bin = NULL;
    size_t len = 0;
    CHECK(!poet_schedule_encode(&r.plan.schedule, &bin, &len, &err));
    schedule_sweep w = {&r, &g, 0, 0};
    long n = bin ? fields_sweep(KIND_SCHEDULE, bin, len, on_schedule, &w) : 0;
    printf("binary schedule: %ld mutants: %ld refused, %ld decoded and valid\n", n, w.refused, w.valid);
    CHECK(n > 100 && w.refused > 0);
    free(bin);
    rig_free(&r);
    poet_graph_free(&g);
}

/* ---- patches ---- */

static void on_patch(void *ctx, const field *f, uint64_t value, const uint8_t *m, size_t len)
{
    (void)f, (void)value;
    *(long *)ctx += exercise_patch(m, len, false);
}

static void test_patches(void)
{
    char *data = NULL;
    size_t len = 0;
    poet_err err = {0};
    CHECK_MSG(!poet_read_file(POET_TEST_DATA "/../fuzz/corpus/patch.bin", &data, &len, &err), "%s", err.msg);
    if (!data) return;
    CHECK_MSG(exercise_patch((const uint8_t *)data, len, false), "the unchanged patch does not apply");
    long applied = 0, n = fields_sweep(KIND_PATCH, (const uint8_t *)data, len, on_patch, &applied);
    printf("patch: %ld mutants: %ld applied (fields a device does not check against itself)\n", n, applied);
    CHECK(n > 100 && applied < n);
    free(data);
}

int main(int argc, char **argv)
{
    if (argc > 1) { /* only the firmware's cases */
        test_images(argv[1]);
        return check_report();
    }
    test_images(NULL);
    test_checkpoints();
    test_schedules();
    test_patches();
    return check_report();
}
