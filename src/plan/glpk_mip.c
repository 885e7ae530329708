/* Small MILPs on GLPK's C API, in this process.
 *
 * CBC's driver costs a fixed few milliseconds a solve (its parameter table,
 * cut generators and message handlers, set up and torn down, and the child
 * process poet runs it in), which is most of a plan on a graph of a few
 * dozen nodes; GLPK solves such a model in a fraction of that. */
#include "glpk_mip.h"

#include <float.h>
#include <glpk.h>
#include <math.h>
#include <setjmp.h>
#include <stdlib.h>

/* GLPK calls this on an internal error and aborts the process if it
 * returns: it jumps back to the solve, which gives up. */
static void on_glpk_error(void *jump) { longjmp(*(jmp_buf *)jump, 1); }

/* Takes all of GLPK's terminal output, its error messages included, which
 * glp_term_out does not stop: standard output is the caller's (poet plan
 * --json writes its answer there). */
static int swallow(void *info, const char *text)
{
    (void)info, (void)text;
    return 1;
}

static int bound_type(double lb, double ub)
{
    bool lo = lb > -DBL_MAX, up = ub < DBL_MAX;
    return lo && up ? (lb == ub ? GLP_FX : GLP_DB) : lo ? GLP_LO : up ? GLP_UP : GLP_FR;
}

typedef struct entry {
    unsigned long long at; /* column, then row */
    int k;                 /* its triplet */
} entry;

static int by_place(const void *a, const void *b)
{
    const entry *x = a, *y = b;
    return (x->at > y->at) - (x->at < y->at);
}

/* GLPK refuses a matrix with an entry twice, where CBC adds them up: the
 * entries in GLPK's 1-based arrays, repeated ones summed; their count, or
 * -1 out of memory. */
static int merged_entries(const small_mip *m, int **ia, int **ja, double **ar)
{
    entry *order = malloc((size_t)(m->nnz + 1) * sizeof *order);
    *ia = malloc((size_t)(m->nnz + 1) * sizeof **ia), *ja = malloc((size_t)(m->nnz + 1) * sizeof **ja);
    *ar = malloc((size_t)(m->nnz + 1) * sizeof **ar);
    if (!order || !*ia || !*ja || !*ar) {
        free(order);
        return -1;
    }
    for (int k = 0; k < m->nnz; k++)
        order[k] = (entry){(unsigned long long)m->col[k] << 32 | (unsigned)m->row[k], k};
    qsort(order, (size_t)m->nnz, sizeof *order, by_place);
    int n = 0;
    for (int k = 0; k < m->nnz; k++) {
        int e = order[k].k;
        if (n && (*ja)[n] == m->col[e] + 1 && (*ia)[n] == m->row[e] + 1) {
            (*ar)[n] += m->val[e];
            continue;
        }
        n++;
        (*ia)[n] = m->row[e] + 1, (*ja)[n] = m->col[e] + 1, (*ar)[n] = m->val[e];
    }
    free(order);
    return n;
}

static void load(glp_prob *g, const small_mip *m, int n, const int *ia, const int *ja, const double *ar)
{
    glp_set_obj_dir(g, GLP_MIN);
    if (m->n_rows) glp_add_rows(g, m->n_rows);
    if (m->n_cols) glp_add_cols(g, m->n_cols);
    for (int i = 0; i < m->n_rows; i++)
        glp_set_row_bnds(g, i + 1, bound_type(m->rlb[i], m->rub[i]), m->rlb[i], m->rub[i]);
    for (int j = 0; j < m->n_cols; j++) {
        glp_set_col_bnds(g, j + 1, bound_type(m->lb[j], m->ub[j]), m->lb[j], m->ub[j]);
        glp_set_obj_coef(g, j + 1, m->obj[j]);
        if (m->is_int[j]) glp_set_col_kind(g, j + 1, GLP_IV);
    }
    glp_load_matrix(g, n, ia, ja, ar);
}

