/* Internal: small MILPs on GLPK, in this process. */
#ifndef POET_SRC_PLAN_GLPK_MIP_H
#define POET_SRC_PLAN_GLPK_MIP_H

#include <stdbool.h>

/* A MILP in triplets, 0-based; bounds of DBL_MAX (either sign) are infinite. */
typedef struct small_mip {
    int n_cols, n_rows, nnz;
    const double *obj, *lb, *ub; /* per column; minimized */
    const char *is_int;
    const double *rlb, *rub; /* per row */
    const int *row, *col;
    const double *val;
} small_mip;

typedef enum small_mip_status { SMALL_MIP_UNSOLVED, SMALL_MIP_OPTIMAL, SMALL_MIP_INFEASIBLE } small_mip_status;

/* Solves m to a proven optimum (its objective in *obj) or infeasibility
 * within seconds and about max_nodes nodes of branch and bound;
 * SMALL_MIP_UNSOLVED when either ran out or GLPK failed, and then *obj is
 * the LP relaxation's optimum where that was reached (a lower bound), NAN
 * otherwise. */
small_mip_status glpk_mip_solve(const small_mip *m, double seconds, int max_nodes, double *obj);

#endif
