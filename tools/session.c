#define _POSIX_C_SOURCE 200809L
/* The options and planning shared by train, export and emulate. */
#include "session.h"

#include <float.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "advice.h"

int train_opts_check(const char *cmd, const train_opts *t, train_values *v)
{
    *v = (train_values){.seed = 1, .rho = 1.5, .opt = poet_optimizer_default(POET_OPT_SGD), .chunk = DEVICE_CHUNK,
                        .fixed_ram_bytes = UINT64_MAX, .counts_paging = true, .frozen = POET_FROZEN_IN_FLASH,
                        .fused_update = t->fused_update};
    if (!t->model == !t->onnx) return usage_error(cmd, "give exactly one of --model and --onnx", NULL);
    if (!t->device) return usage_error(cmd, "--device is required", NULL);
    if (!t->budget == !t->schedule) return usage_error(cmd, "give --budget, or --schedule FILE from poet plan --out", NULL);
    if (t->schedule && (t->planner || t->factor || t->time_limit))
        return usage_error(cmd, "--schedule holds its planner and runtime factor: leave out --planner, "
                                "--runtime-factor and --time-limit", NULL);
    if (t->batch && !parse_int(t->batch, 1, 65536, &v->batch))
        return usage_error(cmd, "--batch must be 1 to 65536, got", t->batch);
    if (t->seed && !parse_u64(t->seed, &v->seed))
        return usage_error(cmd, "--seed must be an integer from 0 to 2^64-1, got", t->seed);
    if (t->factor && !(parse_real(t->factor, &v->rho) && v->rho >= 1 && v->rho <= 1e6))
        return usage_error(cmd, "--runtime-factor must be a number from 1 to 1e6, got", t->factor);
    if (t->schedule && t->runtime_model)
        return usage_error(cmd, "--schedule holds its runtime model: leave out --runtime-model", NULL);
    if (!parse_frozen(t->frozen, &v->frozen)) return usage_error(cmd, "--frozen must be flash or ram, got", t->frozen);
    if (!parse_runtime_model(t->runtime_model, &v->counts_paging))
        return usage_error(cmd, "--runtime-model must be serial or compute, got", t->runtime_model);
    if (t->time_limit && !parse_time_limit(t->time_limit, &v->time_limit_s))
        return usage_error(cmd, "--time-limit must be seconds in (0, 86400], got", t->time_limit);
    if (t->optimizer) {
        if (strcmp(t->optimizer, "adam") == 0) v->opt = poet_optimizer_default(POET_OPT_ADAM);
        else if (strcmp(t->optimizer, "sgd") != 0) return usage_error(cmd, "--optimizer must be sgd or adam, got", t->optimizer);
    }
    if (t->lr) {
        double lr = 0;
        /* as a float, which the optimizer computes in: 1e-50 would be 0 */
        if (!(parse_real(t->lr, &lr) && lr >= FLT_MIN && lr <= 10))
            return usage_error(cmd, "--lr must be from 1.2e-38 (the least normal float) to 10, got", t->lr);
        v->opt.lr = (float)lr;
    }
    v->planner = t->planner ? t->planner : poet_planner_default();
    if (!poet_planner_find(v->planner)) return usage_error(cmd, "unknown planner (see poet planners):", v->planner);
    const poet_model_info *info = t->model ? poet_zoo_find(t->model) : NULL;
    if (info && !info->trainable)
        return usage_error(cmd, "this model is plan-only (see poet models for trainable ones):", t->model);
    v->data = t->data ? t->data : info ? info->dataset : NULL;
    return 0;
}

int open_data(const char *cmd, const train_opts *t, const train_values *v, const poet_graph *g, poet_dataset *d)
{
    poet_data_source src = {v->data, t->labels, t->test_data, t->test_labels, 0, t->data_dir};
    if (!v->data) return usage_error(cmd, "give --data (digits, fashion-mnist or a file: docs/data.md)", NULL);
    if (t->test_split && !(parse_real(t->test_split, &src.test_split) && src.test_split > 0 && src.test_split < 1))
        return usage_error(cmd, "--test-split must be a fraction between 0 and 1, got", t->test_split);
    poet_err err = {0};
    if (poet_dataset_open(&src, d, &err) || poet_dataset_check_model(d, g, &err)) return lib_error(&err);
    return 0;
}

