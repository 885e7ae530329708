/* Schedules: golden cases, the validator against broken schedules of every
 * kind, property tests on seeded random DAGs (stage accounting equals the
 * instruction stream's live peak, placement never overlaps, round trips are
 * exact), and the binary form. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "check.h"
#include "testutil.h"

/* x(0) -> a(1) -> loss(2) -> g(3): g reads loss and a; a is large. */
static const uint64_t CHAIN_BYTES[] = {8, 100, 4, 8};
static const double CHAIN_FLOPS[] = {0, 10, 1, 20};
static const int CHAIN_EDGES[][2] = {{0, 1}, {1, 2}, {2, 3}, {1, 3}};

static void chain(poet_instance *inst) { make_instance(inst, 4, 3, CHAIN_BYTES, CHAIN_FLOPS, CHAIN_EDGES, 4); }

static void keep_all(poet_schedule *s, const poet_problem *p)
{
    for (int t = 0; t < s->T; t++) {
        poet_sched_set(s, POET_R, t, t, true);
        for (int i = 0; i < t; i++)
            if (p->last_use[i] >= t) poet_sched_set(s, POET_SRAM, t, i, true);
    }
}

static void test_golden_chain(void)
{
    poet_instance inst;
    chain(&inst);
    poet_problem p;
    poet_err err = {0};
    CHECK(poet_problem_init(&p, &inst, 1000, 1.0, &err) == POET_OK);
    CHECK(p.keep_all_peak_bytes == 112 && p.min_budget_bytes == 112); /* stage 3: a, loss, g */
    poet_schedule s;
    CHECK(poet_schedule_init(&s, 4, &err) == POET_OK);
    keep_all(&s, &p);
    CHECK_MSG(poet_schedule_validate(&p, &s, &err) == POET_OK, "%s", err.msg);
    poet_sim sim;
    CHECK(poet_simulate(&p, &s, &sim, NULL, &err) == POET_OK);
    CHECK(sim.energy_j == 31 && sim.compute_time_s == 31 && sim.peak_ram_bytes == 112);
    CHECK(sim.placed_peak_bytes == 112 && sim.time_with_paging_s == 31);

    poet_schedule_free(&s);
    poet_problem_free(&p);
    poet_instance_free(&inst);
}

/* x(0) -> a(1) -> b(2) -> c(3) -> g(4); g also reads a, so a can be paged
 * out in stage 2 (where it is resident at the start) and in during stage 3. */
