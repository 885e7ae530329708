/* Partial updates on the device (poet/device.h): which weights a patch
 * chooses among, and checking and applying a patch (src/device/patch.h) in
 * place. A patch is checked whole before the first weight changes: its
 * result is computed one weight at a time and hashed, so that a device
 * needs no second copy of its model to refuse a wrong one. Freestanding. */
#include <string.h>

#include "dev.h"
#include "../base/hash.h"
#include "kernels.h"
#include "patch.h"

uint64_t poet_dev_update_weights(const poet_dev *d, uint8_t *is_weight)
{
    uint64_t n = 0;
    for (uint32_t v = 0; v < d->h->n_forward; v++) {
        const knode *k = &d->nodes[v];
        uint64_t w = knode_weights(k);
        if (is_weight)
            for (uint64_t i = 0; i < k->params; i++) is_weight[k->param_at + i] = i < w;
        n += w;
    }
    return n;
}

/* A patch's sections, located. */
typedef struct patch_view {
    const uint8_t *p;
    poet_dev_patch_info info;
    unsigned index_bits;
    uint32_t layers;
    const uint8_t *bounds, *positions, *values, *dense, *state;
} patch_view;

static float f32_at(const uint8_t *p, uint64_t i)
{
    uint32_t u = (uint32_t)le_get(p + 4 * i, 4);
    float f;
    memcpy(&f, &u, 4);
    return f;
}

static double f64_at(const uint8_t *p, uint64_t i)
{
    uint64_t u = le_get(p + 8 * i, 8);
    double f;
    memcpy(&f, &u, 8);
    return f;
}

/* Bits [at, at + n) of a least-significant-bit-first bit string. */
static uint64_t bits_at(const uint8_t *p, uint64_t at, unsigned n)
{
    uint64_t v = 0;
    for (unsigned i = 0; i < n; i++) v |= (uint64_t)(p[(at + i) / 8] >> ((at + i) % 8) & 1) << i;
    return v;
}

static poet_status refuse(poet_err *err, const char *why)
{
    return poet_fail(err, POET_ERR_INVALID, "patch: %s; nothing changed", why);
}

/* The header's fields against this device, and where the sections lie. */
static poet_status locate(const poet_dev *d, const uint8_t *p, size_t len, patch_view *v, poet_err *err)
{
    memset(v, 0, sizeof *v);
    v->p = p;
    if (len < PATCH_HEADER_BYTES + 4 || memcmp(p, POET_PATCH_MAGIC, 8) != 0) return refuse(err, "not a poet patch");
    poet_dev_patch_info *in = &v->info;
    in->version = (uint32_t)le_get(p + PATCH_VERSION_AT, 4);
    if (in->version != POET_PATCH_VERSION)
        return poet_fail(err, POET_ERR_UNSUPPORTED, "patch: format %u; this poet reads format %u; nothing changed",
                         (unsigned)in->version, (unsigned)POET_PATCH_VERSION);
    if (le_get(p + PATCH_LENGTH_AT, 8) != len) return refuse(err, "its length is not what its header says (truncated?)");
    if (crc32_update(0, p, len - 4) != le_get(p + len - 4, 4)) return refuse(err, "checksum mismatch (corrupted)");
    if (le_get(p + PATCH_GRAPH_AT, 4) != d->h->graph_hash) return refuse(err, "made for another model");
    in->round = (uint32_t)le_get(p + PATCH_ROUND_AT, 4);
    in->rest = (poet_patch_rest)p[PATCH_REST_AT];
    in->bitmap = p[PATCH_BITMAP_AT] == 1;
    in->seed = le_get(p + PATCH_SEED_AT, 8);
    in->weights = le_get(p + PATCH_WEIGHTS_AT, 8);
    in->changed = le_get(p + PATCH_CHANGED_AT, 8);
    in->state = le_get(p + PATCH_STATE_AT, 4);
    v->index_bits = p[PATCH_INDEX_BITS_AT];
    v->layers = (uint32_t)le_get(p + PATCH_LAYERS_AT, 4);
    uint64_t params = le_get(p + PATCH_PARAMS_AT, 8);
    if (params != d->h->n_params || in->weights != poet_dev_update_weights(d, NULL) || in->state != d->h->n_state)
        return refuse(err, "its parameter counts differ from this model's");
    in->dense = params - in->weights;
    if (p[PATCH_BITMAP_AT] > 1 || p[PATCH_ZERO_AT] || in->rest > POET_PATCH_REST_ZERO || in->changed > in->weights ||
        v->index_bits != (in->bitmap ? 0 : patch_index_bits(in->weights)) ||
        v->layers != (in->rest == POET_PATCH_REST_INIT ? knode_weight_layers(d->nodes, d->h->n_forward) : 0) ||
        (in->rest != POET_PATCH_REST_INIT && in->seed))
        return refuse(err, "a header field is out of range");
    uint64_t at = PATCH_HEADER_BYTES;
    v->bounds = p + at, at += 8ull * v->layers;
    v->positions = p + at, at += patch_positions_bytes(in->bitmap, in->weights, in->changed, v->index_bits);
    v->values = p + at, at += 4 * in->changed;
    v->dense = p + at, at += 4 * in->dense;
    v->state = p + at, at += 4 * in->state;
    if (at + 4 != len) return refuse(err, "its sections do not add up to its length");
    for (uint32_t i = 0; i < v->layers; i++) {
        double b = f64_at(v->bounds, i);
        if (!(b > 0 && b <= 1)) return refuse(err, "an initialization bound is out of range");
    }
    return POET_OK;
}

/* Positions: exactly `changed` of them, ascending, below `weights`, with
 * the padding bits zero, so that one set of weights has one patch. */
