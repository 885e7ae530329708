/* See formulation.h. */
#include "formulation.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>


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
            if (i == t) AT(R, t, i) = lp_add_col(&m->lp, os * n[i].compute_j, 1, 1, false);
            else if (m->remat) AT(R, t, i) = lp_add_col(&m->lp, os * n[i].compute_j, 0, 1, true);
            if (i < t) AT(S, t, i) = lp_add_col(&m->lp, 0, 0, 1, true);
            if (m->paging && i < t && t < T - 1) AT(O, t, i) = lp_add_col(&m->lp, os * n[i].pageout_j, 0, 1, true);
            if (m->paging && i + 2 <= t) AT(D, t, i) = lp_add_col(&m->lp, 0, 0, 1, false);
            if (m->paging && i + 2 <= t && t < T - 1) AT(I, t, i) = lp_add_col(&m->lp, os * n[i].pagein_j, 0, 1, true);
            AT(U, t, i) = lp_add_col(&m->lp, 0, 0, m->min_budget ? LP_INF : 1, false);
        }
    const int *in_start = m->p->in_start;
    int E = in_start[T];
    for (int t = 0; t < T; t++)
        for (int k = 0; k <= t; k++)
            if (AT(R, t, k) >= 0)
                for (int c = in_start[k]; c < in_start[k + 1]; c++) m->F[(size_t)t * E + c] = lp_add_col(&m->lp, 0, 0, 1, false);
    if (m->min_budget) m->M = lp_add_col(&m->lp, 1, 0, LP_INF, false);
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
                int u = p->in[c], row = lp_add_row(&m->lp, -LP_INF, 0);
                lp_coef(&m->lp, row, rk, 1);
                lp_coef(&m->lp, row, col_of(m->R, m, t, u), -1);
                lp_coef(&m->lp, row, col_of(m->S, m, t, u), -1);
            }
        }
        for (int i = 0; i < t; i++) {
            if (AT(I, t, i) >= 0) {
                int row = lp_add_row(&m->lp, -LP_INF, 0);
                lp_coef(&m->lp, row, AT(I, t, i), 1), lp_coef(&m->lp, row, AT(D, t, i), -1);
            }
            if (AT(O, t, i) >= 0) {
                int row = lp_add_row(&m->lp, -LP_INF, 0);
                lp_coef(&m->lp, row, AT(O, t, i), 1), lp_coef(&m->lp, row, AT(S, t, i), -1);
            }
        }
        if (t + 1 >= T) continue;
        for (int i = 0; i <= t; i++) {
            int row = lp_add_row(&m->lp, -LP_INF, 0);
            lp_coef(&m->lp, row, AT(S, t + 1, i), 1);
            lp_coef(&m->lp, row, col_of(m->S, m, t, i), -1);
            lp_coef(&m->lp, row, col_of(m->R, m, t, i), -1);
            lp_coef(&m->lp, row, col_of(m->I, m, t, i), -1);
            if (col_of(m->D, m, t + 1, i) >= 0) {
                row = lp_add_row(&m->lp, -LP_INF, 0);
                lp_coef(&m->lp, row, AT(D, t + 1, i), 1);
                lp_coef(&m->lp, row, col_of(m->D, m, t, i), -1);
                lp_coef(&m->lp, row, col_of(m->O, m, t, i), -1);
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
                int row = lp_add_row(&m->lp, -LP_INF, 0);
                lp_coef(&m->lp, row, f, 1), lp_coef(&m->lp, row, AT(R, t, k), -1);
                if (t + 1 < T) {
                    row = lp_add_row(&m->lp, -LP_INF, 1);
                    lp_coef(&m->lp, row, f, 1), lp_coef(&m->lp, row, AT(S, t + 1, i), 1);
                }
                for (int o = p->out_start[i]; o < p->out_start[i + 1]; o++) {
                    int j = p->out[o];
                    if (j <= k || j > t || AT(R, t, j) < 0) continue;
                    row = lp_add_row(&m->lp, -LP_INF, 1);
                    lp_coef(&m->lp, row, f, 1), lp_coef(&m->lp, row, AT(R, t, j), 1);
                }
            }
        }
        /* U[t,0] = m_0 R[t,0] + sum m_i SRam[t,i];
         * U[t,k] = U[t,k-1] + m_k R[t,k] - sum over inputs i of k-1 of m_i Free */
        for (int k = 0; k <= t; k++) {
            int row = lp_add_row(&m->lp, 0, 0);
            lp_coef(&m->lp, row, AT(U, t, k), 1);
            lp_coef(&m->lp, row, col_of(m->R, m, t, k), -m->mem_scale * (double)n[k].bytes);
            if (k == 0) {
                for (int i = 0; i < t; i++) lp_coef(&m->lp, row, AT(S, t, i), -m->mem_scale * (double)n[i].bytes);
            } else {
                lp_coef(&m->lp, row, AT(U, t, k - 1), -1);
                for (int c = p->in_start[k - 1]; c < p->in_start[k]; c++)
                    lp_coef(&m->lp, row, m->F[(size_t)t * E + c], m->mem_scale * (double)n[p->in[c]].bytes);
            }
            if (m->min_budget) { /* U[t,k] <= M */
                int cap = lp_add_row(&m->lp, -LP_INF, 0);
                lp_coef(&m->lp, cap, AT(U, t, k), 1), lp_coef(&m->lp, cap, m->M, -1);
            }
        }
    }
}

static void add_runtime(model *m)
{
    if (!isfinite(m->p->runtime_budget_s)) return;
    int row = lp_add_row(&m->lp, -LP_INF, m->p->runtime_factor);
    const poet_cnode *n = m->p->inst->nodes;
    for (int t = 0; t < m->T; t++)
        for (int i = 0; i <= t; i++) {
            lp_coef(&m->lp, row, AT(R, t, i), m->time_scale * n[i].time_s);
            if (!m->p->runtime_counts_paging) continue;
            lp_coef(&m->lp, row, AT(I, t, i), m->time_scale * n[i].pagein_s); /* absent ones are -1: skipped */
            lp_coef(&m->lp, row, AT(O, t, i), m->time_scale * n[i].pageout_s);
        }
}

void form_free(model *m)
{
    free(m->R), free(m->S), free(m->D), free(m->I), free(m->O), free(m->U), free(m->F);
    lp_free(&m->lp);
}

poet_status form_build(model *m, const poet_problem *p, bool paging, bool remat, bool min_budget,
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
        form_free(m);
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
        form_free(m);
        return poet_fail(err, POET_ERR_NOMEM, "out of memory building the MILP");
    }
    return POET_OK;
}

void form_each_decision(const model *m, void (*fn)(int col, int matrix, int t, int i, void *ctx), void *ctx)
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

mip_start form_start_from(const model *m, const poet_schedule *s)
{
    start_ctx c = {m, s, 0, malloc((size_t)m->lp.n_cols * sizeof(int)), malloc((size_t)m->lp.n_cols * sizeof(double))};
    if (c.idx && c.val) form_each_decision(m, add_start_value, &c);
    return (mip_start){c.idx && c.val ? c.n : 0, c.idx, c.val};
}


typedef struct extract_ctx {
    const double *x;
    poet_schedule *s;
} extract_ctx;

static void set_from_solution(int col, int matrix, int t, int i, void *ctx)
{
    extract_ctx *c = ctx;
    poet_sched_set(c->s, matrix, t, i, c->x[col] > 0.5);
}

void form_extract(const model *m, const double *x, poet_schedule *s)
{
    extract_ctx c = {x, s};
    form_each_decision(m, set_from_solution, &c);
}

void form_normalize(poet_schedule *s)
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

