/* poet on the device: trains a model under a POET schedule on a
 * microcontroller. Freestanding C11: no malloc, no threads, no stdio, no
 * files, no libm; the caller hands over one block of memory and a storage
 * back-end, and poet carves everything it needs from that block once, in
 * poet_dev_open. What the device runs comes in one device image that the
 * host writes (`poet export`, or poet_export_image in poet/runtime.h): the
 * graph's ops and shapes, the schedule as an instruction stream with arena
 * offsets, the initial weights and the memory it takes. The image is read
 * in place (from flash, say) and must stay readable while the device is
 * open.
 *
 * The same library, compiled for the host, is what `poet train` runs, so a
 * step gives the same bits on the host and on the device.
 *
 * A port needs: a startup file that enables the FPU before any float code,
 * a storage back-end (below), and a way to bring the image and the batches
 * in. examples/firmware/ is one for the STM32F405 (QEMU's netduinoplus2);
 * docs/device.md says what to change for another board. */
#ifndef POET_DEVICE_H
#define POET_DEVICE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "poet/ops.h"
#include "poet/status.h"
#include "poet/transfer.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- storage: poet_dev_storage (poet/transfer.h) ---- */

/* ---- memory ---- */
typedef struct poet_dev_memory {
    uint64_t arena_bytes;      /* activations: the schedule's placement */
    uint64_t persistent_bytes; /* weights in RAM, gradients, optimizer state, batch norm statistics, the batch */
    uint64_t workspace_bytes;  /* kernels' scratch */
    uint64_t control_bytes;    /* the executor's own state */
    uint64_t total_bytes;      /* what poet_dev_open needs, alignment included */
    uint64_t storage_bytes;    /* on storage: the slots of paged tensors */
    uint64_t flash_bytes;      /* parameters read in place from the image (frozen ones, when exported so) */
} poet_dev_memory;

/* The length an image declares in its header (it starts with at least 24
 * readable bytes), or 0 when it is not a poet device image: for a device
 * that finds its image in a flash partition. */
uint64_t poet_dev_image_length(const void *image);

/* Checks the image (magic, version, length, CRC-32, every record) and says
 * what it needs. */
poet_status poet_dev_inspect(const void *image, size_t image_bytes, poet_dev_memory *need, poet_err *err);

/* ---- training ---- */
typedef struct poet_dev poet_dev; /* lives at the start of the memory handed over */

typedef struct poet_dev_stats {
    uint64_t arena_bytes;
    uint64_t arena_peak_bytes; /* the highest arena byte an instruction wrote */
    uint64_t paged_out_bytes, paged_in_bytes;
    long recomputations, page_outs, page_ins, steps;
    /* With a clock: seconds in kernels, forward by op, backward by the
     * forward node's op, and waiting for transfers. */
    double compute_s, wait_s;
    double op_s[POET_OP_COUNT], grad_op_s[POET_OP_COUNT];
    double update_s;   /* in the optimizer step */
    double transfer_s; /* starting transfers (storage->start) */
} poet_dev_stats;

/* Opens the image inside memory (8-byte aligned, at least need.total_bytes).
 * storage may be NULL when the schedule pages nothing; it is borrowed. clock
 * (seconds, monotonic) may be NULL; with it, kernel time is measured. An
 * image whose programs place a tensor over another in RAM is refused here. */
poet_status poet_dev_open(const void *image, size_t image_bytes, void *memory, size_t memory_bytes,
                          const poet_dev_storage *storage, double (*clock)(void), poet_dev **out, poet_err *err);

/* Rows of a batch, input floats per row, classes of the loss. */
void poet_dev_batch_shape(const poet_dev *d, int *rows, uint64_t *numel_per_row, int *classes);

/* poet's own batch buffers: a caller that fills them in place (from a
 * sensor or a file) and passes them to poet_dev_step needs no second copy. */
void poet_dev_batch_buffers(poet_dev *d, float **x, int32_t **labels);

/* One training step on a batch (x: the input node's shape; labels: one per
 * row). Writes the mean loss. A failed step changes no weight, no
 * statistic and no optimizer state: the last completed step stays intact;
 * except on an image with a fused update (poet_export_options), where the
 * nodes already updated stay updated (docs/device.md). */
poet_status poet_dev_step(poet_dev *d, const float *x, const int32_t *labels, float *loss, poet_err *err);

