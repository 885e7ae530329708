/* POET's MILP (tests/data/reference/README.md) on COIN-OR CBC's C API.
 *
 * Differences from the original formulation, none of which changes its
 * integer solutions:
 * - variables outside the lower triangle do not exist (rather than one
 *   aggregated equality row per matrix), and R[t,t] is fixed by its bounds;
 * - SSd and Free_E are continuous: with binary MOut and MIn, SSd is pinned
 *   where it matters, and freeing more only lowers memory, so Free_E needs
 *   only its upper bounds (computed, not kept, no later reader);
 * - the objective is scaled by the full-memory energy, memory rows by the
 *   budget and the runtime row by the full-memory time, so that CBC's
 *   tolerances (1e-6 and so on) mean something;
 * - repeated edges count once.
 * The best baseline schedule is handed to CBC as a MIP start. */
#define _POSIX_C_SOURCE 200809L
#include <coin/Cbc_C_Interface.h>
#include <coin/Clp_C_Interface.h>
#include <errno.h>
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include "poet/file.h"
#include "../host/clock.h"
#include "../schedule/accounting.h"
#include "glpk_mip.h"
#include "greedy.h"
#include "milp.h"
#include "progress.h"

/* CBC reads bounds of DBL_MAX as infinite; IEEE infinity upsets it */
#define LP_INF DBL_MAX

typedef struct lp {
    int n_cols, cap_cols;
    double *obj, *lb, *ub;
    char *is_int;
    int n_rows, cap_rows;
    double *rlb, *rub;
    int nnz, cap_nnz;
    int *trow, *tcol;
    double *tval;
    bool oom;
} lp;

/* Grows several parallel arrays to hold `need` entries each. */
static bool grow(int *cap, int need, void **arrays[], const size_t *elem, int n)
{
    if (need <= *cap) return true;
    int cap2 = *cap ? *cap : 4096;
    while (cap2 < need) cap2 *= 2;
    for (int k = 0; k < n; k++) {
        void *q = realloc(*arrays[k], (size_t)cap2 * elem[k]);
        if (!q) return false;
        *arrays[k] = q;
    }
    *cap = cap2;
    return true;
}

static int add_col(lp *m, double obj, double lb, double ub, bool is_int)
{
    void **a[] = {(void **)&m->obj, (void **)&m->lb, (void **)&m->ub, (void **)&m->is_int};
    const size_t e[] = {sizeof(double), sizeof(double), sizeof(double), sizeof(char)};
    if (!grow(&m->cap_cols, m->n_cols + 1, a, e, 4)) return m->oom = true, -1;
    int c = m->n_cols++;
    m->obj[c] = obj, m->lb[c] = lb, m->ub[c] = ub, m->is_int[c] = (char)is_int;
    return c;
}

static int add_row(lp *m, double lb, double ub)
{
    void **a[] = {(void **)&m->rlb, (void **)&m->rub};
    const size_t e[] = {sizeof(double), sizeof(double)};
    if (!grow(&m->cap_rows, m->n_rows + 1, a, e, 2)) return m->oom = true, -1;
    m->rlb[m->n_rows] = lb, m->rub[m->n_rows] = ub;
    return m->n_rows++;
}

static void coef(lp *m, int row, int col, double v)
{
    if (row < 0 || col < 0 || v == 0) return;
    void **a[] = {(void **)&m->trow, (void **)&m->tcol, (void **)&m->tval};
    const size_t e[] = {sizeof(int), sizeof(int), sizeof(double)};
    if (!grow(&m->cap_nnz, m->nnz + 1, a, e, 3)) {
        m->oom = true;
        return;
    }
    m->trow[m->nnz] = row, m->tcol[m->nnz] = col, m->tval[m->nnz] = v;
    m->nnz++;
}

static void lp_free(lp *m)
{
    free(m->obj), free(m->lb), free(m->ub), free(m->is_int), free(m->rlb), free(m->rub);
    free(m->trow), free(m->tcol), free(m->tval);
}

/* ---- the formulation ---- */

typedef struct model {
    const poet_problem *p;
    bool paging, remat;
    bool min_budget; /* objective: the smallest budget (a column) instead of energy */
    int T;
    int *R, *S, *D, *I, *O, *U; /* column of each matrix entry [t*T+i], or -1 */
    int *F;                     /* column of Free for (stage t, input slot c) [t*E+c], or -1 */
    int M;                      /* the budget column when min_budget */
    double mem_scale, obj_scale, time_scale;
    lp lp;
} model;

#define AT(a, t, i) (m->a[(size_t)(t) * (size_t)m->T + (size_t)(i)])

static int col_of(const int *a, const model *m, int t, int i)
{
    return (t < 0 || i < 0 || t >= m->T || i >= m->T) ? -1 : a[(size_t)t * (size_t)m->T + (size_t)i];
}

static void add_columns(model *m)
{
    const poet_cnode *n = m->p->inst->nodes;
    int T = m->T;
    double os = m->min_budget ? 0 : m->obj_scale;
    for (int t = 0; t < T; t++)
        for (int i = 0; i <= t; i++) {
            if (i == t) AT(R, t, i) = add_col(&m->lp, os * n[i].compute_j, 1, 1, false);
            else if (m->remat) AT(R, t, i) = add_col(&m->lp, os * n[i].compute_j, 0, 1, true);
            if (i < t) AT(S, t, i) = add_col(&m->lp, 0, 0, 1, true);
            if (m->paging && i < t && t < T - 1) AT(O, t, i) = add_col(&m->lp, os * n[i].pageout_j, 0, 1, true);
            if (m->paging && i + 2 <= t) AT(D, t, i) = add_col(&m->lp, 0, 0, 1, false);
            if (m->paging && i + 2 <= t && t < T - 1) AT(I, t, i) = add_col(&m->lp, os * n[i].pagein_j, 0, 1, true);
            AT(U, t, i) = add_col(&m->lp, 0, 0, m->min_budget ? LP_INF : 1, false);
        }
    const int *in_start = m->p->in_start;
    int E = in_start[T];
    for (int t = 0; t < T; t++)
        for (int k = 0; k <= t; k++)
            if (AT(R, t, k) >= 0)
                for (int c = in_start[k]; c < in_start[k + 1]; c++) m->F[(size_t)t * E + c] = add_col(&m->lp, 0, 0, 1, false);
    if (m->min_budget) m->M = add_col(&m->lp, 1, 0, LP_INF, false);
}

/* Constraints 3-6 of the reference: inputs present, residency carried,
 * paging needs a source. */
static void add_dataflow(model *m)
{
    const poet_problem *p = m->p;
    int T = m->T;
    for (int t = 0; t < T; t++) {
        for (int k = 0; k <= t; k++) {
            int rk = AT(R, t, k);
            if (rk < 0) continue;
            for (int c = p->in_start[k]; c < p->in_start[k + 1]; c++) {
                int u = p->in[c], row = add_row(&m->lp, -LP_INF, 0);
                coef(&m->lp, row, rk, 1);
                coef(&m->lp, row, col_of(m->R, m, t, u), -1);
                coef(&m->lp, row, col_of(m->S, m, t, u), -1);
            }
        }
        for (int i = 0; i < t; i++) {
            if (AT(I, t, i) >= 0) {
                int row = add_row(&m->lp, -LP_INF, 0);
                coef(&m->lp, row, AT(I, t, i), 1), coef(&m->lp, row, AT(D, t, i), -1);
            }
            if (AT(O, t, i) >= 0) {
                int row = add_row(&m->lp, -LP_INF, 0);
                coef(&m->lp, row, AT(O, t, i), 1), coef(&m->lp, row, AT(S, t, i), -1);
            }
        }
        if (t + 1 >= T) continue;
        for (int i = 0; i <= t; i++) {
            int row = add_row(&m->lp, -LP_INF, 0);
            coef(&m->lp, row, AT(S, t + 1, i), 1);
            coef(&m->lp, row, col_of(m->S, m, t, i), -1);
            coef(&m->lp, row, col_of(m->R, m, t, i), -1);
            coef(&m->lp, row, col_of(m->I, m, t, i), -1);
            if (col_of(m->D, m, t + 1, i) >= 0) {
                row = add_row(&m->lp, -LP_INF, 0);
                coef(&m->lp, row, AT(D, t + 1, i), 1);
                coef(&m->lp, row, col_of(m->D, m, t, i), -1);
                coef(&m->lp, row, col_of(m->O, m, t, i), -1);
            }
        }
    }
}

