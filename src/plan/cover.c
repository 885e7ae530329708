/* The covering bound: a relaxation of POET's MILP with whole returns, a
 * lower bound on the energy of every schedule that CBC (or, small, GLPK)
 * solves in well under a second; docs/fast.md says what each rule counts. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../host/clock.h"
#include "cbc.h"
#include "glpk_mip.h"
#include "lp.h"
#include "milp.h"

#define COVER_MAX_NNZ 100000 /* a staged covering model larger than this is not solved */
/* A covering model this small goes to GLPK first, for this many nodes of
 * its search (cover_solve says why) */
#define GLPK_MAX_NNZ 3000
#define GLPK_MAX_NODES 100

/* ---- the covering bound ----
 * Why it bounds every schedule, and what each rule counts: docs/fast.md,
 * "Certificate". Between two consecutive readers a < b of a tensor i, the
 * stages a < t < b form a gap of i; across each stage of a gap a schedule
 * holds i (in RAM while node t runs) or lets it go and brings it back
 * before b. With r and q (the gap's return is a recomputation, a page-in),
 * d_t (i let go across stage t), x_u and y_u (u brought back after its
 * life by recomputation, by page-in), o_i (i paged out) and h_{u,t} (u held
 * across stage t > L_u, u's last reader; held across t implies held across
 * t - 1):
 *   each stage t: sum over the gaps across t of m_i d_t
 *                 - sum of m_u h_{u,t} >= m_t + inputs of t + held bytes - budget
 *   d_t <= r + q;  for each input u of i with L_u < t: d_t <= q + x_u + y_u + h_{u,t}
 *   for each input w of u with L_w < L_u: x_u <= x_w + y_w + h_{w,L_u}
 *   q <= o_i, y_i <= o_i;  the recomputations' time <= (rho - 1) x full-memory time
 * and the energy is at least the full-memory energy plus what r, q, x, y
 * and o cost. Staged (small graphs), returns get stages: every let-go run
 * pays its own return (d_t - d_{t+1} <= e_{t+1} + in_{t+1}), a dead input
 * comes back per stage (X, Y, P), and a recomputation's moment must fit
 * (cover_moment, cover_absent, cover_needs, cover_again). */

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
        h[s] = lp_add_col(&c->l, 0, 0, 1, false);
        if (s > first) {
            int row = lp_add_row(&c->l, -LP_INF, 0);
            lp_coef(&c->l, row, h[s], 1), lp_coef(&c->l, row, h[s - 1], -1);
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
        int row = lp_add_row(&c->l, -LP_INF, 0);
        lp_coef(&c->l, row, col, 1), lp_coef(&c->l, row, also, -1);
        lp_coef(&c->l, row, c->x[u], -1), lp_coef(&c->l, row, c->y[u], -1), lp_coef(&c->l, row, cover_held(c, u, t), -1);
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
        isfinite(p->runtime_budget_s) && time > 0 ? lp_add_row(&c->l, -LP_INF, p->runtime_factor - 1 + 1e-6) : -1;
    for (int i = 0; i < p->T; i++) {
        c->x[i] = remat && !c->staged ? lp_add_col(&c->l, n[i].compute_j / full, 0, 1, true) : -1;
        c->y[i] = paging && !c->staged ? lp_add_col(&c->l, n[i].pagein_j / full, 0, 1, true) : -1;
        c->o[i] = paging ? lp_add_col(&c->l, n[i].pageout_j / full, 0, 1, true) : -1;
        int row = lp_add_row(&c->l, -LP_INF, 0);
        lp_coef(&c->l, row, c->y[i], 1), lp_coef(&c->l, row, c->o[i], -1);
        lp_coef(&c->l, runtime, c->x[i], n[i].time_s / time);
        /* a counted transfer is one a schedule makes: its time where the runtime counts transfers (the staged
         * returns leave theirs out, which only weakens the bound) */
        lp_coef(&c->l, runtime, c->y[i], poet_transfer_counted_s(p, n[i].pagein_s) / time);
        lp_coef(&c->l, runtime, c->o[i], poet_transfer_counted_s(p, n[i].pageout_s) / time);
    }
    for (int g = 0; g < c->n_gaps; g++) { /* staged, the returns are cover_staged_returns' */
        int i = c->gap_tensor[g];
        c->r[g] = c->q[g] = -1;
        if (c->staged) continue;
        c->r[g] = remat ? lp_add_col(&c->l, n[i].compute_j / full, 0, 1, true) : -1;
        c->q[g] = paging ? lp_add_col(&c->l, n[i].pagein_j / full, 0, 1, true) : -1;
        int row = lp_add_row(&c->l, -LP_INF, 0);
        lp_coef(&c->l, row, c->q[g], 1), lp_coef(&c->l, row, c->o[i], -1);
        row = lp_add_row(&c->l, -LP_INF, 1);
        lp_coef(&c->l, row, c->r[g], 1), lp_coef(&c->l, row, c->q[g], 1);
        lp_coef(&c->l, runtime, c->r[g], n[i].time_s / time);
        lp_coef(&c->l, runtime, c->q[g], poet_transfer_counted_s(p, n[i].pagein_s) / time);
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
        for (int t = c->d_from[g]; t < c->gap_hi[g]; t++) lp_add_col(&c->l, 0, 0, 1, false);
    }
    for (int g = 0; g < c->n_gaps && !c->staged; g++)
        for (int t = c->d_from[g]; t < c->gap_hi[g]; t++) {
            int d = c->d[g] + t - c->d_from[g], row = lp_add_row(&c->l, -LP_INF, 0);
            lp_coef(&c->l, row, d, 1), lp_coef(&c->l, row, c->r[g], -1), lp_coef(&c->l, row, c->q[g], -1);
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
            lp_coef(&c->l, row, c->d[g] + t - c->d_from[g], v);
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
    int row = lp_add_row(&c->l, -1e-6, LP_INF);
    lp_coef(&c->l, row, col, -(need - B) / B);
    for (int j = 0; j < s; j++)
        if (p->last_use[j] >= s && j != v && !reads(p, v, j))
            lp_coef(&c->l, row, cover_absent(c, j, s), (double)n[j].bytes / B);
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
        c->h[u][k] = lp_add_col(&c->l, 0, 0, 1, false);
        c->hx[u][k] = lp_add_col(&c->l, n[u].compute_j / full, 0, 1, true);
        c->hy[u][k] = c->o[u] >= 0 ? lp_add_col(&c->l, n[u].pagein_j / full, 0, 1, true) : -1;
        if (c->runtime >= 0) lp_coef(&c->l, c->runtime, c->hx[u][k], n[u].time_s / p->full_memory_time_s);
    }
    for (int k = 0; k < len; k++) {
        if (c->hy[u][k] >= 0) {
            int row = lp_add_row(&c->l, -LP_INF, 0);
            lp_coef(&c->l, row, c->hy[u][k], 1), lp_coef(&c->l, row, c->o[u], -1);
        }
        if (k > 0) {
            int row = lp_add_row(&c->l, -LP_INF, 0);
            lp_coef(&c->l, row, c->h[u][k], 1), lp_coef(&c->l, row, c->h[u][k - 1], -1);
            lp_coef(&c->l, row, c->hx[u][k], -1), lp_coef(&c->l, row, c->hy[u][k], -1);
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
            int row = lp_add_row(&c->l, -LP_INF, 2);
            lp_coef(&c->l, row, col, 1), cover_let_go_coef(c, row, u, s - 1, 1), cover_let_go_coef(c, row, u, s, 1);
            lp_coef(&c->l, row, cover_again(c, u, s, false), -1), lp_coef(&c->l, row, cover_again(c, u, s, true), -1);
        }
        if (p->last_use[u] >= s - 1) continue;
        cover_after_life(c, u);
        int row = lp_add_row(&c->l, -LP_INF, 0);
        lp_coef(&c->l, row, col, 1), lp_coef(&c->l, row, after_life_at(c, c->hx, u, s), -1);
        lp_coef(&c->l, row, after_life_at(c, c->hy, u, s), -1), lp_coef(&c->l, row, after_life_at(c, c->h, u, s - 1), -1);
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
    *col = lp_add_col(&c->l, (paged ? n[j].pagein_j : n[j].compute_j) / p->full_memory_energy_j, 0, 1, true);
    if (paged) {
        int row = lp_add_row(&c->l, -LP_INF, 0);
        lp_coef(&c->l, row, *col, 1), lp_coef(&c->l, row, c->o[j], -1);
        return *col;
    }
    if (c->runtime >= 0) lp_coef(&c->l, c->runtime, *col, n[j].time_s / p->full_memory_time_s);
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
    *w = lp_add_col(&c->l, 0, 0, 1, false);
    int row = lp_add_row(&c->l, -LP_INF, 0);
    lp_coef(&c->l, row, *w, 1), lp_coef(&c->l, row, cover_again(c, j, s, false), -1);
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
        int prev = f, row = lp_add_row(&c->l, 0, LP_INF);
        f = lp_add_col(&c->l, 0, 0, 1, false);
        lp_coef(&c->l, row, f, 1);
        if (prev < 0) lp_coef(&c->l, row, c->d[g] + t - c->d_from[g], -1);
        else lp_coef(&c->l, row, prev, -1), lp_coef(&c->l, row, e[t], 1);
        row = lp_add_row(&c->l, -LP_INF, 1);
        lp_coef(&c->l, row, in[t + 1], 1), lp_coef(&c->l, row, f, 1);
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
            e[s] = lp_add_col(&c->l, n[i].compute_j / full, 0, 1, true);
            if (c->runtime >= 0) lp_coef(&c->l, c->runtime, e[s], n[i].time_s / p->full_memory_time_s);
            in[s] = c->o[i] >= 0 ? lp_add_col(&c->l, n[i].pagein_j / full, 0, 1, true) : -1;
            if (in[s] >= 0) {
                int row = lp_add_row(&c->l, -LP_INF, 0);
                lp_coef(&c->l, row, in[s], 1), lp_coef(&c->l, row, c->o[i], -1);
            }
            cover_needs(c, e[s], i, s);
            cover_moment(c, e[s], i, s);
        }
        for (int t = lo + 1; t < hi; t++) {
            int row = lp_add_row(&c->l, -LP_INF, 0);
            lp_coef(&c->l, row, c->d[g] + t - c->d_from[g], 1);
            if (t + 1 < hi) lp_coef(&c->l, row, c->d[g] + t + 1 - c->d_from[g], -1);
            lp_coef(&c->l, row, e[t + 1], -1), lp_coef(&c->l, row, in[t + 1], -1);
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
    int row = lp_add_row(&c->l, 1, LP_INF);
    lp_coef(&c->l, row, c->r[g], 1), lp_coef(&c->l, row, c->q[g], 1);
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
        int row = lp_add_row(&c->l, 0, LP_INF);
        for (int g = 0; g < c->n_gaps; g++)
            if (c->gap_lo[g] < t && t < c->gap_hi[g]) {
                double m = (double)n[c->gap_tensor[g]].bytes;
                held += m;
                if (t < c->d_from[g]) lp_coef(&c->l, row, c->r[g], scale * m), lp_coef(&c->l, row, c->q[g], scale * m);
                else lp_coef(&c->l, row, c->d[g] + t - c->d_from[g], scale * m);
                if (m > -need) cover_must_go(c, g, t);
            }
        for (int u = 0; u < t; u++) {
            int h = after_life_at(c, c->h, u, t);
            lp_coef(&c->l, row, h, -scale * (double)n[u].bytes);
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
    if (seconds <= 0 || !cbc_available() || !lp_to_csc(&c->l, &m)) return bound;
    double cutoff = target_j > 0 ? target_j / (1 - 1e-7) / full - 1 : INFINITY; /* less the margin: target_j */
    cbc_recipe rc = {.l = &c->l, .c = &m, .lb = c->l.lb, .ub = c->l.ub, .o = cbc_quiet_options(), .seconds = seconds,
                     .bound_only = true, .cutoff = cutoff};
    solved sv;
    cbc_solve_apart(&(solve_job){.cbc = &rc, .n_cols = c->l.n_cols, .deadline = host_now_s() + 1.25 * seconds + 0.5},
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

