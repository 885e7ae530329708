/* Checkpoints: "POETCKPT", a version, where training stands, what it
 * trains with, the engine's state, and a CRC-32 of everything before it.
 * Little-endian fields. */
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "poet/file.h"
#include "poet/runtime.h"
#include "../base/checked.h"
#include "../base/hash.h"

static const char MAGIC[8] = {'P', 'O', 'E', 'T', 'C', 'K', 'P', 'T'};
/* Version 2 records the data set's size and the optimizer, which a resumed
 * run must share: version 1 let an SGD run go on under Adam. */
enum { CKPT_VERSION = 2, MAX_STATE = 1 << 30 };
enum { /* header fields */
    AT_VERSION = 8, AT_GRAPH = 12, AT_SEED = 16, AT_STEP = 24, AT_EPOCH = 32, AT_BATCH = 40, AT_STATE_LEN = 48,
    AT_EXAMPLES = 56, AT_OPT_KIND = 64, AT_OPT_REALS = 68, N_OPT_REALS = 6, HEADER_BYTES = AT_OPT_REALS + 4 * N_OPT_REALS
};

/* The optimizer's hyperparameters in the order the header keeps them. */
static const char *const REAL_NAMES[N_OPT_REALS] = {"lr", "momentum", "beta1", "beta2", "eps", "weight_decay"};

static void reals_of(const poet_optimizer *o, float r[N_OPT_REALS])
{
    r[0] = o->lr, r[1] = o->momentum, r[2] = o->beta1, r[3] = o->beta2, r[4] = o->eps, r[5] = o->weight_decay;
}

