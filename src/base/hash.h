/* Internal: SHA-256 (FIPS 180-4), CRC-32 (IEEE 802.3, as zlib's crc32),
 * FNV-1a, SplitMix64 and little-endian fields, freestanding, so that a device hashes its weights and checks its image
 * with the same code as the host. */
#ifndef POET_SRC_BASE_HASH_H
#define POET_SRC_BASE_HASH_H

#include <stddef.h>
#include <stdint.h>

/* The SHA-256 of data as 64 lowercase hex digits and a NUL. */
void sha256_hex(const void *data, size_t len, char hex[65]);
void sha256_digest_hex(const uint8_t digest[32], char hex[65]);

/* ... and of data that arrives in pieces (a patch's weights, computed one
 * at a time). */
typedef struct sha256_ctx {
    uint32_t h[8];
    uint64_t bytes;
    uint8_t block[64];
} sha256_ctx;
void sha256_init(sha256_ctx *c);
void sha256_update(sha256_ctx *c, const void *data, size_t len);
void sha256_final(sha256_ctx *c, uint8_t digest[32]);
/* Floats as little-endian bytes, whatever the platform's order. */
void sha256_update_floats(sha256_ctx *c, const float *f, uint64_t n);
/* The SHA-256 of a's floats, then b's (b may be NULL with nb 0). */
void sha256_floats(const float *a, uint64_t na, const float *b, uint64_t nb, uint8_t digest[32]);

/* crc = crc32_update(0, data, len) equals zlib's crc32(0, data, len). */
uint32_t crc32_update(uint32_t crc, const void *data, size_t len);

/* Little-endian fields of `bytes` bytes (at most 8), as images, states and
 * checkpoints store their counts and checksums. */
static inline void le_put(unsigned char *p, uint64_t v, int bytes)
{
    for (int i = 0; i < bytes; i++) p[i] = (unsigned char)(v >> (8 * i));
}

static inline uint64_t le_get(const unsigned char *p, int bytes)
{
    uint64_t v = 0;
    for (int i = 0; i < bytes; i++) v |= (uint64_t)p[i] << (8 * i);
    return v;
}

/* FNV-1a, 32 bits, one byte at a time from h (FNV1A_START for a new hash):
 * the graph hash schedules carry, and the ONNX importer's name index. */
#define FNV1A_START 2166136261u
static inline uint32_t fnv1a_byte(uint32_t h, uint8_t byte) { return (h ^ byte) * 16777619u; }

/* SplitMix64 (Steele, Lea, Flood 2014): weights, dropout masks and shuffles
 * follow from a seed and an index. */
static inline uint64_t mix64(uint64_t z)
{
    z += 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

#endif
