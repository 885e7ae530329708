/* The fast planner. POET's MILP has O(T^2) binaries; most of its freedom is
 * never used by good schedules of these graphs. Here each forward tensor
 * read by the backward pass gets one of three fates, O(T) binaries in all:
 *   keep   in RAM from its computation to its last reader;
 *   remat  dropped after its last forward reader, recomputed (with whatever
 *          ancestors are gone) in the stage of its first backward reader;
 *   page   paged out in the stage after its computation, dropped after its
 *          last forward reader, paged in for its first backward reader.
 * CBC solves that small MILP against a linear memory estimate per stage;
 * the fates become a schedule in POET's matrices, measured stage by stage
 * under POET's own accounting; each stage's cap is recalibrated by how far
 * the estimate missed, and the MILP solved again (a few rounds, until the
 * fates repeat), keeping the best schedule that passes the validator.
 * The LP relaxation of the full MILP gives the certified lower bound. */
#define _POSIX_C_SOURCE 200809L
#include <coin/Cbc_C_Interface.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../schedule/internal.h"
#include "greedy.h"
#include "milp.h"
#include "retain.h"

enum { FATE_KEEP, FATE_REMAT, FATE_PAGE };
enum { MAX_ROUNDS = 12 };

typedef struct fate_info {
    bool decides;              /* read by the backward pass, with a gap to drop it in */
    bool can_remat, can_page;
    int lf, b1, bl;            /* last forward reader (or itself), first and last backward reader */
    double remat_j, remat_s;   /* energy and time of the recomputation at b1, ancestors included */
    uint64_t transient_bytes;  /* ancestors recomputed with it (freed within the stage) */
    int *closure, n_closure;   /* those ancestors */
    int *boundary, n_boundary; /* resident ancestors the recomputation reads */
} fate_info;

typedef struct retain {
    const poet_problem *p;
    int T, F;
    fate_info *f;
    int *col_r, *col_p;        /* CBC columns, -1 if none */
    double *cap;               /* per stage: the memory the estimate may use */
    unsigned char *fate;
    int *stack;
    bool *seen;
} retain;

static bool keep_resident(const poet_problem *p, int i, int t) { return i < t && t <= p->last_use[i]; }

/* A paged tensor stays in RAM through this stage: its page-out needs it at
 * the start of stage i+1, its forward readers until lf. */
static int paged_out_at(const fate_info *f, int i) { return f->lf > i + 1 ? f->lf : i + 1; }

/* What fate changes in the memory estimate of stage t, against keep:
 * a recomputed tensor is absent between its last forward reader and its
 * recomputation, whose lost ancestors stand beside it in that stage; a
 * paged one is absent from after its page-out until the stage its page-in
 * lands in. */
static double fate_delta_bytes(const poet_problem *p, const fate_info *f, int i, int t, int fate)
{
    double bytes = (double)p->inst->nodes[i].bytes;
    if (fate == FATE_REMAT) {
        if (t > f->lf && t < f->b1) return -bytes;
        return t == f->b1 ? (double)f->transient_bytes : 0;
    }
    if (fate == FATE_PAGE && t > paged_out_at(f, i) && t < f->b1 - 1) return -bytes;
    return 0;
}

/* Ancestors of i not in RAM at stage b under keep-all residency. */
static bool find_closure(retain *rt, int i)
{
    const poet_problem *p = rt->p;
    fate_info *f = &rt->f[i];
    int b = f->b1, n = 0;
    memset(rt->seen, 0, (size_t)rt->T);
    rt->stack[n++] = i;
    rt->seen[i] = true;
    f->closure = malloc((size_t)rt->T * sizeof(int));
    f->boundary = malloc((size_t)rt->T * sizeof(int));
    if (!f->closure || !f->boundary) return false;
    f->remat_j = f->remat_s = 0;
    while (n) {
        int k = rt->stack[--n];
        f->remat_j += p->inst->nodes[k].compute_j;
        f->remat_s += p->inst->nodes[k].time_s;
        if (k != i) f->closure[f->n_closure++] = k, f->transient_bytes += p->inst->nodes[k].bytes;
        for (int c = p->in_start[k]; c < p->in_start[k + 1]; c++) {
            int j = p->in[c];
            if (rt->seen[j]) continue;
            rt->seen[j] = true;
            if (keep_resident(p, j, b)) f->boundary[f->n_boundary++] = j;
            else rt->stack[n++] = j;
        }
    }
    return true;
}

