/* The planner registry and the one entry point that validates every
 * schedule before it is reported. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "cbc.h"
#include "greedy.h"
#include "milp.h"
#include "../host/clock.h"
#include "fast.h"
#include "progress.h"

#define GREEDY_PLANNER(fn, mode)                                                                          \
    static poet_status fn(const poet_problem *p, const poet_plan_options *o, poet_plan_result *r, poet_err *err) \
    {                                                                                                     \
        (void)o;                                                                                          \
        return greedy_plan(p, mode, r, err);                                                              \
    }

GREEDY_PLANNER(plan_keep_all, GREEDY_KEEP)
GREEDY_PLANNER(plan_chen, GREEDY_CHEN)
GREEDY_PLANNER(plan_remat, GREEDY_REMAT)
GREEDY_PLANNER(plan_paging, GREEDY_PAGING)
GREEDY_PLANNER(plan_hybrid, GREEDY_HYBRID)

/* Every baseline; the valid schedule with the least energy wins. */
static poet_status plan_portfolio(const poet_problem *p, const poet_plan_options *o, poet_plan_result *r,
                                  poet_err *err)
{
    (void)o;
    return plan_baselines(p, true, true, r, err);
}

/* A schedule re-planned for a tighter budget so that placement fits is
 * still optimal where it meets the bound of the budget asked for. */
static poet_status plan_milp(const poet_problem *p, const poet_plan_options *o, poet_plan_result *r, poet_err *err)
{
    if (!cbc_available())
        return poet_fail(err, POET_ERR_UNSUPPORTED,
                         "the milp planner needs COIN-OR CBC, and this poet was built without it (POET_WITH_CBC=OFF)");
    milp_options mo = {!o->no_paging, !o->no_remat, NULL};
    poet_status st = milp_plan(p, &mo, o, r, err);
    poet_sim sim;
    if (!st && r->status == POET_PLAN_FEASIBLE && isfinite(r->lower_bound_j) &&
        !poet_simulate(p, &r->schedule, &sim, NULL, NULL))
        plan_certify(r, sim.energy_j, r->lower_bound_j);
    return st;
}

static const poet_planner_def PLANNERS[] = {
    {"fast", "fate search (keep, recompute in chains, or page each tensor) polished by the exact MILP over windows, "
             "against a covering bound and the LP bound: a certified gap in seconds", true, fast_plan},
    {"milp", "POET's MILP on COIN-OR CBC: optimal, or the best found with a certified gap", true, plan_milp},
    {"keep-all", "no rematerialization, no paging: ordinary training", false, plan_keep_all},
    {"chen-sqrt", "checkpoint every sqrt(n) forward tensors, recompute the rest once (Chen et al. 2016)", false,
     plan_chen},
    {"remat-dtr", "remat only: evict by DTR's rule cost/(bytes x staleness), recompute on demand", false,
     plan_remat},
    {"paging", "paging only: page out what is read furthest ahead, page in just before its reader", false,
     plan_paging},
    {"hybrid", "Capuchin-style: page where the transfer hides behind compute, recompute otherwise", false,
     plan_hybrid},
    {"portfolio", "every baseline above; keeps the valid schedule with the least energy", false, plan_portfolio},
};

enum { N_PLANNERS = (int)(sizeof PLANNERS / sizeof *PLANNERS) };

int poet_planner_count(void) { return N_PLANNERS; }
const poet_planner_def *poet_planner_info(int i) { return i >= 0 && i < N_PLANNERS ? &PLANNERS[i] : NULL; }
const char *poet_planner_default(void) { return "fast"; }

const poet_planner_def *poet_planner_find(const char *name)
{
    for (int i = 0; i < N_PLANNERS; i++)
        if (name && strcmp(PLANNERS[i].name, name) == 0) return &PLANNERS[i];
    return NULL;
}

const char *poet_plan_status_str(poet_plan_status s)
{
    switch (s) {
    case POET_PLAN_OPTIMAL: return "optimal";
    case POET_PLAN_FEASIBLE: return "feasible";
    case POET_PLAN_INFEASIBLE: return "infeasible";
    case POET_PLAN_UNKNOWN: return "no schedule found";
    }
    return "no schedule found";
}

