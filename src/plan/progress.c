#include "progress.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "../host/clock.h"

typedef struct run {
    poet_plan_progress now;
    char planner[32], phase[32];
    double start;
    void (*tell)(void *ctx, const poet_plan_progress *p);
    void *ctx;
} run;

static _Thread_local run *current;

static void tell(run *r)
{
    r->now.seconds = host_now_s() - r->start;
    r->tell(r->ctx, &r->now);
}

void progress_begin(const char *planner, const poet_plan_options *o)
{
    current = NULL;
    if (!o->progress) return;
    static _Thread_local run r;
    memset(&r, 0, sizeof r);
    snprintf(r.planner, sizeof r.planner, "%s", planner);
    snprintf(r.phase, sizeof r.phase, "start");
    r.now = (poet_plan_progress){r.planner, r.phase, INFINITY, -INFINITY, 0, false};
    r.start = host_now_s();
    r.tell = o->progress, r.ctx = o->progress_ctx;
    current = &r;
    tell(&r);
}

void progress_end(void)
{
    run *r = current;
    if (!r) return;
    snprintf(r->phase, sizeof r->phase, "done");
    r->now.done = true;
    tell(r);
    current = NULL;
}

void progress_report(const char *phase, double energy_j, double bound_j)
{
    run *r = current;
    if (!r) return;
    bool changed = false;
    if (phase && strncmp(phase, r->phase, sizeof r->phase - 1) != 0) {
        snprintf(r->phase, sizeof r->phase, "%s", phase);
        changed = true;
    }
    if (energy_j < r->now.energy_j) r->now.energy_j = energy_j, changed = true;
    if (bound_j > r->now.bound_j) r->now.bound_j = bound_j, changed = true;
    if (changed) tell(r);
}
