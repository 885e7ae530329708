/* See cbc.h. */
#define _POSIX_C_SOURCE 200809L
#include "cbc.h"

#include <coin/Cbc_C_Interface.h>
#include <coin/Clp_C_Interface.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../host/apart.h"
#include "../host/clock.h"
#include "common.h"
#include "progress.h"

/* ---- progress ----
 * A reporting solve sends CBC's log through a pipe to the process that
 * waits for it, which reads the new incumbents and the bound from it. CBC's
 * message callback would not do: the search after its preprocessing runs
 * on a copy of the model that does not call it, so the progress line froze
 * at the MIP start and a schedule found later was dated to it. */

/* What a solve's log has said so far. */
typedef struct cbc_log {
    double scale;    /* joules per unit of CBC's objective */
    double best;     /* the best incumbent in the log, in CBC's units */
    double found_at; /* host_now_s() when the log first gave it; 0 before one */
} cbc_log;

/* One line of CBC's log: a new incumbent (Cbc0004I, Cbc0012I, Cbc0016I:
 * "Integer solution of V found ...") or the tree's state (Cbc0010I: "...,
 * B best solution, best possible P (S seconds)"). */
static void log_line(void *ctx, const char *line)
{
    cbc_log *g = ctx;
    double v, bound;
    const char *at;
    if ((!strncmp(line, "Cbc0004I", 8) || !strncmp(line, "Cbc0012I", 8) || !strncmp(line, "Cbc0016I", 8)) &&
        sscanf(line + 8, " Integer solution of %lf", &v) == 1 && v < g->best) {
        g->best = v, g->found_at = host_now_s();
        progress_report(NULL, v * g->scale, NAN);
    } else if (!strncmp(line, "Cbc0010I", 8) && (at = strstr(line, "best possible")) &&
               sscanf(at, "best possible %lf", &bound) == 1) {
        progress_report(NULL, g->best < 1e49 ? g->best * g->scale : NAN, bound * g->scale);
    }
}

/* ---- solving ---- */

static void set_params(Cbc_Model *cbc, const poet_plan_options *o, double seconds)
{
    char buf[64];
    snprintf(buf, sizeof buf, "%.3f", seconds);
    Cbc_setParameter(cbc, "seconds", buf);
    Cbc_setParameter(cbc, "timeMode", "elapsed");
    if (o->threads > 1) { /* CBC's "threads 1" still takes its threaded search path */
        snprintf(buf, sizeof buf, "%d", o->threads);
        Cbc_setParameter(cbc, "threads", buf);
    }
    /* CBC's gap is relative to the incumbent, poet's to the bound */
    snprintf(buf, sizeof buf, "%.17g", plan_gap(o) / (1 + plan_gap(o)));
    Cbc_setParameter(cbc, "ratioGap", buf);
    Cbc_setParameter(cbc, "allowableGap", "1e-12");
    Cbc_setParameter(cbc, "integerTolerance", "1e-9");
    /* CBC 2.10's probing can tighten a column past its other bound, and
     * CLP then aborts the process on an assertion instead of calling the
     * node infeasible (tests/test_milp.c replays one such model); without
     * it, bounds and times on the reference instances barely move. */
    Cbc_setParameter(cbc, "probing", "off");
    if (o->deterministic) {
        Cbc_setParameter(cbc, "randomSeed", "1");
        Cbc_setParameter(cbc, "randomCbcSeed", "1");
    }
}

/* CBC's model from r, for a solve issued at host_now_s() issued_at. */
static Cbc_Model *cbc_build(const cbc_recipe *r, double issued_at)
{
    const lp *l = r->l;
    Cbc_Model *cbc = Cbc_newModel();
    Cbc_loadProblem(cbc, l->n_cols, l->n_rows, r->c->start, r->c->index, r->c->value, r->lb, r->ub, l->obj, l->rlb,
                    l->rub);
    for (int j = 0; j < l->n_cols; j++)
        if (l->is_int[j]) Cbc_setInteger(cbc, j);
    Cbc_setObjSense(cbc, 1);
    if (r->write_mps) Cbc_writeMps(cbc, r->write_mps);
    if (r->start.n) Cbc_setMIPStartI(cbc, r->start.n, r->start.idx, r->start.val);
    double seconds = fmax(r->seconds - (host_now_s() - issued_at), fmax(r->min_seconds, 1e-3));
    set_params(cbc, &r->o, seconds);
    Cbc_setLogLevel(cbc, r->log_level);
    if (r->bound_only) {
        /* CBC 2.10's integer preprocessing can cut off a covering model's
         * optimum and then prove a wrong one: a bound above a feasible
         * schedule (tests/test_milp.c replays one, 921 against the optimum
         * 868) */
        Cbc_setParameter(cbc, "preprocess", "off");
        /* a bound is all that is asked, never a solution: CBC's heuristics,
         * which look for solutions, took half of a small model's solve
         * (dag_4 of the random-graph table) and left bounds no higher on
         * large ones */
        Cbc_setParameter(cbc, "heuristicsOnOff", "off"); /* the feasibility pump too */
    }
    if (isfinite(r->cutoff)) Cbc_setCutoff(cbc, r->cutoff);
    return cbc;
}

