#define _POSIX_C_SOURCE 200809L
#include "progress.h"

#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "../host/clock.h"

/* The state shown: written by the planner, drawn by the ticker thread. */
typedef struct shown {
    _Atomic double energy, bound;
    char phase[32];
} shown;

typedef struct line {
    shown sh;
    char planner[32];
    bool tty;
    double start;
    _Atomic bool done;
    pthread_t ticker;
    bool ticking;
    pthread_mutex_t lock; /* one writer of the line at a time */
} line;

static _Thread_local line *current;

static void draw(line *l, const char *end)
{
    shown *s = &l->sh;
    double e = s->energy, b = s->bound;
    char es[32] = "-", bs[32] = "-", gap[32] = "-", phase[sizeof s->phase];
    memcpy(phase, s->phase, sizeof phase);
    phase[sizeof phase - 1] = 0;
    if (isfinite(e)) snprintf(es, sizeof es, "%.6g J", e);
    if (isfinite(b) && b > 0) snprintf(bs, sizeof bs, "%.6g J", b);
    /* a solver's bound can pass its incumbent by its tolerance: no gap then */
    if (isfinite(e) && isfinite(b) && b > 0) snprintf(gap, sizeof gap, "%.3f%%", e > b ? 100 * (e - b) / b : 0.0);
    pthread_mutex_lock(&l->lock);
    fprintf(stderr, "%s%s %7.1f s  %-14s best %s  bound %s  gap %s%s", l->tty ? "\r" : "", l->planner,
            host_now_s() - l->start, phase, es, bs, gap, end);
    fflush(stderr);
    pthread_mutex_unlock(&l->lock);
}

static void *tick(void *arg)
{
    line *l = arg;
    double period = l->tty ? 0.5 : 10.0, next = host_now_s() + period;
    while (!l->done) {
        struct timespec nap = {0, 50 * 1000 * 1000};
        nanosleep(&nap, NULL);
        if (host_now_s() >= next && !l->done) {
            draw(l, l->tty ? "   " : "\n");
            next += period;
        }
    }
    return NULL;
}

void progress_begin(const char *planner, const poet_plan_options *o)
{
    current = NULL;
    if (o->quiet) return;
    static _Thread_local line l;
    memset(&l, 0, sizeof l);
    l.sh.energy = INFINITY;
    l.sh.bound = -INFINITY;
    snprintf(l.sh.phase, sizeof l.sh.phase, "start");
    snprintf(l.planner, sizeof l.planner, "%s", planner);
    l.tty = isatty(2) == 1, l.start = host_now_s();
    pthread_mutex_init(&l.lock, NULL);
    l.ticking = pthread_create(&l.ticker, NULL, tick, &l) == 0;
    current = &l;
}

void progress_end(void)
{
    line *l = current;
    if (!l) return;
    l->done = true;
    if (l->ticking) pthread_join(l->ticker, NULL);
    /* a run too short to draw leaves no line; a longer one ends with its state */
    if (host_now_s() - l->start >= (l->tty ? 0.5 : 10.0)) {
        snprintf(l->sh.phase, sizeof l->sh.phase, "done");
        draw(l, "\n");
    }
    pthread_mutex_destroy(&l->lock);
    current = NULL;
}

void progress_report(const char *phase, double energy_j, double bound_j)
{
    line *l = current;
    if (!l) return;
    shown *s = &l->sh;
    if (phase) snprintf(s->phase, sizeof s->phase, "%s", phase);
    if (energy_j < s->energy) s->energy = energy_j;
    if (bound_j > s->bound) s->bound = bound_j;
}