static void test_golden_paging(void)
{
    static const uint64_t bytes[] = {8, 100, 4, 4, 8};
    static const double flops[] = {0, 10, 1, 1, 20};
    static const int edges[][2] = {{0, 1}, {1, 2}, {2, 3}, {3, 4}, {1, 4}};
    poet_instance inst;
    make_instance(&inst, 5, 4, bytes, flops, edges, 5);
    poet_problem p;
    poet_err err = {0};
    CHECK(poet_problem_init(&p, &inst, 1000, 1.0, &err) == POET_OK);
    poet_schedule s;
    CHECK(poet_schedule_init(&s, 5, &err) == POET_OK);
    keep_all(&s, &p);
    poet_sim sim;
    CHECK(poet_simulate(&p, &s, &sim, NULL, &err) == POET_OK);
    CHECK(sim.peak_ram_bytes == 112); /* stage 3: a, b, c; stage 4: a, c, g */
    poet_sched_set(&s, POET_MOUT, 2, 1, true);
    poet_sched_set(&s, POET_SRAM, 3, 1, false);
    poet_sched_set(&s, POET_MIN, 3, 1, true);
    CHECK_MSG(poet_schedule_validate(&p, &s, &err) == POET_OK, "%s", err.msg);
    CHECK(poet_simulate(&p, &s, &sim, NULL, &err) == POET_OK);
    CHECK(sim.energy_j == 32 + 200 + 100 && sim.page_ins == 1 && sim.page_outs == 1);
    CHECK_MSG(sim.peak_ram_bytes == 112, "%llu", (unsigned long long)sim.peak_ram_bytes); /* stage 4 */
    /* one CPU, one DMA channel: the 200 s page-out starts with stage 2 and
     * the stage's end frees a after it; the page-in then takes 100 s */
    CHECK_MSG(sim.time_with_paging_s == 10 + 200 + 1 + 100 + 20, "%g", sim.time_with_paging_s);
    poet_program prog;
    CHECK(poet_program_build(&p, &s, &prog, &err) == POET_OK);
    static const poet_instr_op want[] = {
        POET_I_COMPUTE, POET_I_WAIT,                                                       /* stage 0 */
        POET_I_COMPUTE, POET_I_FREE, POET_I_WAIT,                                          /* 1: frees x */
        POET_I_PAGEOUT, POET_I_COMPUTE, POET_I_FREE, POET_I_WAIT,                          /* 2: frees a */
        POET_I_COMPUTE, POET_I_FREE, POET_I_PAGEIN, POET_I_WAIT,                           /* 3: frees b */
        POET_I_COMPUTE, POET_I_FREE, POET_I_FREE, POET_I_FREE, POET_I_WAIT};               /* 4 */
    CHECK(prog.n == (int)(sizeof want / sizeof *want));
    for (int k = 0; k < prog.n && k < (int)(sizeof want / sizeof *want); k++)
        CHECK_MSG(prog.code[k].op == want[k], "instruction %d", k);
    poet_schedule back;
    CHECK(poet_program_to_schedule(&prog, 5, &back, &err) == POET_OK);
    back.budget_bytes = s.budget_bytes, back.runtime_factor = s.runtime_factor, back.graph_hash = s.graph_hash;
    memcpy(back.planner, s.planner, sizeof back.planner);
    CHECK(poet_schedule_equal(&s, &back));
    poet_schedule_free(&back);
    poet_program_free(&prog);
    p.budget_bytes = 111;
    CHECK(poet_schedule_validate(&p, &s, &err) == POET_ERR_INVALID && strstr(err.msg, "stage 4, node 4: memory-budget"));
    poet_schedule_free(&s);
    poet_problem_free(&p);
    poet_instance_free(&inst);
}

/* Each broken schedule must be refused with its rule, stage and node. */
static void test_validator_rules(void)
{
    poet_instance inst;
    chain(&inst);
    poet_problem p;
    poet_err err = {0};
    CHECK(poet_problem_init(&p, &inst, 1000, 1.5, &err) == POET_OK);
    struct {
        const char *expect;
        int m, t, i;
        bool value;
        int m2, t2, i2;
        bool value2;
    } cases[] = {
        {"stage 2, node 2: stage-computes-its-node", POET_R, 2, 2, false, -1, 0, 0, false},
        {"stage 1, node 2: triangle", POET_R, 1, 2, true, -1, 0, 0, false},
        {"stage 1, node 1: triangle", POET_SRAM, 1, 1, true, -1, 0, 0, false},
        {"stage 2, node 2: input-resident", POET_SRAM, 2, 1, false, -1, 0, 0, false},
        {"stage 3, node 1: redundant-compute", POET_R, 3, 1, true, -1, 0, 0, false},
        {"stage 3, node 0: resident-source", POET_SRAM, 3, 0, true, -1, 0, 0, false},
        {"stage 1, node 1: page-out-source", POET_MOUT, 1, 1, true, -1, 0, 0, false},
        {"stage 2, node 1: page-in-source", POET_MIN, 2, 1, true, POET_SRAM, 3, 1, false},
        {"stage 3, node 1: redundant-page-out", POET_MOUT, 2, 1, true, POET_MOUT, 3, 1, true},
    };
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
        poet_schedule s;
        CHECK(poet_schedule_init(&s, 4, &err) == POET_OK);
        keep_all(&s, &p);
        poet_sched_set(&s, cases[c].m, cases[c].t, cases[c].i, cases[c].value);
        if (cases[c].m2 >= 0) poet_sched_set(&s, cases[c].m2, cases[c].t2, cases[c].i2, cases[c].value2);
        err.msg[0] = 0;
        CHECK_MSG(poet_schedule_validate(&p, &s, &err) == POET_ERR_INVALID, "case %zu", c);
        CHECK_MSG(strstr(err.msg, cases[c].expect) != NULL, "expected '%s', got '%s'", cases[c].expect, err.msg);
        poet_schedule_free(&s);
    }
    poet_schedule s;
    CHECK(poet_schedule_init(&s, 4, &err) == POET_OK);
    keep_all(&s, &p);
    p.budget_bytes = 111;
    CHECK(poet_schedule_validate(&p, &s, &err) == POET_ERR_INVALID);
    CHECK_MSG(strstr(err.msg, "stage 3, node 3: memory-budget: 112 bytes in use, budget 111") != NULL, "%s", err.msg);
    p.budget_bytes = 1000;
    /* drop a after stage 1 and recompute it (with x) in stage 2: 41 s <= 46.5 s */
    poet_sched_set(&s, POET_R, 2, 1, true);
    poet_sched_set(&s, POET_R, 2, 0, true);
    poet_sched_set(&s, POET_SRAM, 2, 1, false);
    CHECK_MSG(poet_schedule_validate(&p, &s, &err) == POET_OK, "%s", err.msg);
    p.runtime_budget_s = 40;
    CHECK(poet_schedule_validate(&p, &s, &err) == POET_ERR_INVALID && strstr(err.msg, "runtime-budget"));
    p.runtime_budget_s = 46.5;
    s.graph_hash = 12345;
    CHECK(poet_schedule_validate(&p, &s, &err) == POET_ERR_INVALID && strstr(err.msg, "different graph"));
    poet_schedule_free(&s);

    /* placement: two live buffers placed on top of each other */
    poet_program prog = {0};
    poet_buffer bufs[2] = {{0, 0, 5, 64, 0, }, {1, 3, 8, 64, 32}};
    prog.buffers = bufs;
    prog.n_buffers = 2;
    prog.arena_bytes = 96;
    CHECK(poet_program_check_placement(&prog, &err) == POET_ERR_INVALID && strstr(err.msg, "overlap"));
    bufs[1].alloc_instr = 6;
    CHECK(poet_program_check_placement(&prog, &err) == POET_OK);
    poet_problem_free(&p);
    poet_instance_free(&inst);
}