static float real_at(const uint8_t *p)
{
    uint32_t u = (uint32_t)le_get(p, 4);
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

static void put_real(uint8_t *p, float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    le_put(p, u, 4);
}

poet_status poet_checkpoint_parse(const uint8_t *data, size_t len, poet_checkpoint_meta *meta, size_t *state_len,
                                  poet_err *err)
{
    if (len < HEADER_BYTES + 4 || memcmp(data, MAGIC, sizeof MAGIC))
        return poet_fail(err, POET_ERR_PARSE, "not a poet checkpoint (too short or wrong magic)");
    if (le_get(data + AT_VERSION, 4) != CKPT_VERSION)
        return poet_fail(err, POET_ERR_UNSUPPORTED, "checkpoint version %u; this poet reads version %d",
                         (unsigned)le_get(data + AT_VERSION, 4), CKPT_VERSION);
    uint64_t n = le_get(data + AT_STATE_LEN, 8), whole;
    if (n > MAX_STATE || !ck_add(n, HEADER_BYTES + 4, &whole) || whole != len)
        return poet_fail(err, POET_ERR_PARSE, "checkpoint is truncated or has trailing bytes");
    if (crc32(0L, data, (uInt)(len - 4)) != le_get(data + len - 4, 4))
        return poet_fail(err, POET_ERR_PARSE, "checkpoint is corrupt (CRC mismatch)");
    poet_checkpoint_meta m = {(uint32_t)le_get(data + AT_GRAPH, 4), le_get(data + AT_SEED, 8),
                              (long)(int64_t)le_get(data + AT_STEP, 8), (long)(int64_t)le_get(data + AT_EPOCH, 8),
                              (long)(int64_t)le_get(data + AT_BATCH, 8), le_get(data + AT_EXAMPLES, 8), {0}};
    if (m.step < 0 || m.epoch < 0 || m.batch_in_epoch < 0)
        return poet_fail(err, POET_ERR_PARSE, "checkpoint has a negative step, epoch or batch");
    uint64_t kind = le_get(data + AT_OPT_KIND, 4);
    if (kind > POET_OPT_ADAM) return poet_fail(err, POET_ERR_PARSE, "checkpoint names an unknown optimizer (%u)", (unsigned)kind);
    float r[N_OPT_REALS];
    for (int k = 0; k < N_OPT_REALS; k++) r[k] = real_at(data + AT_OPT_REALS + 4 * k);
    m.optimizer = (poet_optimizer){(poet_optimizer_kind)kind, r[0], r[1], r[2], r[3], r[4], r[5]};
    *meta = m;
    *state_len = (size_t)n;
    return POET_OK;
}

poet_status poet_checkpoint_write(const char *path, const poet_engine *e, const poet_checkpoint_meta *meta,
                                  poet_err *err)
{
    size_t n = poet_dev_state_bytes(poet_engine_device(e)), len = HEADER_BYTES + n + 4;
    unsigned char *buf = malloc(len);
    if (!buf) return poet_fail(err, POET_ERR_NOMEM, "out of memory writing checkpoint '%s'", path);
    poet_optimizer o = poet_engine_optimizer(e);
    float r[N_OPT_REALS];
    reals_of(&o, r);
    memcpy(buf, MAGIC, sizeof MAGIC);
    le_put(buf + AT_VERSION, CKPT_VERSION, 4);
    le_put(buf + AT_GRAPH, meta->graph_hash, 4);
    le_put(buf + AT_SEED, meta->seed, 8);
    le_put(buf + AT_STEP, (uint64_t)meta->step, 8);
    le_put(buf + AT_EPOCH, (uint64_t)meta->epoch, 8);
    le_put(buf + AT_BATCH, (uint64_t)meta->batch_in_epoch, 8);
    le_put(buf + AT_STATE_LEN, n, 8);
    le_put(buf + AT_EXAMPLES, meta->train_examples, 8);
    le_put(buf + AT_OPT_KIND, (uint64_t)o.kind, 4);
    for (int k = 0; k < N_OPT_REALS; k++) put_real(buf + AT_OPT_REALS + 4 * k, r[k]);
    poet_dev_state_save(poet_engine_device(e), buf + HEADER_BYTES);
    le_put(buf + len - 4, crc32(0L, buf, (uInt)(len - 4)), 4);
    poet_status st = poet_write_file_atomic(path, buf, len, err);
    free(buf);
    return st;
}

/* What of the checkpoint m differs from the run it would resume, or OK. */
static poet_status check_against(const char *path, const poet_checkpoint_meta *m, const poet_checkpoint_meta *run,
                                 const poet_engine *e, poet_err *err)
{
    static const char *const KIND[] = {"sgd", "adam"};
    if (m->graph_hash != run->graph_hash)
        return poet_fail(err, POET_ERR_INVALID, "checkpoint '%s' was written for another model or batch size", path);
    if (m->seed != run->seed)
        return poet_fail(err, POET_ERR_INVALID, "checkpoint '%s' was written with seed %llu, not %llu", path,
                         (unsigned long long)m->seed, (unsigned long long)run->seed);
    if (m->train_examples != run->train_examples)
        return poet_fail(err, POET_ERR_INVALID,
                         "checkpoint '%s' was written for a data set of %llu training examples, not %llu", path,
                         (unsigned long long)m->train_examples, (unsigned long long)run->train_examples);
    poet_optimizer o = poet_engine_optimizer(e);
    if (m->optimizer.kind != o.kind)
        return poet_fail(err, POET_ERR_INVALID, "checkpoint '%s' was written with optimizer %s, not %s", path,
                         KIND[m->optimizer.kind], KIND[o.kind]);
    float want[N_OPT_REALS], have[N_OPT_REALS];
    reals_of(&m->optimizer, have);
    reals_of(&o, want);
    for (int k = 0; k < N_OPT_REALS; k++)
        if (memcmp(&have[k], &want[k], sizeof(float)) != 0)
            return poet_fail(err, POET_ERR_INVALID, "checkpoint '%s' was written with %s %g, not %g", path,
                             REAL_NAMES[k], (double)have[k], (double)want[k]);
    return POET_OK;
}

poet_status poet_checkpoint_read(const char *path, poet_engine *e, poet_checkpoint_meta *meta, poet_err *err)
{
    char *data = NULL;
    size_t len = 0, n = 0;
    poet_checkpoint_meta m;
    poet_status st = poet_read_file(path, &data, &len, err);
    if (!st) st = poet_checkpoint_parse((const uint8_t *)data, len, &m, &n, err);
    if (!st) st = check_against(path, &m, meta, e, err);
    /* the state ends with the engine's step count, which the header's must equal */
    if (!st && (n < 8 || le_get((const uint8_t *)data + HEADER_BYTES + n - 8, 8) != (uint64_t)m.step))
        st = poet_fail(err, POET_ERR_INVALID, "checkpoint '%s' is inconsistent: its state and its header count "
                                              "different steps", path);
    if (!st) st = poet_dev_state_load(poet_engine_device(e), data + HEADER_BYTES, n, err);
    if (!st) *meta = m;
    free(data);
    return st;
}