static int ms_left(double deadline_s, double now_s)
{
    double ms = 1000 * (deadline_s - now_s);
    return ms < 1 ? 1 : ms > 1e9 ? 1000000000 : (int)ms;
}

/* Gives up a search past its node limit (info: an int): a limit on work
 * rather than on time, so that which solver answers does not depend on
 * the machine. */
static void on_node(glp_tree *tree, void *info)
{
    int active, all, total;
    glp_ios_tree_size(tree, &active, &all, &total);
    if (glp_ios_reason(tree) == GLP_ISELECT && total > *(const int *)info) glp_ios_terminate(tree);
}

/* The solve proper: *lp_obj is the LP relaxation's optimum once reached. */
static small_mip_status solve(const small_mip *m, int n, const int *ia, const int *ja, const double *ar,
                              double seconds, int max_nodes, double *obj, double *lp_obj)
{
    small_mip_status st = SMALL_MIP_UNSOLVED;
    double deadline = glp_time() / 1000.0 + seconds;
    glp_prob *g = glp_create_prob();
    load(g, m, n, ia, ja, ar);
    glp_smcp sp;
    glp_init_smcp(&sp);
    sp.msg_lev = GLP_MSG_OFF, sp.tm_lim = ms_left(deadline, glp_time() / 1000.0);
    int lp_ret = glp_simplex(g, &sp), lp_status = glp_get_status(g);
    if (!lp_ret && lp_status == GLP_NOFEAS) st = SMALL_MIP_INFEASIBLE;
    if (!lp_ret && lp_status == GLP_OPT) {
        *lp_obj = glp_get_obj_val(g);
        glp_iocp ip;
        glp_init_iocp(&ip);
        ip.msg_lev = GLP_MSG_OFF, ip.tm_lim = ms_left(deadline, glp_time() / 1000.0);
        ip.tol_int = 1e-9; /* a column within this of a whole number is whole, as CBC is told */
        ip.cb_func = on_node, ip.cb_info = &max_nodes;
        int mip_ret = glp_intopt(g, &ip), mip_status = glp_mip_status(g);
        if (!mip_ret && mip_status == GLP_OPT) st = SMALL_MIP_OPTIMAL, *obj = glp_mip_obj_val(g);
        if (!mip_ret && mip_status == GLP_NOFEAS) st = SMALL_MIP_INFEASIBLE;
    }
    glp_delete_prob(g);
    return st;
}

/* solve() with GLPK's errors caught; *lp_obj NAN after one. */
static small_mip_status guarded(const small_mip *m, int n, const int *ia, const int *ja, const double *ar,
                                double seconds, int max_nodes, double *obj, double *lp_obj)
{
    jmp_buf jump;
    if (setjmp(jump)) {
        glp_free_env(); /* after an error, GLPK's state is only fit to be freed */
        glp_error_hook(NULL, NULL);
        *lp_obj = NAN;
        return SMALL_MIP_UNSOLVED;
    }
    glp_term_hook(swallow, NULL);
    glp_error_hook(on_glpk_error, &jump);
    small_mip_status st = solve(m, n, ia, ja, ar, seconds, max_nodes, obj, lp_obj);
    glp_error_hook(NULL, NULL);
    return st;
}

small_mip_status glpk_mip_solve(const small_mip *m, double seconds, int max_nodes, double *obj)
{
    int *ia, *ja;
    double *ar, lp_obj = NAN;
    int n = merged_entries(m, &ia, &ja, &ar);
    *obj = NAN;
    small_mip_status st = n >= 0 ? guarded(m, n, ia, ja, ar, seconds, max_nodes, obj, &lp_obj) : SMALL_MIP_UNSOLVED;
    free(ia), free(ja), free(ar);
    if (st == SMALL_MIP_UNSOLVED) *obj = lp_obj;
    return st;
}
