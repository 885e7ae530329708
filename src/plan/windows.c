/* The exact MILP over windows of tensors (milp_improve): CBC cannot close
 * POET's MILP on a hundred nodes, but it solves it in a blink when all but
 * a window of tensors have their matrices' columns fixed to a known
 * schedule: the window's tensors may then be kept, dropped, recomputed or
 * paged anew, in every stage, with the exact accounting. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../host/clock.h"
#include "cbc.h"
#include "formulation.h"
#include "milp.h"
#include "progress.h"

typedef struct fix_ctx {
    const poet_schedule *s;
    int lo, hi; /* tensors [lo, hi) stay free */
    double *lb, *ub;
    const double *lb0, *ub0;
} fix_ctx;

static void fix_outside(int col, int matrix, int t, int i, void *ctx)
{
    fix_ctx *c = ctx;
    if (i >= c->lo && i < c->hi) {
        c->lb[col] = c->lb0[col], c->ub[col] = c->ub0[col];
        return;
    }
    double v = poet_sched_get(c->s, matrix, t, i) ? 1.0 : 0.0;
    c->lb[col] = c->ub[col] = v;
}

/* One window's sub-MILP from schedule s; the better schedule, validated
 * with its placement, replaces s and *energy. */
static bool improve_window(const poet_problem *p, const model *m, const csc *c, fix_ctx *fx, double seconds,
                           poet_schedule *s, double *energy)
{
    fx->s = s;
    form_each_decision(m, fix_outside, fx);
    cbc_recipe rc = {.l = &m->lp, .c = c, .lb = fx->lb, .ub = fx->ub, .o = cbc_quiet_options(), .seconds = seconds,
                     .cutoff = INFINITY, .start = form_start_from(m, s)};
    solved sv;
    /* the window's share of the search's time: 1.25 times its limit (0.8 of what is left) */
    double deadline = host_now_s() + 1.25 * seconds;
    cbc_solve_apart(&(solve_job){.cbc = &rc, .n_cols = m->lp.n_cols, .deadline = deadline}, &sv);
    mip_start_free(&rc.start);
    bool better = false;
    poet_schedule next;
    if (sv.has_x && sv.obj / m->obj_scale < *energy * (1 - 1e-9) && !poet_schedule_init(&next, p->T, NULL)) {
        form_extract(m, sv.x, &next);
        form_normalize(&next);
        poet_sim sim;
        better = !poet_schedule_validate(p, &next, NULL) && !poet_simulate(p, &next, &sim, NULL, NULL) &&
                 sim.energy_j < *energy * (1 - 1e-9);
        if (better) {
            poet_schedule_free(s);
            *s = next;
            *energy = sim.energy_j;
        } else {
            poet_schedule_free(&next);
        }
    }
    free(sv.x);
    return better;
}

bool milp_improve(const poet_problem *p, const milp_options *mo, double seconds, double target_j, poet_schedule *s,
                  double *found_at)
{
    double deadline = host_now_s() + seconds;
    poet_sim sim;
    if (seconds <= 0 || !cbc_available() || poet_simulate(p, s, &sim, NULL, NULL)) return false;
    double energy = sim.energy_j, start_j = energy;
    model m;
    if (form_build(&m, p, mo->paging, mo->remat, false, NULL)) return false;
    csc c;
    size_t n = (size_t)m.lp.n_cols;
    fix_ctx fx = {.lb = malloc(n * sizeof(double)), .ub = malloc(n * sizeof(double)), .lb0 = m.lp.lb, .ub0 = m.lp.ub};
    if (!fx.lb || !fx.ub || !lp_to_csc(&m.lp, &c)) {
        free(fx.lb), free(fx.ub), form_free(&m);
        return false;
    }
    memcpy(fx.lb, m.lp.lb, n * sizeof(double));
    memcpy(fx.ub, m.lp.ub, n * sizeof(double));
    int forward = 0;
    while (forward < p->T && !p->inst->nodes[forward].is_backward) forward++;
    int width = forward < 12 ? forward : 12;
    /* sweep windows back and forth over the forward tensors until a whole
     * sweep changes nothing, the target is met or time runs out */
    for (bool changed = true; changed && energy > target_j && host_now_s() < deadline;) {
        changed = false;
        for (int lo = 0; lo < forward && energy > target_j; lo += width / 2) {
            /* CBC overruns its limit by a little, and by more on big models */
            double left = 0.8 * (deadline - host_now_s()) - 0.003 * p->T;
            if (left < 0.5) break;
            fx.lo = lo, fx.hi = lo + width;
            bool got = improve_window(p, &m, &c, &fx, left < 3 ? left : 3, s, &energy);
            if (got) *found_at = host_now_s(), progress_report(NULL, energy, NAN);
            changed = changed || got;
        }
    }
    free(fx.lb), free(fx.ub);
    csc_free(&c);
    form_free(&m);
    return energy < start_j;
}