/* The schedule of a file, checked against the model it is to train. */
static int use_schedule(session *s, const char *path, const char *what)
{
    poet_err err = {0};
    poet_instance embedded;
    int rc = read_schedule(path, &s->plan.schedule, &embedded);
    poet_instance_free(&embedded);
    if (rc) return rc;
    const poet_schedule *sc = &s->plan.schedule;
    if (poet_problem_init(&s->p, &s->inst, sc->budget_bytes, sc->runtime_factor, &err)) return lib_error(&err);
    s->p.runtime_counts_paging = sc->runtime_counts_paging;
    if (poet_schedule_validate(&s->p, sc, &err)) {
        fprintf(stderr, "poet: %s does not fit %s at batch %d on %s: %s\n", path, what, s->g->batch,
                s->inst.device.name, err.msg);
        return 1;
    }
    s->plan.status = POET_PLAN_FEASIBLE;
    return 0;
}

static bool planned(const poet_plan_result *r)
{
    return r->status == POET_PLAN_OPTIMAL || r->status == POET_PLAN_FEASIBLE;
}

/* poet_plan at budget, into s->plan where it finds a schedule (s->p then
 * holds that budget); whether it did. */
static bool plan_at(session *s, const poet_plan_options *o, const char *planner, uint64_t budget, poet_err *err,
                    poet_status *st)
{
    uint64_t was = s->p.budget_bytes;
    poet_plan_result r;
    s->p.budget_bytes = budget;
    if ((*st = poet_plan(planner, &s->p, o, &r, err)) || !planned(&r)) {
        if (!*st) poet_plan_result_free(&r);
        s->p.budget_bytes = was;
        return false;
    }
    poet_plan_result_free(&s->plan);
    s->plan = r;
    return true;
}

/* --budget ram bounds the arena from above, so a schedule for less fits as
 * well: where none places in all of it (placement can bind, issue 48), the
 * largest of a few budgets between it and the floor that does. */
static poet_status plan_below(session *s, const poet_plan_options *o, const char *planner, poet_err *err)
{
    uint64_t hi = s->p.budget_bytes, lo = s->p.min_budget_bytes;
    poet_status st = POET_OK;
    if (!plan_at(s, o, planner, lo, err, &st)) return st;
    for (int k = 0; k < 3 && !st && hi - lo > hi / 100; k++) {
        uint64_t mid = lo + (hi - lo) / 2;
        if (plan_at(s, o, planner, mid, err, &st)) lo = mid;
        else hi = mid;
    }
    if (!st) fprintf(stderr, "poet: note: no schedule placed in all the arena the RAM leaves; this one is planned for %llu B\n",
                     (unsigned long long)s->p.budget_bytes);
    return st;
}

/* Plans under --budget with the planner the options name. */
static int plan_now(const char *cmd, session *s, const train_opts *t, const train_values *v, const char *what)
{
    poet_err err = {0};
    if (poet_problem_init(&s->p, &s->inst, 0, v->rho, &err)) return lib_error(&err);
    s->p.runtime_counts_paging = v->counts_paging;
    int rc = resolve_budget(cmd, t->budget, &s->p, &s->ram, &s->p.budget_bytes);
    if (rc) return rc;
    poet_plan_options o = {.time_limit_s = v->time_limit_s, .threads = 1, .deterministic = true};
    if (poet_plan(v->planner, &s->p, &o, &s->plan, &err)) return lib_error(&err);
    bool ram = strcmp(t->budget, "ram") == 0;
    if (!planned(&s->plan) && ram && s->p.budget_bytes > s->p.min_budget_bytes &&
        plan_below(s, &o, v->planner, &err))
        return lib_error(&err);
    if (!planned(&s->plan)) {
        fprintf(stderr, "poet: cannot train %s under %llu B: planner %s says %s%s%s\n", what,
                (unsigned long long)s->p.budget_bytes, v->planner, poet_plan_status_str(s->plan.status),
                s->plan.note[0] ? ": " : "", s->plan.note);
        if (s->p.budget_bytes < s->p.min_budget_bytes) {
            fix_question q = {t->model, t->onnx, t->train, s->g->batch, &s->inst.device, s->p.budget_bytes,
                              ram, layout_of_values(v), s->ram.fixed_bytes};
            if (q.whole_ram) explain_ram(&s->inst.device, &s->ram, s->p.budget_bytes, s->p.min_budget_bytes);
            suggest_fix(&q);
        }
        return EXIT_NO_SCHEDULE;
    }
    return 0;
}

