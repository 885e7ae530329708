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
    float *params, *grads, *opt_m, *opt_v, *state, *state_next, *batch_x, *work;
    int32_t *labels;
    int32_t *live;  /* node -> buffer in RAM, or -1 */
    int64_t *pending; /* node -> ticket of its page-out, or -1 */
    const uint8_t *train_mask; /* bit i: parameter i trains; NULL: all do (borrowed) */
    const float *rates;        /* per forward node, weights' then bias's learning rate; NULL: the image's (borrowed) */
    uint64_t step;
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

/* New weights (a patch, a saved model) make the optimizer state stale:
 * start it afresh. */
static inline void dev_forget_optimizer(poet_dev *d)
{
    memset(d->opt_m, 0, 4ull * d->h->n_trained);
    if (d->opt_v) memset(d->opt_v, 0, 4ull * d->h->n_trained);
    d->step = 0;
}

#endif