/* CBC's driver prints its log on standard output, which belongs to the
 * caller (poet plan --json writes its result there): for the solve, the log
 * goes to fd log (a pipe the waiting process reads, line by line) or is
 * dropped where log < 0. */
static void quiet_solve(Cbc_Model *cbc, int log)
{
    int saved = dup(1), sink = log >= 0 ? log : open("/dev/null", O_WRONLY);
    if (saved >= 0 && sink >= 0) dup2(sink, 1);
    /* a pipe would get the log in blocks; progress wants each line as it
     * comes (stdout was flushed before the fork, so nothing is pending) */
    if (log >= 0) setvbuf(stdout, NULL, _IOLBF, BUFSIZ);
    Cbc_solve(cbc);
    fflush(stdout);
    if (saved >= 0 && sink >= 0) dup2(saved, 1);
    if (saved >= 0) close(saved);
    if (sink >= 0 && sink != log) close(sink);
}

static void run_job(const solve_job *job, double issued_at, solved *out, int log)
{
    memset(out, 0, sizeof *out);
    out->ended = true;
    if (job->here) {
        job->here(job->here_ctx, job->deadline, out);
        return;
    }
    Cbc_Model *cbc = cbc_build(job->cbc, issued_at);
    quiet_solve(cbc, log);
    const double *x = Cbc_bestSolution(cbc);
    out->optimal = Cbc_isProvenOptimal(cbc), out->infeasible = Cbc_isProvenInfeasible(cbc);
    out->obj = Cbc_getObjValue(cbc), out->bound = Cbc_getBestPossibleObjValue(cbc);
    out->x = x ? malloc((size_t)job->n_cols * sizeof(double)) : NULL;
    if (out->x) memcpy(out->x, x, (size_t)job->n_cols * sizeof(double));
    out->has_x = out->x != NULL;
    Cbc_deleteModel(cbc);
}

typedef struct apart_ctx {
    const solve_job *job;
    double issued_at;
} apart_ctx;

/* In the child: the solve, and its answers (the solved record, then the
 * solution's columns) written back. */
static bool solve_in_child(void *ctx, int answer, int log)
{
    const apart_ctx *a = ctx;
    solved mine;
    run_job(a->job, a->issued_at, &mine, log);
    return apart_write(answer, &mine, sizeof mine) &&
           (!mine.has_x || apart_write(answer, mine.x, (size_t)a->job->n_cols * sizeof(double)));
}

/* Debian's CBC 2.10 can abort on an internal assertion (tests/test_milp.c
 * replays one such model) and segfaulted in CglPreProcess::postProcess
 * during a window solve on BERT (core dump from a benchmark run); in a
 * child, only the solve is lost (ended false) and the planner goes on with
 * what it has. A solve that does not stop at its own limit (CLP's, for one)
 * is killed at the deadline. */
void cbc_solve_apart(const solve_job *job, solved *out)
{
    apart_ctx a = {job, host_now_s()};
    cbc_log g = {.scale = job->scale, .best = INFINITY};
    apart_job aj = {solve_in_child, &a, job->scale ? log_line : NULL, &g, job->deadline};
    uint8_t *answer;
    size_t len, x_bytes = (size_t)job->n_cols * sizeof(double);
    memset(out, 0, sizeof *out);
    apart_outcome o = apart_run(&aj, &answer, &len);
    if (o == APART_NO_CHILD) {
        run_job(job, a.issued_at, out, -1);
        return;
    }
    solved got;
    bool whole = o == APART_DONE && len >= sizeof got;
    if (whole) memcpy(&got, answer, sizeof got);
    whole = whole && len == sizeof got + (got.has_x ? x_bytes : 0);
    if (whole && (!got.has_x || (got.x = malloc(x_bytes)))) {
        if (got.has_x) memcpy(got.x, answer + sizeof got, x_bytes);
        *out = got;
        /* the log's last incumbent is the answer, unless CBC kept a better
         * one it did not print: then it had it by now */
        bool logged = g.found_at > 0 && got.obj >= g.best - 1e-9 * fabs(g.best);
        out->found_at = !job->scale ? 0 : logged ? g.found_at : host_now_s();
    }
    free(answer);
}

void clp_solve_relaxation(const lp *l, double seconds, double obj_scale, solved *out)
{
    csc c;
    if (!lp_to_csc(l, &c)) return;
    Clp_Simplex *clp = Clp_newModel();
    Clp_setLogLevel(clp, 0);
    Clp_loadProblem(clp, l->n_cols, l->n_rows, c.start, c.index, c.value, l->lb, l->ub, l->obj, l->rlb, l->rub);
    Clp_setMaximumSeconds(clp, seconds);
    Clp_initialSolve(clp);
    out->optimal = Clp_isProvenOptimal(clp);
    out->obj = out->bound = Clp_objectiveValue(clp) / obj_scale;
    Clp_deleteModel(clp);
    csc_free(&c);
}

bool cbc_available(void) { return true; }
