/* Internal: the float32 kernels, forward and backward, one per op of the
 * registry, shared by the host and the device. Freestanding.
 *
 * Determinism: each output is computed by one fixed sequence of float
 * operations (docs/device.md lists them), whatever the tiling, the chunking
 * of the workspace, the platform or where a tensor lives; so a
 * recomputation reproduces the dropped tensor bit for bit and a device
 * reproduces the host. Vectorised and tiled loops only ever run independent
 * outputs side by side, never reorder one output's sum. */
#ifndef POET_SRC_DEVICE_KERNELS_H
#define POET_SRC_DEVICE_KERNELS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "image.h"
#include "../base/hash.h" /* mix64 */

typedef struct kernel_ctx {
    const knode *nodes;                /* the graph */
    const knode *n;                    /* the node computed */
    const float *in[POET_MAX_INPUTS];  /* its inputs, in n->inputs order */
    float *out;
    const float *params;   /* the forward node's weights, gamma or operand (a grad node: its forward node's) */
    const float *bias;     /* ... and its bias or beta: the parameters' two parts live apart (knode.home) */
    /* gradients to write of the weights (gamma, the operand) and of the
     * bias (beta); NULL where frozen, and in a recomputation (no side effects) */
    float *grad_w, *grad_b;
    const float *running;  /* batch norm statistics: read in inference */
    float *running_out;    /* ... and written in training when not NULL (first computation only) */
    const float *batch_x;  /* the input node's data */
    const int32_t *labels; /* one per row of the loss */
    uint64_t dropout_seed; /* per step */
    float *work;           /* scratch of work_floats >= kernel_workspace_min */
    size_t work_floats;
    bool training;
    const uint32_t *channels; /* the image's channel lists (channel_select, ratio:R), or NULL */
} kernel_ctx;

/* Computes ctx->n; returns false for an op the runtime does not execute. */
bool kernel_run(const kernel_ctx *ctx);

/* Scratch floats node v needs at least (chunks of one output position),
 * and for chunks of `positions` output positions (0: whole images, the
 * fastest). */
uint64_t kernel_workspace_min(const knode *nodes, int v);
uint64_t kernel_workspace_for(const knode *nodes, int v, uint64_t positions);


/* PyTorch's default initialization, U(-bound, bound) with bound =
 * 1/sqrt(fan_in), as a stream: node v's parameters take the successive
 * values of kernel_init_next from kernel_init_stream(seed, v). The host
 * computes the bound (a square root in double, which a device without a
 * double FPU would need libm for); a device that re-creates weights from a
 * seed is handed it (a patch carries it). */
static inline uint64_t kernel_init_stream(uint64_t seed, int v) { return mix64(seed ^ mix64((uint64_t)v + 1)); }

static inline float kernel_init_next(uint64_t *rng, double bound)
{
    *rng = mix64(*rng);
    return (float)(bound * (2.0 * (double)(*rng >> 11) / 9007199254740992.0 - 1.0));
}

#endif
