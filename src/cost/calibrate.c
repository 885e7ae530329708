/* Per-op costs fit to what a device measured (poet emulate --calibrate):
 * the profile the planner then prices each node with. */
#include <stdio.h>
#include <string.h>

#include "poet/cost.h"

/* Sums of a least-squares fit of t = a + b x. */
typedef struct line_fit {
    double n, sx, sy, sxx, sxy;
} line_fit;

static void fit_add(line_fit *f, double x, double t)
{
    f->n += 1, f->sx += x, f->sy += t, f->sxx += x * x, f->sxy += x * t;
}

/* The least-squares line with a >= 0 and b >= 0: the free fit where both
 * come out so, else the better of the two one-parameter fits. */
static void fit_solve(const line_fit *f, double *a, double *b)
{
    *a = *b = 0;
    if (f->n <= 0) return;
    double den = f->n * f->sxx - f->sx * f->sx;
    if (f->n >= 2 && den > 1e-12 * f->n * f->sxx) {
        *b = (f->n * f->sxy - f->sx * f->sy) / den;
        *a = (f->sy - *b * f->sx) / f->n;
        if (*a >= 0 && *b >= 0) return;
    }
    double b_only = f->sxx > 0 ? f->sxy / f->sxx : 0, a_only = f->sy / f->n;
    /* squared error of each, up to the shared sum of t^2 */
    double e_b = f->sxx > 0 ? -f->sxy * f->sxy / f->sxx : 0, e_a = -f->sy * f->sy / f->n;
    if (b_only > 0 && e_b <= e_a) *a = 0, *b = b_only;
    else *a = a_only > 0 ? a_only : 0, *b = 0;
}

static double unit_of(const poet_node *n, int elem_bytes)
{
    return n->flops > 0 ? (double)n->flops : (double)n->bytes / (double)elem_bytes;
}

static poet_status check_step(const poet_measured_step *s, poet_err *err)
{
    if (!s->g || !s->compute_s || !s->computes || !s->transfer_s || !s->transfers)
        return poet_fail(err, POET_ERR_INVALID, "calibration: a measured step lacks its graph or per-node arrays");
    for (int v = 0; v < s->g->n_nodes; v++)
        if (!(s->compute_s[v] >= 0) || !(s->transfer_s[v] >= 0) || s->computes[v] < 0 || s->transfers[v] < 0)
            return poet_fail(err, POET_ERR_INVALID, "calibration: node %s has a negative or undefined measurement",
                             s->g->nodes[v].name);
    if (!(s->update_s >= 0) || !(s->other_s == s->other_s))
        return poet_fail(err, POET_ERR_INVALID, "calibration: undefined step totals");
    return POET_OK;
}

poet_status poet_profile_calibrate(const poet_profile *base, const poet_measured_step *m, int n,
                                   double instructions_per_s, poet_profile *out, poet_err *err)
{
    poet_status st = poet_profile_validate(base, err);
    if (st) return st;
    if (n < 1) return poet_fail(err, POET_ERR_INVALID, "calibration: no measured step");
    line_fit ops[POET_COST_KINDS][2];
    memset(ops, 0, sizeof ops);
    line_fit paging = {0};
    double update_s = 0, other_s = 0, trained = 0;
    for (int k = 0; k < n; k++) {
        const poet_measured_step *s = &m[k];
        if ((st = check_step(s, err))) return st;
        const poet_graph *g = s->g;
        for (int v = 0; v < g->n_nodes; v++) {
            const poet_node *nd = &g->nodes[v];
            bool grad = nd->op == POET_OP_GRAD;
            int kind = poet_cost_kind(g, nd);
            if (s->computes[v]) fit_add(&ops[kind][grad], unit_of(nd, g->elem_bytes), s->compute_s[v] / s->computes[v]);
            if (s->transfers[v]) fit_add(&paging, (double)nd->bytes, s->transfer_s[v] / s->transfers[v]);
        }
        update_s += s->update_s, other_s += s->other_s, trained += (double)s->trained_params;
    }
    poet_profile p = *base;
    for (int kind = 0; kind < POET_COST_KINDS; kind++)
        for (int grad = 0; grad < 2; grad++) {
            poet_op_cost *c = &p.op[kind][grad];
            if (!ops[kind][grad].n) continue; /* base's: POET's FLOP model, or an earlier calibration's */
            c->measured = true;
            fit_solve(&ops[kind][grad], &c->call_s, &c->unit_s);
        }
    if (paging.n > 0) {
        double lat, per_byte;
        fit_solve(&paging, &lat, &per_byte);
        double rate = per_byte > 1e-15 ? 1.0 / per_byte : 1e15;
        p.pagein_latency_s = p.pageout_latency_s = lat;
        p.pagein_bytes_per_s = p.pageout_bytes_per_s = rate;
    }
    p.compute_power_w = base->compute_power_w > 0 ? base->compute_power_w : base->flops_per_s / base->flops_per_j;
    p.update_s_per_param = trained > 0 ? update_s / trained : 0;
    p.step_s = other_s / n > 0 ? other_s / n : 0;
    p.instructions_per_s = instructions_per_s;
    static const char suffix[] = "-calibrated";
    size_t len = strlen(base->name), keep = sizeof p.name - sizeof suffix;
    bool named = len >= sizeof suffix - 1 && strcmp(base->name + len - (sizeof suffix - 1), suffix) == 0;
    if (!named) snprintf(p.name, sizeof p.name, "%.*s%s", (int)(len < keep ? len : keep), base->name, suffix);
    if ((st = poet_profile_validate(&p, err))) return st;
    *out = p;
    return POET_OK;
}

double poet_profile_step_overhead_s(const poet_profile *d, uint64_t trained_params)
{
    return d->step_s + d->update_s_per_param * (double)trained_params;
}
