/* Internal: a sparse linear (or mixed-integer) program, built a row and a
 * column at a time, for any solver to read: POET's formulation, the
 * covering models and the windows all build one. */
#ifndef POET_SRC_PLAN_LP_H
#define POET_SRC_PLAN_LP_H

#include <float.h>
#include <stdbool.h>

#include "poet/plan.h"

#ifdef POET_WITH_CBC
#include <coin/Coin_C_defines.h> /* CoinBigIndex, whose width CBC's build chose */
#else
typedef int CoinBigIndex;
#endif

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


/* The model's matrix in column-major form, as CBC and CLP read it; false
 * when out of memory. */
typedef struct csc {
    CoinBigIndex *start;
    int *index;
    double *value;
} csc;

void csc_free(csc *c);
bool lp_to_csc(const lp *l, csc *c);

/* A MIP start for CBC: the integer columns' values for a schedule. */
typedef struct mip_start {
    int n, *idx;
    double *val;
} mip_start;

void mip_start_free(mip_start *s);

/* The options of the solves poet runs for itself (bounds, windows): one
 * thread, no log, reproducible, to a proof. */
poet_plan_options cbc_quiet_options(void);

#endif
