/* A training step: the pass (device.c), then the optimizer (optimizer.c),
 * unless the image fused it into the pass; and the step that lets the
 * gradient choose what trains. Freestanding. */
#include "dev.h"

/* A fused update ran in the pass (KI_UPDATE): only the count moves on. */
static void finish_step(poet_dev *d)
{
    for (uint32_t v = 0; !d->h->fused_grad_floats && v < d->h->n_forward; v++) dev_update_timed(d, v);
    d->step++;
    d->stats.steps++;
}

void poet_dev_update(poet_dev *d)
{
    if (!d->h->fused_grad_floats) finish_step(d); /* a fused image has no gradients left to apply */
}

poet_status poet_dev_step(poet_dev *d, const float *x, const int32_t *labels, float *loss, poet_err *err)
{
    poet_status st = dev_pass(d, x, labels, loss, err);
    if (!st) finish_step(d);
    return st;
}

poet_status poet_dev_step_attending(poet_dev *d, const float *x, const int32_t *labels, const uint32_t *rows_kept,
                                    uint32_t count, uint8_t *mask, float *loss, poet_err *err)
{
    poet_status st = poet_dev_gradient(d, x, labels, loss, err);
    for (uint32_t i = 0; i < count && !st; i++)
        st = poet_dev_keep_rows(d, (int)rows_kept[2 * i], rows_kept[2 * i + 1], mask, err);
    if (st) return st;
    poet_dev_set_train_mask(d, mask);
    poet_dev_update(d);
    return POET_OK;
}