static poet_status check_positions(const patch_view *v, poet_err *err)
{
    const poet_dev_patch_info *in = &v->info;
    uint64_t nbits = in->bitmap ? in->weights : in->changed * v->index_bits, bytes = (nbits + 7) / 8;
    if (nbits % 8 && v->positions[bytes - 1] >> (nbits % 8)) return refuse(err, "stray bits after the positions");
    if (in->bitmap) {
        uint64_t ones = 0;
        for (uint64_t i = 0; i < bytes; i++)
            for (uint8_t b = v->positions[i]; b; b &= (uint8_t)(b - 1)) ones++;
        return ones == in->changed ? POET_OK : refuse(err, "the bitmap sets a different number of weights than it says");
    }
    uint64_t prev = 0;
    for (uint64_t i = 0; i < in->changed; i++) {
        uint64_t at = bits_at(v->positions, i * v->index_bits, v->index_bits);
        if (at >= in->weights || (i && at <= prev)) return refuse(err, "its positions are not ascending weight indices");
        prev = at;
    }
    return POET_OK;
}

/* Where the next changed weight is, by walking the positions in order. */
typedef struct cursor {
    uint64_t k;    /* changed weights passed */
    uint64_t next; /* index list: the next position */
} cursor;

static bool is_changed(const patch_view *v, cursor *c, uint64_t w)
{
    if (v->info.bitmap) return v->positions[w / 8] >> (w % 8) & 1;
    if (c->k < v->info.changed && c->next == w) {
        c->k++;
        c->next = c->k < v->info.changed ? bits_at(v->positions, c->k * v->index_bits, v->index_bits) : 0;
        return true;
    }
    return false;
}

/* Where parameter i of node k is read and written (NULL: a home in flash). */
static void param_of(const poet_dev *d, const knode *k, uint64_t i, const float **read, float **write)
{
    uint64_t at, w;
    knode_part(k, 0, &at, &w);
    int part = i >= w;
    uint64_t j = part ? i - w : i;
    *read = dev_part(d, k, part) + j;
    *write = k->home[part] == KHOME_FLASH ? NULL : dev_part_ram(d, k, part) + j;
}

/* Every weight the patch makes, in order, then the buffers it sends:
 * hashed, and the weights written when `write`. The first node whose
 * parameters in flash the patch would change (-1: none) is *in_flash. */
static void walk(const poet_dev *d, const patch_view *v, bool write, uint8_t digest[32], int *in_flash)
{
    const poet_dev_patch_info *in = &v->info;
    sha256_ctx h;
    sha256_init(&h);
    cursor c = {0, in->bitmap || !in->changed ? 0 : bits_at(v->positions, 0, v->index_bits)};
    uint64_t w = 0, value = 0, dense = 0;
    uint32_t layer = 0;
    *in_flash = -1;
    for (uint32_t n = 0; n < d->h->n_forward; n++) {
        const knode *k = &d->nodes[n];
        uint64_t nw = knode_weights(k), rng = kernel_init_stream(in->seed, (int)n);
        double bound = in->rest == POET_PATCH_REST_INIT && nw ? f64_at(v->bounds, layer++) : 0.0;
        for (uint64_t i = 0; i < k->params; i++) {
            const float *base;
            float *to, x;
            param_of(d, k, i, &base, &to);
            if (i >= nw)
                x = f32_at(v->dense, dense++);
            else {
                float init = bound > 0 ? kernel_init_next(&rng, bound) : 0.0f; /* the stream runs on regardless */
                x = is_changed(v, &c, w++) ? f32_at(v->values, value++)
                    : in->rest == POET_PATCH_REST_BASE ? *base
                    : in->rest == POET_PATCH_REST_INIT ? init
                                                       : 0.0f;
            }
            sha256_update_floats(&h, &x, 1);
            if (!to && *in_flash < 0 && memcmp(&x, base, 4)) *in_flash = (int)n;
            if (write && to) *to = x;
        }
    }
    for (uint64_t i = 0; i < in->state; i++) sha256_update(&h, v->state + 4 * i, 4); /* little-endian already */
    sha256_final(&h, digest);
}

static poet_status check(const poet_dev *d, const void *patch, size_t len, patch_view *v, poet_err *err)
{
    poet_status st = locate(d, patch, len, v, err);
    if (!st) st = check_positions(v, err);
    if (st) return st;
    uint8_t digest[32];
    int in_flash;
    dev_weights_digest(d, digest);
    if (memcmp(digest, v->p + PATCH_BASE_AT, 32) != 0)
        return refuse(err, "made for other weights than this device holds (a missed or repeated round?)");
    walk(d, v, false, digest, &in_flash);
    if (memcmp(digest, v->p + PATCH_RESULT_AT, 32) != 0)
        return refuse(err, "it does not give the weights and buffers it promises");
    if (in_flash >= 0)
        return poet_fail(err, POET_ERR_INVALID, "patch: it changes the frozen parameters of node %d, which this image "
                                                "reads from flash; nothing changed", in_flash);
    return POET_OK;
}

poet_status poet_dev_patch_check(const poet_dev *d, const void *patch, size_t len, poet_dev_patch_info *info,
                                 poet_err *err)
{
    patch_view v;
    poet_status st = check(d, patch, len, &v, err);
    if (!st && info) *info = v.info;
    return st;
}

poet_status poet_dev_patch_apply(poet_dev *d, const void *patch, size_t len, poet_err *err)
{
    patch_view v;
    poet_status st = check(d, patch, len, &v, err);
    if (st) return st;
    uint8_t digest[32];
    int in_flash;
    walk(d, &v, true, digest, &in_flash);
    for (uint64_t i = 0; i < v.info.state; i++) d->state[i] = f32_at(v.state, i);
    dev_forget_optimizer(d);
    return POET_OK;
}
