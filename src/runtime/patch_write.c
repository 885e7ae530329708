/* Patches of partial updates (src/device/patch.h), written for the
 * devices running an image: the host side of the format the device library
 * checks and applies (src/device/patch.c). */
#include <stdlib.h>
#include <string.h>

#include "poet/patch.h"

#include "../base/hash.h"
#include "../device/dev.h"
#include "../device/kernels.h"
#include "../device/patch.h"

void poet_patch_init_weights(const poet_dev *d, uint64_t seed, const float *keep, float *out)
{
    for (uint32_t v = 0; v < d->h->n_forward; v++) {
        const knode *k = &d->nodes[v];
        uint64_t nw = knode_weights(k), rng = kernel_init_stream(seed, (int)v);
        double bound = nw ? image_init_bound(d->nodes, (int)v) : 0;
        for (uint64_t i = 0; i < k->params; i++)
            out[k->param_at + i] = i < nw ? kernel_init_next(&rng, bound) : keep[k->param_at + i];
    }
}

static void put_f32(uint8_t *p, float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    le_put(p, u, 4);
}

poet_status poet_patch_make(const poet_dev *d, const poet_patch_spec *sp, uint8_t **out, size_t *len, poet_err *err)
{
    *out = NULL, *len = 0;
    uint64_t P = d->h->n_params, S = d->h->n_state, I = poet_dev_update_weights(d, NULL), changed = 0;
    for (uint64_t i = 0; i < I; i++) changed += sp->changed[i] != 0;
    uint32_t layers = sp->rest == POET_PATCH_REST_INIT ? knode_weight_layers(d->nodes, d->h->n_forward) : 0;
    unsigned bits = patch_index_bits(I);
    int bitmap = patch_positions_bytes(1, I, changed, 0) < patch_positions_bytes(0, I, changed, bits);
    uint64_t pos_bytes = patch_positions_bytes(bitmap, I, changed, bitmap ? 0 : bits);
    uint64_t total = PATCH_HEADER_BYTES + 8ull * layers + pos_bytes + 4 * (changed + (P - I) + S) + 4;
    uint8_t *p = calloc(1, total), *is_weight = malloc(P + 1);
    if (!p || !is_weight) {
        free(p), free(is_weight);
        return poet_fail(err, POET_ERR_NOMEM, "out of memory for a patch");
    }
    poet_dev_update_weights(d, is_weight);
    memcpy(p, POET_PATCH_MAGIC, 8);
    le_put(p + PATCH_VERSION_AT, POET_PATCH_VERSION, 4);
    le_put(p + PATCH_GRAPH_AT, d->h->graph_hash, 4);
    le_put(p + PATCH_LENGTH_AT, total, 8);
    le_put(p + PATCH_ROUND_AT, sp->round, 4);
    p[PATCH_REST_AT] = (uint8_t)sp->rest, p[PATCH_BITMAP_AT] = (uint8_t)bitmap;
    p[PATCH_INDEX_BITS_AT] = (uint8_t)(bitmap ? 0 : bits);
    le_put(p + PATCH_SEED_AT, sp->rest == POET_PATCH_REST_INIT ? sp->seed : 0, 8);
    le_put(p + PATCH_PARAMS_AT, P, 8), le_put(p + PATCH_WEIGHTS_AT, I, 8), le_put(p + PATCH_CHANGED_AT, changed, 8);
    le_put(p + PATCH_LAYERS_AT, layers, 4), le_put(p + PATCH_STATE_AT, S, 4);
    sha256_floats(sp->base, P, NULL, 0, p + PATCH_BASE_AT);
    sha256_floats(sp->weights, P, sp->state, S, p + PATCH_RESULT_AT);
    uint8_t *at = p + PATCH_HEADER_BYTES;
    for (uint32_t v = 0, l = 0; v < d->h->n_forward && l < layers; v++)
        if (knode_weights(&d->nodes[v])) {
            double b = image_init_bound(d->nodes, (int)v);
            uint64_t u;
            memcpy(&u, &b, 8);
            le_put(at + 8 * l++, u, 8);
        }
    at += 8ull * layers;
    uint8_t *pos = at, *values = pos + pos_bytes, *dense = values + 4 * changed, *state = dense + 4 * (P - I);
    for (uint64_t i = 0, w = 0, c = 0, n = 0; i < P; i++) {
        if (!is_weight[i]) {
            put_f32(dense + 4 * n++, sp->weights[i]);
            continue;
        }
        if (sp->changed[w]) {
            if (bitmap)
                pos[w / 8] |= (uint8_t)(1u << (w % 8));
            else
                for (unsigned b = 0; b < bits; b++) pos[(c * bits + b) / 8] |= (uint8_t)((w >> b & 1) << ((c * bits + b) % 8));
            put_f32(values + 4 * c++, sp->weights[i]);
        }
        w++;
    }
    for (uint64_t i = 0; i < S; i++) put_f32(state + 4 * i, sp->state[i]);
    le_put(p + total - 4, crc32_update(0, p, total - 4), 4);
    free(is_weight);
    *out = p, *len = (size_t)total;
    return POET_OK;
}
