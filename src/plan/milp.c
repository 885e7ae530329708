/* POET's MILP on COIN-OR CBC (the formulation: formulation.c): solved
 * with the best baseline schedule as CBC's MIP start, its placement made to
 * fit the budget, and an infeasible budget explained. */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "poet/file.h"
#include "../host/clock.h"
#include "../schedule/accounting.h"
#include "cbc.h"
#include "common.h"
#include "formulation.h"
#include "milp.h"
#include "progress.h"

/* The planner's whole time limit; 300 s unless the caller set one. */
static double limit_s(const poet_plan_options *o) { return o->time_limit_s > 0 ? o->time_limit_s : 300; }

static bool better_start(const poet_problem *p, const poet_schedule *a, const poet_schedule *b)
{
    poet_sim sa, sb;
    if (poet_schedule_validate(p, a, NULL) || poet_simulate(p, a, &sa, NULL, NULL)) return false;
    return !b || poet_simulate(p, b, &sb, NULL, NULL) || sa.energy_j < sb.energy_j;
}

/* --write-mps: CBC writes the model where poet chose, in a directory of
 * its own (it appends ".mps" or ".mps.gz" and, where it cannot write,
 * terminates its process); poet then writes it to the caller's path with
 * that suffix, under its output rule (poet/file.h). */
typedef struct mps_relay {
    char dir[4096], base[4200];
} mps_relay;