static void round_trips(const poet_problem *p, const poet_schedule *s, unsigned seed)
{
    poet_err err = {0};
    char *text = poet_schedule_to_json(s, p->inst);
    poet_schedule back;
    poet_instance g;
    CHECK(text && poet_schedule_parse_json(text, strlen(text), &back, &g, &err) == POET_OK);
    CHECK_MSG(poet_schedule_equal(s, &back), "seed %u: JSON round trip", seed);
    CHECK(g.T == p->T && poet_instance_hash(&g) == poet_instance_hash(p->inst));
    poet_schedule_free(&back);
    poet_instance_free(&g);
    free(text);
    uint8_t *bin = NULL;
    size_t len = 0;
    CHECK(poet_schedule_encode(s, &bin, &len, &err) == POET_OK);
    CHECK(poet_schedule_decode(bin, len, &back, &err) == POET_OK);
    CHECK_MSG(poet_schedule_equal(s, &back), "seed %u: binary round trip", seed);
    uint8_t *again = NULL;
    size_t len2 = 0;
    CHECK(poet_schedule_encode(&back, &again, &len2, &err) == POET_OK && len2 == len && !memcmp(bin, again, len));
    poet_schedule_free(&back);
    free(again);
    free(bin);
}

/* Properties of every schedule a planner returns on random graphs. */
static void test_random_graphs(unsigned seed)
{
    printf("random graphs: seed %u\n", seed);
    int checked = 0;
    for (int round = 0; round < 40; round++) {
        unsigned s0 = seed + (unsigned)round;
        poet_instance inst;
        random_instance(&inst, 4 + (int)(rng_next(&s0) % 20), &s0);
        poet_problem p;
        poet_err err = {0};
        CHECK(poet_problem_init(&p, &inst, 0, 1.0 + (rng_next(&s0) % 100) / 50.0, &err) == POET_OK);
        for (int k = 0; k < poet_planner_count(); k++) {
            if (poet_planner_info(k)->variants) continue; /* the MILP has tests of its own */
            uint64_t span = p.keep_all_peak_bytes - p.min_budget_bytes;
            p.budget_bytes = p.min_budget_bytes + (span ? rng_next(&s0) % (span + 1) : 0);
            poet_plan_result r;
            poet_plan_options o = {0};
            poet_status st = poet_plan(poet_planner_info(k)->name, &p, &o, &r, &err);
            CHECK_MSG(st == POET_OK, "seed %u planner %s: %s", s0, poet_planner_info(k)->name, err.msg);
            if (st || r.status != POET_PLAN_FEASIBLE) continue;
            poet_sim sim;
            poet_program prog;
            CHECK(poet_simulate(&p, &r.schedule, &sim, NULL, &err) == POET_OK);
            CHECK(poet_program_build(&p, &r.schedule, &prog, &err) == POET_OK);
            CHECK_MSG(prog.live_peak_bytes == sim.peak_ram_bytes, "seed %u: stream peak %llu, stages %llu", s0,
                      (unsigned long long)prog.live_peak_bytes, (unsigned long long)sim.peak_ram_bytes);
            CHECK(poet_program_place(&prog, &err) == POET_OK && poet_program_check_placement(&prog, &err) == POET_OK);
            CHECK(prog.arena_bytes >= prog.live_peak_bytes && prog.arena_bytes <= p.budget_bytes);
            CHECK(sim.energy_j >= p.full_memory_energy_j * (1 - 1e-12) && sim.peak_ram_bytes <= p.budget_bytes);
            poet_schedule back;
            CHECK(poet_program_to_schedule(&prog, p.T, &back, &err) == POET_OK);
            back.budget_bytes = r.schedule.budget_bytes, back.runtime_factor = r.schedule.runtime_factor;
            back.graph_hash = r.schedule.graph_hash;
            memcpy(back.planner, r.schedule.planner, sizeof back.planner);
            CHECK_MSG(poet_schedule_equal(&r.schedule, &back), "seed %u: stream round trip", s0);
            poet_schedule_free(&back);
            round_trips(&p, &r.schedule, s0);
            poet_program_free(&prog);
            poet_plan_result_free(&r);
            checked++;
        }
        poet_problem_free(&p);
        poet_instance_free(&inst);
    }
    CHECK(checked > 40);
}

