/* The planner registry and the one entry point that validates every
 * schedule before it is reported. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "greedy.h"
#include "milp.h"
#include "fates.h"
#include "progress.h"
#include "../host/clock.h"

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

enum { POLISH_MAX_NODES = 64 };

/* A schedule within this of a lower bound is optimal (the bounds keep 1e-7
 * of margin for their solvers' tolerances, so they never quite meet it). */
#define OPTIMAL_GAP 1e-6

/* The certificate of a schedule of this energy against a lower bound: the
 * bound (never above the energy) and optimality when the two meet, or when
 * already proven. */
static void certify(poet_plan_result *r, double energy, double bound)
{
    r->lower_bound_j = bound < energy ? bound : energy;
    if (energy <= r->lower_bound_j * (1 + OPTIMAL_GAP)) r->status = POET_PLAN_OPTIMAL;
    else if (r->status != POET_PLAN_OPTIMAL) r->status = POET_PLAN_FEASIBLE;
}

/* A schedule re-planned for a tighter budget so that placement fits is
 * still optimal where it meets the bound of the budget asked for. */
static poet_status plan_milp(const poet_problem *p, const poet_plan_options *o, poet_plan_result *r, poet_err *err)
{
    milp_options mo = {!o->no_paging, !o->no_remat, NULL};
    poet_status st = milp_plan(p, &mo, o, r, err);
    poet_sim sim;
    if (!st && r->status == POET_PLAN_FEASIBLE && isfinite(r->lower_bound_j) &&
        !poet_simulate(p, &r->schedule, &sim, NULL, NULL))
        certify(r, sim.energy_j, r->lower_bound_j);
    return st;
}

/* fast's time limit: the caller's, or 60 s. */
static double fast_limit(const poet_plan_options *o) { return o->time_limit_s > 0 ? o->time_limit_s : 60; }

/* Seconds of the limit held back for CBC's overruns and the final validation. */
static double fast_reserve(double limit) { return 0.03 * limit + 0.3; }

/* Seconds of the limit left to a plan started at started, less the reserve. */
static double time_left(const poet_plan_options *o, double started)
{
    double limit = fast_limit(o);
    return limit - fast_reserve(limit) - (host_now_s() - started);
}

/* On small graphs, the exact MILP started from the schedule found, in the
 * time left less the reserve for CBC's overruns and the final validation:
 * it closes what gap remains, or proves the schedule optimal. */
static poet_status polish(const poet_problem *p, const poet_plan_options *o, double started, double energy,
                          poet_plan_result *r, poet_err *err)
{
    double left = time_left(o, started);
    if (r->status == POET_PLAN_OPTIMAL || p->T > POLISH_MAX_NODES || left < 1) return POET_OK;
    if (energy <= r->lower_bound_j * (1 + plan_gap(o))) return POET_OK;
    poet_plan_options again = *o;
    again.time_limit_s = left;
    milp_options mo = {!o->no_paging, !o->no_remat, r->schedule.T ? &r->schedule : NULL};
    poet_plan_result m;
    memset(&m, 0, sizeof m);
    m.lower_bound_j = NAN;
    poet_status st = milp_plan(p, &mo, &again, &m, err);
    if (st) return st;
    poet_sim sm, sr;
    bool have_m = (m.status == POET_PLAN_OPTIMAL || m.status == POET_PLAN_FEASIBLE) &&
                  !poet_schedule_validate(p, &m.schedule, NULL) && !poet_simulate(p, &m.schedule, &sm, NULL, NULL);
    bool have_r = r->schedule.T && !poet_simulate(p, &r->schedule, &sr, NULL, NULL);
    double bound = r->lower_bound_j;
    if (isfinite(m.lower_bound_j) && (!isfinite(bound) || m.lower_bound_j > bound)) bound = m.lower_bound_j;
    if (!have_m && !have_r) { /* the MILP's word stands: infeasible, or unknown */
        poet_plan_result_free(r);
        *r = m;
        return POET_OK;
    }
    if (have_m && (!have_r || sm.energy_j <= sr.energy_j)) {
        double found = have_r && sm.energy_j >= sr.energy_j * (1 - 1e-12) ? r->found_seconds : m.found_seconds;
        poet_plan_result_free(r);
        *r = m;
        r->found_seconds = found;
        sr = sm;
    } else {
        poet_plan_result_free(&m);
    }
    certify(r, sr.energy_j, bound);
    return POET_OK;
}