/* The step in two halves, for a trainer that combines gradients (several
 * losses on one batch, as nested subnets train): poet_dev_gradient runs the
 * forward and backward passes and leaves the gradients (poet_dev_params
 * with gradient true, which the caller may change) and the batch norm
 * statistics updated, weights untouched; poet_dev_update then takes one
 * optimizer step with whatever the gradients hold. poet_dev_step is the
 * two in a row. */
poet_status poet_dev_gradient(poet_dev *d, const float *x, const int32_t *labels, float *loss, poet_err *err);
void poet_dev_update(poet_dev *d);

/* Forward pass in inference mode (running statistics, no dropout) inside
 * the same arena: sums the loss and counts correct predictions over the
 * first `rows` rows. */
poet_status poet_dev_eval(poet_dev *d, const float *x, const int32_t *labels, int rows, float *loss_sum,
                          int *correct, poet_err *err);

/* The logits of a batch in inference mode, rows x classes floats. */
poet_status poet_dev_predict(poet_dev *d, const float *x, float *logits, poet_err *err);

const poet_dev_stats *poet_dev_get_stats(const poet_dev *d);

/* Per-node timing, what a calibration fits its per-op costs to (`poet
 * emulate --calibrate`, docs/devices.md): with a clock, every computation
 * of node v adds its kernel's seconds to compute_s[v], and every transfer
 * of its tensor the seconds of starting it to transfer_s[v]. Borrowed
 * arrays of poet_dev_nodes(d) doubles, which the caller zeroes; NULL: none. */
void poet_dev_set_node_timers(poet_dev *d, double *compute_s, double *transfer_s);
/* Nodes of the training graph, forward and backward. */
uint32_t poet_dev_nodes(const poet_dev *d);

/* The arena's first byte, so that a port can paint it and measure the
 * high-water mark that kernels really wrote. */
const void *poet_dev_arena(const poet_dev *d);

/* SHA-256 of the trainable weights (float32, little-endian, node order), as
 * 64 hex digits: the same bits give the same digest on every platform. */
void poet_dev_weights_sha256(const poet_dev *d, char hex[65]);

/* The state a checkpoint keeps: weights, optimizer moments (m, then v; v is
 * zeros for SGD), batch norm statistics, the step count. */
size_t poet_dev_state_bytes(const poet_dev *d);
void poet_dev_state_save(const poet_dev *d, void *dst);
poet_status poet_dev_state_load(poet_dev *d, const void *src, size_t len, poet_err *err);

/* Direct access, for tests and for exporting: a forward node's parameters
 * (or their gradients) and batch norm statistics. NULL for other nodes,
 * and for parameters of which a part is read in place from flash (they
 * cannot be written; poet_dev_params_read reads them). */
float *poet_dev_params(poet_dev *d, int node, bool gradient, uint64_t *count);
/* Part `part` (0: weights, gamma or operand; 1: bias or beta) of a forward
 * node's parameters, wherever it lives; NULL when it has none. */
const float *poet_dev_params_read(const poet_dev *d, int node, int part, uint64_t *count);
/* All parameters in node order (what poet_dev_weights_sha256 hashes; count
 * is always set), or NULL when some are read in place from flash:
 * poet_dev_weights_copy then gathers them into dst (count floats). Also
 * the gradients from the last step; and all buffers (batch norm
 * statistics, constants). */
const float *poet_dev_weights(const poet_dev *d, uint64_t *count);
void poet_dev_weights_copy(const poet_dev *d, float *dst);
/* Parameters the device reads in place from the image, never copying or
 * writing them (frozen tensors exported with their home in flash). */
uint64_t poet_dev_flash_params(const poet_dev *d);
const float *poet_dev_gradients(const poet_dev *d, uint64_t *count);
const float *poet_dev_state(const poet_dev *d, uint64_t *count);
float *poet_dev_buffers(poet_dev *d, int node, uint64_t *count);
uint64_t poet_dev_seed(const poet_dev *d);
uint32_t poet_dev_graph_hash(const poet_dev *d);

/* ---- partial training and partial updates (docs/update.md) ---- */

/* Trains only the parameters whose bit is set: bit i (byte i / 8, least
 * significant bit first) of mask stands for float i of poet_dev_weights.
 * The others, and their optimizer state, do not change in a step. The mask
 * is borrowed and must stay readable; NULL: every parameter trains. */
void poet_dev_set_train_mask(poet_dev *d, const uint8_t *mask);