int session_plan(const char *cmd, session *s, const train_opts *t, const train_values *v)
{
    poet_err err = {0};
    poet_profile dev;
    memset(s, 0, sizeof *s);
    if (poet_profile_find(t->device, &dev, &err)) return lib_error(&err);
    int rc = load_graph(cmd, t->model, t->onnx, t->train, v->batch, &s->zoo, &s->onnx, &s->g);
    if (rc) return rc;
    if (poet_instance_from_graph(s->g, &dev, &s->inst, &err)) return lib_error(&err);
    device_layout layout = layout_of_values(v);
    uint64_t fixed = v->fixed_ram_bytes;
    if (fixed != UINT64_MAX) fixed += v->node_ram_bytes * (uint64_t)s->g->n_nodes;
    if ((rc = ram_use_of(s->g, &s->inst, &layout, fixed, &s->ram))) return rc;
    const char *what = t->model ? t->model : t->onnx;
    rc = t->schedule ? use_schedule(s, t->schedule, what) : plan_now(cmd, s, t, v, what);
    if (rc) return rc;
    if (poet_simulate(&s->p, &s->plan.schedule, &s->sim, NULL, &err)) return lib_error(&err);
    warn_ram(&s->p, &s->sim, &s->ram);
    return 0;
}

void session_free(session *s)
{
    poet_plan_result_free(&s->plan);
    poet_problem_free(&s->p);
    poet_instance_free(&s->inst);
    if (s->onnx) poet_onnx_free(s->onnx);
    else poet_graph_free(&s->zoo);
    memset(s, 0, sizeof *s);
}

const float *session_params(const session *s)
{
    uint64_t n;
    return s->onnx ? poet_onnx_params(s->onnx, &n) : NULL;
}

const float *session_buffers(const session *s)
{
    uint64_t n;
    return s->onnx ? poet_onnx_buffers(s->onnx, &n) : NULL;
}

bool parse_chunk(const char *s, uint32_t *out)
{
    int v = DEVICE_CHUNK;
    if (s && !parse_int(s, 0, 1 << 20, &v)) return false;
    *out = (uint32_t)v;
    return true;
}

int export_image(const session *s, const train_values *v, uint8_t **img, size_t *len, poet_dev_memory *need)
{
    poet_export_options o = {v->opt, v->seed, v->chunk, session_params(s), session_buffers(s), v->frozen, v->fused_update};
    poet_err err = {0};
    if (poet_export_image(s->g, &s->p, &s->plan.schedule, &o, img, len, &err) ||
        poet_dev_inspect(*img, *len, need, &err))
        return lib_error(&err);
    return 0;
}

void add_memory_json(cJSON *o, const poet_dev_memory *m)
{
    cJSON_AddNumberToObject(o, "arena_bytes", (double)m->arena_bytes);
    cJSON_AddNumberToObject(o, "persistent_bytes", (double)m->persistent_bytes);
    cJSON_AddNumberToObject(o, "workspace_bytes", (double)m->workspace_bytes);
    cJSON_AddNumberToObject(o, "control_bytes", (double)m->control_bytes);
    cJSON_AddNumberToObject(o, "memory_bytes", (double)m->total_bytes);
    cJSON_AddNumberToObject(o, "storage_bytes", (double)m->storage_bytes);
}