/* Constraints 7-9: what may be freed after each computation, and memory. */
static void add_memory(model *m)
{
    const poet_problem *p = m->p;
    const poet_cnode *n = p->inst->nodes;
    int T = m->T, E = p->in_start[T];
    for (int t = 0; t < T; t++) {
        for (int k = 0; k <= t; k++) {
            for (int c = p->in_start[k]; c < p->in_start[k + 1]; c++) {
                int f = m->F[(size_t)t * E + c], i = p->in[c];
                if (f < 0) continue;
                int row = add_row(&m->lp, -LP_INF, 0);
                coef(&m->lp, row, f, 1), coef(&m->lp, row, AT(R, t, k), -1);
                if (t + 1 < T) {
                    row = add_row(&m->lp, -LP_INF, 1);
                    coef(&m->lp, row, f, 1), coef(&m->lp, row, AT(S, t + 1, i), 1);
                }
                for (int o = p->out_start[i]; o < p->out_start[i + 1]; o++) {
                    int j = p->out[o];
                    if (j <= k || j > t || AT(R, t, j) < 0) continue;
                    row = add_row(&m->lp, -LP_INF, 1);
                    coef(&m->lp, row, f, 1), coef(&m->lp, row, AT(R, t, j), 1);
                }
            }
        }
        /* U[t,0] = m_0 R[t,0] + sum m_i SRam[t,i];
         * U[t,k] = U[t,k-1] + m_k R[t,k] - sum over inputs i of k-1 of m_i Free */
        for (int k = 0; k <= t; k++) {
            int row = add_row(&m->lp, 0, 0);
            coef(&m->lp, row, AT(U, t, k), 1);
            coef(&m->lp, row, col_of(m->R, m, t, k), -m->mem_scale * (double)n[k].bytes);
            if (k == 0) {
                for (int i = 0; i < t; i++) coef(&m->lp, row, AT(S, t, i), -m->mem_scale * (double)n[i].bytes);
            } else {
                coef(&m->lp, row, AT(U, t, k - 1), -1);
                for (int c = p->in_start[k - 1]; c < p->in_start[k]; c++)
                    coef(&m->lp, row, m->F[(size_t)t * E + c], m->mem_scale * (double)n[p->in[c]].bytes);
            }
            if (m->min_budget) { /* U[t,k] <= M */
                int cap = add_row(&m->lp, -LP_INF, 0);
                coef(&m->lp, cap, AT(U, t, k), 1), coef(&m->lp, cap, m->M, -1);
            }
        }
    }
}

static void add_runtime(model *m)
{
    if (!isfinite(m->p->runtime_budget_s)) return;
    int row = add_row(&m->lp, -LP_INF, m->p->runtime_factor);
    for (int t = 0; t < m->T; t++)
        for (int i = 0; i <= t; i++)
            coef(&m->lp, row, AT(R, t, i), m->time_scale * m->p->inst->nodes[i].time_s);
}

static void model_free(model *m)
{
    free(m->R), free(m->S), free(m->D), free(m->I), free(m->O), free(m->U), free(m->F);
    lp_free(&m->lp);
}

static poet_status model_build(model *m, const poet_problem *p, bool paging, bool remat, bool min_budget,
                               poet_err *err)
{
    memset(m, 0, sizeof *m);
    m->p = p, m->T = p->T, m->paging = paging, m->remat = remat, m->min_budget = min_budget, m->M = -1;
    size_t TT = (size_t)p->T * (size_t)p->T, E = (size_t)p->in_start[p->T] + 1;
    int **mats[] = {&m->R, &m->S, &m->D, &m->I, &m->O, &m->U};
    bool ok = true;
    for (size_t k = 0; k < sizeof mats / sizeof *mats; k++) {
        *mats[k] = malloc(TT * sizeof(int));
        ok = ok && *mats[k];
        if (*mats[k]) memset(*mats[k], 0xff, TT * sizeof(int));
    }
    m->F = malloc((size_t)p->T * E * sizeof(int));
    if (!ok || !m->F) {
        model_free(m);
        return poet_fail(err, POET_ERR_NOMEM, "out of memory building the MILP");
    }
    memset(m->F, 0xff, (size_t)p->T * E * sizeof(int));
    m->mem_scale = 1.0 / (double)(p->budget_bytes ? p->budget_bytes : 1);
    if (min_budget) m->mem_scale = 1.0 / (double)(p->keep_all_peak_bytes ? p->keep_all_peak_bytes : 1);
    m->obj_scale = p->full_memory_energy_j > 0 ? 1.0 / p->full_memory_energy_j : 1.0;
    m->time_scale = p->full_memory_time_s > 0 ? 1.0 / p->full_memory_time_s : 1.0;
    add_columns(m);
    add_dataflow(m);
    add_memory(m);
    add_runtime(m);
    if (m->lp.oom) {
        model_free(m);
        return poet_fail(err, POET_ERR_NOMEM, "out of memory building the MILP");
    }
    return POET_OK;
}

/* The model's matrix in column-major form; false when out of memory. */
typedef struct csc {
    CoinBigIndex *start;
    int *index;
    double *value;
} csc;

static void csc_free(csc *c) { free(c->start), free(c->index), free(c->value); }

static bool to_csc(const lp *l, csc *c)
{
    c->start = calloc((size_t)l->n_cols + 1, sizeof *c->start);
    c->index = malloc((size_t)(l->nnz + 1) * sizeof *c->index);
    c->value = malloc((size_t)(l->nnz + 1) * sizeof *c->value);
    int *fill = malloc((size_t)(l->n_cols + 1) * sizeof *fill);
    bool ok = c->start && c->index && c->value && fill;
    if (ok) {
        for (int k = 0; k < l->nnz; k++) c->start[l->tcol[k] + 1]++;
        for (int j = 0; j < l->n_cols; j++) c->start[j + 1] += c->start[j];
        for (int j = 0; j < l->n_cols; j++) fill[j] = (int)c->start[j];
        for (int k = 0; k < l->nnz; k++) {
            int at = fill[l->tcol[k]]++;
            c->index[at] = l->trow[k], c->value[at] = l->tval[k];
        }
    }
    free(fill);
    if (!ok) csc_free(c);
    return ok;
}

/* Calls fn for each decision column (R, SRam, MIn, MOut) with the matrix
 * of the schedule it stands for. */
static void each_decision(const model *m, void (*fn)(int col, int matrix, int t, int i, void *ctx), void *ctx)
{
    const int matrices[4] = {POET_R, POET_SRAM, POET_MIN, POET_MOUT};
    const int *cols[4] = {m->R, m->S, m->I, m->O};
    for (int k = 0; k < 4; k++)
        for (int t = 0; t < m->T; t++)
            for (int i = 0; i <= t; i++) {
                int c = cols[k][(size_t)t * (size_t)m->T + (size_t)i];
                if (c >= 0) fn(c, matrices[k], t, i, ctx);
            }
}

typedef struct start_ctx {
    const model *m;
    const poet_schedule *s;
    int n, *idx;
    double *val;
} start_ctx;

static void add_start_value(int col, int matrix, int t, int i, void *ctx)
{
    start_ctx *c = ctx;
    if (!c->m->lp.is_int[col]) return;
    c->idx[c->n] = col;
    c->val[c->n++] = poet_sched_get(c->s, matrix, t, i) ? 1.0 : 0.0;
}

/* A MIP start for CBC: the integer columns' values for a schedule. */
typedef struct mip_start {
    int n, *idx;
    double *val;
} mip_start;

static mip_start start_from(const model *m, const poet_schedule *s)
{
    start_ctx c = {m, s, 0, malloc((size_t)m->lp.n_cols * sizeof(int)), malloc((size_t)m->lp.n_cols * sizeof(double))};
    if (c.idx && c.val) each_decision(m, add_start_value, &c);
    return (mip_start){c.idx && c.val ? c.n : 0, c.idx, c.val};
}

static void start_free(mip_start *s) { free(s->idx), free(s->val); }

typedef struct extract_ctx {
    const double *x;
    poet_schedule *s;
} extract_ctx;

static void set_from_solution(int col, int matrix, int t, int i, void *ctx)
{
    extract_ctx *c = ctx;
    poet_sched_set(c->s, matrix, t, i, c->x[col] > 0.5);
}

