/* The model on storage (poet/device.h): two slots, each a body (weights,
 * then buffers) and a header written after it, so that power lost while
 * saving leaves the slot that was current whole. The newest slot whose
 * header and body check out is the model. Freestanding. */
#include <string.h>

#include "dev.h"
#include "../base/hash.h"

#define STORE_MAGIC "POETMDL" /* and a NUL: 8 bytes */

enum {
    STORE_GRAPH_AT = 8,      /* u32: the image's graph hash */
    STORE_BODY_CRC_AT = 12,  /* u32: CRC-32 of the body */
    STORE_SEQUENCE_AT = 16,  /* u64: 1 for the first save, then one more each */
    STORE_BODY_BYTES_AT = 24, /* u32 */
    STORE_HEADER_CRC_AT = 28, /* u32: CRC-32 of the 28 bytes before */
    STORE_HEADER_BYTES = 32,
    STORE_CHUNK = 256        /* bytes read at a time to check a body */
};

static uint64_t body_bytes(const poet_dev *d) { return 4 * (d->h->n_params + d->h->n_state); }

static uint64_t slot_bytes(const poet_dev *d) { return STORE_HEADER_BYTES + (body_bytes(d) + 7) / 8 * 8; }

uint64_t poet_dev_store_bytes(const poet_dev *d) { return 2 * slot_bytes(d); }

static poet_status transfer(const poet_dev_storage *st, bool write, uint64_t at, void *ram, size_t bytes, poet_err *err)
{
    long ticket;
    poet_status s = st->start(st->ctx, write, at, ram, bytes, &ticket, err);
    return s ? s : st->wait(st->ctx, ticket, err);
}

/* A slot's sequence number when its header and body check out, else 0. */
static poet_status slot_sequence(const poet_dev *d, const poet_dev_storage *st, uint64_t at, uint64_t *seq,
                                 poet_err *err)
{
    uint8_t h[STORE_HEADER_BYTES], chunk[STORE_CHUNK];
    *seq = 0;
    poet_status s = transfer(st, false, at, h, sizeof h, err);
    if (s) return s;
    if (memcmp(h, STORE_MAGIC, 8) != 0 || crc32_update(0, h, STORE_HEADER_CRC_AT) != le_get(h + STORE_HEADER_CRC_AT, 4) ||
        le_get(h + STORE_GRAPH_AT, 4) != d->h->graph_hash || le_get(h + STORE_BODY_BYTES_AT, 4) != body_bytes(d))
        return POET_OK;
    uint32_t crc = 0;
    for (uint64_t off = 0, n = body_bytes(d); off < n; off += STORE_CHUNK) {
        size_t k = n - off < STORE_CHUNK ? (size_t)(n - off) : STORE_CHUNK;
        if ((s = transfer(st, false, at + STORE_HEADER_BYTES + off, chunk, k, err))) return s;
        crc = crc32_update(crc, chunk, k);
    }
    if (crc == le_get(h + STORE_BODY_CRC_AT, 4)) *seq = le_get(h + STORE_SEQUENCE_AT, 8);
    return POET_OK;
}

static poet_status check_room(const poet_dev *d, const poet_dev_storage *st, uint64_t at, poet_err *err)
{
    if (!st || st->version != POET_DEV_STORAGE_VERSION)
        return poet_fail(err, POET_ERR_INVALID, "model store: needs a storage back-end of version %d",
                         POET_DEV_STORAGE_VERSION);
    if (at % 8 || at > st->capacity_bytes || st->capacity_bytes - at < poet_dev_store_bytes(d))
        return poet_fail(err, POET_ERR_LIMIT, "model store: %llu bytes at offset %llu do not fit the storage's %llu",
                         (unsigned long long)poet_dev_store_bytes(d), (unsigned long long)at,
                         (unsigned long long)st->capacity_bytes);
    return POET_OK;
}

/* Both slots' sequence numbers. */
static poet_status sequences(const poet_dev *d, const poet_dev_storage *st, uint64_t at, uint64_t seq[2],
                             poet_err *err)
{
    poet_status s = check_room(d, st, at, err);
    if (!s) s = slot_sequence(d, st, at, &seq[0], err);
    if (!s) s = slot_sequence(d, st, at + slot_bytes(d), &seq[1], err);
    return s;
}