static bool analyse(retain *rt, bool remat, bool paging)
{
    const poet_problem *p = rt->p;
    for (int i = 0; i < rt->F; i++) {
        fate_info *f = &rt->f[i];
        f->lf = i, f->b1 = f->bl = -1;
        for (int c = p->out_start[i]; c < p->out_start[i + 1]; c++) {
            int v = p->out[c];
            if (v < rt->F) f->lf = v > f->lf ? v : f->lf;
            else f->b1 = f->b1 < 0 ? v : f->b1, f->bl = v;
        }
        if (f->b1 < 0) continue;
        f->can_remat = remat && f->lf + 1 <= f->b1 - 1;
        f->can_page = paging && paged_out_at(f, i) + 1 <= f->b1 - 2 && f->b1 - 1 >= i + 2;
        f->decides = f->can_remat || f->can_page;
        if (f->can_remat && !find_closure(rt, i)) return false;
    }
    return true;
}

/* ---- the schedule a set of fates stands for ---- */

static void set_range(poet_schedule *s, int m, int i, int from, int to)
{
    for (int t = from; t <= to; t++) poet_sched_set(s, m, t, i, true);
}

static void materialize(const retain *rt, poet_schedule *s)
{
    const poet_problem *p = rt->p;
    for (int m = 0; m < POET_N_MATRICES; m++) memset(s->m[m], 0, (size_t)s->T * (size_t)s->words * sizeof(uint64_t));
    for (int t = 0; t < rt->T; t++) poet_sched_set(s, POET_R, t, t, true);
    for (int i = 0; i < rt->T; i++) {
        const fate_info *f = i < rt->F ? &rt->f[i] : NULL;
        int fate = f && f->decides ? rt->fate[i] : FATE_KEEP;
        if (fate == FATE_KEEP) {
            set_range(s, POET_SRAM, i, i + 1, p->last_use[i]);
        } else if (fate == FATE_REMAT) {
            set_range(s, POET_SRAM, i, i + 1, f->lf);
            poet_sched_set(s, POET_R, f->b1, i, true);
            for (int k = 0; k < f->n_closure; k++) poet_sched_set(s, POET_R, f->b1, f->closure[k], true);
            set_range(s, POET_SRAM, i, f->b1 + 1, f->bl);
        } else {
            set_range(s, POET_SRAM, i, i + 1, paged_out_at(f, i));
            poet_sched_set(s, POET_MOUT, i + 1, i, true);
            poet_sched_set(s, POET_MIN, f->b1 - 1, i, true);
            set_range(s, POET_SRAM, i, f->b1, f->bl);
        }
    }
}

/* ---- the small MILP ---- */

typedef struct rows {
    int n, cap, nnz, nnz_cap;
    double *hi; /* every row is "<= hi" */
    int *row, *col;
    double *val;
    bool oom;
} rows;

static int row_new(rows *r, double hi)
{
    if (r->n == r->cap) {
        int cap = r->cap ? 2 * r->cap : 256;
        double *b = realloc(r->hi, (size_t)cap * sizeof *b);
        if (!b) return r->oom = true, -1;
        r->hi = b;
        r->cap = cap;
    }
    r->hi[r->n] = hi;
    return r->n++;
}

static void row_add(rows *r, int row, int col, double v)
{
    if (row < 0 || col < 0 || v == 0) return;
    if (r->nnz == r->nnz_cap) {
        int cap = r->nnz_cap ? 2 * r->nnz_cap : 1024;
        int *a = realloc(r->row, (size_t)cap * sizeof *a), *b = a ? realloc(r->col, (size_t)cap * sizeof *b) : NULL;
        if (a) r->row = a;
        if (b) r->col = b;
        double *c = b ? realloc(r->val, (size_t)cap * sizeof *c) : NULL;
        if (c) r->val = c;
        if (!a || !b || !c) {
            r->oom = true;
            return;
        }
        r->nnz_cap = cap;
    }
    r->row[r->nnz] = row, r->col[r->nnz] = col, r->val[r->nnz] = v;
    r->nnz++;
}

static void rows_free(rows *r) { free(r->hi), free(r->row), free(r->col), free(r->val); }

/* Memory of stage t under keep-all, the stage's own output included. */
static double keep_memory(const poet_problem *p, int t)
{
    double b = (double)p->inst->nodes[t].bytes;
    for (int i = 0; i < t; i++)
        if (keep_resident(p, i, t)) b += (double)p->inst->nodes[i].bytes;
    return b;
}

/* Rows: one fate per tensor, memory per stage (scaled by the budget),
 * recomputations that would lose an ancestor they read, the runtime. */