static poet_status mps_begin(mps_relay *m, poet_err *err)
{
    const char *tmp = getenv("TMPDIR");
    snprintf(m->dir, sizeof m->dir, "%s/poet-mps-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(m->dir)) return poet_fail(err, POET_ERR_IO, "cannot make a directory for the MPS file: %s", strerror(errno));
    snprintf(m->base, sizeof m->base, "%s/model", m->dir);
    return POET_OK;
}

static poet_status mps_end(mps_relay *m, const char *want, poet_err *err)
{
    static const char *const SUFFIX[] = {".mps.gz", ".mps"};
    poet_status st = poet_fail(err, POET_ERR_IO, "cannot write '%s.mps.gz': CBC wrote no model", want);
    for (int k = 0; k < 2; k++) {
        char from[4300], to[4200];
        snprintf(from, sizeof from, "%s%s", m->base, SUFFIX[k]);
        char *data = NULL;
        size_t len = 0;
        if (access(from, F_OK) != 0) continue;
        snprintf(to, sizeof to, "%s%s", want, SUFFIX[k]);
        if (!(st = poet_read_file_max(from, UINT64_MAX, &data, &len, err))) st = poet_write_file_atomic(to, data, len, err);
        free(data);
        unlink(from);
    }
    rmdir(m->dir);
    return st;
}

static poet_status solve(const poet_problem *p, const milp_options *mo, const poet_plan_options *o,
                         poet_plan_result *r, poet_err *err)
{
    double started = host_now_s();
    model m;
    poet_status st = form_build(&m, p, mo->paging, mo->remat, false, err);
    if (st) return st;
    csc c;
    if (!lp_to_csc(&m.lp, &c)) {
        form_free(&m);
        return poet_fail(err, POET_ERR_NOMEM, "out of memory building the MILP's matrix");
    }
    poet_schedule start;
    bool have_start = plan_best_baseline(p, mo->paging, mo->remat, &start);
    if (mo->start && better_start(p, mo->start, have_start ? &start : NULL)) {
        if (have_start) poet_schedule_free(&start);
        have_start = !poet_schedule_copy(&start, mo->start, NULL);
    }
    double start_at = host_now_s(); /* a caller's start keeps its own time, which the caller knows */
    mps_relay mps;
    if (o->write_mps && (st = mps_begin(&mps, err))) {
        csc_free(&c);
        form_free(&m);
        return st;
    }
    cbc_recipe rc = {.l = &m.lp, .c = &c, .lb = m.lp.lb, .ub = m.lp.ub, .o = *o, .min_seconds = 1, .log_level = 1,
                     .cutoff = INFINITY, .write_mps = o->write_mps ? mps.base : NULL};
    if (have_start) rc.start = form_start_from(&m, &start);
    /* the limit covers the whole planner, warm start and model included;
     * CBC looks at its clock between phases and overruns by a few percent:
     * keep that inside the limit, and time to read the answer back */
    rc.seconds = 0.97 * (limit_s(o) - (host_now_s() - started)) - 1;
    progress_report("milp", NAN, NAN);
    solved sv;
    solve_job job = {.cbc = &rc, .scale = 1.0 / m.obj_scale, .n_cols = m.lp.n_cols, .deadline = started + limit_s(o)};
    cbc_solve_apart(&job, &sv);
    mip_start_free(&rc.start);
    csc_free(&c);
    if (o->write_mps) st = mps_end(&mps, o->write_mps, err);
    const double *x = sv.x;
    double bound = sv.bound / m.obj_scale;
    progress_report(NULL, x ? sv.obj / m.obj_scale : NAN, bound);
    /* CBC calls a solve that met its gap tolerance optimal: poet, only a proof */
    bool optimal = sv.optimal && sv.obj - sv.bound <= 1e-6 * fabs(sv.obj), infeasible = sv.infeasible;
    if (!sv.ended) snprintf(r->note, sizeof r->note, "CBC died during the solve; its answers are lost");
    if (!st && !(st = poet_schedule_init(&r->schedule, p->T, err))) {
        poet_err why = {0};
        if (x) {
            form_extract(&m, x, &r->schedule);
            form_normalize(&r->schedule);
            r->status = optimal ? POET_PLAN_OPTIMAL : POET_PLAN_FEASIBLE;
            r->found_seconds = sv.found_at > 0 ? sv.found_at : host_now_s();
        }
        if (x && poet_schedule_validate(p, &r->schedule, &why) && !strstr(why.msg, "placement-budget") &&
            have_start) {
            /* CBC's tolerances let a rounded solution overstep a budget */
            snprintf(r->note, sizeof r->note, "CBC's solution failed validation after rounding (%.150s); "
                     "reporting the best baseline", why.msg);
            x = NULL;
        }
        if (!x && have_start) { /* CBC kept nothing better than the start */
            poet_schedule_free(&r->schedule);
            r->schedule = start;
            r->found_seconds = start_at;
            have_start = false;
            r->status = POET_PLAN_FEASIBLE;
        } else if (!x) {
            poet_schedule_free(&r->schedule);
            r->status = infeasible ? POET_PLAN_INFEASIBLE : POET_PLAN_UNKNOWN;
        }
        /* CBC's bound, when it has one, else every node computed once; never
         * above the schedule's own energy, which rounding could put it */
        r->lower_bound_j = isfinite(bound) && bound > p->full_memory_energy_j ? bound : p->full_memory_energy_j;
        poet_sim sim;
        if (r->schedule.T && !poet_simulate(p, &r->schedule, &sim, NULL, NULL) && r->lower_bound_j > sim.energy_j)
            r->lower_bound_j = sim.energy_j;
        if (infeasible) r->lower_bound_j = NAN;
    }
    free(sv.x);
    if (have_start) poet_schedule_free(&start);
    form_free(&m);
    return st;
}

/* The smallest budget any schedule meets under the runtime budget, bracketed
 * by CBC within a time limit: [*lo, *hi] bytes (*hi = 0 when none found). */
static void smallest_budget(const poet_problem *p, const milp_options *mo, double seconds, uint64_t *lo,
                            uint64_t *hi)
{
    model m;
    *lo = p->min_budget_bytes, *hi = 0;
    if (form_build(&m, p, mo->paging, mo->remat, true, NULL)) return;
    csc c;
    if (lp_to_csc(&m.lp, &c)) {
        cbc_recipe rc = {.l = &m.lp, .c = &c, .lb = m.lp.lb, .ub = m.lp.ub, .o = cbc_quiet_options(), .seconds = seconds,
                         .cutoff = INFINITY};
        solved sv;
        double deadline = host_now_s() + 1.1 * seconds + 1;
        cbc_solve_apart(&(solve_job){.cbc = &rc, .n_cols = m.lp.n_cols, .deadline = deadline}, &sv);
        /* M is in units of the keep-all peak */
        double b = sv.bound / m.mem_scale;
        if (sv.ended && isfinite(b) && b > (double)*lo) *lo = (uint64_t)ceil(b - 1e-3);
        if (sv.has_x) *hi = (uint64_t)ceil(sv.obj / m.mem_scale);
        free(sv.x);
        csc_free(&c);
    }
    form_free(&m);
}

/* The LP relaxation, built and solved by CLP; its objective in joules.
 * Run apart: building the model of a graph of a thousand nodes takes
 * longer than the time left can be (DenseNet-121: 1595 nodes), and only
 * the child can be stopped then. */
typedef struct relaxation {
    const poet_problem *p;
    const milp_options *mo;
} relaxation;

static void solve_lp(const void *ctx, double deadline, solved *out)
{
    const relaxation *r = ctx;
    model m;
    if (form_build(&m, r->p, r->mo->paging, r->mo->remat, false, NULL)) return;
    /* the limit covers building the model too, and leaves a tenth for what follows */
    double left = 0.9 * (deadline - host_now_s());
    if (left > 0.1) clp_solve_relaxation(&m.lp, left, m.obj_scale, out);
    form_free(&m);
}

double milp_lp_bound(const poet_problem *p, const milp_options *mo, double seconds)
{
    if (seconds <= 0 || !cbc_available()) return NAN;
    solved sv;
    relaxation r = {p, mo};
    cbc_solve_apart(&(solve_job){.here = solve_lp, .here_ctx = &r, .deadline = host_now_s() + seconds}, &sv);
    /* a margin for the LP's tolerances, so that the bound stays a bound */
    return sv.optimal ? sv.obj * (1 - 1e-7) : NAN;
}

/* Solved, but placement needs more than the budget: solve against budgets
 * reduced by the excess (the first solve's bound still holds for the budget
 * asked for); failing that, the best baseline. Never reports a tighter
 * problem's infeasibility as the asked one's. */
static poet_status fit_placement(const poet_problem *p, const milp_options *mo, const poet_plan_options *o,
                                 double started, poet_plan_result *r, poet_err *err)
{
    double bound = r->lower_bound_j;
    poet_problem tighter = *p;
    poet_err why = {0};
    /* each try plans for less: by the placement's excess, or halfway down to
     * the smallest budget when that would go below it or found nothing */
    for (int attempt = 0; attempt < 4 && poet_schedule_validate(p, &r->schedule, &why); attempt++) {
        uint64_t arena = placed_arena_bytes(p, &r->schedule), floor_bytes = p->min_budget_bytes;
        double left = limit_s(o) - (host_now_s() - started);
        if (!strstr(why.msg, "placement-budget") || arena <= p->budget_bytes || left < 1) break;
        uint64_t excess = arena - p->budget_bytes, at = tighter.budget_bytes;
        tighter.budget_bytes = at > floor_bytes + excess ? at - excess : floor_bytes + (at - floor_bytes) / 2;
        if (tighter.budget_bytes >= at) break;
        poet_plan_options again = *o;
        again.time_limit_s = left;
        poet_plan_result next;
        memset(&next, 0, sizeof next);
        poet_status st = solve(&tighter, mo, &again, &next, err);
        if (st) return st;
        if (!next.schedule.T) { /* too tight: try halfway back up */
            tighter.budget_bytes += (at - tighter.budget_bytes) / 2;
            continue;
        }
        poet_plan_result_free(r);
        *r = next;
        r->status = POET_PLAN_FEASIBLE; /* optimal, if at all, for the tighter budget only */
        snprintf(r->note, sizeof r->note, "re-planned for %llu bytes so that placement fits",
                 (unsigned long long)tighter.budget_bytes);
    }
    if (r->schedule.T && poet_schedule_validate(p, &r->schedule, &why)) {
        poet_plan_result_free(r);
        memset(r, 0, sizeof *r);
        r->status = plan_best_baseline(p, mo->paging, mo->remat, &r->schedule) ? POET_PLAN_FEASIBLE : POET_PLAN_UNKNOWN;
        r->found_seconds = host_now_s();
        snprintf(r->note, sizeof r->note, "CBC's schedules did not place within the budget; %s",
                 r->schedule.T ? "reporting the best baseline" : "no baseline did either");
    }
    r->lower_bound_j = bound;
    return POET_OK;
}

void milp_explain_infeasible(const poet_problem *p, const milp_options *mo, double seconds, poet_plan_result *r)
{
    uint64_t lo, hi;
    r->status = POET_PLAN_INFEASIBLE;
    smallest_budget(p, mo, seconds, &lo, &hi);
    if (hi)
        snprintf(r->note, sizeof r->note,
                 "proven infeasible; the smallest feasible budget lies in [%llu, %llu] bytes",
                 (unsigned long long)lo, (unsigned long long)hi);
    else
        snprintf(r->note, sizeof r->note, "proven infeasible; no schedule exists below %llu bytes",
                 (unsigned long long)lo);
}

poet_status milp_plan(const poet_problem *p, const milp_options *mo, const poet_plan_options *o,
                      poet_plan_result *r, poet_err *err)
{
    double started = host_now_s();
    poet_status st = solve(p, mo, o, r, err);
    if (st) return st;
    if (r->schedule.T) return fit_placement(p, mo, o, started, r, err);
    if (r->status == POET_PLAN_INFEASIBLE)
        milp_explain_infeasible(p, mo, o->time_limit_s > 0 ? o->time_limit_s : 60, r);
    return POET_OK;
}