static void extract(const model *m, const double *x, poet_schedule *s)
{
    extract_ctx c = {x, s};
    each_decision(m, set_from_solution, &c);
}

/* Removes what an optimal solution may carry at no cost but the validator
 * refuses: recomputing or paging in what is in RAM, paging out twice. */
static void normalize(poet_schedule *s)
{
    int T = s->T;
    for (int i = 0; i < T; i++) {
        bool stored = false;
        for (int t = i; t < T; t++) {
            bool in_ram = poet_sched_get(s, POET_SRAM, t, i);
            if (in_ram && i != t) poet_sched_set(s, POET_R, t, i, false);
            if (in_ram || poet_sched_get(s, POET_R, t, i) || !stored) poet_sched_set(s, POET_MIN, t, i, false);
            if (stored || !in_ram) poet_sched_set(s, POET_MOUT, t, i, false);
            stored = stored || poet_sched_get(s, POET_MOUT, t, i);
        }
    }
}

/* ---- progress ----
 * A reporting solve sends CBC's log through a pipe to the process that
 * waits for it, which reads the new incumbents and the bound from it. CBC's
 * message callback would not do: the search after its preprocessing runs
 * on a copy of the model that does not call it, so the progress line froze
 * at the MIP start and a schedule found later was dated to it. */

/* The planner's whole time limit; 300 s unless the caller set one. */
static double limit_s(const poet_plan_options *o) { return o->time_limit_s > 0 ? o->time_limit_s : 300; }

double plan_gap(const poet_plan_options *o)
{
    double gap = o->gap > 0 ? o->gap : POET_PLAN_DEFAULT_GAP;
    return gap > 1e-9 ? gap : 1e-9;
}

/* The reading end of a solve's log, and what it has said so far. */
typedef struct cbc_log {
    int fd;          /* -1 once closed */
    double scale;    /* joules per unit of CBC's objective */
    double best;     /* the best incumbent in the log, in CBC's units */
    double found_at; /* host_now_s() when the log first gave it; 0 before one */
    size_t len;
    char line[512];
} cbc_log;

/* One line of CBC's log: a new incumbent (Cbc0004I, Cbc0012I, Cbc0016I:
 * "Integer solution of V found ...") or the tree's state (Cbc0010I: "...,
 * B best solution, best possible P (S seconds)"). */