static void build_rows(const retain *rt, rows *r)
{
    const poet_problem *p = rt->p;
    double scale = 1.0 / (double)p->budget_bytes;
    for (int i = 0; i < rt->F; i++)
        if (rt->col_r[i] >= 0 && rt->col_p[i] >= 0) {
            int row = row_new(r, 1);
            row_add(r, row, rt->col_r[i], 1), row_add(r, row, rt->col_p[i], 1);
        }
    for (int t = 0; t < rt->T; t++) {
        int row = row_new(r, (rt->cap[t] - keep_memory(p, t)) * scale);
        for (int i = 0; i < rt->F && i < t; i++) {
            row_add(r, row, rt->col_r[i], fate_delta_bytes(p, &rt->f[i], i, t, FATE_REMAT) * scale);
            row_add(r, row, rt->col_p[i], fate_delta_bytes(p, &rt->f[i], i, t, FATE_PAGE) * scale);
        }
    }
    for (int i = 0; i < rt->F; i++) {
        const fate_info *f = &rt->f[i];
        if (rt->col_r[i] < 0) continue;
        for (int k = 0; k < f->n_boundary; k++) {
            int j = f->boundary[k];
            const fate_info *g = &rt->f[j];
            if (j >= rt->F || !g->decides) continue;
            bool gone_r = g->lf < f->b1 && f->b1 <= g->b1; /* j's remat window, its own recomputation included */
            bool gone_p = paged_out_at(g, j) < f->b1 && f->b1 < g->b1;
            if (gone_r && rt->col_r[j] >= 0) {
                int row = row_new(r, 1);
                row_add(r, row, rt->col_r[i], 1), row_add(r, row, rt->col_r[j], 1);
            }
            if (gone_p && rt->col_p[j] >= 0) {
                int row = row_new(r, 1);
                row_add(r, row, rt->col_r[i], 1), row_add(r, row, rt->col_p[j], 1);
            }
        }
    }
    int row = row_new(r, (p->runtime_budget_s - p->full_memory_time_s) / p->full_memory_time_s);
    for (int i = 0; i < rt->F; i++)
        if (rt->col_r[i] >= 0) row_add(r, row, rt->col_r[i], rt->f[i].remat_s / p->full_memory_time_s);
}

/* Solves for the fates; false when the model has no solution. */
static bool solve_fates(retain *rt, double seconds)
{
    const poet_problem *p = rt->p;
    double escale = 1.0 / p->full_memory_energy_j;
    Cbc_Model *cbc = Cbc_newModel();
    int n = 0;
    for (int i = 0; i < rt->F; i++) {
        const fate_info *f = &rt->f[i];
        rt->col_r[i] = rt->col_p[i] = -1;
        if (f->can_remat) {
            rt->col_r[i] = n++;
            Cbc_addCol(cbc, "", 0, 1, f->remat_j * escale, 1, 0, NULL, NULL);
        }
        if (f->can_page) {
            rt->col_p[i] = n++;
            Cbc_addCol(cbc, "", 0, 1, (p->inst->nodes[i].pageout_j + p->inst->nodes[i].pagein_j) * escale, 1, 0, NULL,
                       NULL);
        }
    }
    rows r = {0};
    build_rows(rt, &r);
    bool ok = !r.oom;
    /* entries grouped by row (counting sort), then one call per row */
    int *start = ok ? calloc((size_t)r.n + 1, sizeof *start) : NULL;
    int *cols = ok ? malloc((size_t)(r.nnz + 1) * sizeof *cols) : NULL;
    double *vals = ok ? malloc((size_t)(r.nnz + 1) * sizeof *vals) : NULL;
    ok = ok && start && cols && vals;
    if (ok) {
        for (int e = 0; e < r.nnz; e++) start[r.row[e] + 1]++;
        for (int k = 0; k < r.n; k++) start[k + 1] += start[k];
        int *at = malloc((size_t)(r.n + 1) * sizeof *at);
        ok = at != NULL;
        for (int k = 0; ok && k < r.n; k++) at[k] = start[k];
        for (int e = 0; ok && e < r.nnz; e++) {
            int q = at[r.row[e]]++;
            cols[q] = r.col[e], vals[q] = r.val[e];
        }
        for (int k = 0; ok && k < r.n; k++)
            Cbc_addRow(cbc, "", start[k + 1] - start[k], cols + start[k], vals + start[k], 'L', r.hi[k]);
        free(at);
    }
    free(start), free(cols), free(vals);
    rows_free(&r);
    if (ok) {
        char buf[32];
        snprintf(buf, sizeof buf, "%.3f", seconds > 0.5 ? seconds : 0.5);
        Cbc_setParameter(cbc, "seconds", buf);
        Cbc_setParameter(cbc, "ratioGap", "1e-9");
        Cbc_setParameter(cbc, "allowableGap", "1e-12");
        Cbc_setLogLevel(cbc, 0);
        milp_quiet_solve(cbc);
        const double *x = Cbc_bestSolution(cbc);
        ok = x != NULL;
        for (int i = 0; ok && i < rt->F; i++) {
            rt->fate[i] = FATE_KEEP;
            if (rt->col_r[i] >= 0 && x[rt->col_r[i]] > 0.5) rt->fate[i] = FATE_REMAT;
            if (rt->col_p[i] >= 0 && x[rt->col_p[i]] > 0.5) rt->fate[i] = FATE_PAGE;
        }
    }
    Cbc_deleteModel(cbc);
    return ok;
}

