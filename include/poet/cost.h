/* poet: device profiles and the costed graph (a planning instance).
 * Knows graphs, not solvers. */
#ifndef POET_COST_H
#define POET_COST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "poet/graph.h"
#include "poet/status.h"

#ifdef __cplusplus
extern "C" {
#endif

#define POET_MAX_EDGES 1000000 /* POET_MAX_NODES nodes of up to POET_MAX_INPUTS inputs each, and room */
#define POET_MAX_ITERATION_COST 1e15 /* seconds, or joules, of one training iteration: all nodes together */

/* What a calibration measures apart: every op kind, and the convolutions
 * whose groups split their channels (depthwise ones), whose few
 * multiply-adds per output cost unlike a dense convolution's. */
enum { POET_COST_GROUPED_CONV2D = POET_OP_COUNT, POET_COST_KINDS };
/* The kind that prices node n of g (a gradient under its forward node's). */
int poet_cost_kind(const poet_graph *g, const poet_node *n);
/* Its name in a profile's "ops" (an op's name, or "conv2d_grouped"), and
 * back: -1 for a name that is none. */
const char *poet_cost_kind_name(int kind);
int poet_cost_kind_from_name(const char *name);

/* A cost measured on the device (a calibration, docs/devices.md): seconds
 * a call, and seconds per FLOP, or per output element for an op that
 * counts no FLOPs. */
typedef struct poet_op_cost {
    double call_s, unit_s;
    bool measured;
} poet_op_cost;

/* A device, in POET's cost model: compute from FLOPs, paging from bytes;
 * or, where a calibration measured an op, compute from its per-op costs. */
typedef struct poet_profile {
    char name[POET_NAME_BYTES];
    char description[160];
    double flops_per_s;         /* POET: FLOPS */
    double flops_per_j;         /* POET: FLOPS_PER_WATT (FLOP per joule) */
    double pagein_latency_s;    /* storage -> RAM, per transfer */
    double pagein_bytes_per_s;
    double pageout_latency_s;   /* RAM -> storage, per transfer */
    double pageout_bytes_per_s;
    double memory_power_w;      /* power while paging */
    double power_w;             /* board power; informational, as in POET */
    int bytes_per_element;
    uint64_t ram_bytes;         /* the device's RAM; 0: not stated */
    uint64_t flash_bytes;       /* storage for paging; 0: not stated */
    uint64_t fixed_ram_bytes;   /* of ram_bytes, what the firmware keeps for itself (static data, the stack);
                                   training has the rest */
    uint64_t image_flash_bytes; /* flash the device image lies in, read in place (with the frozen parameters
                                   homed there); 0: not stated */
    /* A calibration's (poet emulate --calibrate): where op[kind][0] (forward) or op[kind][1] (the gradient of
       a node of that kind, poet_cost_kind) is measured, a node costs call_s + unit_s x its FLOPs (or elements) and energy
       is that time x compute_power_w; elsewhere POET's FLOP model above */
    poet_op_cost op[POET_COST_KINDS][2];
    double compute_power_w;
    double update_s_per_param; /* the optimizer step, per trained parameter */
    double step_s;             /* a step's cost that no node, transfer or update accounts for */
    double instructions_per_s; /* the calibration's: its board's instructions a second (QEMU counts
                                  instructions, not cycles); 0: not calibrated */
} poet_profile;

/* Whether a calibration measured any op of the profile. */
bool poet_profile_calibrated(const poet_profile *d);
/* Seconds and joules of a node of cost kind `kind` (poet_cost_kind; its
 * gradient where grad) with these FLOPs and output elements: the
 * calibrated cost where the profile measured the kind, else POET's FLOP
 * model. */
double poet_cost_node_s(const poet_profile *d, int kind, bool grad, double flops, double elements);
double poet_cost_node_j(const poet_profile *d, int kind, bool grad, double flops, double elements);

int poet_profile_count(void);
const poet_profile *poet_profile_builtin(int i);
/* A built-in name, or a path to a JSON profile (docs/devices.md). */
poet_status poet_profile_find(const char *name_or_path, poet_profile *out, poet_err *err);
poet_status poet_profile_parse_json(const char *text, size_t len, poet_profile *out, poet_err *err);
poet_status poet_profile_validate(const poet_profile *d, poet_err *err);

/* Cost of one node on a device, exactly as POET computes it. */
double poet_cost_compute_time_s(const poet_profile *d, double flops);
double poet_cost_compute_j(const poet_profile *d, double flops);
double poet_cost_pagein_s(const poet_profile *d, uint64_t bytes);
double poet_cost_pageout_s(const poet_profile *d, uint64_t bytes);
double poet_cost_pagein_j(const poet_profile *d, uint64_t bytes);
double poet_cost_pageout_j(const poet_profile *d, uint64_t bytes);

/* A profile as JSON (docs/devices.md), which poet_profile_parse_json
 * reads back; the caller frees it. NULL when out of memory. */
char *poet_profile_to_json(const poet_profile *d);

/* ---- calibration: per-op costs from a device's measurements ---- */

/* What one training step measured on a device, for every node of graph g
 * under one schedule (arrays of g->n_nodes). */
typedef struct poet_measured_step {
    const poet_graph *g;
    const double *compute_s; /* per node: its computations' seconds in the step */
    const int *computes;     /* per node: computations in the step (recomputations included) */
    const double *transfer_s; /* per node: its transfers' seconds */
    const int *transfers;    /* per node: its page-outs and page-ins */
    double update_s;         /* the optimizer step's */
    double other_s;          /* the rest of the step: the executor, the batch, waiting */
    uint64_t trained_params;
} poet_measured_step;

/* A profile from base with per-op costs fit to the measurements of n
 * steps: for each cost kind and direction, call_s and unit_s by least
 * squares (both at least 0) over the nodes of that kind, one point a node
 * (its seconds a computation against its FLOPs, or elements where it
 * counts none); paging, where anything was paged, from a fit of seconds a
 * transfer to bytes (page-ins and page-outs alike); the optimizer per
 * parameter; step_s the rest; energy at the power base's FLOP figures
 * imply (flops_per_s / flops_per_j). Ops the steps did not run, and
 * paging where nothing was paged, keep base's costs (POET's FLOP model,
 * or an earlier calibration's: calibrating a calibrated profile on a
 * second schedule adds what the first did not run). */
poet_status poet_profile_calibrate(const poet_profile *base, const poet_measured_step *m, int n,
                                   double instructions_per_s, poet_profile *out, poet_err *err);

/* Seconds of a step that no node or transfer accounts for, by the
 * calibration: step_s and the optimizer for trained_params. 0 for a
 * profile that was not calibrated. */
double poet_profile_step_overhead_s(const poet_profile *d, uint64_t trained_params);

/* ---- costed graph: what every planner sees ---- */
typedef struct poet_cnode {
    char name[POET_NAME_BYTES];
    char op[24];
    bool is_backward;
    uint64_t bytes;   /* output tensor */
    double flops;
    double time_s;    /* compute */
    double compute_j;
    double pagein_j, pageout_j;
    double pagein_s, pageout_s;
} poet_cnode;

typedef struct poet_edge {
    int src, dst; /* src is read by dst; src < dst */
} poet_edge;

typedef struct poet_instance {
    char model[POET_NAME_BYTES];
    int batch;
    poet_profile device;
    int T;
    poet_cnode *nodes;
    int n_edges;
    poet_edge *edges;        /* in file order; POET's files repeat one edge */
    double parameter_bytes;  /* weights and buffers; outside the activation budget */
    double gradient_bytes;   /* gradients of the weights that train; outside the activation budget */
    double buffer_bytes;     /* of parameter_bytes, batch norm statistics and constants */
    bool runnable;           /* built from a zoo model the runtime can execute */
} poet_instance;

typedef struct poet_instance_stats {
    int nodes, edges, forward_nodes;
    uint64_t forward_activation_bytes; /* sum over forward nodes (POET's total_ram_fwd) */
    uint64_t keep_all_peak_bytes;      /* POET's stage accounting, no remat, no paging */
    uint64_t min_budget_bytes;         /* no schedule fits below this */
    int min_budget_node;               /* ... set by the stage of this node: it and its inputs at once */
    double full_memory_energy_j;
    double full_memory_time_s;
    double parameter_bytes;
    double gradient_bytes;
} poet_instance_stats;

poet_status poet_instance_from_graph(const poet_graph *g, const poet_profile *d, poet_instance *out,
                                     poet_err *err);
/* The costed graph of g when its convolutions and linear layers (by rows,
 * poet_weight_rows) run as DRESS-style sparse
 * subnets at one level (poet/sparse.h): each keeps ceil((1 - s) x inputs)
 * weights per output, so its forward node and its gradient nodes cost that
 * share of their dense FLOPs (bias terms included, under 1/inputs of them);
 * tensors keep their bytes, so a schedule of the dense graph is one of
 * this graph too, with its own time and energy. parameter_bytes counts the
 * weights row-sorted: a 16-bit column beside each float.
 * sparsity_bp: basis points, below 10000. */
poet_status poet_instance_sparse(const poet_graph *g, const poet_profile *d, uint32_t sparsity_bp, poet_instance *out,
                                 poet_err *err);
/* Counts g's frozen convolution and linear weights (a quantized backbone under partial
 * training; all of them where every weight trains, a model as deployed)
 * in inst->parameter_bytes as multi-bit
 * (poet/alq.h) at an average of `bits` terms per weight in groups of
 * `group`: a term count per group, and per term a 4-byte scale and a sign
 * bit per weight (whole bytes a group). The terms are taken as spread
 * evenly over the groups, which is exact where the groups of a layer have
 * one length; ALQ gives each group its own count. */
poet_status poet_instance_set_multibit(poet_instance *inst, const poet_graph *g, double bits, uint32_t group,
                                      poet_err *err);
/* Reads POET's reference format or poet's own graph format (docs/formats.md). */
poet_status poet_instance_read_file(const char *path, poet_instance *out, poet_err *err);
poet_status poet_instance_parse_json(const char *text, size_t len, poet_instance *out, poet_err *err);
/* poet's own format; the caller frees the string. NULL when out of memory. */
char *poet_instance_to_json(const poet_instance *inst);
poet_status poet_instance_write_file(const poet_instance *inst, const char *path, poet_err *err);
poet_status poet_instance_write_dot(const poet_instance *inst, const char *path, poet_err *err);
/* Checks structure and values: order, edges in range, finite costs. */
poet_status poet_instance_validate(const poet_instance *inst, poet_err *err);
poet_status poet_instance_stats_compute(const poet_instance *inst, poet_instance_stats *out, poet_err *err);
/* What training holds in RAM beside the activation arena, as the device
 * image lays it out (src/device/device.c): weights, gradients, optimizer_slots
 * more copies of the gradients' size (SGD with momentum: 1, Adam: 2), the
 * buffers (batch-norm statistics) twice, and the batch with a label per
 * sample (a label per row for sequence models is not counted). */
uint64_t poet_instance_persistent_bytes(const poet_instance *inst, int optimizer_slots);
void poet_instance_free(poet_instance *inst);

#ifdef __cplusplus
}
#endif
#endif
