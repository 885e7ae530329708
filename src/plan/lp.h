/* Internal: a sparse linear (or mixed-integer) program, built a row and a
 * column at a time, for any solver to read: POET's formulation, the
 * covering models and the windows all build one. */
#ifndef POET_SRC_PLAN_LP_H
#define POET_SRC_PLAN_LP_H

#include <float.h>
#include <stdbool.h>

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

/* A new column (its index, or -1 when out of memory: m->oom), row, or
 * coefficient (none for a zero, or a column or row of -1). */
int lp_add_col(lp *m, double obj, double lb, double ub, bool is_int);
int lp_add_row(lp *m, double lb, double ub);
void lp_coef(lp *m, int row, int col, double v);
void lp_free(lp *m);

#endif
