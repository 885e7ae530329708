/* The libFuzzer target of fuzz_parsers.c with a structure-aware mutator:
 * an input that is a device image, a checkpoint, a binary schedule or a
 * patch is mutated one integer field at a time, to a boundary value or a
 * random one, with its CRC made right (fields.h), so that the search
 * spends its time behind the checksum; other inputs mutate as libFuzzer's
 * own. scripts/fuzz.sh runs it on the corpus for its share of the time. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "exercise.h"
#include "fields.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
size_t LLVMFuzzerMutate(uint8_t *data, size_t size, size_t max_size);
size_t LLVMFuzzerCustomMutator(uint8_t *data, size_t size, size_t max_size, unsigned int seed);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    exercise_parsers(data, size);
    return 0;
}

static uint64_t next(uint64_t *s)
{
    *s = *s * 6364136223846793005ull + 1442695040888963407ull;
    return *s >> 11 ^ *s << 7;
}

size_t LLVMFuzzerCustomMutator(uint8_t *data, size_t size, size_t max_size, unsigned int seed)
{
    field_kind k = fields_kind(data, size);
    uint64_t s = seed;
    size_t n = 0;
    field *fs = k ? fields_of(k, data, size, &n) : NULL;
    if (!n || next(&s) % 8 == 0) { /* now and then, or for other inputs, libFuzzer's own */
        free(fs);
        return LLVMFuzzerMutate(data, size, max_size);
    }
    const field *f = &fs[next(&s) % n];
    uint64_t vals[BOUNDARY_MAX], v;
    int nv = field_boundaries(f, field_get(data, size, f), vals);
    v = nv && next(&s) % 4 ? vals[next(&s) % (uint64_t)nv] : next(&s);
    size_t out_len;
    uint8_t *m = field_set(data, size, f, v, &out_len);
    free(fs);
    if (!m || out_len > max_size) {
        free(m);
        return LLVMFuzzerMutate(data, size, max_size);
    }
    memcpy(data, m, out_len);
    free(m);
    return out_len;
}
