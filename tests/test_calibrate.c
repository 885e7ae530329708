/* Calibration (src/cost/calibrate.c): per-op costs fit to a device's
 * measurements recover the costs that made them, price the graph's nodes,
 * survive a round trip through JSON, and hostile values are refused. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "poet/poet.h"

static double rel(double a, double b) { return fabs(a - b) / (fabs(b) > 0 ? fabs(b) : 1); }

static double units(const poet_graph *g, int v)
{
    const poet_node *n = &g->nodes[v];
    return n->flops > 0 ? (double)n->flops : (double)n->bytes / (double)g->elem_bytes;
}

/* Made-up true costs per cost kind and direction: a call's and a unit's. */
static double true_call(int kind, bool grad) { return 1e-5 * (1 + kind % 5) * (grad ? 2 : 1); }
static double true_unit(int kind, bool grad) { return 1e-8 * (1 + kind % 3) * (grad ? 1.5 : 1); }

/* One step's measurements, per node: computations' seconds and count, transfers' seconds and count. */
typedef struct measures {
    double *cs, *ts;
    int *cn, *tn;
} measures;

static measures measures_new(int T)
{
    measures m = {calloc((size_t)T, sizeof(double)), calloc((size_t)T, sizeof(double)), calloc((size_t)T, sizeof(int)),
                  calloc((size_t)T, sizeof(int))};
    CHECK(m.cs && m.ts && m.cn && m.tn);
    return m;
}

static void measures_free(measures *m) { free(m->cs), free(m->ts), free(m->cn), free(m->tn); }

/* A zoo model's graph, the stm32f405 profile as the base, and room for a step's measurements. */
static measures zoo_setup(const char *model, int batch, poet_graph *g, poet_profile *base)
{
    poet_err err = {0};
    CHECK(poet_zoo_build(model, batch, g, &err) == POET_OK);
    CHECK(poet_profile_find("stm32f405", base, &err) == POET_OK);
    return measures_new(g->n_nodes);
}

/* Each node measured at its kind's true costs, computed cn[v] times. */
static void measure_true_costs(const poet_graph *g, measures *m)
{
    for (int v = 0; v < g->n_nodes; v++) {
        const poet_node *n = &g->nodes[v];
        bool grad = n->op == POET_OP_GRAD;
        int kind = poet_cost_kind(g, n);
        m->cs[v] = m->cn[v] * (true_call(kind, grad) + true_unit(kind, grad) * units(g, v));
    }
}

static void test_fit_recovers_costs(void)
{
    poet_graph g;
    poet_profile base;
    poet_err err = {0};
    measures ms = zoo_setup("resnet_small", 2, &g, &base);
    int T = g.n_nodes;
    double *cs = ms.cs;
    int *cn = ms.cn;
    for (int v = 0; v < T; v++) {
        cn[v] = 1 + v % 2; /* some recomputed */
        ms.tn[v] = v % 3 == 0 ? 2 : 0;
        ms.ts[v] = ms.tn[v] * (3e-6 + (double)g.nodes[v].bytes / 2e7);
    }
    measure_true_costs(&g, &ms);
    poet_measured_step m = {&g, cs, cn, ms.ts, ms.tn, 0.004, 0.001, poet_graph_trained_count(&g)};
    poet_profile cal;
    CHECK(poet_profile_calibrate(&base, &m, 1, 168e6, &cal, &err) == POET_OK);
    CHECK(strcmp(cal.name, "stm32f405-calibrated") == 0);
    CHECK(poet_profile_calibrated(&cal) && !poet_profile_calibrated(&base));
    CHECK(rel(cal.pagein_latency_s, 3e-6) < 1e-6 && rel(cal.pageout_bytes_per_s, 2e7) < 1e-6);
    CHECK(rel(cal.update_s_per_param * (double)poet_graph_trained_count(&g), 0.004) < 1e-9);
    CHECK(rel(cal.step_s, 0.001) < 1e-12);
    CHECK(rel(poet_profile_step_overhead_s(&cal, poet_graph_trained_count(&g)), 0.005) < 1e-9);
    /* every node priced as it was measured: the fit is exact where the kind has two shapes or more */
    poet_instance inst;
    CHECK(poet_instance_from_graph(&g, &cal, &inst, &err) == POET_OK);
    int exact = 0;
    for (int v = 0; v < T; v++) {
        CHECK(rel(inst.nodes[v].time_s * cn[v], cs[v]) < 1e-6 || inst.nodes[v].flops == 0);
        exact += rel(inst.nodes[v].time_s * cn[v], cs[v]) < 1e-6;
        CHECK(rel(inst.nodes[v].compute_j, inst.nodes[v].time_s * cal.compute_power_w) < 1e-12);
    }
    CHECK(exact > T / 2);
    /* a second calibration on a step that ran fewer ops keeps the first's for the others */
    for (int v = 0; v < T; v++)
        if (g.nodes[v].op != POET_OP_RELU) cn[v] = 0;
    poet_profile again;
    CHECK(poet_profile_calibrate(&cal, &m, 1, 168e6, &again, &err) == POET_OK);
    CHECK(strcmp(again.name, "stm32f405-calibrated") == 0);
    CHECK(again.op[POET_OP_CONV2D][1].measured && again.op[POET_OP_CONV2D][1].unit_s == cal.op[POET_OP_CONV2D][1].unit_s);
    poet_instance_free(&inst);
    measures_free(&ms);
    poet_graph_free(&g);
}

