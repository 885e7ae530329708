/* poet: the engine, which runs a schedule's instruction stream in one arena
 * of the planned size with the device library, pages tensors to storage and
 * back on a worker thread and recomputes what was dropped; the optimizer,
 * and the device image it (or a device) trains from.
 *
 * Everything is allocated by poet_engine_new; a training step allocates
 * nothing. Depends on graphs and schedules, never on a planner. */
#ifndef POET_ENGINE_H
#define POET_ENGINE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "poet/device.h"
#include "poet/schedule.h"
#include "poet/storage.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- the network's persistent state: weights, gradients, buffers ---- */
typedef enum poet_optimizer_kind { POET_OPT_SGD, POET_OPT_ADAM } poet_optimizer_kind;

typedef struct poet_optimizer {
    poet_optimizer_kind kind;
    float lr;
    float momentum;     /* SGD */
    float beta1, beta2; /* Adam */
    float eps;
    float weight_decay;
} poet_optimizer;

/* Defaults: SGD lr 0.05 momentum 0.9; Adam lr 1e-3, betas 0.9/0.999, eps 1e-8. */
poet_optimizer poet_optimizer_default(poet_optimizer_kind kind);

/* Gradient-sized buffers the optimizer keeps (SGD's momentum; Adam's two
 * moments), as poet_instance_persistent_bytes counts them. */
int poet_optimizer_slots(poet_optimizer_kind kind);

/* ---- the device image: what a device (or this runtime) trains from ---- */

/* Where the parameters that do not train live on the device: copied into
 * RAM, or read in place from the image (flash on a microcontroller; zero
 * RAM, never written). Training gives the same bits either way. */
typedef enum poet_frozen_home { POET_FROZEN_IN_RAM = 0, POET_FROZEN_IN_FLASH = 1 } poet_frozen_home;

typedef struct poet_export_options {
    poet_optimizer optimizer;
    uint64_t seed;            /* initial weights (unless given) and dropout masks */
    uint32_t chunk_positions; /* kernels' scratch: im2col chunks of this many output positions; 0: whole images
                               * (the fastest; up to 16 MiB) */
    const float *params;      /* initial weights in node order, or NULL: from the seed */
    const float *buffers;     /* initial batch norm statistics, or NULL: mean 0, variance 1 */
    poet_frozen_home frozen;
    /* Each layer's optimizer step runs in the backward pass, right after the last instruction that reads its
     * parameters, so one layer's gradients at a time take RAM instead of all of them. Same bits. A step that
     * fails part way then leaves the layers it updated updated (resume from a checkpoint or the model store);
     * poet_dev_gradient, which leaves the gradients to the caller, is refused. */
    bool fused_update;
} poet_export_options;

/* Checks the graph, validates the schedule, builds its instruction stream
 * and placement, and writes the device image (docs/device.md). The caller
 * frees *data. */
poet_status poet_export_image(const poet_graph *g, const poet_problem *p, const poet_schedule *s,
                              const poet_export_options *o, uint8_t **data, size_t *len, poet_err *err);

/* The memory a device needs to train g with an arena of arena_bytes under
 * these options (the optimizer and chunk_positions matter): what
 * poet_dev_inspect says of the image poet_export_image writes with a
 * schedule whose placement has that arena. With arena_bytes 0: all that
 * training needs beside the arena, which a RAM budget leaves out. */
poet_status poet_export_memory(const poet_graph *g, const poet_export_options *o, uint64_t arena_bytes,
                               poet_dev_memory *need, poet_err *err);

/* ---- the engine: one graph, one schedule, one arena ---- */
typedef struct poet_engine_stats {
    uint64_t arena_bytes;        /* the arena: the placement's size */
    uint64_t arena_peak_bytes;   /* highest byte of the arena written so far */
    uint64_t persistent_bytes;   /* weights, gradients, buffers, optimizer state, the batch */
    uint64_t workspace_bytes;    /* kernels' scratch */
    uint64_t storage_bytes;      /* the storage slots of paged tensors */
    uint64_t paged_out_bytes, paged_in_bytes;
    long recomputations, page_outs, page_ins, steps;
    double device_energy_j;      /* what the device profile says these steps cost */
    double device_compute_s;     /* the device's compute time for these steps */
    double device_transfer_s;    /* its page-in and page-out time (overlappable with compute) */
    double host_compute_s;       /* kernels */
    double host_wait_s;          /* waiting for transfers */
    double host_op_s[POET_OP_COUNT]; /* kernels by op (backward under its forward op) */
} poet_engine_stats;

typedef struct poet_engine poet_engine;

typedef struct poet_engine_config {
    const poet_graph *graph;     /* a zoo graph; must outlive the engine */
    const poet_problem *problem; /* the costed graph and budgets the schedule was planned for */
    const poet_schedule *schedule; /* validated */
    poet_storage *storage;       /* taken over by the engine; NULL: in memory */
    poet_optimizer optimizer;
    uint64_t seed;               /* initial weights and dropout masks */
    uint32_t chunk_positions;    /* kernels' scratch (poet_export_options); 0: the fastest */
    const float *params;         /* initial weights (an imported model's), or NULL: from the seed */
    const float *buffers;        /* initial batch norm statistics and constants, or NULL */
    poet_frozen_home frozen;     /* poet_export_options */
    bool fused_update;           /* poet_export_options */
} poet_engine_config;

poet_status poet_engine_new(const poet_engine_config *cfg, poet_engine **out, poet_err *err);
void poet_engine_free(poet_engine *e);

/* The device image the engine runs: the bytes `poet export` would write. */
const uint8_t *poet_engine_image(const poet_engine *e, size_t *len);

/* One training step on a batch: x holds the input tensor (the graph's input
 * node's shape), labels one class per row of the loss. Writes the mean loss.
 * Weights change only when the whole step succeeded. */
poet_status poet_engine_step(poet_engine *e, const float *x, const int32_t *labels, double *loss, poet_err *err);
/* Forward pass in inference mode (running statistics, no dropout) on one
 * batch, inside the same arena; sums the loss and counts correct
 * predictions over the first `rows` rows (the rest is padding). */
poet_status poet_engine_eval(poet_engine *e, const float *x, const int32_t *labels, int rows, double *loss_sum,
                             int *correct, poet_err *err);
/* The engine's statistics, brought up to date from the device library's
 * (which is why it takes the engine, not a const one). */
const poet_engine_stats *poet_engine_get_stats(poet_engine *e);
/* The device library the engine runs: its weights, gradients and buffers,
 * its state for checkpoints, its hashes, inference (poet_dev_predict) and
 * the batch shape are the engine's, through this one handle. */
poet_dev *poet_engine_device(const poet_engine *e);
poet_optimizer poet_engine_optimizer(const poet_engine *e);

/* SHA-256 (FIPS 180-4) as 64 hex digits. */
void poet_sha256_hex(const void *data, size_t len, char hex[65]);

#ifdef __cplusplus
}
#endif
#endif
