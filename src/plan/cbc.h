/* Internal: COIN-OR's CBC (and CLP) as poet's planners use them: a model
 * from an lp (lp.h) as plain data, solved in a child process (host/apart.h)
 * that builds the model too, so that no COIN-OR code runs in poet's own
 * process (COIN-OR answers a failed allocation by terminating it, and
 * Debian's CBC 2.10 can abort on an internal assertion). Built without
 * CBC (POET_WITH_CBC off), cbc_absent.c answers every solve with nothing. */
#ifndef POET_SRC_PLAN_CBC_H
#define POET_SRC_PLAN_CBC_H

#include "poet/plan.h"
#include "lp.h"

/* What CBC is to solve, and how, as plain data. The process that runs the
 * solve (a child: cbc_solve_apart) builds CBC's model from it, so that no
 * COIN-OR code runs in poet's own process: COIN-OR answers a failed
 * allocation by terminating the process (std::bad_alloc). */
typedef struct cbc_recipe {
    const lp *l;
    const csc *c;          /* l's matrix */
    const double *lb, *ub; /* column bounds: l's own, or a window's fixings */
    poet_plan_options o;   /* threads, gap, determinism */
    double seconds;        /* CBC's limit from when the solve is issued: loading the model counts */
    double min_seconds;    /* but never less than this */
    int log_level;         /* 1 where the solve reports progress */
    bool bound_only;       /* no preprocessing, no heuristics: below */
    double cutoff;         /* in the model's units; INFINITY: none */
    mip_start start;
    const char *write_mps; /* where CBC writes the model (appending .mps), or NULL */
} cbc_recipe;



/* What a solve left behind: CBC's or CLP's answers, copied out of the model. */
typedef struct solved {
    bool ended;            /* the solve ran to its end (its process was not killed) */
    bool has_x, optimal, infeasible;
    double obj, bound;     /* in the model's scaled units */
    double found_at;       /* host_now_s() when CBC found its best solution, 0 if unknown */
    double *x;             /* the best solution's columns, when has_x */
} solved;

/* A solve to run apart: CBC's on a model (reporting progress, or not), or
 * work of the caller's that runs where the solve runs (the LP relaxation,
 * built there because building it can take longer than the time left, and
 * only a child can be stopped); either leaves its answers in out. */
typedef struct solve_job {
    const cbc_recipe *cbc;
    void (*here)(const void *ctx, double deadline, solved *out);
    const void *here_ctx;
    double scale;    /* joules per unit of CBC's objective, for progress; 0: the solve does not report */
    int n_cols;
    double deadline; /* host_now_s() after which the solve is stopped, lost */
} solve_job;

/* Solves in a child process and reads the answers back (and, where the
 * solve reports, its log as it comes); out->ended is false where the solve
 * was lost. Where no child can be started, the solve runs here, without
 * the deadline. */
void cbc_solve_apart(const solve_job *job, solved *out);

/* The LP relaxation of l with CLP, within seconds (CLP stops at its limit,
 * unlike CBC's driver): its optimum divided by obj_scale. */
void clp_solve_relaxation(const lp *l, double seconds, double obj_scale, solved *out);

/* Whether this poet was built with CBC; the milp planner needs it. */
bool cbc_available(void);

#endif