static void test_fit_constraints(void)
{
    /* points on a line through a negative intercept: the fit keeps both costs at least 0 */
    poet_graph g;
    poet_profile base, cal;
    poet_err err = {0};
    measures ms = zoo_setup("cnn_digits", 4, &g, &base);
    int T = g.n_nodes;
    double *cs = ms.cs;
    for (int v = 0; v < T; v++) ms.cn[v] = 1, cs[v] = fmax(0, 1e-8 * units(&g, v) - 1e-4);
    poet_measured_step m = {&g, cs, ms.cn, ms.ts, ms.tn, 0, -1, 0};
    CHECK(poet_profile_calibrate(&base, &m, 1, 168e6, &cal, &err) == POET_OK);
    for (int k = 0; k < POET_COST_KINDS; k++)
        for (int d = 0; d < 2; d++) CHECK(cal.op[k][d].call_s >= 0 && cal.op[k][d].unit_s >= 0);
    CHECK(cal.step_s == 0 && cal.pagein_latency_s == base.pagein_latency_s); /* nothing paged: base's paging */
    cs[0] = -1;
    CHECK(poet_profile_calibrate(&base, &m, 1, 168e6, &cal, &err) == POET_ERR_INVALID);
    CHECK(strstr(err.msg, g.nodes[0].name) != NULL);
    cs[0] = NAN;
    CHECK(poet_profile_calibrate(&base, &m, 1, 168e6, &cal, &err) == POET_ERR_INVALID);
    CHECK(poet_profile_calibrate(&base, &m, 0, 168e6, &cal, &err) == POET_ERR_INVALID);
    measures_free(&ms);
    poet_graph_free(&g);
}

static int add(poet_graph *g, poet_op op, int x, poet_attrs a) { return poet_graph_add(g, op, &x, x < 0 ? 0 : 1, &a, NULL); }

/* Depthwise convolutions are fit apart from dense ones (conv2d_grouped),
 * priced by their own line, and the kind survives JSON. */
static void test_grouped_convolutions(void)
{
    poet_graph g;
    poet_profile base, cal, back;
    poet_err err = {0};
    CHECK(poet_graph_init(&g, "depthwise", 2, &err) == POET_OK);
    poet_attrs none = {0};
    int x = add(&g, POET_OP_INPUT, -1, (poet_attrs){.ndim = 4, .dim = {2, 2, 8, 8}});
    x = add(&g, POET_OP_CONV2D, x, (poet_attrs){.features = 4, .kernel = 3, .stride = 1, .pad = 1});
    x = add(&g, POET_OP_CONV2D, x, (poet_attrs){.features = 4, .kernel = 3, .stride = 1, .pad = 1, .groups = 4});
    x = add(&g, POET_OP_CONV2D, x, (poet_attrs){.features = 8, .kernel = 1, .stride = 1});
    x = add(&g, POET_OP_CONV2D, x, (poet_attrs){.features = 8, .kernel = 3, .stride = 2, .pad = 1, .groups = 8});
    x = add(&g, POET_OP_FLATTEN, x, none);
    x = add(&g, POET_OP_LINEAR, x, (poet_attrs){.features = 3});
    CHECK(poet_graph_autodiff(&g, add(&g, POET_OP_SOFTMAX_CE, x, none), &err) == POET_OK);
    CHECK(poet_cost_kind(&g, &g.nodes[1]) == POET_OP_CONV2D && poet_cost_kind(&g, &g.nodes[2]) == POET_COST_GROUPED_CONV2D);
    CHECK(poet_profile_find("stm32f405", &base, &err) == POET_OK);
    measures ms = measures_new(g.n_nodes);
    for (int v = 0; v < g.n_nodes; v++) ms.cn[v] = 1;
    measure_true_costs(&g, &ms);
    poet_measured_step m = {&g, ms.cs, ms.cn, ms.ts, ms.tn, 0, 0, poet_graph_trained_count(&g)};
    CHECK(poet_profile_calibrate(&base, &m, 1, 168e6, &cal, &err) == POET_OK);
    for (int grad = 0; grad < 2; grad++) {
        const poet_op_cost *dense = &cal.op[POET_OP_CONV2D][grad], *grouped = &cal.op[POET_COST_GROUPED_CONV2D][grad];
        CHECK(dense->measured && grouped->measured);
        CHECK(rel(grouped->unit_s, true_unit(POET_COST_GROUPED_CONV2D, grad)) < 1e-6);
        CHECK(rel(dense->unit_s, true_unit(POET_OP_CONV2D, grad)) < 1e-6);
    }
    poet_instance inst;
    CHECK(poet_instance_from_graph(&g, &cal, &inst, &err) == POET_OK);
    for (int v = 0; v < g.n_nodes; v++) { /* two shapes of each convolution kind: their lines are exact */
        int kind = poet_cost_kind(&g, &g.nodes[v]);
        if (kind == POET_OP_CONV2D || kind == POET_COST_GROUPED_CONV2D) CHECK(rel(inst.nodes[v].time_s, ms.cs[v]) < 1e-6);
    }
    char *s = poet_profile_to_json(&cal);
    CHECK(s && strstr(s, "\"conv2d_grouped\"") != NULL);
    CHECK(poet_profile_parse_json(s, strlen(s), &back, &err) == POET_OK);
    CHECK(memcmp(back.op, cal.op, sizeof cal.op) == 0);
    CHECK(poet_cost_kind_from_name("conv2d_grouped") == POET_COST_GROUPED_CONV2D &&
          poet_cost_kind_from_name("conv2d") == POET_OP_CONV2D && poet_cost_kind_from_name("warp") == -1);
    free(s);
    poet_instance_free(&inst);
    measures_free(&ms);
    poet_graph_free(&g);
}

