/* Allocation failure on a countdown through every host-side init path:
 * building a zoo graph, costing it, reading files, preparing a problem,
 * planning with the baselines, building and placing the instruction stream,
 * writing and reading schedules, starting the runtime, a training step and
 * a checkpoint. Each failure must come back as a status
 * (never a crash); the sanitizer build checks that nothing leaks. malloc,
 * calloc and realloc are wrapped at link time (-Wl,--wrap), and with them
 * COIN-OR's operator new (libstdc++ is linked from its archive): a failure
 * there ends the child process that runs the solve ("terminate called after
 * throwing an instance of 'std::bad_alloc'" on stderr), and the planner
 * goes on without that solve's answer. */
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "poet/poet.h"
#include "rtutil.h"

void *__real_malloc(size_t n);
void *__real_calloc(size_t n, size_t m);
void *__real_realloc(void *p, size_t n);
void *__wrap_malloc(size_t n);
void *__wrap_calloc(size_t n, size_t m);
void *__wrap_realloc(void *p, size_t n);

static long countdown = -1; /* allocations left before one fails; -1: never */
static long allocations;

static bool fail_now(void)
{
    allocations++;
    if (countdown < 0) return false;
    return countdown-- == 0;
}

void *__wrap_malloc(size_t n) { return fail_now() ? NULL : __real_malloc(n); }
void *__wrap_calloc(size_t n, size_t m) { return fail_now() ? NULL : __real_calloc(n, m); }
void *__wrap_realloc(void *p, size_t n) { return fail_now() ? NULL : __real_realloc(p, n); }

/* One pass through every path; returns 0 when all of it succeeded. */
static int run_all(void)
{
    poet_err err = {0};
    poet_graph g;
    poet_instance inst, back;
    poet_problem p;
    poet_plan_result r;
    int rc = 1;
    if (poet_zoo_build("resnet_small", 2, &g, &err)) return 1;
    if (poet_instance_from_graph(&g, poet_profile_builtin(1), &inst, &err)) goto graph;
    char *text = poet_instance_to_json(&inst);
    if (!text) goto inst;
    poet_status st = poet_instance_parse_json(text, strlen(text), &back, &err);
    free(text);
    if (st) goto inst;
    poet_instance_free(&back);
    if (poet_problem_init(&p, &inst, 0, 1.5, &err)) goto inst;
    p.budget_bytes = p.keep_all_peak_bytes / 2;
    poet_plan_options o = {0};
    if (poet_plan("portfolio", &p, &o, &r, &err)) goto problem;
    if (r.status == POET_PLAN_FEASIBLE) {
        poet_sim sim;
        poet_mem_trace trace = {0};
        uint8_t *bin = NULL;
        size_t len = 0;
        poet_schedule dec;
        char *json = NULL;
        st = poet_simulate(&p, &r.schedule, &sim, &trace, &err);
        poet_mem_trace_free(&trace);
        if (st || poet_schedule_encode(&r.schedule, &bin, &len, &err)) goto result;
        st = poet_schedule_decode(bin, len, &dec, &err);
        free(bin);
        if (st) goto result;
        poet_schedule_free(&dec);
        if (!(json = poet_schedule_to_json(&r.schedule, &inst))) goto result;
        st = poet_schedule_parse_json(json, strlen(json), &dec, &back, &err);
        free(json);
        if (st) goto result;
        poet_schedule_free(&dec);
        poet_instance_free(&back);
    }
    rc = 0;
result:
    poet_plan_result_free(&r);
problem:
    poet_problem_free(&p);
inst:
    poet_instance_free(&inst);
graph:
    poet_graph_free(&g);
    return rc;
}

/* The MILP planner on a small graph: its model building and warm start. */
static int run_milp(void)
{
    static const uint64_t bytes[] = {8, 100, 4, 4, 8};
    static const double flops[] = {0, 10, 1, 1, 20};
    static const int edges[][2] = {{0, 1}, {1, 2}, {2, 3}, {3, 4}, {1, 4}};
    poet_instance inst;
    memset(&inst, 0, sizeof inst);
    inst.T = 5;
    inst.n_edges = 5;
    inst.device = *poet_profile_builtin(1);
    inst.nodes = __real_calloc(5, sizeof *inst.nodes);
    inst.edges = __real_calloc(5, sizeof *inst.edges);
    for (int i = 0; i < 5; i++) {
        inst.nodes[i].bytes = bytes[i];
        inst.nodes[i].time_s = inst.nodes[i].compute_j = flops[i];
        inst.nodes[i].pagein_j = inst.nodes[i].pageout_j = (double)bytes[i];
        inst.nodes[i].is_backward = i == 4;
        inst.edges[i] = (poet_edge){edges[i][0], edges[i][1]};
    }
    poet_err err = {0};
    poet_problem p;
    poet_plan_result r;
    int rc = 1;
    if (!poet_problem_init(&p, &inst, 112, 1.5, &err)) {
        poet_plan_options o = {.time_limit_s = 10};
        if (!poet_plan("milp", &p, &o, &r, &err)) {
            rc = r.status == POET_PLAN_OPTIMAL || r.status == POET_PLAN_FEASIBLE ? 0 : 2;
            poet_plan_result_free(&r);
        }
        poet_problem_free(&p);
    }
    poet_instance_free(&inst);
    return rc;
}