/* A saved model whose parameters in flash differ from the image's cannot
 * be loaded: refused before anything changes. */
static poet_status check_flash_parts(const poet_dev *d, const poet_dev_storage *st, uint64_t body, poet_err *err)
{
    uint8_t chunk[STORE_CHUNK];
    DEV_FOR_EACH_PART(d, v, part, p, count) {
        if (d->nodes[v].home[part] != KHOME_FLASH) continue;
        const uint8_t *flash = (const uint8_t *)dev_part(d, &d->nodes[v], part);
        for (uint64_t off = 0; off < 4 * count; off += STORE_CHUNK) {
            size_t k = 4 * count - off < STORE_CHUNK ? (size_t)(4 * count - off) : STORE_CHUNK;
            poet_status s = transfer(st, false, body + 4 * p + off, chunk, k, err);
            if (s) return s;
            if (memcmp(chunk, flash + off, k))
                return poet_fail(err, POET_ERR_INVALID, "model store: the saved model changes the frozen parameters "
                                                        "of node %u, which this image reads from flash", (unsigned)v);
        }
    }
    return POET_OK;
}

poet_status poet_dev_store_save(poet_dev *d, const poet_dev_storage *st, uint64_t at, poet_err *err)
{
    uint64_t seq[2];
    poet_status s = sequences(d, st, at, seq, err);
    if (s) return s;
    int target = seq[0] > seq[1] ? 1 : 0; /* never the current slot */
    uint64_t slot = at + (uint64_t)target * slot_bytes(d), np = 4 * d->h->n_params, ns = 4 * d->h->n_state;
    uint32_t crc = 0;
    DEV_FOR_EACH_PART(d, v, part, p, count) crc = crc32_update(crc, dev_part(d, &d->nodes[v], part), 4 * count);
    crc = crc32_update(crc, d->state, ns);
    uint8_t h[STORE_HEADER_BYTES];
    memcpy(h, STORE_MAGIC, 8);
    le_put(h + STORE_GRAPH_AT, d->h->graph_hash, 4);
    le_put(h + STORE_BODY_CRC_AT, crc, 4);
    le_put(h + STORE_SEQUENCE_AT, (seq[0] > seq[1] ? seq[0] : seq[1]) + 1, 8);
    le_put(h + STORE_BODY_BYTES_AT, np + ns, 4);
    le_put(h + STORE_HEADER_CRC_AT, crc32_update(0, h, STORE_HEADER_CRC_AT), 4);
    /* the body, durable, before the header that makes it current */
    DEV_FOR_EACH_PART(d, v, part, p, count) /* the parameter vector, wherever its parts live */
        if (!s) /* a write only reads the memory it is handed */
            s = transfer(st, true, slot + STORE_HEADER_BYTES + 4 * p, (void *)(uintptr_t)dev_part(d, &d->nodes[v], part),
                             (size_t)(4 * count), err);
    if (!s && ns) s = transfer(st, true, slot + STORE_HEADER_BYTES + np, d->state, (size_t)ns, err);
    if (!s) s = st->sync(st->ctx, err);
    if (!s) s = transfer(st, true, slot, h, sizeof h, err);
    if (!s) s = st->sync(st->ctx, err);
    return s;
}

poet_status poet_dev_store_load(poet_dev *d, const poet_dev_storage *st, uint64_t at, poet_err *err)
{
    uint64_t seq[2];
    poet_status s = sequences(d, st, at, seq, err);
    if (s) return s;
    if (!seq[0] && !seq[1]) return poet_fail(err, POET_ERR_NOT_FOUND, "model store: no saved model of this graph");
    uint64_t slot = at + (seq[1] > seq[0] ? slot_bytes(d) : 0) + STORE_HEADER_BYTES, np = 4 * d->h->n_params;
    if ((s = check_flash_parts(d, st, slot, err))) return s;
    DEV_FOR_EACH_PART(d, v, part, p, count)
        if (!s && d->nodes[v].home[part] != KHOME_FLASH)
            s = transfer(st, false, slot + 4 * p, dev_part_ram(d, &d->nodes[v], part), (size_t)(4 * count), err);
    if (!s && d->h->n_state) s = transfer(st, false, slot + np, d->state, (size_t)(4 * d->h->n_state), err);
    dev_forget_optimizer(d);
    return s;
}