static void test_binary_robustness(void)
{
    poet_instance inst;
    poet_err err = {0};
    CHECK(poet_instance_read_file(POET_TEST_DATA "/reference/resnet18_cifar__m4.json", &inst, &err) == POET_OK);
    poet_problem p;
    CHECK(poet_problem_init(&p, &inst, 0, 1.5, &err) == POET_OK);
    for (int k = 0; k < poet_planner_count(); k++) {
        if (poet_planner_info(k)->variants) continue;
        p.budget_bytes = p.keep_all_peak_bytes / 2;
        poet_plan_result r;
        poet_plan_options o = {0};
        CHECK(poet_plan(poet_planner_info(k)->name, &p, &o, &r, &err) == POET_OK);
        if (r.status != POET_PLAN_FEASIBLE) continue;
        uint8_t *bin = NULL;
        size_t len = 0;
        CHECK(poet_schedule_encode(&r.schedule, &bin, &len, &err) == POET_OK);
        CHECK_MSG(len <= 1024, "%s: %zu bytes", poet_planner_info(k)->name, len);
        poet_schedule back;
        for (size_t n = 0; n < len; n++) CHECK(poet_schedule_decode(bin, n, &back, &err) != POET_OK);
        for (size_t at = 0; at < len; at++) {
            bin[at] ^= 0x5a;
            poet_status st = poet_schedule_decode(bin, len, &back, &err);
            CHECK_MSG(st != POET_OK, "a flipped byte %zu was accepted", at);
            if (!st) poet_schedule_free(&back);
            bin[at] ^= 0x5a;
        }
        free(bin);
        poet_plan_result_free(&r);
    }
    poet_problem_free(&p);
    poet_instance_free(&inst);
}

int main(int argc, char **argv)
{
    unsigned seed = argc > 1 ? (unsigned)strtoul(argv[1], NULL, 10) : (unsigned)time(NULL);
    test_golden_chain();
    test_golden_paging();
    test_validator_rules();
    test_random_graphs(seed);
    test_binary_robustness();
    return check_report();
}
