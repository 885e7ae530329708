/* The fast planner (docs/fast.md): the fate search, then the exact MILP
 * over windows and on small graphs, against the covering bounds and the LP
 * bound, until the certified gap is met or time runs out. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "../host/clock.h"
#include "cbc.h"
#include "common.h"
#include "fast.h"
#include "fates.h"
#include "greedy.h"
#include "milp.h"
#include "progress.h"

enum { POLISH_MAX_NODES = 64 };

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
    if (r->status == POET_PLAN_OPTIMAL || p->T > POLISH_MAX_NODES || left < 1 || !cbc_available()) return POET_OK;
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
    plan_certify(r, sr.energy_j, bound);
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
poet_status fast_plan(const poet_problem *p, const poet_plan_options *o, poet_plan_result *r, poet_err *err)
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
        double relaxed = milp_lp_bound(p, &mo, time_left(o, started));
        if (isfinite(relaxed) && relaxed > bound) bound = relaxed;
        else if (!isfinite(relaxed))
            snprintf(r->note, sizeof r->note, "%s",
                     cbc_available() ? "the LP bound was not reached in time" : "no LP bound: poet was built without CBC");
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
    plan_certify(r, energy, bound);
    return polish(p, o, started, energy, r, err);
}