static void log_line(cbc_log *g, const char *line)
{
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

/* Reads what the log has, line by line; closes it at its end. */
static void log_read(cbc_log *g)
{
    ssize_t k = read(g->fd, g->line + g->len, sizeof g->line - 1 - g->len);
    if (k < 0 && errno == EINTR) return;
    if (k <= 0) {
        close(g->fd), g->fd = -1;
        return;
    }
    g->len += (size_t)k;
    char *nl;
    while ((nl = memchr(g->line, '\n', g->len))) {
        *nl = 0;
        log_line(g, g->line);
        g->len -= (size_t)(nl + 1 - g->line);
        memmove(g->line, nl + 1, g->len);
    }
    if (g->len == sizeof g->line - 1) g->len = 0; /* a line too long to be one of ours */
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

/* The options of the solves poet runs for itself (bounds, windows): one
 * thread, no log, reproducible, to a proof. */
static poet_plan_options quiet_cbc(void)
{
    return (poet_plan_options){.threads = 1, .quiet = true, .deterministic = true, .gap = 1e-9};
}

/* What CBC is to solve, and how, as plain data. The process that runs the
 * solve (a child: solve_apart) builds CBC's model from it, so that no
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

/* What a solve left behind: CBC's or CLP's answers, copied out of the model. */
typedef struct solved {
    bool ended;            /* the solve ran to its end (its process was not killed) */
    bool has_x, optimal, infeasible;
    double obj, bound;     /* in the model's scaled units */
    double found_at;       /* host_now_s() when CBC found its best solution, 0 if unknown */
    double *x;             /* the best solution's columns, when has_x */
} solved;

/* A solve to run apart: CBC's on a model (reporting progress, or not), or
 * CLP's on an LP; either leaves its answers in out. */
typedef struct solve_job {
    const cbc_recipe *cbc;
    double scale;    /* joules per unit of CBC's objective, for progress; 0: the solve does not report */
    const poet_problem *lp_of; /* the LP relaxation of this problem's MILP, built where it is solved */
    const milp_options *mo;
    int n_cols;
    double deadline; /* host_now_s() after which the solve is stopped, lost */
} solve_job;

static void solve_lp(const solve_job *job, solved *out);

static void run_job(const solve_job *job, double issued_at, solved *out, int log)
{
    memset(out, 0, sizeof *out);
    out->ended = true;
    if (job->lp_of) {
        solve_lp(job, out);
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

static bool write_all(int fd, const void *buf, size_t n)
{
    for (const char *p = buf; n > 0;) {
        ssize_t k = write(fd, p, n);
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) return false;
        p += k, n -= (size_t)k;
    }
    return true;
}

/* Reads n bytes unless the deadline passes first, and the log meanwhile. */
static bool read_all(int fd, void *buf, size_t n, double deadline, cbc_log *g)
{
    for (char *p = buf; n > 0;) {
        double left = deadline - host_now_s();
        struct pollfd pfd[2] = {{.fd = fd, .events = POLLIN}, {.fd = g->fd, .events = POLLIN}};
        int ready = left > 0 ? poll(pfd, g->fd >= 0 ? 2 : 1, (int)ceil(left * 1000)) : 0;
        if (ready < 0 && errno == EINTR) continue;
        if (ready <= 0) return false;
        if (g->fd >= 0 && pfd[1].revents) log_read(g);
        if (!pfd[0].revents) continue;
        ssize_t k = read(fd, p, n);
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) return false;
        p += k, n -= (size_t)k;
    }
    return true;
}

/* The child's answers, or ended false where it died before giving them or
 * ran past the deadline (then it is killed: CLP, for one, does not always
 * stop at its own time limit). */
static void read_back(pid_t pid, int fd, const solve_job *job, cbc_log *g, solved *out)
{
    memset(out, 0, sizeof *out);
    size_t x_bytes = (size_t)job->n_cols * sizeof(double);
    solved got;
    bool ok = read_all(fd, &got, sizeof got, job->deadline, g);
    got.x = ok && got.has_x ? malloc(x_bytes) : NULL;
    ok = ok && (!got.has_x || (got.x && read_all(fd, got.x, x_bytes, job->deadline, g)));
    if (!ok) kill(pid, SIGKILL);
    int status;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {}
    if (ok && WIFEXITED(status) && WEXITSTATUS(status) == 0) {
        *out = got;
        /* the log's last incumbent is the answer, unless CBC kept a better
         * one it did not print: then it had it by now */
        bool logged = g->found_at > 0 && got.obj >= g->best - 1e-9 * fabs(g->best);
        out->found_at = !job->scale ? 0 : logged ? g->found_at : host_now_s();
        return;
    }
    free(got.x);
}

/* Solves in a child process and reads the answers back (and, where the
 * solve reports, its log as it comes). The child builds the model too, so
 * that COIN-OR's terminating on a failed allocation loses only the solve.
 * Debian's CBC 2.10
 * can abort on an internal assertion (tests/test_milp.c replays one such
 * model) and segfaulted in CglPreProcess::postProcess during a window solve
 * on BERT (core dump from a benchmark run); in a child, only the solve is
 * lost (ended false) and the planner goes on with what it has. Where no
 * child can be started, the solve runs here, without the deadline. */
static void solve_apart(const solve_job *job, solved *out)
{
    int fd[2], lg[2] = {-1, -1};
    double issued_at = host_now_s();
    fflush(stdout), fflush(stderr);
    bool piped = pipe(fd) == 0;
    if (piped && job->scale && pipe(lg) != 0) close(fd[0]), close(fd[1]), piped = false;
    if (piped) {
        pid_t pid = fork();
        if (pid == 0) {
            close(fd[0]);
            if (lg[0] >= 0) close(lg[0]);
            solved mine;
            run_job(job, issued_at, &mine, lg[1]);
            bool ok = write_all(fd[1], &mine, sizeof mine) &&
                      (!mine.has_x || write_all(fd[1], mine.x, (size_t)job->n_cols * sizeof(double)));
            _exit(ok ? 0 : 1);
        }
        close(fd[1]);
        if (lg[1] >= 0) close(lg[1]);
        cbc_log g = {.fd = lg[0], .scale = job->scale, .best = INFINITY};
        if (pid > 0) read_back(pid, fd[0], job, &g, out);
        close(fd[0]);
        if (g.fd >= 0) close(g.fd);
        if (pid > 0) return;
    }
    run_job(job, issued_at, out, -1);
}

/* The best baseline schedule that respects the variant, or none. */
bool plan_best_baseline(const poet_problem *p, bool paging, bool remat, poet_schedule *best)
{
    greedy_mode modes[] = {GREEDY_KEEP, GREEDY_REMAT, GREEDY_PAGING, GREEDY_HYBRID, GREEDY_CHEN};
    double best_j = INFINITY;
    bool found = false;
    for (size_t k = 0; k < sizeof modes / sizeof *modes; k++) {
        bool uses_remat = modes[k] == GREEDY_REMAT || modes[k] == GREEDY_HYBRID || modes[k] == GREEDY_CHEN;
        bool uses_paging = modes[k] == GREEDY_PAGING || modes[k] == GREEDY_HYBRID;
        if ((uses_remat && !remat) || (uses_paging && !paging)) continue;
        poet_plan_result r;
        memset(&r, 0, sizeof r);
        poet_sim sim;
        if (greedy_plan(p, modes[k], &r, NULL) || r.status != POET_PLAN_FEASIBLE) continue;
        if (!poet_simulate(p, &r.schedule, &sim, NULL, NULL) && sim.energy_j < best_j) {
            best_j = sim.energy_j;
            if (found) poet_schedule_free(best);
            *best = r.schedule;
            found = true;
            continue;
        }
        poet_schedule_free(&r.schedule);
    }
    return found;
}

/* Whether a is a valid schedule with less energy than b (or b is NULL). */
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
    poet_status st = model_build(&m, p, mo->paging, mo->remat, false, err);
    if (st) return st;
    csc c;
    if (!to_csc(&m.lp, &c)) {
        model_free(&m);
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
        model_free(&m);
        return st;
    }
    cbc_recipe rc = {.l = &m.lp, .c = &c, .lb = m.lp.lb, .ub = m.lp.ub, .o = *o, .min_seconds = 1, .log_level = 1,
                     .cutoff = INFINITY, .write_mps = o->write_mps ? mps.base : NULL};
    if (have_start) rc.start = start_from(&m, &start);
    /* the limit covers the whole planner, warm start and model included;
     * CBC looks at its clock between phases and overruns by a few percent:
     * keep that inside the limit, and time to read the answer back */
    rc.seconds = 0.97 * (limit_s(o) - (host_now_s() - started)) - 1;
    progress_report("milp", NAN, NAN);
    solved sv;
    solve_job job = {.cbc = &rc, .scale = 1.0 / m.obj_scale, .n_cols = m.lp.n_cols, .deadline = started + limit_s(o)};
    solve_apart(&job, &sv);
    start_free(&rc.start);
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
            extract(&m, x, &r->schedule);
            normalize(&r->schedule);
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
    model_free(&m);
    return st;
}

/* The smallest budget any schedule meets under the runtime budget, bracketed
 * by CBC within a time limit: [*lo, *hi] bytes (*hi = 0 when none found). */
static void smallest_budget(const poet_problem *p, const milp_options *mo, double seconds, uint64_t *lo,
                            uint64_t *hi)
{
    model m;
    *lo = p->min_budget_bytes, *hi = 0;
    if (model_build(&m, p, mo->paging, mo->remat, true, NULL)) return;
    csc c;
    if (to_csc(&m.lp, &c)) {
        cbc_recipe rc = {.l = &m.lp, .c = &c, .lb = m.lp.lb, .ub = m.lp.ub, .o = quiet_cbc(), .seconds = seconds,
                         .cutoff = INFINITY};
        solved sv;
        double deadline = host_now_s() + 1.1 * seconds + 1;
        solve_apart(&(solve_job){.cbc = &rc, .n_cols = m.lp.n_cols, .deadline = deadline}, &sv);
        /* M is in units of the keep-all peak */
        double b = sv.bound / m.mem_scale;
        if (sv.ended && isfinite(b) && b > (double)*lo) *lo = (uint64_t)ceil(b - 1e-3);
        if (sv.has_x) *hi = (uint64_t)ceil(sv.obj / m.mem_scale);
        free(sv.x);
        csc_free(&c);
    }
    model_free(&m);
}

/* The LP relaxation, built and solved by CLP; its objective in joules.
 * Run apart: building the model of a graph of a thousand nodes takes
 * longer than the time left can be (DenseNet-121: 1595 nodes), and only
 * the child can be stopped then. */
static void solve_lp(const solve_job *job, solved *out)
{
    model m;
    if (model_build(&m, job->lp_of, job->mo->paging, job->mo->remat, false, NULL)) return;
    csc c;
    /* the limit covers building the model too, and leaves a tenth for what follows */
    double left = 0.9 * (job->deadline - host_now_s());
    if (left > 0.1 && to_csc(&m.lp, &c)) {
        /* CLP directly: unlike CBC's driver, it stops at its time limit */
        Clp_Simplex *clp = Clp_newModel();
        Clp_setLogLevel(clp, 0);
        Clp_loadProblem(clp, m.lp.n_cols, m.lp.n_rows, c.start, c.index, c.value, m.lp.lb, m.lp.ub, m.lp.obj,
                        m.lp.rlb, m.lp.rub);
        Clp_setMaximumSeconds(clp, left);
        Clp_initialSolve(clp);
        out->optimal = Clp_isProvenOptimal(clp);
        out->obj = out->bound = Clp_objectiveValue(clp) / m.obj_scale;
        Clp_deleteModel(clp);
        csc_free(&c);
    }
    model_free(&m);
}

double milp_lp_bound(const poet_problem *p, const milp_options *mo, double seconds)
{
    if (seconds <= 0) return NAN;
    solved sv;
    solve_apart(&(solve_job){.lp_of = p, .mo = mo, .deadline = host_now_s() + seconds}, &sv);
    /* a margin for the LP's tolerances, so that the bound stays a bound */
    return sv.optimal ? sv.obj * (1 - 1e-7) : NAN;
}

#define COVER_MAX_NNZ 100000 /* a staged covering model larger than this is not solved */
/* A covering model this small goes to GLPK first, for this many nodes of
 * its search (cover_solve says why) */
#define GLPK_MAX_NNZ 3000
#define GLPK_MAX_NODES 100

/* ---- the covering bound ----
 * A relaxation of POET's MILP with whole variables, small enough for CBC to
 * solve in well under a second. Between two consecutive readers a < b of a
 * tensor i (its producer counts as the first), the stages a < t < b form a
 * gap of i, across which keep-all holds it. In any schedule, i is either
 * held across a stage t of the gap, and then in RAM while node t runs
 * (nothing frees a tensor kept for the next stage), or let go there and
 * brought back in (t, b] before b reads it: recomputed (c_i, tau_i) or paged
 * in (p_in_i, after one page-out, p_out_i, that every page-in of i shares).
 * One return serves every stage of the gap it follows; returns in different
 * gaps are different events.
 *
 * Recomputing i after t needs each input u of i in RAM then. Where u's last
 * reader L_u lies before t, u is dead there under keep-all: it was brought
 * back after L_u (once per u, however many recomputations it feeds:
 * recomputed, which needs u's own inputs the same way, or paged in), or it
 * was held across every stage from L_u + 1 to t, in RAM while those nodes ran.
 *
 * So, with r and q (the gap's return is a recomputation, a page-in), d_t (i
 * let go across stage t), x_u and y_u (u brought back after its life by
 * recomputation, by page-in), o_i (i paged out) and h_{u,t} (u held across
 * stage t > L_u; held across t implies held across t - 1):
 *   each stage t: sum over the gaps across t of m_i d_t
 *                 - sum of m_u h_{u,t} >= m_t + inputs of t + held bytes - budget
 *   d_t <= r + q;  for each input u of i with L_u < t: d_t <= q + x_u + y_u + h_{u,t}
 *   for each input w of u with L_w < L_u: x_u <= x_w + y_w + h_{w,L_u}
 *   q <= o_i, y_i <= o_i;  the recomputations' time <= (rho - 1) x full-memory time
 * and every schedule costs at least the full-memory energy plus what r, q,
 * x, y and o cost. The memory a recomputation needs while it runs,
 * repeated returns within a gap, and recomputations of u within its life
 * that feed i are left out, so this is a relaxation; but its returns are
 * whole, which the LP relaxation's are not: where one 16 KiB tensor must go
 * to save 1 KiB, the LP pays a sixteenth of its cost and this bound all of
 * it; and a cheap tensor whose inputs are long gone costs what bringing them
 * back, or keeping them, costs.
 *
 * Staged (remat allowed, small graphs), the returns get stages, and three of
 * those relaxations go:
 * - Every let-go run pays its own return: i, let go across t and in RAM
 *   while node t + 1 runs, was recomputed in stage t + 1 (e_{t+1}) or paged
 *   in during stage t (in_{t+1}): d_t - d_{t+1} <= e_{t+1} + in_{t+1}, each
 *   at its full cost (d has a column at every stage of the gap).
 * - A dead input u comes back per stage: recomputed in stage s (X_{u,s}),
 *   paged in for it (Y_{u,s}), or in RAM while node s - 1 ran (P_{u,s-1},
 *   which is h, with P_{u,t} <= P_{u,t-1} + X_{u,t} + Y_{u,t}); so one
 *   recomputation of u no longer serves chains stages apart unless u is
 *   held, in RAM, between them.
 * - A recomputation's moment: recomputing v in stage s needs v and its
 *   inputs in RAM beside what keep-all holds from node s - 1 to node s, so
 *   where that exceeds the budget, some of those tensors are missing then
 *   (cover_moment, cover_absent). And an input u that the schedule lets go
 *   across both s - 1 and s is back for stage s and back again after it:
 *   one return more (cover_needs, cover_again).
 * Its model is several times larger and CBC's solve slower, so fast runs
 * it after the fate search, only where the gap is still open. */

typedef struct cover {
    const poet_problem *p;
    lp l;
    int n_gaps;
    int *gap_lo, *gap_hi, *gap_tensor;
    int *r, *q;     /* per gap: returned by recomputation, by page-in; -1 where not allowed */
    int *d, *d_from; /* per gap: the column d of stage d_from; the rest follow */
    int *x, *y, *o; /* per tensor: recomputed or paged in after its life, paged out */
    int **h;        /* h[u][t - L_u - 1]: u held across stage t > L_u; made when first needed, -1 until then */
    bool staged;    /* returns after a tensor's life are placed in stages (below) */
    int **hx, **hy; /* staged: hx[u][t - L_u - 1], hy[...]: u recomputed in stage t, paged in for it */
    int *gap_first; /* the gaps of tensor j: gap_first[j] .. gap_first[j + 1] - 1 */
    int *absent;    /* absent[s * T + j]: j missing at some recomputation in stage s; -1 until made */
    int *again, *again_in; /* [s * T + j]: j recomputed, paged in, once more in stage s; -1 until made */
    double *kept;   /* staged: kept[s], keep-all's bytes in RAM while nodes s - 1 and s run */
    int runtime;    /* the runtime row, or -1 where there is no runtime budget */
} cover;

static void cover_free(cover *c)
{
    free(c->gap_lo), free(c->gap_hi), free(c->gap_tensor), free(c->r), free(c->q), free(c->d), free(c->d_from);
    for (int u = 0; c->h && u < c->p->T; u++) free(c->h[u]);
    for (int u = 0; c->hx && u < c->p->T; u++) free(c->hx[u]), free(c->hy[u]);
    free(c->x), free(c->y), free(c->o), free(c->h), free(c->hx), free(c->hy), free(c->gap_first);
    free(c->absent), free(c->again), free(c->again_in), free(c->kept);
    lp_free(&c->l);
}

/* The gaps of every tensor: consecutive readers (the producer first) with
 * at least one stage between them; false when out of memory. */
static bool cover_alloc(cover *c)
{
    const poet_problem *p = c->p;
    size_t T = (size_t)p->T, G = (size_t)p->out_start[T] + 1;
    int **per_gap[] = {&c->gap_lo, &c->gap_hi, &c->gap_tensor, &c->r, &c->q, &c->d, &c->d_from};
    int **per_tensor[] = {&c->x, &c->y, &c->o};
    bool ok = (c->h = calloc(T, sizeof(int *))) != NULL;
    ok = (c->hx = calloc(T, sizeof(int *))) && (c->hy = calloc(T, sizeof(int *))) && ok;
    ok = (c->gap_first = malloc((T + 1) * sizeof(int))) && ok;
    for (size_t k = 0; k < sizeof per_gap / sizeof *per_gap; k++) ok = (*per_gap[k] = malloc(G * sizeof(int))) && ok;
    for (size_t k = 0; k < sizeof per_tensor / sizeof *per_tensor; k++)
        ok = (*per_tensor[k] = malloc(T * sizeof(int))) && ok;
    if (!ok) return false;
    for (int i = 0; i < p->T; i++) {
        int a = i;
        c->gap_first[i] = c->n_gaps;
        for (int k = p->out_start[i]; k < p->out_start[i + 1]; a = p->out[k++])
            if (p->out[k] - a >= 2) {
                c->gap_lo[c->n_gaps] = a, c->gap_hi[c->n_gaps] = p->out[k];
                c->gap_tensor[c->n_gaps++] = i;
            }
    }
    c->gap_first[p->T] = c->n_gaps;
    return true;
}

/* u's column of stage t > L_u in one of its per-stage arrays (h, and,
 * staged, hx and hy), or -1 where there is none. */
static int after_life_at(const cover *c, int *const *cols, int u, int t)
{
    int first = c->p->last_use[u] + 1;
    return cols[u] && t >= first && t < c->p->T ? cols[u][t - first] : -1;
}

/* The column h_{u,t}, made on first use with the rows h_{u,s} <= h_{u,s-1}
 * back to L_u + 1 (u held across s > L_u was held since its life ended);
 * -1 when out of memory. */
static int cover_held(cover *c, int u, int t)
{
    int first = c->p->last_use[u] + 1;
    if (!c->h[u]) {
        c->h[u] = malloc((size_t)(c->p->T - first) * sizeof(int));
        if (!c->h[u]) return c->l.oom = true, -1;
        memset(c->h[u], 0xff, (size_t)(c->p->T - first) * sizeof(int));
    }
    int *h = c->h[u] - first;
    for (int s = first; s <= t; s++) {
        if (h[s] >= 0) continue;
        h[s] = add_col(&c->l, 0, 0, 1, false);
        if (s > first) {
            int row = add_row(&c->l, -LP_INF, 0);
            coef(&c->l, row, h[s], 1), coef(&c->l, row, h[s - 1], -1);
        }
    }
    return h[t];
}

/* col - also <= x_u + y_u + h_{u,t} for every input u of node v dead across
 * stage t (L_u < t): what recomputing v after stage t needs. */
static void cover_inputs_back(cover *c, int col, int also, int v, int t)
{
    const poet_problem *p = c->p;
    for (int k = p->in_start[v]; k < p->in_start[v + 1]; k++) {
        int u = p->in[k];
        if (p->last_use[u] >= t) continue;
        int row = add_row(&c->l, -LP_INF, 0);
        coef(&c->l, row, col, 1), coef(&c->l, row, also, -1);
        coef(&c->l, row, c->x[u], -1), coef(&c->l, row, c->y[u], -1), coef(&c->l, row, cover_held(c, u, t), -1);
    }
}

/* The returns, their costs, the runtime row and the chains of
 * recomputation. */
static void cover_returns(cover *c, bool remat, bool paging)
{
    const poet_problem *p = c->p;
    const poet_cnode *n = p->inst->nodes;
    double full = p->full_memory_energy_j, time = p->full_memory_time_s;
    int runtime = c->runtime =
        isfinite(p->runtime_budget_s) && time > 0 ? add_row(&c->l, -LP_INF, p->runtime_factor - 1 + 1e-6) : -1;
    for (int i = 0; i < p->T; i++) {
        c->x[i] = remat && !c->staged ? add_col(&c->l, n[i].compute_j / full, 0, 1, true) : -1;
        c->y[i] = paging && !c->staged ? add_col(&c->l, n[i].pagein_j / full, 0, 1, true) : -1;
        c->o[i] = paging ? add_col(&c->l, n[i].pageout_j / full, 0, 1, true) : -1;
        int row = add_row(&c->l, -LP_INF, 0);
        coef(&c->l, row, c->y[i], 1), coef(&c->l, row, c->o[i], -1);
        coef(&c->l, runtime, c->x[i], n[i].time_s / time);
    }
    for (int g = 0; g < c->n_gaps; g++) { /* staged, the returns are cover_staged_returns' */
        int i = c->gap_tensor[g];
        c->r[g] = c->q[g] = -1;
        if (c->staged) continue;
        c->r[g] = remat ? add_col(&c->l, n[i].compute_j / full, 0, 1, true) : -1;
        c->q[g] = paging ? add_col(&c->l, n[i].pagein_j / full, 0, 1, true) : -1;
        int row = add_row(&c->l, -LP_INF, 0);
        coef(&c->l, row, c->q[g], 1), coef(&c->l, row, c->o[i], -1);
        row = add_row(&c->l, -LP_INF, 1);
        coef(&c->l, row, c->r[g], 1), coef(&c->l, row, c->q[g], 1);
        coef(&c->l, runtime, c->r[g], n[i].time_s / time);
    }
    for (int u = 0; remat && !c->staged && u < p->T; u++) cover_inputs_back(c, c->x[u], -1, u, p->last_use[u]);
}

/* The first stage of gap g at which an input of its tensor is dead: from
 * there on, letting it go needs more than a return, and d has columns. */
static int cover_dead_from(const cover *c, int g, bool remat)
{
    const poet_problem *p = c->p;
    int i = c->gap_tensor[g], from = c->gap_hi[g];
    for (int k = p->in_start[i]; remat && k < p->in_start[i + 1]; k++)
        if (p->last_use[p->in[k]] + 1 < from) from = p->last_use[p->in[k]] + 1;
    return from > c->gap_lo[g] + 1 ? from : c->gap_lo[g] + 1;
}

/* d for the stages of every gap from cover_dead_from on, bounded by the
 * gap's returns and, where it comes back by recomputation, by what that
 * needs; before, d is the return itself (r + q). */
static void cover_let_go(cover *c, bool remat)
{
    for (int g = 0; g < c->n_gaps; g++) { /* consecutive columns, before cover_held makes any */
        c->d_from[g] = c->staged ? c->gap_lo[g] + 1 : cover_dead_from(c, g, remat);
        c->d[g] = c->l.n_cols;
        for (int t = c->d_from[g]; t < c->gap_hi[g]; t++) add_col(&c->l, 0, 0, 1, false);
    }
    for (int g = 0; g < c->n_gaps && !c->staged; g++)
        for (int t = c->d_from[g]; t < c->gap_hi[g]; t++) {
            int d = c->d[g] + t - c->d_from[g], row = add_row(&c->l, -LP_INF, 0);
            coef(&c->l, row, d, 1), coef(&c->l, row, c->r[g], -1), coef(&c->l, row, c->q[g], -1);
            cover_inputs_back(c, d, c->q[g], c->gap_tensor[g], t);
        }
}

/* Staged: v times d_t of j ("j let go across stage t") into row; nothing
 * where t is not inside a gap of j (node t reads or makes j, so j is in RAM
 * while it runs). Staged, d has a column at every stage of a gap. */
static void cover_let_go_coef(cover *c, int row, int j, int t, double v)
{
    for (int g = c->gap_first[j]; g < c->gap_first[j + 1]; g++)
        if (c->gap_lo[g] < t && t < c->gap_hi[g]) {
            coef(&c->l, row, c->d[g] + t - c->d_from[g], v);
            return;
        }
}

static bool reads(const poet_problem *p, int v, int u)
{
    for (int k = p->in_start[v]; k < p->in_start[v + 1]; k++)
        if (p->in[k] == u) return true;
    return false;
}

static int cover_absent(cover *c, int j, int s);
static int cover_again(cover *c, int j, int s, bool paged);
static void cover_needs(cover *c, int col, int v, int s);

/* Recomputing v in stage s (col) needs v and its inputs in RAM beside what
 * stays there from node s - 1 to node s; where keep-all's share of that
 * exceeds the budget, tensors must be missing then (w):
 *   sum of m_j w_{j,s} >= (need - budget) col. */
static void cover_moment(cover *c, int col, int v, int s)
{
    const poet_problem *p = c->p;
    const poet_cnode *n = p->inst->nodes;
    double B = (double)p->budget_bytes, need = c->kept[s];
    need += v < s && p->last_use[v] >= s ? 0 : (double)n[v].bytes;
    for (int k = p->in_start[v]; k < p->in_start[v + 1]; k++)
        need += p->last_use[p->in[k]] < s ? (double)n[p->in[k]].bytes : 0;
    if (need - B <= 1e-6 * B) return;
    int row = add_row(&c->l, -1e-6, LP_INF);
    coef(&c->l, row, col, -(need - B) / B);
    for (int j = 0; j < s; j++)
        if (p->last_use[j] >= s && j != v && !reads(p, v, j))
            coef(&c->l, row, cover_absent(c, j, s), (double)n[j].bytes / B);
}

/* u's per-stage block, once: for each stage t > L_u, P_t (u in RAM while
 * node t runs, the column h), X_t (recomputed in stage t) and Y_t (paged in
 * for stage t), with P_t <= P_{t-1} + X_t + Y_t; the columns first, so that
 * the rows' needs may come back to u. */
static void cover_after_life(cover *c, int u)
{
    const poet_problem *p = c->p;
    const poet_cnode *n = p->inst->nodes;
    int first = p->last_use[u] + 1, len = p->T - first;
    if (c->h[u] || len <= 0) return;
    c->h[u] = malloc((size_t)len * sizeof(int)), c->hx[u] = malloc((size_t)len * sizeof(int));
    c->hy[u] = malloc((size_t)len * sizeof(int));
    if (!c->h[u] || !c->hx[u] || !c->hy[u]) {
        c->l.oom = true;
        return;
    }
    double full = p->full_memory_energy_j;
    for (int k = 0; k < len; k++) {
        c->h[u][k] = add_col(&c->l, 0, 0, 1, false);
        c->hx[u][k] = add_col(&c->l, n[u].compute_j / full, 0, 1, true);
        c->hy[u][k] = c->o[u] >= 0 ? add_col(&c->l, n[u].pagein_j / full, 0, 1, true) : -1;
        if (c->runtime >= 0) coef(&c->l, c->runtime, c->hx[u][k], n[u].time_s / p->full_memory_time_s);
    }
    for (int k = 0; k < len; k++) {
        if (c->hy[u][k] >= 0) {
            int row = add_row(&c->l, -LP_INF, 0);
            coef(&c->l, row, c->hy[u][k], 1), coef(&c->l, row, c->o[u], -1);
        }
        if (k > 0) {
            int row = add_row(&c->l, -LP_INF, 0);
            coef(&c->l, row, c->h[u][k], 1), coef(&c->l, row, c->h[u][k - 1], -1);
            coef(&c->l, row, c->hx[u][k], -1), coef(&c->l, row, c->hy[u][k], -1);
        }
        cover_needs(c, c->hx[u][k], u, first + k);
        cover_moment(c, c->hx[u][k], u, first + k);
    }
}

/* col <= what brings each input u of v, dead before stage s - 1 (L_u <
 * s - 1), to a recomputation of v in stage s: u recomputed in stage s,
 * paged in for it, or in RAM while node s - 1 ran (an input read last at
 * s - 1 may be kept into stage s: no row). */
static void cover_needs(cover *c, int col, int v, int s)
{
    const poet_problem *p = c->p;
    for (int k = p->in_start[v]; k < p->in_start[v + 1]; k++) {
        int u = p->in[k];
        if (p->last_use[u] >= s) {
            /* let go across s - 1 and s, u is back for stage s and again after */
            int row = add_row(&c->l, -LP_INF, 2);
            coef(&c->l, row, col, 1), cover_let_go_coef(c, row, u, s - 1, 1), cover_let_go_coef(c, row, u, s, 1);
            coef(&c->l, row, cover_again(c, u, s, false), -1), coef(&c->l, row, cover_again(c, u, s, true), -1);
        }
        if (p->last_use[u] >= s - 1) continue;
        cover_after_life(c, u);
        int row = add_row(&c->l, -LP_INF, 0);
        coef(&c->l, row, col, 1), coef(&c->l, row, after_life_at(c, c->hx, u, s), -1);
        coef(&c->l, row, after_life_at(c, c->hy, u, s), -1), coef(&c->l, row, after_life_at(c, c->h, u, s - 1), -1);
    }
}

/* The column of j's return once more in stage s, beyond the return its
 * let-go run pays: recomputed (needing its inputs), or, paged, paged in for
 * the stage; made on first use. */
static int cover_again(cover *c, int j, int s, bool paged)
{
    const poet_problem *p = c->p;
    const poet_cnode *n = p->inst->nodes;
    int *col = &(paged ? c->again_in : c->again)[(size_t)s * (size_t)p->T + (size_t)j];
    if (*col >= 0 || (paged && c->o[j] < 0)) return *col;
    *col = add_col(&c->l, (paged ? n[j].pagein_j : n[j].compute_j) / p->full_memory_energy_j, 0, 1, true);
    if (paged) {
        int row = add_row(&c->l, -LP_INF, 0);
        coef(&c->l, row, *col, 1), coef(&c->l, row, c->o[j], -1);
        return *col;
    }
    if (c->runtime >= 0) coef(&c->l, c->runtime, *col, n[j].time_s / p->full_memory_time_s);
    cover_needs(c, *col, j, s);
    return *col;
}

/* The column w_{j,s}: j, which keep-all holds while nodes s - 1 and s run,
 * is missing at a recomputation in stage s. In POET's stages a tensor in
 * RAM at a stage's start stays until a reader in that stage frees it, and
 * cannot come back in that stage after; so j is missing only where it was
 * let go across s - 1 or s, or dropped after s - 1 and recomputed in stage
 * s after the recomputation (z: one more return, needing its inputs). */
static int cover_absent(cover *c, int j, int s)
{
    const poet_problem *p = c->p;
    int *w = &c->absent[(size_t)s * (size_t)p->T + (size_t)j];
    if (*w >= 0) return *w;
    *w = add_col(&c->l, 0, 0, 1, false);
    int row = add_row(&c->l, -LP_INF, 0);
    coef(&c->l, row, *w, 1), coef(&c->l, row, cover_again(c, j, s, false), -1);
    cover_let_go_coef(c, row, j, s - 1, -1), cover_let_go_coef(c, row, j, s, -1);
    return *w;
}

/* A page-in needs a page-out before it, and a page-out needs the tensor in
 * RAM at the start of a stage; so where a tensor is let go right after the
 * stage that made it (gap g starts at its producer), its first return is a
 * recomputation. With f_t ("not in RAM since it was made, through stage t"):
 *   f_{lo+1} >= d_{lo+1},  f_t >= f_{t-1} - e_t,  in_{t+1} + f_t <= 1.
 * Without it the bound let the gradient of residual_5 on the m4 at 68% go
 * across the stage after its producer and still paged it in later. */
static void cover_first_return(cover *c, int g, const int *e, const int *in)
{
    int lo = c->gap_lo[g], hi = c->gap_hi[g], f = -1;
    if (lo != c->gap_tensor[g] || c->o[lo] < 0) return;
    for (int t = lo + 1; t < hi; t++) {
        int prev = f, row = add_row(&c->l, 0, LP_INF);
        f = add_col(&c->l, 0, 0, 1, false);
        coef(&c->l, row, f, 1);
        if (prev < 0) coef(&c->l, row, c->d[g] + t - c->d_from[g], -1);
        else coef(&c->l, row, prev, -1), coef(&c->l, row, e[t], 1);
        row = add_row(&c->l, -LP_INF, 1);
        coef(&c->l, row, in[t + 1], 1), coef(&c->l, row, f, 1);
    }
}

/* Staged returns (with remat): gap g's tensor i, let go across stage t and
 * in RAM while node t + 1 runs, came back in between: recomputed in stage
 * t + 1 (e, needing i's inputs there and room for its moment) or paged in
 * during stage t (a page-in for stage t + 1, after the one page-out); so
 * every let-go run pays its own return:
 *   d_t - d_{t+1} <= e_{t+1} + in_{t+1}  (d_hi = 0: node hi reads i). */
static void cover_staged_returns(cover *c)
{
    const poet_problem *p = c->p;
    const poet_cnode *n = p->inst->nodes;
    size_t T = (size_t)p->T;
    double full = p->full_memory_energy_j;
    int *e = malloc(T * sizeof(int)), *in = malloc(T * sizeof(int));
    int **per_stage[] = {&c->absent, &c->again, &c->again_in};
    bool ok = e && in && (c->kept = calloc(T, sizeof(double)));
    for (size_t k = 0; k < sizeof per_stage / sizeof *per_stage; k++) {
        ok = (*per_stage[k] = malloc(T * T * sizeof(int))) && ok;
        if (*per_stage[k]) memset(*per_stage[k], 0xff, T * T * sizeof(int));
    }
    if (!ok) {
        c->l.oom = true;
        free(e), free(in);
        return;
    }
    for (int s = 1; s < p->T; s++)
        for (int j = 0; j < s; j++) c->kept[s] += p->last_use[j] >= s ? (double)n[j].bytes : 0;
    /* building stops once the model is too large to be solved */
    for (int g = 0; g < c->n_gaps && c->l.nnz <= COVER_MAX_NNZ; g++) {
        int i = c->gap_tensor[g], lo = c->gap_lo[g], hi = c->gap_hi[g];
        for (int s = lo + 2; s <= hi; s++) {
            e[s] = add_col(&c->l, n[i].compute_j / full, 0, 1, true);
            if (c->runtime >= 0) coef(&c->l, c->runtime, e[s], n[i].time_s / p->full_memory_time_s);
            in[s] = c->o[i] >= 0 ? add_col(&c->l, n[i].pagein_j / full, 0, 1, true) : -1;
            if (in[s] >= 0) {
                int row = add_row(&c->l, -LP_INF, 0);
                coef(&c->l, row, in[s], 1), coef(&c->l, row, c->o[i], -1);
            }
            cover_needs(c, e[s], i, s);
            cover_moment(c, e[s], i, s);
        }
        for (int t = lo + 1; t < hi; t++) {
            int row = add_row(&c->l, -LP_INF, 0);
            coef(&c->l, row, c->d[g] + t - c->d_from[g], 1);
            if (t + 1 < hi) coef(&c->l, row, c->d[g] + t + 1 - c->d_from[g], -1);
            coef(&c->l, row, e[t + 1], -1), coef(&c->l, row, in[t + 1], -1);
        }
        cover_first_return(c, g, e, in);
    }
    free(e), free(in);
}

/* Gap g's tensor does not fit beside node t and its inputs: it is let go
 * across t in every schedule. The rows say so only in part where d is
 * continuous (a third of a tensor let go covers a third of the excess), so
 * the fixing is stated: d_t = 1, or, before d has a column, a return. On
 * residual_5 on the m4 at 68% the LP let a third of a gradient go across
 * the stage where it cannot stay, and paid a third of its paging. */
static void cover_must_go(cover *c, int g, int t)
{
    if (t >= c->d_from[g]) {
        c->l.lb[c->d[g] + t - c->d_from[g]] = 1;
        return;
    }
    int row = add_row(&c->l, 1, LP_INF);
    coef(&c->l, row, c->r[g], 1), coef(&c->l, row, c->q[g], 1);
}

/* One row per stage, scaled by the budget; false where some stage cannot
 * fit at all. The rows give CBC 1e-6 of the budget to spare, more than its
 * tolerance, so that a solution it accepts within tolerance is one of a
 * (slightly) relaxed model and its bound stays a bound. */
static bool cover_stages(cover *c)
{
    const poet_problem *p = c->p;
    const poet_cnode *n = p->inst->nodes;
    double scale = 1.0 / (double)p->budget_bytes;
    bool fits = true;
    for (int t = 1; t + 1 < p->T; t++) {
        double need = (double)n[t].bytes - (double)p->budget_bytes, held = 0;
        for (int k = p->in_start[t]; k < p->in_start[t + 1]; k++) need += (double)n[p->in[k]].bytes;
        fits = fits && need <= 0;
        int row = add_row(&c->l, 0, LP_INF);
        for (int g = 0; g < c->n_gaps; g++)
            if (c->gap_lo[g] < t && t < c->gap_hi[g]) {
                double m = (double)n[c->gap_tensor[g]].bytes;
                held += m;
                if (t < c->d_from[g]) coef(&c->l, row, c->r[g], scale * m), coef(&c->l, row, c->q[g], scale * m);
                else coef(&c->l, row, c->d[g] + t - c->d_from[g], scale * m);
                if (m > -need) cover_must_go(c, g, t);
            }
        for (int u = 0; u < t; u++) {
            int h = after_life_at(c, c->h, u, t);
            coef(&c->l, row, h, -scale * (double)n[u].bytes);
            if (h >= 0 && (double)n[u].bytes > -need) c->l.ub[h] = 0;
        }
        c->l.rlb[row] = scale * (need + held) - 1e-6;
    }
    return fits;
}

/* A recomputation that alone takes longer than the runtime budget leaves
 * is fixed to none, where the LP relaxation would make a part of it: CBC's
 * preprocessing, which would find that, is off (cover_solve). */
static void cover_too_long(cover *c)
{
    for (int k = 0; c->runtime >= 0 && k < c->l.nnz; k++)
        if (c->l.trow[k] == c->runtime && c->l.tval[k] > c->l.rub[c->runtime]) c->l.ub[c->l.tcol[k]] = 0;
}

/* The covering model, staged where asked; false where some stage cannot
 * fit at all or memory ran out. */
static bool cover_build(cover *c, const milp_options *mo)
{
    if (!cover_alloc(c)) return false;
    cover_returns(c, mo->remat, mo->paging), cover_let_go(c, mo->remat);
    if (c->staged) cover_staged_returns(c);
    cover_too_long(c);
    return cover_stages(c) && !c->l.oom;
}

/* Whole let-go and held columns: a tensor is in RAM across a stage or it is
 * not. Continuous, the staged model lets a tensor go by part, and a rule
 * that counts let-go columns passes for free (attention_7 on the m4 at 63%
 * let a softmax go by halves across the stages where a recomputation reads
 * it: 0.930x the optimum continuous, the optimum whole); and CBC's search,
 * branching on the returns alone, proved less in the same time (whole, all
 * 38 proven settings of the random-graph table meet their optimum in 2 s).
 * cover_let_go makes the let-go columns one consecutive range. */
static void cover_whole(cover *c)
{
    int last = c->n_gaps - 1, first = last >= 0 ? c->d[0] : 0;
    int end = last >= 0 ? c->d[last] + c->gap_hi[last] - c->d_from[last] : 0;
    for (int k = first; k < end; k++) c->l.is_int[k] = 1;
    for (int u = 0; u < c->p->T; u++)
        for (int t = c->p->last_use[u] + 1; t < c->p->T; t++) {
            int h = after_life_at(c, c->h, u, t);
            if (h >= 0) c->l.is_int[h] = 1;
        }
}

/* A covering model's objective (the energy above the full-memory energy,
 * as a fraction of it) as a bound in joules, less a margin for the
 * solvers' tolerances. */
static double cover_joules(const cover *c, double obj) { return c->p->full_memory_energy_j * (1 + obj) * (1 - 1e-7); }

/* The covering model's bound in joules, NAN where not solved in time.
 * A small model goes to GLPK first, in this process: CBC's driver costs
 * some 20 ms a solve however small the model (its parameter table and cut
 * generators, set up in the child process it runs in), where GLPK closes a
 * model of a few hundred rows in a few milliseconds. Where GLPK's search
 * runs past its node limit, the model is one where CBC's cuts pay (on the
 * random-graph table: 1.1-2 s for GLPK against 0.03-0.7 s for CBC), and
 * CBC solves it with the time left. With a target, CBC cuts off every
 * branch whose relaxation reaches it: no solution left below it then
 * proves the target itself, sooner than the optimum could be found and
 * proved. */
static double cover_solve(cover *c, double seconds, double target_j)
{
    double full = c->p->full_memory_energy_j, bound = NAN;
    if (seconds <= 0) return NAN;
    if (c->l.nnz <= GLPK_MAX_NNZ) {
        double started = host_now_s(), obj;
        const lp *l = &c->l;
        small_mip sm = {l->n_cols, l->n_rows, l->nnz, l->obj, l->lb, l->ub, l->is_int, l->rlb, l->rub,
                        l->trow, l->tcol, l->tval};
        small_mip_status st = glpk_mip_solve(&sm, seconds, GLPK_MAX_NODES, &obj);
        if (st == SMALL_MIP_INFEASIBLE) return INFINITY;
        if (st == SMALL_MIP_OPTIMAL) return cover_joules(c, obj);
        if (isfinite(obj)) bound = cover_joules(c, obj);
        seconds -= host_now_s() - started;
    }
    csc m;
    if (seconds <= 0 || !to_csc(&c->l, &m)) return bound;
    double cutoff = target_j > 0 ? target_j / (1 - 1e-7) / full - 1 : INFINITY; /* less the margin: target_j */
    cbc_recipe rc = {.l = &c->l, .c = &m, .lb = c->l.lb, .ub = c->l.ub, .o = quiet_cbc(), .seconds = seconds,
                     .bound_only = true, .cutoff = cutoff};
    solved sv;
    solve_apart(&(solve_job){.cbc = &rc, .n_cols = c->l.n_cols, .deadline = host_now_s() + 1.25 * seconds + 0.5},
                &sv);
    /* CBC's best possible objective bounds the optimum even when it ran out of time */
    if (sv.ended && !sv.infeasible && isfinite(sv.bound) && sv.bound >= 0 && sv.bound < 1e30)
        bound = fmax(bound, cover_joules(c, sv.bound));
    else if (sv.ended && sv.infeasible) /* the model has the schedules: none below the cutoff, or none at all */
        bound = isfinite(cutoff) ? fmax(bound, target_j) : INFINITY;
    free(sv.x);
    csc_free(&m);
    return bound;
}

double milp_cover_bound(const poet_problem *p, const milp_options *mo, cover_kind kind, double seconds,
                        double target_j)
{
    double bound = NAN;
    bool staged = kind != COVER_AGGREGATE;
    if (seconds <= 0 || !(p->full_memory_energy_j > 0) || !p->budget_bytes || (staged && !mo->remat)) return NAN;
    cover c = {.p = p, .staged = staged};
    if (cover_build(&c, mo) && (!staged || c.l.nnz <= COVER_MAX_NNZ)) {
        if (kind == COVER_STAGED_WHOLE) cover_whole(&c);
        bound = cover_solve(&c, seconds, target_j);
    }
    cover_free(&c);
    return bound;
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

/* ---- large neighbourhood search ----
 * CBC cannot close POET's MILP on a hundred nodes, but it solves it in a
 * blink when all but a window of tensors have their matrices' columns fixed
 * to a known schedule: the window's tensors may then be kept, dropped,
 * recomputed or paged anew, in every stage, with the exact accounting. */

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
    each_decision(m, fix_outside, fx);
    cbc_recipe rc = {.l = &m->lp, .c = c, .lb = fx->lb, .ub = fx->ub, .o = quiet_cbc(), .seconds = seconds,
                     .cutoff = INFINITY, .start = start_from(m, s)};
    solved sv;
    /* the window's share of the search's time: 1.25 times its limit (0.8 of what is left) */
    double deadline = host_now_s() + 1.25 * seconds;
    solve_apart(&(solve_job){.cbc = &rc, .n_cols = m->lp.n_cols, .deadline = deadline}, &sv);
    start_free(&rc.start);
    bool better = false;
    poet_schedule next;
    if (sv.has_x && sv.obj / m->obj_scale < *energy * (1 - 1e-9) && !poet_schedule_init(&next, p->T, NULL)) {
        extract(m, sv.x, &next);
        normalize(&next);
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
    if (seconds <= 0 || poet_simulate(p, s, &sim, NULL, NULL)) return false;
    double energy = sim.energy_j, start_j = energy;
    model m;
    if (model_build(&m, p, mo->paging, mo->remat, false, NULL)) return false;
    csc c;
    size_t n = (size_t)m.lp.n_cols;
    fix_ctx fx = {.lb = malloc(n * sizeof(double)), .ub = malloc(n * sizeof(double)), .lb0 = m.lp.lb, .ub0 = m.lp.ub};
    if (!fx.lb || !fx.ub || !to_csc(&m.lp, &c)) {
        free(fx.lb), free(fx.ub), model_free(&m);
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
    model_free(&m);
    return energy < start_j;
}
