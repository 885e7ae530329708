/* poet: the training runtime. Executes a schedule's instruction stream in
 * one arena of the planned size, pages tensors to storage and back on a
 * worker thread, recomputes what was dropped, and trains.
 *
 * Everything is allocated by the *_init functions; a training step
 * allocates nothing. Depends on graphs and schedules, never on a planner. */
#ifndef POET_RUNTIME_H
#define POET_RUNTIME_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "poet/device.h"
#include "poet/schedule.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- storage: flash or SD card, reached through a table of functions ---- */
#define POET_STORAGE_VERSION 1

typedef struct poet_storage {
    int version; /* POET_STORAGE_VERSION */
    void *ctx;
    uint64_t capacity_bytes;
    poet_status (*write)(void *ctx, uint64_t offset, const void *src, size_t bytes, poet_err *err);
    poet_status (*read)(void *ctx, uint64_t offset, void *dst, size_t bytes, poet_err *err);
    poet_status (*sync)(void *ctx, poet_err *err);
    void (*close)(void *ctx);
} poet_storage;

/* A file of capacity_bytes standing in for flash, at path: created, or
 * reused where it is poet's storage file from an earlier run; any other
 * non-empty file is refused, not overwritten (a checkpoint or a data set
 * given by mistake). */
poet_status poet_storage_open_file(const char *path, uint64_t capacity_bytes, poet_storage *out, poet_err *err);
/* The same in a file without a name in dir (NULL: $TMPDIR, else /tmp),
 * which nobody else can open and which is gone when closed or when the
 * process dies. */
poet_status poet_storage_open_temp(const char *dir, uint64_t capacity_bytes, poet_storage *out, poet_err *err);
/* RAM standing in for storage, for tests. */
poet_status poet_storage_open_memory(uint64_t capacity_bytes, poet_storage *out, poet_err *err);

/* Fault injection: call number n (counting from 1) of the kind fails; 0 never. */
typedef struct poet_storage_faults {
    long fail_read_at, fail_write_at, fail_sync_at;
    long reads, writes, syncs; /* calls seen so far */
} poet_storage_faults;

/* Wraps inner so that the calls f names fail; f must outlive the result,
 * which takes ownership of inner. */
poet_status poet_storage_with_faults(poet_storage *inner, poet_storage_faults *f, poet_storage *out, poet_err *err);
void poet_storage_close(poet_storage *s);

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
typedef struct poet_export_options {
    poet_optimizer optimizer;
    uint64_t seed;            /* initial weights (unless given) and dropout masks */
    uint32_t chunk_positions; /* kernels' scratch: im2col chunks of this many output positions; 0: whole images
                               * (the fastest; up to 16 MiB) */
    const float *params;      /* initial weights in node order, or NULL: from the seed */
    const float *buffers;     /* initial batch norm statistics, or NULL: mean 0, variance 1 */
} poet_export_options;

/* Checks the graph, validates the schedule, builds its instruction stream
 * and placement, and writes the device image (docs/device.md). The caller
 * frees *data. */
poet_status poet_export_image(const poet_graph *g, const poet_problem *p, const poet_schedule *s,
                              const poet_export_options *o, uint8_t **data, size_t *len, poet_err *err);

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
} poet_engine_config;

poet_status poet_engine_init(poet_engine **out, const poet_engine_config *cfg, poet_err *err);
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
/* The logits of a batch in inference mode, rows x classes floats. */
poet_status poet_engine_predict(poet_engine *e, const float *x, float *logits, poet_err *err);
const poet_engine_stats *poet_engine_get_stats(const poet_engine *e);
/* The device library the engine runs (weights, gradients, buffers). */
poet_dev *poet_engine_device(poet_engine *e);
/* Rows of a batch, input floats per row, and classes of the loss. */
void poet_engine_batch_shape(const poet_engine *e, int *rows, uint64_t *numel_per_row, int *classes);
uint64_t poet_engine_seed(const poet_engine *e);
poet_optimizer poet_engine_optimizer(const poet_engine *e);
/* Of the graph's structure and sizes: what a checkpoint must match. */
uint32_t poet_engine_graph_hash(const poet_engine *e);

/* The state a checkpoint keeps: weights, buffers, optimizer state and the
 * step count, as one flat byte image. */
size_t poet_engine_state_bytes(const poet_engine *e);
void poet_engine_state_save(const poet_engine *e, void *dst);
poet_status poet_engine_state_load(poet_engine *e, const void *src, size_t len, poet_err *err);
/* SHA-256 of the trainable weights, in node order, as 64 hex digits. */
void poet_engine_weights_sha256(const poet_engine *e, char hex[65]);
/* Direct access for tests: parameter (or gradient) floats of a node. */
float *poet_engine_params(poet_engine *e, int node, bool gradient, uint64_t *count);
/* Batch-norm running statistics of a node (mean, then variance). */
float *poet_engine_buffers(poet_engine *e, int node, uint64_t *count);