/* The runtime: engine start-up (arena, state, transfer thread), a step
 * that pages, a checkpoint written and read back. */
static int run_runtime(void)
{
    poet_err err = {0};
    poet_graph g;
    poet_instance inst;
    poet_problem p;
    poet_plan_result r;
    poet_engine *e = NULL;
    int rc = 1;
    if (poet_zoo_build("cnn_digits", 2, &g, &err)) return 1;
    if (poet_instance_from_graph(&g, poet_profile_builtin(1), &inst, &err)) goto graph;
    if (poet_problem_init(&p, &inst, 0, 1.5, &err)) goto inst;
    p.budget_bytes = p.keep_all_peak_bytes / 2;
    poet_plan_options o = {0};
    if (poet_plan("paging", &p, &o, &r, &err)) goto problem;
    poet_engine_config cfg = {&g, &p, &r.schedule, NULL, poet_optimizer_default(POET_OPT_ADAM), 1, 0, NULL, NULL, POET_FROZEN_IN_RAM, false};
    if (r.status != POET_PLAN_FEASIBLE || poet_engine_new(&cfg, &e, &err)) goto result;
    float x[2 * 64] = {0};
    int32_t y[2] = {1, 2};
    double loss;
    poet_checkpoint_meta m = {.graph_hash = poet_dev_graph_hash(poet_engine_device(e)), .seed = 1, .step = 1, .epoch = 0, .batch_in_epoch = 1};
    char path[] = "/tmp/poet-faults-ckpt";
    if (!poet_engine_step(e, x, y, &loss, &err) && !poet_checkpoint_write(path, e, &m, &err) &&
        !poet_checkpoint_read(path, e, &m, &err))
        rc = 0;
    remove(path);
    poet_engine_free(e);
result:
    poet_plan_result_free(&r);
problem:
    poet_problem_free(&p);
inst:
    poet_instance_free(&inst);
graph:
    poet_graph_free(&g);
    return rc;
}

/* The compact weight trainers: nested sparse subnets and multi-bit
 * weights, each trained an epoch (ALQ pruning at its end) and packed. */
static poet_dataset compact_data;

static int run_compact(void)
{
    poet_err err = {0};
    poet_graph g;
    poet_instance inst;
    poet_problem p;
    poet_plan_result r;
    poet_engine *e = NULL;
    int rc = 1;
    if (poet_zoo_build("mlp_digits", 32, &g, &err)) return 1;
    if (poet_instance_from_graph(&g, poet_profile_builtin(1), &inst, &err)) goto graph;
    if (poet_problem_init(&p, &inst, 0, 1.5, &err)) goto inst;
    p.budget_bytes = p.keep_all_peak_bytes;
    poet_plan_options o = {0};
    if (poet_plan("keep-all", &p, &o, &r, &err)) goto problem;
    poet_engine_config cfg = {&g, &p, &r.schedule, NULL, poet_optimizer_default(POET_OPT_ADAM), 1, 0, NULL, NULL, POET_FROZEN_IN_RAM, false};
    bool planned = r.status == POET_PLAN_OPTIMAL || r.status == POET_PLAN_FEASIBLE;
    if (!planned || poet_engine_new(&cfg, &e, &err)) goto result;
    poet_dress *d = NULL;
    poet_dress_options dopt = {.n_levels = 2, .sparsity_bp = {0, 5000}, .epochs = 1};
    double loss, acc;
    bool ok = !poet_dress_new(e, &g, &dopt, &d, &err) && !poet_dress_train(d, &compact_data, &err) &&
              !poet_dress_evaluate(d, &compact_data, 1, &loss, &acc, &err);
    poet_dress_free(d);
    poet_quant *q = NULL;
    poet_quant_options qopt = {POET_QUANT_ALQ, 16, 2, 0.5, 1, 1, 2, 1e-3f, 1};
    poet_alq_layer l;
    ok = ok && !poet_quant_new(e, &g, &qopt, &q, &err) && !poet_quant_train(q, &compact_data, &err) &&
         poet_quant_layer(q, 1, &l);
    poet_quant_free(q);
    rc = ok ? 0 : 1;
    poet_engine_free(e);
result:
    poet_plan_result_free(&r);
problem:
    poet_problem_free(&p);
inst:
    poet_instance_free(&inst);
graph:
    poet_graph_free(&g);
    return rc;
}

static void countdown_through(int (*run)(void), const char *what)
{
    countdown = -1;
    allocations = 0;
    CHECK_MSG(run() == 0, "%s without faults", what);
    long total = allocations;
    printf("%s: %ld allocations on the way; failing each in turn\n", what, total);
    int reported = 0;
    for (long k = 0; k < total; k++) {
        countdown = k;
        reported += run() != 0;
    }
    countdown = -1;
    CHECK(reported > 0); /* failures were injected and came back as errors */
    CHECK(run() == 0);
}

int main(void)
{
    countdown_through(run_all, "graph, files, baselines, schedules");
    countdown_through(run_milp, "milp");
    countdown_through(run_runtime, "runtime");
    rt_fake_digits(&compact_data, 64, 32);
    countdown_through(run_compact, "compact weights");
    poet_dataset_free(&compact_data);
    return check_report();
}
