/* Checkpoints: "POETCKPT", a version, where training stands, the engine's
 * state, and a CRC-32 of everything before it. Little-endian fields. */
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "poet/file.h"
#include "poet/runtime.h"
#include "../core/hash.h"

static const char MAGIC[8] = {'P', 'O', 'E', 'T', 'C', 'K', 'P', 'T'};
enum { CKPT_VERSION = 1, HEADER_BYTES = 8 + 4 + 4 + 8 * 5, MAX_STATE = 1 << 30 };

poet_status poet_checkpoint_parse(const uint8_t *data, size_t len, poet_checkpoint_meta *meta, size_t *state_len,
                                  poet_err *err)
{
    if (len < HEADER_BYTES + 4 || memcmp(data, MAGIC, sizeof MAGIC))
        return poet_fail(err, POET_ERR_PARSE, "not a poet checkpoint (too short or wrong magic)");
    if (le_get(data + 8, 4) != CKPT_VERSION)
        return poet_fail(err, POET_ERR_UNSUPPORTED, "checkpoint version %u; this poet reads version %d",
                         (unsigned)le_get(data + 8, 4), CKPT_VERSION);
    uint64_t n = le_get(data + 48, 8);
    if (n > MAX_STATE || n != len - HEADER_BYTES - 4)
        return poet_fail(err, POET_ERR_PARSE, "checkpoint is truncated or has trailing bytes");
    if (crc32(0L, data, (uInt)(len - 4)) != le_get(data + len - 4, 4))
        return poet_fail(err, POET_ERR_PARSE, "checkpoint is corrupt (CRC mismatch)");
    poet_checkpoint_meta m = {(uint32_t)le_get(data + 12, 4), le_get(data + 16, 8), (long)(int64_t)le_get(data + 24, 8),
                              (long)(int64_t)le_get(data + 32, 8), (long)(int64_t)le_get(data + 40, 8)};
    if (m.step < 0 || m.epoch < 0 || m.batch_in_epoch < 0)
        return poet_fail(err, POET_ERR_PARSE, "checkpoint has a negative step, epoch or batch");
    *meta = m;
    *state_len = (size_t)n;
    return POET_OK;
}

poet_status poet_checkpoint_write(const char *path, const poet_engine *e, const poet_checkpoint_meta *meta,
                                  poet_err *err)
{
    size_t n = poet_engine_state_bytes(e), len = HEADER_BYTES + n + 4;
    unsigned char *buf = malloc(len);
    if (!buf) return poet_fail(err, POET_ERR_NOMEM, "out of memory writing checkpoint '%s'", path);
    memcpy(buf, MAGIC, sizeof MAGIC);
    le_put(buf + 8, CKPT_VERSION, 4);
    le_put(buf + 12, meta->graph_hash, 4);
    le_put(buf + 16, meta->seed, 8);
    le_put(buf + 24, (uint64_t)meta->step, 8);
    le_put(buf + 32, (uint64_t)meta->epoch, 8);
    le_put(buf + 40, (uint64_t)meta->batch_in_epoch, 8);
    le_put(buf + 48, n, 8);
    poet_engine_state_save(e, buf + HEADER_BYTES);
    le_put(buf + len - 4, crc32(0L, buf, (uInt)(len - 4)), 4);
    poet_status st = poet_write_file_atomic(path, buf, len, err);
    free(buf);
    return st;
}

poet_status poet_checkpoint_read(const char *path, poet_engine *e, poet_checkpoint_meta *meta, poet_err *err)
{
    char *data = NULL;
    size_t len = 0, n = 0;
    poet_checkpoint_meta m;
    poet_status st = poet_read_file(path, &data, &len, err);
    if (!st) st = poet_checkpoint_parse((const uint8_t *)data, len, &m, &n, err);
    if (!st && m.graph_hash != meta->graph_hash)
        st = poet_fail(err, POET_ERR_INVALID, "checkpoint '%s' was written for another model or batch size", path);
    if (!st && m.seed != meta->seed)
        st = poet_fail(err, POET_ERR_INVALID, "checkpoint '%s' was written with seed %llu, not %llu", path,
                       (unsigned long long)m.seed, (unsigned long long)meta->seed);
    if (!st) st = poet_engine_state_load(e, data + HEADER_BYTES, n, err);
    if (!st) *meta = m;
    free(data);
    return st;
}
