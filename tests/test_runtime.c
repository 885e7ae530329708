/* The runtime: bit-identical training under every schedule, the arena's
 * measured peak, the device accounting, storage faults at each call index,
 * checkpoints and bit-exact resumption. */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <unistd.h>

#include "check.h"
#include "rtutil.h"

enum { BATCH = 8, STEPS = 50 };

typedef struct run_result {
    bool ok;
    double loss[STEPS];
    char sha[65];
    long recomputations;
    uint64_t paged;
} run_result;

static poet_optimizer sgd(void) { return poet_optimizer_default(POET_OPT_SGD); }

static void train_steps(rig *r, const poet_graph *g, int steps, run_result *out)
{
    uint64_t n = poet_shape_numel(&g->nodes[0].shape);
    float *x = malloc(n * sizeof *x);
    int32_t y[BATCH];
    poet_err err = {0};
    out->ok = true;
    for (int s = 0; s < steps && out->ok; s++) {
        rt_batch(g, 1000 + (uint64_t)(s % 2), x, y); /* two batches: the loss can fall */
        out->ok = !poet_engine_step(r->e, x, y, &out->loss[s], &err);
        if (!out->ok) fprintf(stderr, "step %d: %s\n", s, err.msg);
    }
    poet_dev_weights_sha256(poet_engine_device(r->e), out->sha);
    free(x);
}

/* Checks what the engine measured against what the schedule promised. */
static void check_accounting(const char *what, const rig *r, int steps)
{
    const poet_engine_stats *s = poet_engine_get_stats(r->e);
    CHECK_MSG(s->arena_peak_bytes <= r->p.budget_bytes, "%s: arena peak %llu above budget %llu", what,
              (unsigned long long)s->arena_peak_bytes, (unsigned long long)r->p.budget_bytes);
    CHECK_MSG(s->arena_peak_bytes == s->arena_bytes && s->arena_bytes == r->sim.placed_peak_bytes,
              "%s: measured peak %llu, arena %llu, planned placement %llu", what,
              (unsigned long long)s->arena_peak_bytes, (unsigned long long)s->arena_bytes,
              (unsigned long long)r->sim.placed_peak_bytes);
    CHECK_MSG(fabs(s->device_energy_j - steps * r->sim.energy_j) <= 1e-9 * steps * r->sim.energy_j,
              "%s: device energy %.12g, simulator %.12g per step", what, s->device_energy_j, r->sim.energy_j);
    CHECK_MSG(s->recomputations == (long)steps * r->sim.recomputations && s->page_outs == (long)steps * r->sim.page_outs &&
                  s->page_ins == (long)steps * r->sim.page_ins,
              "%s: %ld recomputations, %ld page-outs, %ld page-ins over %d steps; the simulator says %d, %d, %d per step",
              what, s->recomputations, s->page_outs, s->page_ins, steps, r->sim.recomputations, r->sim.page_outs,
              r->sim.page_ins);
}

typedef struct config {
    const char *planner;
    double fraction;
} config;

