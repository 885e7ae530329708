/* The planner registry and the one entry point that validates every
 * schedule before it is reported. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "greedy.h"
#include "milp.h"

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
    static const greedy_mode modes[] = {GREEDY_KEEP, GREEDY_REMAT, GREEDY_PAGING, GREEDY_HYBRID, GREEDY_CHEN};
    double best = INFINITY;
    r->status = POET_PLAN_UNKNOWN;
    for (size_t k = 0; k < sizeof modes / sizeof *modes; k++) {
        poet_plan_result one;
        memset(&one, 0, sizeof one);
        one.lower_bound_j = NAN;
        poet_status st = greedy_plan(p, modes[k], &one, err);
        if (st) {
            poet_plan_result_free(r);
            return st;
        }
        if (one.status != POET_PLAN_FEASIBLE) continue;
        poet_sim sim;
        if ((st = poet_simulate(p, &one.schedule, &sim, NULL, err))) {
            poet_plan_result_free(&one);
            poet_plan_result_free(r);
            return st;
        }
        if (sim.energy_j < best) {
            best = sim.energy_j;
            poet_plan_result_free(r);
            *r = one;
        } else {
            poet_plan_result_free(&one);
        }
    }
    if (r->status != POET_PLAN_FEASIBLE) snprintf(r->note, sizeof r->note, "no baseline met the budgets");
    return POET_OK;
}

static poet_status plan_milp(const poet_problem *p, const poet_plan_options *o, poet_plan_result *r, poet_err *err)
{
    milp_options mo = {!o->no_paging, !o->no_remat};
    return milp_plan(p, &mo, o, r, err);
}

static const poet_planner_def PLANNERS[] = {
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
const char *poet_planner_default(void) { return "portfolio"; }

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
    case POET_PLAN_UNKNOWN: return "unknown";
    }
    return "unknown";
}

void poet_plan_result_free(poet_plan_result *r)
{
    if (!r) return;
    poet_schedule_free(&r->schedule);
}

poet_status poet_plan(const char *planner, const poet_problem *p, const poet_plan_options *o, poet_plan_result *r,
                      poet_err *err)
{
    memset(r, 0, sizeof *r);
    r->status = POET_PLAN_UNKNOWN;
    r->lower_bound_j = NAN;
    const poet_planner_def *def = poet_planner_find(planner);
    if (!def) return poet_fail(err, POET_ERR_NOT_FOUND, "unknown planner '%s' (see poet planners)", planner);
    if ((o->no_paging || o->no_remat) && !def->variants)
        return poet_fail(err, POET_ERR_INVALID, "planner '%s' takes neither --no-paging nor --no-remat", def->name);
    if (o->no_paging && o->no_remat)
        return poet_fail(err, POET_ERR_INVALID, "--no-paging and --no-remat together leave only keep-all");
    double start = plan_wall_s();
    if (p->budget_bytes < p->min_budget_bytes) {
        r->status = POET_PLAN_INFEASIBLE;
        snprintf(r->note, sizeof r->note,
                 "no schedule fits in %llu bytes: some stage holds a node and its inputs, %llu bytes at least",
                 (unsigned long long)p->budget_bytes, (unsigned long long)p->min_budget_bytes);
        return POET_OK;
    }
    poet_status st = def->plan(p, o, r, err);
    r->solve_seconds = plan_wall_s() - start;
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
