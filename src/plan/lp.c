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

