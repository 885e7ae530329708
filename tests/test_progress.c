/* The planner's progress reports (poet_plan_options.progress): the one way
 * poet tells how a plan goes; the library itself prints nothing. */
#include <math.h>
#include <string.h>

#include "check.h"
#include "poet/poet.h"

typedef struct heard {
    int calls, starts, dones, after_done;
    bool energy_rose, bound_fell, time_went_back, wrong_planner;
    double energy_j, bound_j, seconds;
    char last_phase[32];
} heard;

static void listen(void *ctx, const poet_plan_progress *p)
{
    heard *h = ctx;
    if (h->dones) h->after_done++;
    if (h->calls && p->energy_j > h->energy_j) h->energy_rose = true;
    if (h->calls && p->bound_j < h->bound_j) h->bound_fell = true;
    if (h->calls && p->seconds < h->seconds) h->time_went_back = true;
    if (strcmp(p->planner, "fast") != 0) h->wrong_planner = true;
    h->starts += strcmp(p->phase, "start") == 0 && !h->calls;
    h->dones += p->done;
    h->energy_j = p->energy_j, h->bound_j = p->bound_j, h->seconds = p->seconds;
    snprintf(h->last_phase, sizeof h->last_phase, "%s", p->phase);
    h->calls++;
}

int main(void)
{
    poet_err err = {0};
    poet_graph g;
    poet_profile dev;
    poet_instance inst;
    poet_problem p;
    if (poet_zoo_build("cnn_digits", 8, &g, &err) || poet_profile_find("m4", &dev, &err) ||
        poet_instance_from_graph(&g, &dev, &inst, &err) || poet_problem_init(&p, &inst, 0, 1.2, &err)) {
        fprintf(stderr, "setup: %s\n", err.msg);
        return 1;
    }
    p.budget_bytes = p.keep_all_peak_bytes / 2;
    heard h = {0};
    poet_plan_options o = {.threads = 1, .deterministic = true, .progress = listen, .progress_ctx = &h};
    poet_plan_result r;
    CHECK(poet_plan("fast", &p, &o, &r, &err) == POET_OK);
    CHECK(r.status == POET_PLAN_OPTIMAL || r.status == POET_PLAN_FEASIBLE);
    CHECK_MSG(h.calls >= 3, "%d reports: a start, some progress and the end", h.calls);
    CHECK(h.starts == 1 && h.dones == 1 && h.after_done == 0);
    CHECK(strcmp(h.last_phase, "done") == 0);
    CHECK(!h.energy_rose && !h.bound_fell && !h.time_went_back && !h.wrong_planner);
    /* what it reported it held and proved is what it returned, within CBC's tolerance */
    CHECK_MSG(isfinite(h.energy_j) && h.energy_j >= r.lower_bound_j * (1 - 1e-6),
              "reported best %.9g J, returned bound %.9g J", h.energy_j, r.lower_bound_j);
    CHECK_MSG(h.bound_j <= r.lower_bound_j * (1 + 1e-6) + 1e-12, "reported bound %.9g J, returned %.9g J", h.bound_j,
              r.lower_bound_j);
    poet_plan_result_free(&r);

    /* an infeasible budget is answered before any planner runs: nothing to report */
    heard none = {0};
    o.progress_ctx = &none;
    p.budget_bytes = p.min_budget_bytes - 1;
    CHECK(poet_plan("fast", &p, &o, &r, &err) == POET_OK && r.status == POET_PLAN_INFEASIBLE);
    CHECK(none.calls == 0);
    poet_plan_result_free(&r);
    poet_problem_free(&p);
    poet_instance_free(&inst);
    poet_graph_free(&g);
    return check_report();
}
