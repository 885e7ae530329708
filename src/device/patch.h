/* Internal: the patch format of partial updates (docs/update.md,
 * "The patch format"), written by the host (src/runtime/patch_write.c) and read by the
 * device (src/device/patch.c). Every field is little-endian and read byte by
 * byte, so a patch may sit anywhere in RAM or flash. Freestanding. */
#ifndef POET_SRC_DEVICE_PATCH_H
#define POET_SRC_DEVICE_PATCH_H

#include <stdint.h>

#define POET_PATCH_MAGIC "POETPAT" /* and a NUL: 8 bytes */
#define POET_PATCH_VERSION 1u

/* Header fields: their offsets, then the header's size. */
enum {
    PATCH_MAGIC_AT = 0,
    PATCH_VERSION_AT = 8,     /* u32 */
    PATCH_GRAPH_AT = 12,      /* u32: the device image's graph hash */
    PATCH_LENGTH_AT = 16,     /* u64: the whole patch, its CRC-32 included */
    PATCH_ROUND_AT = 24,      /* u32 */
    PATCH_REST_AT = 28,       /* u8: poet_patch_rest */
    PATCH_BITMAP_AT = 29,     /* u8: 1 bitmap, 0 index list */
    PATCH_INDEX_BITS_AT = 30, /* u8: bits per index (0 with a bitmap) */
    PATCH_ZERO_AT = 31,       /* u8: 0 */
    PATCH_SEED_AT = 32,       /* u64 */
    PATCH_PARAMS_AT = 40,     /* u64: trainable floats of the model */
    PATCH_WEIGHTS_AT = 48,    /* u64: of them, the weights chosen among */
    PATCH_CHANGED_AT = 56,    /* u64: weights the patch sets */
    PATCH_LAYERS_AT = 64,     /* u32: initialization bounds that follow (rest = init) */
    PATCH_STATE_AT = 68,      /* u32: buffer floats that follow */
    PATCH_BASE_AT = 72,       /* 32 bytes: SHA-256 of the weights it applies to */
    PATCH_RESULT_AT = 104,    /* 32 bytes: SHA-256 of the weights it makes, then of the buffers */
    PATCH_HEADER_BYTES = 136
};
/* Then: f64 bounds (one per layer with weights, rest = init), the
 * positions (a bitmap of `weights` bits, or `changed` ascending indices of
 * index_bits bits each, both packed least significant bit first), f32
 * values of the changed weights, f32 dense parameters (every parameter that
 * is not a weight, in order), f32 buffers, and the CRC-32 of all before. */

/* Bits an index below n needs (at least 1). */
static inline unsigned patch_index_bits(uint64_t n)
{
    unsigned b = 1;
    while (b < 64 && (n - 1) >> b) b++;
    return b;
}

static inline uint64_t patch_positions_bytes(int bitmap, uint64_t weights, uint64_t changed, unsigned bits)
{
    return bitmap ? (weights + 7) / 8 : (changed * bits + 7) / 8;
}

#endif