/* ---- rounds of solve, build, check ---- */

static void retain_free(retain *rt)
{
    if (rt->f)
        for (int i = 0; i < rt->F; i++) free(rt->f[i].closure), free(rt->f[i].boundary);
    free(rt->f), free(rt->col_r), free(rt->col_p), free(rt->cap), free(rt->fate), free(rt->stack), free(rt->seen);
}

/* The estimate of stage t for the current fates (what its row adds up). */
static double estimate(const retain *rt, int t)
{
    const poet_problem *p = rt->p;
    double b = keep_memory(p, t);
    for (int i = 0; i < rt->F && i < t; i++)
        if (rt->f[i].decides) b += fate_delta_bytes(p, &rt->f[i], i, t, rt->fate[i]);
    return b;
}

/* Recalibrates each stage's estimate against POET's accounting of the
 * schedule: the cap becomes the budget plus what the estimate overstated
 * (or minus what it understated), so that the next round aims at the real
 * budget. Returns true when the schedule fits, placement included. */
static bool recalibrate(retain *rt, const poet_schedule *s)
{
    const poet_problem *p = rt->p;
    bool fits = true;
    for (int t = 0; t < rt->T; t++) {
        const uint64_t *K = t + 1 < s->T ? sched_row(s, POET_SRAM, t + 1) : NULL;
        int node = t;
        uint64_t peak = stage_memory(p, t, sched_row(s, POET_SRAM, t), sched_row(s, POET_R, t), K, &node, NULL);
        double slack = estimate(rt, t) - (double)peak;
        if (peak > p->budget_bytes) fits = false;
        rt->cap[t] = (double)p->budget_bytes + (slack < 0 ? 2 * slack : slack);
    }
    if (!fits) return false;
    uint64_t arena = placed_arena_bytes(p, s);
    if (arena <= p->budget_bytes) return true;
    for (int t = 0; t < rt->T; t++) rt->cap[t] -= (double)(arena - p->budget_bytes);
    return false;
}

poet_status retain_plan(const poet_problem *p, bool remat, bool paging, double seconds, poet_schedule *out,
                        bool *found, poet_err *err)
{
    *found = false;
    retain rt = {.p = p, .T = p->T};
    while (rt.F < p->T && !p->inst->nodes[rt.F].is_backward) rt.F++;
    size_t T = (size_t)p->T;
    rt.f = calloc(T, sizeof *rt.f);
    rt.col_r = malloc(T * sizeof(int)), rt.col_p = malloc(T * sizeof(int));
    rt.cap = malloc(T * sizeof(double));
    rt.fate = calloc(T, 1), rt.stack = malloc(T * sizeof(int)), rt.seen = malloc(T);
    poet_status st = POET_OK;
    if (!rt.f || !rt.col_r || !rt.col_p || !rt.cap || !rt.fate || !rt.stack || !rt.seen || !analyse(&rt, remat, paging) ||
        poet_schedule_init(out, p->T, err)) {
        retain_free(&rt);
        return poet_fail(err, POET_ERR_NOMEM, "out of memory in the fast planner");
    }
    for (int t = 0; t < p->T; t++) rt.cap[t] = (double)p->budget_bytes;
    double started = plan_wall_s(), best = INFINITY;
    poet_schedule trial;
    if ((st = poet_schedule_init(&trial, p->T, err))) {
        poet_schedule_free(out);
        retain_free(&rt);
        return st;
    }
    /* rounds: solve, build, recalibrate; the best valid schedule is kept */
    unsigned char *last = calloc((size_t)p->T, 1);
    for (int round = 0; last && round < MAX_ROUNDS; round++) {
        double left = seconds - (plan_wall_s() - started);
        if (left <= 0 || !solve_fates(&rt, left)) break;
        if (round > 0 && memcmp(last, rt.fate, (size_t)rt.F) == 0) break; /* converged */
        memcpy(last, rt.fate, (size_t)rt.F);
        materialize(&rt, &trial);
        poet_sim sim;
        if (recalibrate(&rt, &trial) && !poet_schedule_validate(p, &trial, NULL) &&
            !poet_simulate(p, &trial, &sim, NULL, NULL) && sim.energy_j < best) {
            best = sim.energy_j;
            poet_schedule tmp = *out;
            *out = trial, trial = tmp;
            *found = true;
        }
    }
    poet_schedule_free(&trial);
    free(last);
    if (!*found) poet_schedule_free(out);
    retain_free(&rt);
    return st;
}