static void test_json(void)
{
    poet_profile d, back;
    poet_err err = {0};
    CHECK(poet_profile_find("stm32f405", &d, &err) == POET_OK);
    d.op[POET_OP_CONV2D][1] = (poet_op_cost){1.25e-5, 3.5e-9, true};
    d.op[POET_OP_RELU][0] = (poet_op_cost){0, 2e-8, true};
    d.compute_power_w = 0.132, d.update_s_per_param = 1e-7, d.step_s = 2e-4, d.instructions_per_s = 168e6;
    char *s = poet_profile_to_json(&d);
    CHECK(s != NULL);
    CHECK(poet_profile_parse_json(s, strlen(s), &back, &err) == POET_OK);
    CHECK(memcmp(back.op, d.op, sizeof d.op) == 0 && back.step_s == d.step_s && back.compute_power_w == d.compute_power_w);
    CHECK(!back.op[POET_OP_CONV2D][0].measured); /* a pair left out is not measured */
    /* priced by the measured cost where there is one, by FLOPs elsewhere */
    CHECK(poet_cost_node_s(&back, POET_OP_CONV2D, true, 1000, 10) == 1.25e-5 + 3.5e-9 * 1000);
    CHECK(poet_cost_node_s(&back, POET_OP_RELU, false, 0, 64) == 2e-8 * 64);
    CHECK(poet_cost_node_s(&back, POET_OP_CONV2D, false, 1000, 10) == poet_cost_compute_time_s(&back, 1000));
    free(s);
    const char *bad[] = {
        "\"ops\": {\"warp\": {\"call_s\": 1, \"unit_s\": 1}}",            /* no such op */
        "\"ops\": {\"relu\": {\"call_s\": -1, \"unit_s\": 1}}",           /* negative */
        "\"ops\": {\"relu\": {\"call_s\": 1e300, \"unit_s\": 1}}",        /* absurd */
        "\"ops\": {\"relu\": {\"call_s\": 1}}",                           /* half a pair */
        "\"ops\": {\"relu\": {\"call_s\": 1, \"unit_s\": 1, \"x\": 1}}", /* unknown key */
        "\"ops\": [1]",                                                   /* not an object */
        "\"ops\": {\"relu\": {\"call_s\": 1e-6, \"unit_s\": 1e-9}}",     /* no power to price energy */
        "\"step_s\": -1",
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        char text[512];
        snprintf(text, sizeof text,
                 "{\"format\":\"poet-device\",\"version\":1,\"name\":\"b\",\"flops_per_s\":1e8,\"flops_per_j\":1e9,"
                 "\"pagein_latency_s\":1e-4,\"pagein_bytes_per_s\":1e7,\"pageout_latency_s\":2e-4,"
                 "\"pageout_bytes_per_s\":5e6,\"memory_power_w\":0.2,%s}", bad[i]);
        err.msg[0] = 0;
        CHECK(poet_profile_parse_json(text, strlen(text), &back, &err) != POET_OK);
        CHECK(err.msg[0] != 0);
    }
}

int main(void)
{
    test_fit_recovers_costs();
    test_fit_constraints();
    test_grouped_convolutions();
    test_json();
    return check_report();
}
