/* Every op's gradients against central finite differences of the loss,
 * through small graphs that put each op between a parameter and the loss
 * (so that both its input gradient and any parameter gradient are checked).
 * The same graphs are reused by tests/torch_check.py through test_torch_dump. */
#include "check.h"
#include "graphs.h"
#include "rtutil.h"

static const double H = 5e-3;

static double loss_at(rig *r, const float *x, const int32_t *y, void *state)
{
    double l = NAN;
    poet_err err = {0};
    /* the state (and with it the step that seeds dropout) is restored after
     * each evaluation, so that every evaluation sees the same function */
    poet_dev_state_save(poet_engine_device(r->e), state);
    if (poet_engine_step(r->e, x, y, &l, &err)) fprintf(stderr, "step: %s\n", err.msg);
    poet_dev_state_load(poet_engine_device(r->e), state, poet_dev_state_bytes(poet_engine_device(r->e)), &err);
    return l;
}

static void check_graph(const char *name, poet_graph *g, uint64_t seed)
{
    rig r;
    poet_optimizer still = {POET_OPT_SGD, 0, 0, 0, 0, 0, 0}; /* lr 0: weights never move */
    rig_start(&r, g, "keep-all", 0, NULL, still, seed);
    CHECK_MSG(r.ok, "%s: engine", name);
    if (!r.ok) return;
    uint64_t n_in = poet_shape_numel(&g->nodes[0].shape);
    float *x = malloc(n_in * sizeof *x);
    int32_t *y = malloc(256 * sizeof *y);
    void *state = malloc(poet_dev_state_bytes(poet_engine_device(r.e)));
    rt_batch(g, seed, x, y);
    loss_at(&r, x, y, state); /* fills the gradients */
    int checked = 0, bad = 0;
    for (int v = 0; v < g->n_forward; v++) {
        uint64_t n = 0;
        float *w = poet_dev_params(poet_engine_device(r.e), v, false, &n), *gw = poet_dev_params(poet_engine_device(r.e), v, true, &n);
        if (!n) continue;
        float *an = malloc(n * sizeof *an);
        memcpy(an, gw, n * sizeof *an);
        uint64_t stride = n > 12 ? n / 12 : 1;
        for (uint64_t i = 0; i < n; i += stride) {
            float keep = w[i];
            w[i] = keep + (float)H;
            double up = loss_at(&r, x, y, state);
            w[i] = keep - (float)H;
            double down = loss_at(&r, x, y, state);
            w[i] = keep;
            double fd = (up - down) / (2 * H), tol = 2e-3 + 3e-2 * fabs(fd);
            checked++;
            if (fabs(fd - an[i]) > tol) {
                bad++;
                fprintf(stderr, "%s (seed %llu): %s param %llu: analytic %.6g, finite difference %.6g\n", name,
                        (unsigned long long)seed, g->nodes[v].name, (unsigned long long)i, an[i], fd);
            }
        }
        free(an);
    }
    CHECK_MSG(bad == 0 && checked > 20, "%s: %d of %d gradients off", name, bad, checked);
    printf("%s: %d parameter gradients checked (seed %llu)\n", name, checked, (unsigned long long)seed);
    free(x), free(y), free(state);
    rig_free(&r);
}

int main(void)
{
    uint64_t seed = 20261202;
    for (int k = 0; k < N_TEST_GRAPHS; k++) {
        poet_graph g;
        poet_err err = {0};
        CHECK_MSG(!test_graph_build(k, &g, &err), "%s: %s", test_graph_name(k), err.msg);
        check_graph(test_graph_name(k), &g, seed + (uint64_t)k);
        poet_graph_free(&g);
    }
    return check_report();
}