static void test_model_bit_identity(const char *model)
{
    static const config configs[] = {{"keep-all", 0}, {"remat-dtr", 0.5}, {"paging", 0.5},
                                     {"hybrid", 0.25}, {"portfolio", 0.25}, {"remat-dtr", 0.25},
                                     {"remat-dtr", 0.8}};
    poet_graph g;
    poet_err err = {0};
    CHECK_MSG(!poet_zoo_build(model, BATCH, &g, &err), "%s: %s", model, err.msg);
    run_result base = {0};
    long recomputed = 0;
    uint64_t paged = 0;
    for (size_t c = 0; c < sizeof configs / sizeof *configs; c++) {
        rig r;
        rig_start(&r, &g, configs[c].planner, configs[c].fraction, NULL, sgd(), 7);
        char what[96];
        snprintf(what, sizeof what, "%s %s at %.0f%%", model, configs[c].planner, 100 * configs[c].fraction);
        if (c == 0) CHECK_MSG(r.ok, "%s: keep-all must run", model);
        if (!r.ok) {
            printf("%s: no schedule (%s)\n", what, r.plan.note);
            rig_free(&r);
            continue;
        }
        run_result res = {0};
        train_steps(&r, &g, STEPS, &res);
        CHECK_MSG(res.ok, "%s: training failed", what);
        check_accounting(what, &r, STEPS);
        const poet_engine_stats *s = poet_engine_get_stats(r.e);
        recomputed += s->recomputations;
        paged += s->paged_out_bytes;
        printf("%s: budget %llu B (keep-all %llu), arena %llu B, %ld recomputations, %llu B paged, sha %.16s\n", what,
               (unsigned long long)r.p.budget_bytes, (unsigned long long)r.p.keep_all_peak_bytes,
               (unsigned long long)s->arena_bytes, s->recomputations, (unsigned long long)s->paged_out_bytes, res.sha);
        if (c == 0) {
            base = res;
        } else {
            CHECK_MSG(strcmp(base.sha, res.sha) == 0, "%s: weights differ from keep-all", what);
            CHECK_MSG(memcmp(base.loss, res.loss, sizeof base.loss) == 0, "%s: losses differ from keep-all", what);
        }
        rig_free(&r);
    }
    CHECK_MSG(recomputed > 0, "%s: no schedule recomputed anything", model);
    CHECK_MSG(paged > 0, "%s: no schedule paged anything", model);
    CHECK_MSG(base.loss[STEPS - 1] < base.loss[0], "%s: loss did not fall (%g -> %g)", model, base.loss[0],
              base.loss[STEPS - 1]);
    poet_graph_free(&g);
}

/* A storage failure voids its step: an error naming it, weights unchanged,
 * and the engine can go on. Every call index of every kind is failed. */
static void test_storage_faults(void)
{
    poet_graph g;
    poet_err err = {0};
    CHECK(!poet_zoo_build("mlp_fashion", BATCH, &g, &err));
    long calls[3] = {0};
    for (int kind = 0; kind < 3; kind++) {
        for (long at = 1;; at++) {
            poet_storage_faults f = {0};
            long *target = kind == 0 ? &f.fail_write_at : kind == 1 ? &f.fail_read_at : &f.fail_sync_at;
            *target = at;
            poet_storage mem, faulty;
            CHECK(!poet_storage_open_memory(1 << 20, &mem, &err));
            CHECK(!poet_storage_with_faults(&mem, &f, &faulty, &err));
            rig r;
            rig_start(&r, &g, "paging", 0.5, &faulty, sgd(), 3);
            CHECK_MSG(r.ok, "fault rig");
            if (!r.ok) break;
            run_result before = {0}, after = {0};
            train_steps(&r, &g, 1, &before); /* one good step first, unless it is the one to fail */
            bool failed_first = !before.ok;
            uint64_t n = poet_shape_numel(&g.nodes[0].shape);
            float *x = malloc(n * sizeof *x);
            int32_t y[BATCH];
            rt_batch(&g, 99, x, y);
            double l;
            poet_err e2 = {0};
            poet_status st = failed_first ? POET_OK : poet_engine_step(r.e, x, y, &l, &e2);
            poet_dev_weights_sha256(poet_engine_device(r.e), after.sha);
            long seen = kind == 0 ? f.writes : kind == 1 ? f.reads : f.syncs;
            if (!failed_first && !st && seen < at) { /* past the last call of two steps */
                calls[kind] = at - 1;
                free(x);
                rig_free(&r);
                break;
            }
            if (!failed_first) {
                CHECK_MSG(st == POET_ERR_IO && strstr(e2.msg, "injected"), "kind %d call %ld: %s", kind, at, e2.msg);
                CHECK_MSG(strcmp(before.sha, after.sha) == 0, "kind %d call %ld: a failed step changed the weights", kind,
                          at);
            }
            /* the engine recovers: the next step runs */
            f.fail_write_at = f.fail_read_at = f.fail_sync_at = 0;
            CHECK_MSG(!poet_engine_step(r.e, x, y, &l, &e2), "kind %d call %ld: no recovery: %s", kind, at, e2.msg);
            free(x);
            rig_free(&r);
        }
    }
    printf("storage faults: failed each of %ld writes, %ld reads, %ld syncs of two steps\n", calls[0], calls[1],
           calls[2]);
    CHECK(calls[0] > 0 && calls[1] > 0 && calls[2] > 0);
    poet_graph_free(&g);
}