/* Why no schedule fits below the floor: the stage, its node, and the
 * tensors that must be in RAM with it there. */
static void explain_floor(const poet_problem *p, char *note, size_t cap)
{
    int v = p->min_budget_node, shown = 0, k = p->in_start[v];
    const poet_cnode *n = p->inst->nodes;
    size_t at = (size_t)snprintf(note, cap,
                                 "no schedule fits in %llu bytes: stage %d computes node %d '%.32s' (%.16s), whose %llu B "
                                 "output and inputs must be in RAM at once",
                                 (unsigned long long)p->budget_bytes, v, v, n[v].name, n[v].op,
                                 (unsigned long long)n[v].bytes);
    for (; k < p->in_start[v + 1] && shown < 3 && at < cap; k++, shown++) {
        int u = p->in[k];
        at += (size_t)snprintf(note + at, cap - at, "%s'%.32s' %llu B", shown ? ", " : ": ", n[u].name,
                               (unsigned long long)n[u].bytes);
    }
    int more = p->in_start[v + 1] - k;
    if (at < cap && more) at += (size_t)snprintf(note + at, cap - at, " and %d more", more);
    if (at < cap)
        snprintf(note + at, cap - at, "; %llu bytes at least", (unsigned long long)p->min_budget_bytes);
}

poet_status poet_plan(const char *planner, const poet_problem *p, const poet_plan_options *o, poet_plan_result *r,
                      poet_err *err)
{
    memset(r, 0, sizeof *r);
    r->status = POET_PLAN_UNKNOWN;
    r->lower_bound_j = r->found_seconds = NAN;
    const poet_planner_def *def = poet_planner_find(planner);
    if (!def) return poet_fail(err, POET_ERR_NOT_FOUND, "unknown planner '%s' (see poet planners)", planner);
    if ((o->no_paging || o->no_remat) && !def->variants)
        return poet_fail(err, POET_ERR_INVALID, "planner '%s' takes neither --no-paging nor --no-remat", def->name);
    if (o->no_paging && o->no_remat)
        return poet_fail(err, POET_ERR_INVALID, "--no-paging and --no-remat together leave only keep-all");
    double start = host_now_s();
    if (p->budget_bytes < p->min_budget_bytes) {
        r->status = POET_PLAN_INFEASIBLE;
        explain_floor(p, r->note, sizeof r->note);
        return POET_OK;
    }
    progress_begin(def->name, o);
    poet_status st = def->plan(p, o, r, err);
    progress_end();
    double end = host_now_s();
    r->solve_seconds = end - start;
    /* a planner that did not say when (0 or NAN) had it at its end */
    r->found_seconds = !r->schedule.T ? NAN : (r->found_seconds > 0 ? r->found_seconds : end) - start;
    if (st) {
        poet_plan_result_free(r);
        r->status = POET_PLAN_UNKNOWN;
        return st;
    }
    if (r->status == POET_PLAN_OPTIMAL || r->status == POET_PLAN_FEASIBLE) {
        poet_schedule *s = &r->schedule;
        snprintf(s->planner, sizeof s->planner, "%s", def->name);
        s->budget_bytes = p->budget_bytes;
        s->runtime_factor = p->runtime_factor;
        s->runtime_counts_paging = p->runtime_counts_paging;
        s->graph_hash = poet_instance_hash(p->inst);
        poet_err why = {0};
        if (poet_schedule_validate(p, s, &why)) {
            poet_plan_result_free(r);
            r->status = POET_PLAN_UNKNOWN;
            return poet_fail(err, POET_ERR_INVALID, "planner '%s' produced an invalid schedule (a bug): %s",
                             def->name, why.msg);
        }
        /* every node is computed at least once: full-memory energy bounds the optimum */
        if (isnan(r->lower_bound_j)) r->lower_bound_j = p->full_memory_energy_j;
    } else if (!r->note[0]) {
        snprintf(r->note, sizeof r->note, "planner '%s' found no schedule within the budgets", def->name);
    }
    return POET_OK;
}