/* ---- data sets ---- */
typedef struct poet_dataset {
    char name[32];
    int n_train, n_test;
    int channels, height, width; /* one example */
    int classes;
    float *train_x, *test_x; /* n * channels * height * width, scaled to [0, 1] */
    int32_t *train_y, *test_y;
} poet_dataset;

/* "digits" (python3-sklearn) or "fashion-mnist" (dataset-fashion-mnist);
 * dir overrides where the files are looked for (NULL: Debian's place). */
poet_status poet_dataset_load(const char *name, const char *dir, poet_dataset *out, poet_err *err);
void poet_dataset_free(poet_dataset *d);

/* ---- checkpoints ---- */
typedef struct poet_checkpoint_meta {
    uint32_t graph_hash;
    uint64_t seed;
    long step, epoch, batch_in_epoch; /* where training goes on */
    uint64_t train_examples;          /* of the data set, whose order each epoch shuffles */
    poet_optimizer optimizer;         /* the engine's; written and checked by the functions below */
} poet_checkpoint_meta;

/* Written atomically: the old checkpoint stays whole until the new one is.
 * The optimizer recorded is e's (meta->optimizer is not read). */
poet_status poet_checkpoint_write(const char *path, const poet_engine *e, const poet_checkpoint_meta *meta,
                                  poet_err *err);
/* Loads the checkpoint at path into e after checking it against the run it
 * resumes: meta's graph hash, seed and training examples, and e's
 * optimizer (kind and every hyperparameter) must be the checkpoint's, and
 * its state's step count its step. On success *meta is the checkpoint's. */
poet_status poet_checkpoint_read(const char *path, poet_engine *e, poet_checkpoint_meta *meta, poet_err *err);
/* Parses and checks a checkpoint image without an engine (for fuzzing). */
poet_status poet_checkpoint_parse(const uint8_t *data, size_t len, poet_checkpoint_meta *meta, size_t *state_len,
                                  poet_err *err);

/* ---- the training loop ---- */
typedef struct poet_train_progress {
    long step, total_steps;  /* steps done, of all */
    int epoch, epochs;       /* 1-based epoch in progress */
    long batch, batches;     /* within the epoch */
    double loss;             /* of the last step */
    bool epoch_done;         /* test metrics below are fresh */
    double train_loss;       /* mean over the epoch's steps run in this process */
    double test_loss, test_accuracy;
} poet_train_progress;

typedef struct poet_train_options {
    int epochs;               /* used when steps <= 0 */
    long steps;               /* > 0: train this many steps in all */
    const char *checkpoint;   /* file, or NULL */
    long checkpoint_every;    /* steps between checkpoints; <= 0: at each epoch's end only */
    bool resume;              /* start from the checkpoint when it exists */
    void (*progress)(void *ctx, const poet_train_progress *p);
    void *ctx;
    bool evaluate_first;      /* measure the test set before the first step too (pretrained weights) */
} poet_train_options;

typedef struct poet_train_report {
    long steps;               /* in all, including those before a resume */
    long resumed_at;          /* step the run started from */
    double final_loss;        /* of the last step */
    double test_loss, test_accuracy;
    double initial_test_loss, initial_test_accuracy; /* with evaluate_first; NAN otherwise */
    double host_seconds;      /* this process's training and evaluation */
    double step_seconds;      /* of which training steps */
    double eval_seconds;      /* of which test-set evaluation */
} poet_train_report;

/* The order poet_train visits the n training examples in `epoch` (from 0):
 * a permutation that depends only on the seed and the epoch. With
 * B = n / rows batches an epoch (the last partial one is dropped), step k
 * takes entries [j * rows, (j + 1) * rows) of epoch k / B's order, j = k % B. */
void poet_train_order(uint64_t seed, long epoch, int n, int *order);

/* Rows idx[0..rows) of xs (per floats each) and ys into one batch, x and y. */
void poet_train_gather(float *x, int32_t *y, int rows, uint64_t per, const float *xs, const int32_t *ys, const int *idx);

/* Mean loss and accuracy of e in inference mode over n examples: xs holds
 * one input per example (the model's input floats each) and ys one label;
 * idx picks the examples (NULL: the first n). */
poet_status poet_evaluate(poet_engine *e, const float *xs, const int32_t *ys, const int *idx, int n, double *loss,
                          double *accuracy, poet_err *err);

/* Trains e on d: shuffles each epoch from (engine seed, epoch), drops the last
 * partial batch, evaluates on the whole test set after each epoch (and at
 * the end), writes checkpoints atomically. */
poet_status poet_train(poet_engine *e, const poet_dataset *d, const poet_train_options *o, poet_train_report *r,
                       poet_err *err);

/* SHA-256 (FIPS 180-4) as 64 hex digits. */
void poet_sha256_hex(const void *data, size_t len, char hex[65]);

#ifdef __cplusplus
}
#endif
#endif
