/* The SD card and memory back-ends (see storage.h). */
#include "storage.h"

#include <string.h>

#include "semihost.h"

/* ---- SD card, over semihosting ---- */

static poet_status sd_do(sd_card *c, const sd_job *j, poet_err *err)
{
    bool fault = j->write ? ++c->writes == c->fail_write_at : ++c->reads == c->fail_read_at;
    if (fault)
        return poet_fail(err, POET_ERR_IO, "sd card: %s %ld failed (injected fault)", j->write ? "write" : "read",
                         j->write ? c->writes : c->reads);
    if (sh_seek(c->handle, j->offset) != 0 ||
        (j->write ? sh_write(c->handle, j->ram, j->bytes) : sh_read(c->handle, j->ram, j->bytes)) != 0)
        return poet_fail(err, POET_ERR_IO, "sd card: %s of %lu bytes at %lu failed", j->write ? "write" : "read",
                         (unsigned long)j->bytes, (unsigned long)j->offset);
    return POET_OK;
}

/* Completes the oldest queued transfer; the first failure is kept. */
static void sd_complete_one(sd_card *c)
{
    const sd_job *j = &c->queue[c->completed % SD_QUEUE];
    poet_err e = {0};
    if (!c->failed && sd_do(c, j, &e)) {
        c->failed = true;
        c->first = e;
    }
    c->completed++;
}

static poet_status sd_start(void *ctx, bool write, uint64_t offset, void *ram, size_t bytes, long *ticket, poet_err *err)
{
    sd_card *c = ctx;
    (void)err;
    if (c->started - c->completed == SD_QUEUE) sd_complete_one(c); /* the queue is full */
    c->queue[c->started % SD_QUEUE] = (sd_job){write, (uint32_t)offset, ram, (uint32_t)bytes};
    *ticket = c->started++;
    return POET_OK;
}

static poet_status sd_wait(void *ctx, long ticket, poet_err *err)
{
    sd_card *c = ctx;
    long until = ticket < 0 ? c->started : ticket + 1;
    while (c->completed < until) sd_complete_one(c);
    if (!c->failed) return POET_OK;
    if (err) *err = c->first;
    return c->first.status;
}

static poet_status sd_sync(void *ctx, poet_err *err)
{
    (void)ctx, (void)err; /* semihosting writes reach the host file at once */
    return POET_OK;
}

static void sd_reset(void *ctx)
{
    sd_card *c = ctx;
    c->completed = c->started;
    c->failed = false;
}

poet_status sd_card_open(sd_card *c, const char *path, uint64_t capacity, bool keep, poet_dev_storage *out,
                         poet_err *err)
{
    c->handle = keep ? sh_open(path, SH_RW_BINARY) : -1;
    c->created = c->handle < 0;
    if (c->handle < 0) c->handle = sh_open(path, SH_UPDATE_BINARY);
    if (c->handle < 0) return poet_fail(err, POET_ERR_IO, "sd card: cannot open '%s'", path);
    static const uint8_t zeros[256];
    for (uint64_t at = 0; keep && c->created && at < capacity; at += sizeof zeros) /* a card reads everywhere */
        if (sh_write(c->handle, zeros, capacity - at < sizeof zeros ? (size_t)(capacity - at) : sizeof zeros))
            return poet_fail(err, POET_ERR_IO, "sd card: cannot write '%s'", path);
    *out = (poet_dev_storage){POET_DEV_STORAGE_VERSION, c, capacity, sd_start, sd_wait, sd_sync, sd_reset};
    return POET_OK;
}

/* ---- memory ---- */

static poet_status ram_start(void *ctx, bool write, uint64_t offset, void *ram, size_t bytes, long *ticket,
                             poet_err *err)
{
    ram_store *r = ctx;
    (void)err;
    if (write)
        memcpy(r->base + offset, ram, bytes);
    else
        memcpy(ram, r->base + offset, bytes);
    *ticket = r->done++;
    return POET_OK;
}

static poet_status ram_wait(void *ctx, long ticket, poet_err *err)
{
    (void)ctx, (void)ticket, (void)err;
    return POET_OK;
}

static void ram_reset(void *ctx) { (void)ctx; }

void ram_store_open(ram_store *r, void *base, uint64_t capacity, poet_dev_storage *out)
{
    r->base = base;
    r->done = 0;
    *out = (poet_dev_storage){POET_DEV_STORAGE_VERSION, r, capacity, ram_start, ram_wait, sd_sync, ram_reset};
}
