/* See lp.h. */
#include "lp.h"

#include <stdlib.h>

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

int lp_add_col(lp *m, double obj, double lb, double ub, bool is_int)
{
    void **a[] = {(void **)&m->obj, (void **)&m->lb, (void **)&m->ub, (void **)&m->is_int};
    const size_t e[] = {sizeof(double), sizeof(double), sizeof(double), sizeof(char)};
    if (!grow(&m->cap_cols, m->n_cols + 1, a, e, 4)) return m->oom = true, -1;
    int c = m->n_cols++;
    m->obj[c] = obj, m->lb[c] = lb, m->ub[c] = ub, m->is_int[c] = (char)is_int;
    return c;
}

int lp_add_row(lp *m, double lb, double ub)
{
    void **a[] = {(void **)&m->rlb, (void **)&m->rub};
    const size_t e[] = {sizeof(double), sizeof(double)};
    if (!grow(&m->cap_rows, m->n_rows + 1, a, e, 2)) return m->oom = true, -1;
    m->rlb[m->n_rows] = lb, m->rub[m->n_rows] = ub;
    return m->n_rows++;
}

void lp_coef(lp *m, int row, int col, double v)
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

void lp_free(lp *m)
{
    free(m->obj), free(m->lb), free(m->ub), free(m->is_int), free(m->rlb), free(m->rub);
    free(m->trow), free(m->tcol), free(m->tval);
}

void csc_free(csc *c) { free(c->start), free(c->index), free(c->value); }

bool lp_to_csc(const lp *l, csc *c)
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

void mip_start_free(mip_start *s) { free(s->idx), free(s->val); }

poet_plan_options cbc_quiet_options(void)
{
    return (poet_plan_options){.threads = 1, .deterministic = true, .gap = 1e-9};
}