static void train_run(const poet_graph *g, const poet_dataset *d, const char *ckpt, long steps, bool resume,
                      poet_storage *storage, poet_status *st, char sha[65], poet_err *err)
{
    rig r;
    rig_start(&r, g, "hybrid", 0.25, storage, poet_optimizer_default(POET_OPT_ADAM), 11);
    if (!r.ok) {
        *st = POET_ERR_INVALID;
        return;
    }
    poet_train_options o = {0, steps, ckpt, 4, resume, NULL, NULL, false};
    poet_train_report rep;
    *st = poet_train(r.e, d, &o, &rep, err);
    poet_dev_weights_sha256(poet_engine_device(r.e), sha);
    rig_free(&r);
}

static void test_checkpoints(void)
{
    poet_graph g;
    poet_err err = {0};
    CHECK(!poet_zoo_build("cnn_digits", BATCH, &g, &err));
    poet_dataset d;
    rt_fake_digits(&d, 80, 16); /* 10 batches an epoch */
    char dir[] = "/tmp/poet-ckpt-XXXXXX", path[64];
    CHECK(mkdtemp(dir) != NULL);
    snprintf(path, sizeof path, "%s/c.poet", dir);
    poet_status st;
    char whole[65], part[65], resumed[65];
    train_run(&g, &d, NULL, 25, false, NULL, &st, whole, &err);
    CHECK_MSG(!st, "uninterrupted: %s", err.msg);
    train_run(&g, &d, path, 14, false, NULL, &st, part, &err); /* stops mid-epoch, checkpoint at step 12 */
    CHECK(!st);
    poet_checkpoint_meta m = {0};
    char *data = NULL;
    size_t len = 0, n = 0;
    CHECK(!poet_read_file(path, &data, &len, &err));
    CHECK(!poet_checkpoint_parse((const uint8_t *)data, len, &m, &n, &err));
    CHECK_MSG(m.step == 14 && m.epoch == 1 && m.batch_in_epoch == 4, "checkpoint at step %ld epoch %ld batch %ld",
              m.step, m.epoch, m.batch_in_epoch);
    train_run(&g, &d, path, 25, true, NULL, &st, resumed, &err);
    CHECK_MSG(!st, "resume: %s", err.msg);
    CHECK_MSG(strcmp(whole, resumed) == 0, "resumed run ends with other weights than an uninterrupted one");
    CHECK_MSG(strcmp(whole, part) != 0, "the partial run should differ");
    /* every corruption of the file is refused */
    int refused = 0;
    for (size_t i = 0; i < len; i += len / 97 + 1) {
        data[i] ^= 0x20;
        refused += poet_checkpoint_parse((const uint8_t *)data, len, &m, &n, &err) != POET_OK;
        data[i] ^= 0x20;
    }
    CHECK_MSG(refused == (int)((len + len / 97) / (len / 97 + 1)), "a flipped byte went unnoticed");
    CHECK(poet_checkpoint_parse((const uint8_t *)data, len - 1, &m, &n, &err) != POET_OK);
    /* a storage failure mid-run: a clear error, and the last checkpoint intact */
    char *good = NULL;
    size_t good_len = 0;
    train_run(&g, &d, path, 8, false, NULL, &st, part, &err);
    CHECK(!poet_read_file(path, &good, &good_len, &err));
    poet_storage_faults f = {.fail_write_at = 10};
    poet_storage mem, faulty;
    CHECK(!poet_storage_open_memory(1 << 22, &mem, &err));
    CHECK(!poet_storage_with_faults(&mem, &f, &faulty, &err));
    train_run(&g, &d, path, 25, true, &faulty, &st, part, &err);
    CHECK_MSG(st == POET_ERR_IO && strstr(err.msg, "injected"), "fault mid-run: %d %s", st, err.msg);
    char *after = NULL;
    size_t after_len = 0;
    CHECK(!poet_read_file(path, &after, &after_len, &err));
    CHECK_MSG(!poet_checkpoint_parse((const uint8_t *)after, after_len, &m, &n, &err), "checkpoint after the fault: %s",
              err.msg);
    printf("checkpoints: fault at storage write 10 stopped the run; checkpoint holds step %ld\n", m.step);
    CHECK(m.step >= 8 && m.step < 25);
    train_run(&g, &d, path, 25, true, NULL, &st, resumed, &err);
    CHECK_MSG(!st && strcmp(whole, resumed) == 0, "resuming after the fault reaches the uninterrupted weights");
    free(good), free(after), free(data);
    /* every storage call of a run fails in turn: each time an error, a
     * checkpoint that parses and lies before the failure, and a resumption
     * that reaches the uninterrupted weights */
    int runs = 0, intact = 0;
    for (int kind = 0; kind < 3; kind++)
        for (long at = 1; at <= 12; at++) {
            unlink(path);
            poet_storage_faults ff = {0};
            *(kind == 0 ? &ff.fail_write_at : kind == 1 ? &ff.fail_read_at : &ff.fail_sync_at) = at;
            CHECK(!poet_storage_open_memory(1 << 22, &mem, &err));
            CHECK(!poet_storage_with_faults(&mem, &ff, &faulty, &err));
            train_run(&g, &d, path, 25, false, &faulty, &st, part, &err);
            if (st == POET_OK) break; /* past the run's last call of this kind */
            runs++;
            char *img = NULL;
            size_t img_len = 0;
            bool have = access(path, F_OK) == 0;
            m.step = 0;
            if (have && (poet_read_file(path, &img, &img_len, &err) ||
                         poet_checkpoint_parse((const uint8_t *)img, img_len, &m, &n, &err)))
                have = false, m.step = -1;
            free(img);
            train_run(&g, &d, path, 25, true, NULL, &st, resumed, &err);
            intact += st == POET_OK && m.step >= 0 && strcmp(whole, resumed) == 0;
        }
    printf("checkpoints: %d runs stopped by a storage fault, %d resumed to the uninterrupted weights\n", runs, intact);
    CHECK(runs >= 12 && intact == runs);
    unlink(path);
    rmdir(dir);
    poet_dataset_free(&d);
    poet_graph_free(&g);
}