/* Keeps cand, found at the host_now_s() at, as *best when it is valid and
 * cheaper; frees it otherwise. */
static void keep_cheaper(const poet_problem *p, poet_schedule *cand, double at, poet_schedule *best, double *best_j,
                         double *found_at)
{
    poet_sim sim;
    if (!poet_simulate(p, cand, &sim, NULL, NULL) && sim.energy_j < *best_j) {
        if (isfinite(*best_j)) poet_schedule_free(best);
        *best = *cand, *best_j = sim.energy_j, *found_at = at;
        return;
    }
    poet_schedule_free(cand);
}

/* No schedule meets both budgets, as a covering model proved: r says so,
 * and the smallest budget that would do, in the time left. */
static poet_status explain_infeasible(const poet_problem *p, const poet_plan_options *o, const milp_options *mo,
                                      double started, poet_plan_result *r)
{
    milp_explain_infeasible(p, mo, time_left(o, started), r);
    return POET_OK;
}

/* Whether the fate search or a baseline finds a valid schedule within
 * budget bytes, in the given seconds. */
static bool found_within(const poet_problem *p, bool remat, bool paging, uint64_t budget, double seconds)
{
    poet_problem q = *p;
    q.budget_bytes = budget;
    poet_schedule s;
    double at = 0;
    bool found = plan_best_baseline(&q, paging, remat, &s);
    /* any schedule that fits will do: the target is met by the first */
    if (!found && !fates_plan(&q, remat, paging, seconds, INFINITY, &s, &at, NULL)) found = at > 0;
    if (!found) return false;
    found = !poet_schedule_validate(&q, &s, NULL);
    poet_schedule_free(&s);
    return found;
}

/* No schedule was found and none was proven impossible: the note gives the
 * smallest budget (to a 64th of the way from the one asked for to the
 * keep-all peak) at which the fate search or a baseline finds one, searched
 * by bisection in at most a quarter of the limit, so that the user learns
 * which budget would do (a transformer block imported from ONNX, m4, 50%
 * of its keep-all peak: nothing found there, a schedule from 53.9%). */
static void note_found_from(const poet_problem *p, const poet_plan_options *o, double started, poet_plan_result *r)
{
    bool remat = !o->no_remat, paging = !o->no_paging;
    double left = time_left(o, started), quarter = 0.25 * fast_limit(o);
    double deadline = host_now_s() + (left < quarter ? left : quarter);
    uint64_t lo = p->budget_bytes, hi = p->keep_all_peak_bytes;
    if (left <= 0 || hi <= lo || !found_within(p, remat, paging, hi, deadline - host_now_s())) return;
    uint64_t step = (hi - lo) / 64 + 1;
    /* each probe gets a share of the time left: six halvings reach the 64th, one more for slack */
    for (int probes = 7; hi - lo > step && host_now_s() < deadline; probes = probes > 1 ? probes - 1 : 1) {
        uint64_t mid = lo + (hi - lo) / 2;
        if (found_within(p, remat, paging, mid, (deadline - host_now_s()) / probes)) hi = mid;
        else lo = mid;
    }
    size_t n = strlen(r->note);
    snprintf(r->note + n, sizeof r->note - n,
             "%sthe fate search or a baseline finds one from %llu bytes (%.1f%% of the keep-all peak)", n ? "; " : "",
             (unsigned long long)hi, 100.0 * (double)hi / (double)p->keep_all_peak_bytes);
}

/* The covering bound; the fate search (until it meets the bound) and the
 * best baseline; the LP bound; then the exact MILP over windows of tensors
 * (large graphs) or over the whole (small ones), while the gap stays open. */
