#define _POSIX_C_SOURCE 200809L
#include "progress_line.h"

#include "cli.h"

#include <math.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static double period(const progress_line *l) { return l->tty ? 0.5 : 10.0; }

static void draw(progress_line *l, const char *end)
{
    char es[32] = "-", bs[32] = "-", gap[32] = "-";
    pthread_mutex_lock(&l->lock);
    if (!l->planner[0]) { /* no report yet: nothing to show */
        pthread_mutex_unlock(&l->lock);
        return;
    }
    double e = l->energy_j, b = l->bound_j;
    if (isfinite(e)) snprintf(es, sizeof es, "%.6g J", e);
    if (isfinite(b) && b > 0) snprintf(bs, sizeof bs, "%.6g J", b);
    /* a solver's bound can pass its incumbent by its tolerance: no gap then */
    if (isfinite(e) && isfinite(b) && b > 0) snprintf(gap, sizeof gap, "%.3f%%", e > b ? 100 * (e - b) / b : 0.0);
    fprintf(stderr, "%s%s %7.1f s  %-14s best %s  bound %s  gap %s%s", l->tty ? "\r" : "", l->planner,
            monotonic_s() - l->start, l->phase, es, bs, gap, end);
    fflush(stderr);
    pthread_mutex_unlock(&l->lock);
}

static bool is_done(progress_line *l)
{
    pthread_mutex_lock(&l->lock);
    bool done = l->done;
    pthread_mutex_unlock(&l->lock);
    return done;
}

static void *tick(void *arg)
{
    progress_line *l = arg;
    double next = monotonic_s() + period(l);
    while (!is_done(l)) {
        struct timespec nap = {0, 50 * 1000 * 1000};
        nanosleep(&nap, NULL);
        if (monotonic_s() >= next && !is_done(l)) {
            draw(l, l->tty ? "   " : "\n");
            next += period(l);
        }
    }
    return NULL;
}

void progress_line_start(progress_line *l)
{
    memset(l, 0, sizeof *l);
    pthread_mutex_init(&l->lock, NULL);
    snprintf(l->phase, sizeof l->phase, "start");
    l->energy_j = INFINITY, l->bound_j = -INFINITY;
    l->tty = isatty(2) == 1, l->start = monotonic_s();
    l->ticking = pthread_create(&l->ticker, NULL, tick, l) == 0;
}

void progress_line_report(void *ctx, const poet_plan_progress *p)
{
    progress_line *l = ctx;
    pthread_mutex_lock(&l->lock);
    snprintf(l->planner, sizeof l->planner, "%s", p->planner);
    snprintf(l->phase, sizeof l->phase, "%s", p->phase);
    l->energy_j = p->energy_j, l->bound_j = p->bound_j;
    pthread_mutex_unlock(&l->lock);
}

void progress_line_stop(progress_line *l)
{
    pthread_mutex_lock(&l->lock);
    l->done = true;
    pthread_mutex_unlock(&l->lock);
    if (l->ticking) pthread_join(l->ticker, NULL);
    /* a run too short to draw leaves no line; a longer one ends with its state */
    if (monotonic_s() - l->start >= period(l)) draw(l, "\n");
    pthread_mutex_destroy(&l->lock);
}
