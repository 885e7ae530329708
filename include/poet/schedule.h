/* poet: schedules in POET's stage model, their independent validator, the
 * simulator, the flat instruction stream with arena placement, and the JSON
 * and compact binary forms. Depends on the costed graph, never on a planner. */
#ifndef POET_SCHEDULE_H
#define POET_SCHEDULE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "poet/cost.h"
#include "poet/status.h"

#ifdef __cplusplus
extern "C" {
#endif

#define POET_MAX_PLAN_NODES 8192 /* largest graph a schedule may cover */
#define POET_MAX_BUDGET_BYTES (1ULL << 53) /* a budget a JSON number holds exactly */

/* A planning problem: a costed graph with its RAM and runtime budgets. */
typedef struct poet_problem {
    const poet_instance *inst;
    int T;
    int *in_start, *in;   /* distinct inputs of node v: in[in_start[v] .. in_start[v+1]) */
    int *out_start, *out; /* distinct consumers of node v, ascending */
    int *last_use;        /* last consumer of v, or v itself */
    uint64_t budget_bytes;
    double runtime_factor;   /* POET's rho */
    double runtime_budget_s; /* rho * sum of compute times */
    /* What the runtime budget bounds: false (poet_problem_init's, POET's
     * accounting) the compute time alone; true the serial sum of compute and
     * every page-in and page-out, a safe bound on the step's time on a device
     * whatever its transfers overlap (poet's command line by default). */
    bool runtime_counts_paging;
    uint64_t keep_all_peak_bytes, min_budget_bytes;
    int min_budget_node; /* the node whose stage sets min_budget_bytes */
    double full_memory_energy_j, full_memory_time_s;
} poet_problem;

/* Repeated edges (POET's files have one) count once. runtime_factor >= 1. */
poet_status poet_problem_init(poet_problem *p, const poet_instance *inst, uint64_t budget_bytes,
                              double runtime_factor, poet_err *err);
void poet_problem_free(poet_problem *p);

/* POET's decision matrices, row = stage t, column = node i, as bitsets:
 * R (i computed in stage t), SRAM (i in RAM at the start of t), MIN (i paged
 * in during t, usable from t+1), MOUT (i paged out during t). A copy on
 * storage (POET's SSd) follows from MOUT: i is on storage from the stage
 * after its first page-out. */
enum { POET_R, POET_SRAM, POET_MIN, POET_MOUT, POET_N_MATRICES };

typedef struct poet_schedule {
    int T;
    int words; /* 64-bit words per row */
    uint64_t *m[POET_N_MATRICES];
    char planner[32];
    uint64_t budget_bytes;   /* the budget it was planned for */
    double runtime_factor;
    bool runtime_counts_paging; /* the problem's, when it was planned */
    uint32_t graph_hash;     /* poet_instance_hash of the graph it was planned for */
} poet_schedule;

poet_status poet_schedule_init(poet_schedule *s, int T, poet_err *err);
void poet_schedule_free(poet_schedule *s);
poet_status poet_schedule_copy(poet_schedule *dst, const poet_schedule *src, poet_err *err);
bool poet_schedule_equal(const poet_schedule *a, const poet_schedule *b);

static inline bool poet_sched_get(const poet_schedule *s, int m, int t, int i)
{
    return (s->m[m][(size_t)t * (size_t)s->words + (size_t)(i >> 6)] >> (i & 63)) & 1u;
}

static inline void poet_sched_set(poet_schedule *s, int m, int t, int i, bool v)
{
    uint64_t *w = &s->m[m][(size_t)t * (size_t)s->words + (size_t)(i >> 6)];
    uint64_t bit = (uint64_t)1 << (i & 63);
    *w = v ? (*w | bit) : (*w & ~bit);
}

/* The seconds a transfer of `seconds` counts against p's runtime budget. */
static inline double poet_transfer_counted_s(const poet_problem *p, double seconds)
{
    return p->runtime_counts_paging ? seconds : 0;
}

/* Fingerprint of a graph's structure and sizes (FNV-1a), so that a schedule
 * is never applied to a graph it was not planned for. */
uint32_t poet_instance_hash(const poet_instance *inst);

/* ---- simulation ---- */
typedef struct poet_sim {
    double compute_j, pagein_j, pageout_j, energy_j;
    double compute_time_s;     /* POET's accounting: compute only */
    double transfer_time_s;    /* every page-in and page-out, one after the other */
    double time_with_paging_s; /* one CPU and one DMA channel; see docs/schedules.md */
    uint64_t peak_ram_bytes;   /* POET's stage accounting */
    int peak_stage, peak_node;
    uint64_t placed_peak_bytes; /* arena size after placement, fragmentation included */
    int recomputations, page_ins, page_outs;
    uint64_t paged_out_bytes, paged_in_bytes;
} poet_sim;

/* Memory in use right after each computation, in order (for pictures). */
typedef struct poet_mem_point {
    int stage, node;
    uint64_t bytes;
} poet_mem_point;

typedef struct poet_mem_trace {
    int n, cap;
    poet_mem_point *p;
    bool oom; /* a point could not be recorded */
} poet_mem_trace;

void poet_mem_trace_free(poet_mem_trace *tr);

/* Re-derives every figure of a schedule. trace may be NULL. The schedule
 * must have passed poet_schedule_validate. */
poet_status poet_simulate(const poet_problem *p, const poet_schedule *s, poet_sim *out, poet_mem_trace *trace,
                          poet_err *err);

/* ---- the independent validator ---- */
/* Checks every rule of POET's model and the budgets; on the first violation
 * returns POET_ERR_INVALID with "stage T, node I: RULE: detail" in err. */
poet_status poet_schedule_validate(const poet_problem *p, const poet_schedule *s, poet_err *err);

/* ---- the flat instruction stream and arena placement ---- */
typedef enum poet_instr_op {
    POET_I_PAGEOUT, /* start copying a resident tensor to storage */
    POET_I_COMPUTE, /* compute a node into a new buffer */
    POET_I_FREE,    /* release a buffer (after its pending page-out) */
    POET_I_PAGEIN,  /* start copying a tensor from storage into a new buffer */
    POET_I_WAIT     /* end of stage: wait for every transfer */
} poet_instr_op;

typedef struct poet_instr {
    uint8_t op;
    int32_t stage, node, buffer;
} poet_instr;

typedef struct poet_buffer {
    int node;
    int alloc_instr, free_instr; /* live over [alloc_instr, free_instr] */
    uint64_t bytes, offset;
} poet_buffer;

typedef struct poet_program {
    int n, cap;
    poet_instr *code;
    int n_buffers, cap_buffers;
    poet_buffer *buffers;
    uint64_t arena_bytes;      /* after placement */
    uint64_t live_peak_bytes;  /* the largest sum of live buffers */
} poet_program;

poet_status poet_program_build(const poet_problem *p, const poet_schedule *s, poet_program *out, poet_err *err);
/* Assigns arena offsets from the buffers' lifetimes (several greedy orders,
 * the best kept); sets arena_bytes. */
poet_status poet_program_place(poet_program *prog, poet_err *err);
/* Checks that no two buffers live at once overlap in the arena. */
poet_status poet_program_check_placement(const poet_program *prog, poet_err *err);
/* The stage model back from an instruction stream. */
poet_status poet_program_to_schedule(const poet_program *prog, int T, poet_schedule *out, poet_err *err);
void poet_program_free(poet_program *prog);

/* ---- files ---- */
/* JSON: sparse events and retention intervals, plus the graph when given. */
char *poet_schedule_to_json(const poet_schedule *s, const poet_instance *graph_or_null);
/* Reads a schedule; when the file embeds its graph, *graph receives it
 * (graph may be NULL to ignore it; graph->T == 0 when absent). */
poet_status poet_schedule_parse_json(const char *text, size_t len, poet_schedule *s, poet_instance *graph,
                                     poet_err *err);
/* The compact binary form for devices: a version word first, varints, a
 * CRC-32 last. The caller frees *data. */
poet_status poet_schedule_encode(const poet_schedule *s, uint8_t **data, size_t *len, poet_err *err);
poet_status poet_schedule_decode(const uint8_t *data, size_t len, poet_schedule *s, poet_err *err);

#define POET_SCHEDULE_BINARY_VERSION 0x50530002u /* "PS", format 2 (format 1, without flags, is read too) */

#ifdef __cplusplus
}
#endif
#endif