/* SGD without momentum keeps no state from one step to the next: after a
 * step on a batch with a NaN (the weights its gradient reaches turn NaN)
 * and the weights put back, the next step gives exactly what a fresh
 * engine's does. */
static void test_sgd_forgets_a_nan(void)
{
    poet_graph g;
    poet_err err = {0};
    CHECK(!poet_zoo_build("mlp_digits", BATCH, &g, &err));
    poet_optimizer sgd = poet_optimizer_default(POET_OPT_SGD);
    sgd.momentum = 0;
    rig a, b;
    rig_start(&a, &g, "keep-all", 0, NULL, sgd, 3);
    rig_start(&b, &g, "keep-all", 0, NULL, sgd, 3);
    CHECK(a.ok && b.ok);
    uint64_t P = poet_graph_param_count(&g);
    float *w = malloc(4 * P), *x = malloc(4 * poet_shape_numel(&g.nodes[0].shape));
    int32_t y[BATCH];
    double loss;
    if (a.ok && b.ok) {
        rt_get_params(a.e, &g, w);
        rt_batch(&g, 5, x, y);
        x[0] = NAN;
        CHECK(!poet_engine_step(a.e, x, y, &loss, &err));
        float *after = malloc(4 * P);
        rt_get_params(a.e, &g, after);
        int nans = 0;
        for (uint64_t i = 0; i < P; i++) nans += isnan(after[i]);
        CHECK_MSG(nans > 0, "a step on an input with a NaN left every weight finite");
        free(after);
        rt_put_params(a.e, &g, w);
        rt_batch(&g, 6, x, y);
        CHECK(!poet_engine_step(a.e, x, y, &loss, &err) && !poet_engine_step(b.e, x, y, &loss, &err));
        char ha[65], hb[65];
        poet_dev_weights_sha256(poet_engine_device(a.e), ha), poet_dev_weights_sha256(poet_engine_device(b.e), hb);
        CHECK_MSG(strcmp(ha, hb) == 0, "SGD without momentum carried a NaN into the next step");
    }
    free(w), free(x);
    rig_free(&a), rig_free(&b);
    poet_graph_free(&g);
}

int main(void)
{
    static const char *models[] = {"mlp_digits", "cnn_digits", "mlp_fashion", "cnn_fashion", "resnet_small"};
    for (size_t i = 0; i < sizeof models / sizeof *models; i++) test_model_bit_identity(models[i]);
    test_sgd_forgets_a_nan();
    test_storage_faults();
    test_checkpoints();
    return check_report();
}