static poet_status plan_fast(const poet_problem *p, const poet_plan_options *o, poet_plan_result *r, poet_err *err)
{
    double started = host_now_s(), limit = fast_limit(o);
    /* a schedule within this factor of the bound is good enough */
    double enough = 1 + (plan_gap(o) > OPTIMAL_GAP ? plan_gap(o) : OPTIMAL_GAP);
    bool remat = !o->no_remat, paging = !o->no_paging;
    double fates_at;
    poet_schedule best, cand;
    double energy = INFINITY, bound = p->full_memory_energy_j;
    milp_options mo = {paging, remat, NULL};
    progress_report("covering bound", NAN, bound);
    double cover = milp_cover_bound(p, &mo, COVER_AGGREGATE, 0.1 * limit, 0);
    if (cover == INFINITY) return explain_infeasible(p, o, &mo, started, r);
    if (isfinite(cover) && cover > bound) bound = cover;
    progress_report("baselines", NAN, bound);
    if (plan_best_baseline(p, paging, remat, &cand))
        keep_cheaper(p, &cand, host_now_s(), &best, &energy, &r->found_seconds);
    progress_report("fate search", energy, NAN);
    double fates_from = host_now_s();
    poet_status st = fates_plan(p, remat, paging, 0.4 * limit, bound * enough, &cand, &fates_at, err);
    /* what the fate search leaves of its share goes to the staged bound, the step likeliest to close the gap
     * after it (residual_5 of the random graphs on the m4 at 68%: its proof takes 1.6-2.0 s of the 2 s it had
     * with a 10 s limit, so the plan ended at a 0.1% or a 3.7% gap, one run or the next) */
    double fates_left = 0.4 * limit - (host_now_s() - fates_from);
    if (st) {
        if (isfinite(energy)) poet_schedule_free(&best);
        return st;
    }
    if (fates_at > 0) keep_cheaper(p, &cand, fates_at, &best, &energy, &r->found_seconds);
    /* the staged model has no solution on settings where the aggregate one has (dag_4 of the random graphs on
     * the a72 at 54%: proven in 0.02 s, where the whole MILP took 5 s) */
    if (!isfinite(energy) && remat && milp_cover_bound(p, &mo, COVER_STAGED_WHOLE, 0.2 * limit, 0) == INFINITY)
        return explain_infeasible(p, o, &mo, started, r);
    if (!isfinite(energy)) {
        r->status = POET_PLAN_UNKNOWN;
        snprintf(r->note, sizeof r->note, "neither the fate search nor a baseline met the budgets");
        st = polish(p, o, started, INFINITY, r, err);
        if (!st && r->status == POET_PLAN_UNKNOWN && !o->no_budget_note) note_found_from(p, o, started, r);
        return st;
    }
    r->schedule = best;
    if (energy > bound * enough && remat) {
        progress_report("staged covering bound", energy, NAN);
        double staged = milp_cover_bound(p, &mo, COVER_STAGED_WHOLE, 0.2 * limit + fmax(fates_left, 0),
                                         energy / enough);
        if (isfinite(staged) && staged > bound) bound = staged;
        progress_report(NULL, NAN, bound);
    }
    if (energy > bound * enough) {
        progress_report("LP bound", energy, NAN);
        double lp = milp_lp_bound(p, &mo, time_left(o, started));
        if (isfinite(lp) && lp > bound) bound = lp;
        else if (!isfinite(lp)) snprintf(r->note, sizeof r->note, "the LP bound was not reached in time");
        progress_report(NULL, NAN, bound);
    }
    poet_sim sim;
    if (energy > bound * enough) {
        /* small graphs: windows first, quick to find what the fate search
         * missed; then the whole MILP (polish) with the rest of the time */
        double left = time_left(o, started);
        progress_report("MILP windows", NAN, NAN);
        if (milp_improve(p, &mo, p->T > POLISH_MAX_NODES ? left : 0.25 * left, bound * enough, &r->schedule,
                         &r->found_seconds) &&
            !poet_simulate(p, &r->schedule, &sim, NULL, NULL))
            energy = sim.energy_j;
    }
    r->status = POET_PLAN_FEASIBLE;
    certify(r, energy, bound);
    return polish(p, o, started, energy, r, err);
}

static const poet_planner_def PLANNERS[] = {
    {"fast", "fate search (keep, recompute in chains, or page each tensor) polished by the exact MILP over windows, "
             "against a covering bound and the LP bound: a certified gap in seconds", true, plan_fast},
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
        snprintf(r->note, sizeof r->note,
                 "no schedule fits in %llu bytes: some stage holds a node and its inputs, %llu bytes at least",
                 (unsigned long long)p->budget_bytes, (unsigned long long)p->min_budget_bytes);
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
