/* Internal: the device library's state, shared by its files (device.c runs
 * the image; update.c applies partial updates to it). Freestanding. */
#ifndef POET_SRC_DEVICE_DEV_H
#define POET_SRC_DEVICE_DEV_H

#include "poet/device.h"

#include <string.h>

#include "image.h"

struct poet_dev {
    const uint8_t *image;
    const img_header *h;
    const knode *nodes;
    const uint64_t *slots;
    const poet_dev_storage *storage;
    double (*clock)(void);
    unsigned char *arena;
    float *params; /* the parameters whose home is RAM (knode.home); the others are read from the image */
    float *grads, *opt_m, *opt_v, *state, *state_next, *batch_x, *work;
    int32_t *labels;
    int32_t *live;  /* node -> buffer in RAM, or -1 */
    int64_t *pending; /* node -> ticket of its page-out, or -1 */
    const uint8_t *train_mask; /* bit i: parameter i trains; NULL: all do (borrowed) */
    const float *rates;        /* per forward node, weights' then bias's learning rate; NULL: the image's (borrowed) */
    double *node_compute_s, *node_transfer_s; /* per node, or NULL (poet_dev_set_node_timers; borrowed) */
    uint64_t step;
    float adam_c1, adam_c2; /* Adam's bias corrections for the step under way (dev_pass sets them) */
    poet_dev_stats stats;
};

/* The image at img checked field by field (image_check.c): the CRC, every
 * count, offset and shape, before anything runs. */
poet_status image_check(const uint8_t *img, size_t len, poet_err *err);

/* The channel_select nodes' lists of input channels (ratio:R), or NULL. */
static inline const uint32_t *channel_lists(const poet_dev *d)
{
    return d->h->channels_at ? (const uint32_t *)(const void *)(d->image + d->h->channels_at) : NULL;
}

/* Part `part` of node n's parameters where a kernel reads it: in RAM, or
 * in place in the image. */
static inline const float *dev_part(const poet_dev *d, const knode *n, int part)
{
    uint64_t at, count;
    if (n->home[part] != KHOME_FLASH) return d->params + n->home[part];
    knode_part(n, part, &at, &count);
    return (const float *)(const void *)(d->image + d->h->params_at) + at;
}

/* ... where it may be written: NULL for a home in flash. */
static inline float *dev_part_ram(const poet_dev *d, const knode *n, int part)
{
    return n->home[part] == KHOME_FLASH ? NULL : d->params + n->home[part];
}

/* Runs the statement after it for every non-empty part of every forward
 * node, in the order of the parameter vector (poet_dev_weights_copy), with
 * v, part, at (its first float in the vector) and count set. */
#define DEV_FOR_EACH_PART(d, v, part, at, count)                                                                   \
    for (uint32_t v = 0; v < (d)->h->n_forward; v++)                                                               \
        for (int part = 0; part < 2; part++)                                                                       \
            for (uint64_t at, count, once_ = (knode_part(&(d)->nodes[v], part, &at, &count), count != 0); once_;   \
                 once_ = 0)

/* Where node n's gradients are written: its block of the persistent
 * gradients, or, with a fused update, the one buffer each node's pass
 * through until its KI_UPDATE. */
static inline float *dev_grads_of(const poet_dev *d, const knode *n)
{
    return d->grads + (d->h->fused_grad_floats ? 0 : n->grad_at);
}

/* The forward and backward pass of a step (with a fused update, the
 * optimizer steps too); the batch norm statistics committed on success. */
poet_status dev_pass(poet_dev *d, const float *x, const int32_t *labels, float *loss, poet_err *err);

/* Adam's bias corrections for the step about to run (d->step counts the
 * steps completed), once a step rather than once a node. */
void dev_begin_step(poet_dev *d);

/* The optimizer step of forward node v's parameters (optimizer.c): all of
 * them at the end of a step, or one at its KI_UPDATE. */
void dev_update_node(poet_dev *d, uint32_t v);
/* ... its time counted in the statistics (update_s) where there is a clock. */
void dev_update_timed(poet_dev *d, uint32_t v);

/* SHA-256 of the parameter vector (poet_dev_weights_sha256's digest). */
void dev_weights_digest(const poet_dev *d, uint8_t digest[32]);

/* The first forward node one of whose parameters homed in flash differs
 * (in its bits) from vector[] (a whole parameter vector), or -1: a state,
 * a saved model or a patch that would write flash is refused. */
int dev_flash_changed(const poet_dev *d, const float *vector);

/* New weights (a patch, a saved model) make the optimizer state stale:
 * start it afresh. */
static inline void dev_forget_optimizer(poet_dev *d)
{
    memset(d->opt_m, 0, 4ull * d->h->n_trained);
    if (d->opt_v) memset(d->opt_v, 0, 4ull * d->h->n_trained);
    d->step = 0;
}

#endif
