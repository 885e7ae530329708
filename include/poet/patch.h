/* poet: patches that bring a deployed device's weights up to date (the
 * format: docs/update.md; the device applies them, poet/device.h). */
#ifndef POET_PATCH_H
#define POET_PATCH_H

#include <stddef.h>
#include <stdint.h>

#include "poet/device.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct poet_patch_spec {
    uint32_t round;
    poet_patch_rest rest;
    uint64_t seed;           /* POET_PATCH_REST_INIT: the initialization's */
    const float *base;       /* the weights the device holds */
    const float *weights;    /* the weights it is to hold */
    const uint8_t *changed;  /* one per weight of poet_dev_update_weights, in order: 1 to send it */
    const float *state;      /* the buffers it is to hold */
} poet_patch_spec;

/* Writes a patch for devices running d's image; positions go as a bitmap
 * or an index list, whichever is smaller. The caller frees *out. */
poet_status poet_patch_make(const poet_dev *d, const poet_patch_spec *s, uint8_t **out, size_t *len, poet_err *err);

/* The weights a device running d's image makes of seed when a patch
 * re-initializes (POET_PATCH_REST_INIT): each conv's and linear layer's
 * weights drawn as poet_export_image draws them, every other parameter
 * from keep; into out (poet_dev_weights' count of floats). */
void poet_patch_init_weights(const poet_dev *d, uint64_t seed, const float *keep, float *out);

#ifdef __cplusplus
}
#endif
#endif