/* Learning rates per tensor (p-Meta-style adaptation learns one per
 * layer): rates[2 v] for forward node v's weights, rates[2 v + 1] for its
 * bias; poet_dev_forward_nodes(d) nodes. Borrowed until replaced; NULL:
 * the image's one rate. */
void poet_dev_set_rates(poet_dev *d, const float *rates);
uint32_t poet_dev_forward_nodes(const poet_dev *d);

/* Channel attention from the gradients: in mask (a train mask, bits over
 * poet_dev_weights), sets the bits of the `keep` output rows of node's
 * weights (and their bias entries) whose gradient now (after
 * poet_dev_gradient) has the largest norm, ties to the lower row, and
 * clears the others' bits. The node must be a convolution or linear layer
 * with trained weights. Quadratic in the rows, with no scratch memory. */
poet_status poet_dev_keep_rows(poet_dev *d, int node, uint32_t keep, uint8_t *mask, poet_err *err);

/* A step whose gradient first chooses what trains: for each of the count
 * pairs (node, rows kept) in rows_kept, poet_dev_keep_rows into mask; then
 * mask becomes the train mask (for this step's update and those after). */
poet_status poet_dev_step_attending(poet_dev *d, const float *x, const int32_t *labels, const uint32_t *rows_kept,
                                    uint32_t count, uint8_t *mask, float *loss, poet_err *err);

/* The weights a partial update chooses among: those of convolutions and
 * linear layers, not their biases nor any other parameter (a patch sends
 * those in full). Sets is_weight[i] to 1 or 0 for each float of
 * poet_dev_weights (is_weight may be NULL); returns how many are weights. */
uint64_t poet_dev_update_weights(const poet_dev *d, uint8_t *is_weight);

/* What a patch says of itself (docs/update.md, "The patch format"). */
typedef enum poet_patch_rest {
    POET_PATCH_REST_BASE = 0, /* weights the patch does not set keep their value */
    POET_PATCH_REST_INIT = 1, /* ... are re-initialized from the patch's seed */
    POET_PATCH_REST_ZERO = 2  /* ... become zero (a pruned model) */
} poet_patch_rest;

typedef struct poet_dev_patch_info {
    uint32_t version, round;
    poet_patch_rest rest;
    uint64_t seed;      /* POET_PATCH_REST_INIT */
    uint64_t weights;   /* what the patch chooses among (poet_dev_update_weights) */
    uint64_t changed;   /* of them, the ones it sets */
    uint64_t dense;     /* other parameters, all sent */
    uint64_t state;     /* batch norm statistics and constants, all sent */
    bool bitmap;        /* positions as a bitmap, not an index list */
} poet_dev_patch_info;

/* Checks a patch against this device's model without changing anything:
 * its CRC-32 and fields, that it was made for this graph and for the
 * weights the device holds now (SHA-256), and that applying it gives the
 * weights it promises (SHA-256 again, computed one weight at a time, with
 * no copy of the model). */
poet_status poet_dev_patch_check(const poet_dev *d, const void *patch, size_t len, poet_dev_patch_info *info,
                                 poet_err *err);

/* Checks the patch as above, then applies it in place. A patch that fails
 * any check is refused and changes nothing. The optimizer state is zeroed
 * (it belonged to the old weights). */
poet_status poet_dev_patch_apply(poet_dev *d, const void *patch, size_t len, poet_err *err);

/* ---- the model on storage ---- */

/* Bytes the model store takes: two slots of weights and buffers. */
uint64_t poet_dev_store_bytes(const poet_dev *d);

/* Saves the weights and buffers to the store at storage offset `at` (a
 * multiple of 8, past the bytes the schedule pages), into the slot that is
 * not current, the body made durable before the header that makes it
 * current: power lost at any moment of a save leaves the model saved
 * before it or this one, never a mix. */
poet_status poet_dev_store_save(poet_dev *d, const poet_dev_storage *st, uint64_t at, poet_err *err);

/* Loads the newest slot whose header and CRC-32 check out, and zeroes the
 * optimizer state. POET_ERR_NOT_FOUND (nothing changed) when no slot holds
 * a model of this graph; after a read error the weights are undefined. */
poet_status poet_dev_store_load(poet_dev *d, const poet_dev_storage *st, uint64_t at, poet_err *err);

#ifdef __cplusplus
}
#endif
#endif
