/* The board's per-node times: read, compared with the plan, fit. */
#include "board_times.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void board_times_free(board_times *t)
{
    free(t->compute_s), free(t->computes);
    memset(t, 0, sizeof *t);
}

/* How often the schedule computes and transfers each node in a step. */
static void count_schedule(const poet_schedule *s, board_times *t)
{
    for (int st = 0; st < s->T; st++)
        for (int v = 0; v < s->T; v++) {
            t->computes[v] += poet_sched_get(s, POET_R, st, v);
            t->transfers[v] += poet_sched_get(s, POET_MIN, st, v) + poet_sched_get(s, POET_MOUT, st, v);
        }
}

int board_times_read(const char *path, const session *s, long steps, double step_ticks, double instructions_per_tick,
                     board_times *out)
{
    memset(out, 0, sizeof *out);
    int T = s->inst.T;
    char *raw = NULL;
    size_t len = 0;
    poet_err err = {0};
    size_t want = (2 * (size_t)T + 4) * sizeof(double);
    if (poet_read_file(path, &raw, &len, &err)) return lib_error(&err);
    if (len != want || steps < 1 || !(instructions_per_tick > 0)) {
        free(raw);
        fprintf(stderr, "poet emulate: the board's times file has %zu bytes; %zu expected for %d nodes\n", len, want, T);
        return 1;
    }
    out->T = T;
    out->compute_s = calloc(2 * (size_t)T, sizeof(double));
    out->computes = calloc(2 * (size_t)T, sizeof(int));
    if (!out->compute_s || !out->computes) {
        free(raw);
        board_times_free(out);
        return lib_error(&(poet_err){POET_ERR_NOMEM, "out of memory reading the board's times"});
    }
    out->transfer_s = out->compute_s + T, out->transfers = out->computes + T;
    double per = instructions_per_tick / BOARD_INSTRUCTIONS_PER_S / (double)steps, totals[4];
    memcpy(out->compute_s, raw, 2 * (size_t)T * sizeof(double)); /* compute, then transfer, per node */
    memcpy(totals, raw + 2 * (size_t)T * sizeof(double), sizeof totals);
    free(raw);
    double accounted = 0;
    for (int i = 0; i < 2 * T; i++) out->compute_s[i] *= per, accounted += out->compute_s[i];
    out->update_s = totals[0] * per;
    out->step_s = step_ticks * per;
    out->other_s = out->step_s - accounted - out->update_s;
    count_schedule(&s->plan.schedule, out);
    return 0;
}

void add_op_instructions_json(cJSON *o, const session *s, const board_times *t)
{
    const poet_profile *d = &s->inst.device;
    double ips = d->instructions_per_s > 0 ? d->instructions_per_s : BOARD_INSTRUCTIONS_PER_S;
    cJSON *ops = cJSON_AddObjectToObject(o, "op_instructions");
    for (int v = 0; ops && v < t->T; v++) { /* by cost kind, as the profile prices them */
        const poet_node *n = &s->g->nodes[v];
        char label[48];
        snprintf(label, sizeof label, "%s%s", poet_cost_kind_name(poet_cost_kind(s->g, n)),
                 n->op == POET_OP_GRAD ? "_grad" : "");
        cJSON *e = cJSON_GetObjectItemCaseSensitive(ops, label);
        if (!e && (e = cJSON_AddObjectToObject(ops, label))) {
            cJSON_AddNumberToObject(e, "measured", 0);
            cJSON_AddNumberToObject(e, "predicted", 0);
        }
        if (!e) return;
        cJSON *m = cJSON_GetObjectItemCaseSensitive(e, "measured"), *p = cJSON_GetObjectItemCaseSensitive(e, "predicted");
        cJSON_SetNumberValue(m, m->valuedouble + t->compute_s[v] * BOARD_INSTRUCTIONS_PER_S);
        cJSON_SetNumberValue(p, p->valuedouble + t->computes[v] * s->inst.nodes[v].time_s * ips);
    }
    double overhead = poet_profile_step_overhead_s(d, poet_graph_trained_count(s->g));
    cJSON_AddNumberToObject(o, "predicted_instructions_per_step",
                            (s->sim.compute_time_s + s->sim.transfer_time_s + overhead) * ips);
}

int write_calibrated_profile(const session *s, const board_times *t, const char *path)
{
    poet_measured_step m = {s->g, t->compute_s, t->computes, t->transfer_s, t->transfers, t->update_s, t->other_s,
                            poet_graph_trained_count(s->g)};
    poet_profile p;
    poet_err err = {0};
    if (poet_profile_calibrate(&s->inst.device, &m, 1, BOARD_INSTRUCTIONS_PER_S, &p, &err)) return lib_error(&err);
    snprintf(p.description, sizeof p.description, "%s, its per-op costs measured on QEMU's netduinoplus2 (%s, batch %d)",
             s->inst.device.name, s->g->model, s->g->batch);
    char *json = poet_profile_to_json(&p);
    if (!json) return lib_error(&(poet_err){POET_ERR_NOMEM, "out of memory writing the profile"});
    size_t n = strlen(json);
    json[n] = '\n'; /* cJSON's text has no final newline; the NUL's byte takes it */
    int rc = poet_write_file_atomic(path, json, n + 1, &err) ? lib_error(&err) : 0;
    free(json);
    return rc;
}
