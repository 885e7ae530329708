/* Helpers for runtime tests: a graph planned and loaded into an engine. */
#ifndef POET_TESTS_RTUTIL_H
#define POET_TESTS_RTUTIL_H

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "poet/poet.h"

typedef struct rig {
    poet_instance inst;
    poet_problem p;
    poet_plan_result plan;
    poet_sim sim;
    poet_engine *e;
    bool ok;
} rig;

/* Plans g with planner at budget (0: the keep-all peak; fraction in (0, 1]:
 * that share of it, raised to the smallest feasible budget) and starts an
 * engine on it with the initial weights params (node order; NULL: from the
 * seed). storage may be NULL (in memory). rig.ok says whether a schedule
 * was found; errors print. */
static inline void rig_start_from(rig *r, const poet_graph *g, const char *planner, double fraction,
                                  poet_storage *storage, poet_optimizer opt, uint64_t seed, const float *params)
{
    memset(r, 0, sizeof *r);
    poet_err err = {0};
    poet_profile dev;
    if (poet_profile_find("m4", &dev, &err) || poet_instance_from_graph(g, &dev, &r->inst, &err) ||
        poet_problem_init(&r->p, &r->inst, 0, 1e6, &err)) {
        fprintf(stderr, "rig: %s\n", err.msg);
        return;
    }
    uint64_t b = fraction > 0 ? (uint64_t)(fraction * (double)r->p.keep_all_peak_bytes) : r->p.keep_all_peak_bytes;
    r->p.budget_bytes = b < r->p.min_budget_bytes ? r->p.min_budget_bytes : b;
    poet_plan_options o = {.threads = 1, .deterministic = true};
    if (poet_plan(planner, &r->p, &o, &r->plan, &err)) {
        fprintf(stderr, "rig: %s\n", err.msg);
        return;
    }
    if (r->plan.status != POET_PLAN_OPTIMAL && r->plan.status != POET_PLAN_FEASIBLE) return;
    if (poet_simulate(&r->p, &r->plan.schedule, &r->sim, NULL, &err)) return;
    poet_engine_config cfg = {g, &r->p, &r->plan.schedule, storage, opt, seed, 0, params, NULL, POET_FROZEN_IN_RAM, false};
    if (poet_engine_new(&cfg, &r->e, &err)) {
        fprintf(stderr, "rig: engine: %s\n", err.msg);
        return;
    }
    r->ok = true;
}

/* The same, with the initial weights from the seed. */
static inline void rig_start(rig *r, const poet_graph *g, const char *planner, double fraction, poet_storage *storage,
                             poet_optimizer opt, uint64_t seed)
{
    rig_start_from(r, g, planner, fraction, storage, opt, seed, NULL);
}

static inline void rig_free(rig *r)
{
    poet_engine_free(r->e);
    poet_plan_result_free(&r->plan);
    poet_problem_free(&r->p);
    poet_instance_free(&r->inst);
    memset(r, 0, sizeof *r);
}

/* All of e's trainable parameters, in node order (g's), to or from a
 * flat vector. */
static inline void rt_put_params(poet_engine *e, const poet_graph *g, const float *p)
{
    for (int v = 0; v < g->n_forward; v++) {
        uint64_t n;
        float *w = poet_dev_params(poet_engine_device(e), v, false, &n);
        if (w && n) memcpy(w, p, 4 * n), p += n;
    }
}

static inline void rt_get_params(poet_engine *e, const poet_graph *g, float *out)
{
    for (int v = 0; v < g->n_forward; v++) {
        uint64_t n;
        const float *w = poet_dev_params(poet_engine_device(e), v, false, &n);
        if (w && n) memcpy(out, w, 4 * n), out += n;
    }
}

/* Deterministic pseudo-random floats in [-1, 1) and labels. */
static inline float rt_uniform(uint64_t *s)
{
    *s = *s * 6364136223846793005ull + 1442695040888963407ull;
    return (float)((double)(*s >> 40) / 8388608.0 - 1.0);
}

static inline void rt_batch(const poet_graph *g, uint64_t seed, float *x, int32_t *y)
{
    const poet_node *in = &g->nodes[0];
    const poet_node *loss = &g->nodes[g->loss];
    const poet_node *logits = &g->nodes[loss->inputs[0]];
    uint64_t n = poet_shape_numel(&in->shape), s = seed;
    for (uint64_t i = 0; i < n; i++) x[i] = rt_uniform(&s);
    for (int64_t r = 0; r < logits->shape.dim[0]; r++) y[r] = (int32_t)((s = s * 6364136223846793005ull + 1) >> 33) % (int32_t)logits->shape.dim[1];
}
/* A tiny synthetic data set in the shape of the digits. */
static inline void rt_fake_digits(poet_dataset *d, int n_train, int n_test)
{
    memset(d, 0, sizeof *d);
    snprintf(d->name, sizeof d->name, "synthetic");
    d->channels = 1, d->height = 8, d->width = 8, d->classes = 10;
    d->n_train = n_train, d->n_test = n_test;
    d->train_x = malloc((size_t)n_train * 64 * sizeof(float));
    d->test_x = malloc((size_t)n_test * 64 * sizeof(float));
    d->train_y = malloc((size_t)n_train * sizeof(int32_t));
    d->test_y = malloc((size_t)n_test * sizeof(int32_t));
    uint64_t s = 5;
    for (int i = 0; i < n_train; i++) {
        d->train_y[i] = i % 10;
        for (int k = 0; k < 64; k++) d->train_x[i * 64 + k] = rt_uniform(&s) + (k % 10 == i % 10);
    }
    for (int i = 0; i < n_test; i++) {
        d->test_y[i] = i % 10;
        for (int k = 0; k < 64; k++) d->test_x[i * 64 + k] = rt_uniform(&s) + (k % 10 == i % 10);
    }
}

#endif
