/* Storage back-ends: a file standing in for flash, RAM for tests, and a
 * wrapper that fails the Nth call of a kind. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "poet/storage.h"

static poet_status out_of_range(uint64_t cap, uint64_t offset, size_t bytes, poet_err *err)
{
    if (offset > cap || bytes > cap - offset)
        return poet_fail(err, POET_ERR_INVALID, "storage: %zu bytes at offset %llu exceed its %llu bytes", bytes,
                         (unsigned long long)offset, (unsigned long long)cap);
    return POET_OK;
}

/* Every back-end here copies in start, so wait has nothing left to wait
 * for and reset nothing to forget; tickets count the starts. */
static poet_status done_already(void *ctx, long ticket, poet_err *err)
{
    (void)ctx, (void)ticket, (void)err;
    return POET_OK;
}

static void nothing_to_forget(void *ctx) { (void)ctx; }

static poet_storage storage_of(void *ctx, uint64_t capacity_bytes,
                               poet_status (*start)(void *, bool, uint64_t, void *, size_t, long *, poet_err *),
                               poet_status (*sync)(void *, poet_err *), void (*close)(void *))
{
    return (poet_storage){{POET_DEV_STORAGE_VERSION, ctx, capacity_bytes, start, done_already, sync, nothing_to_forget},
                          close};
}

/* ---- file ----
 * A storage file starts with poet's header and holds the slots after it.
 * The header is how a file poet made is told from one given by mistake (a
 * checkpoint, a data set): the first is reused, the second refused. The
 * slots' old content means nothing to a new run. */

static const char STORE_MAGIC[16] = "POET-STORAGE-v1";
enum { STORE_HEADER_BYTES = 4096 }; /* the slots start block-aligned */

typedef struct file_store {
    int fd;
    uint64_t cap;
    long started;
    char path[256];
} file_store;

static off_t slot_at(uint64_t offset) { return (off_t)(STORE_HEADER_BYTES + offset); }

static poet_status file_write(file_store *f, uint64_t offset, const void *src, size_t bytes, poet_err *err)
{
    poet_status st = out_of_range(f->cap, offset, bytes, err);
    for (size_t done = 0; !st && done < bytes;) {
        ssize_t n = pwrite(f->fd, (const char *)src + done, bytes - done, slot_at(offset + done));
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return poet_fail(err, POET_ERR_IO, "storage '%s': write failed: %s", f->path, strerror(errno));
        done += (size_t)n;
    }
    return st;
}

static poet_status file_read(file_store *f, uint64_t offset, void *dst, size_t bytes, poet_err *err)
{
    poet_status st = out_of_range(f->cap, offset, bytes, err);
    for (size_t done = 0; !st && done < bytes;) {
        ssize_t n = pread(f->fd, (char *)dst + done, bytes - done, slot_at(offset + done));
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) return poet_fail(err, POET_ERR_IO, "storage '%s': read failed: %s", f->path, strerror(errno));
        if (n == 0) return poet_fail(err, POET_ERR_IO, "storage '%s': read past its end", f->path);
        done += (size_t)n;
    }
    return st;
}

static poet_status file_start(void *ctx, bool write, uint64_t offset, void *ram, size_t bytes, long *ticket,
                              poet_err *err)
{
    file_store *f = ctx;
    *ticket = f->started++;
    return write ? file_write(f, offset, ram, bytes, err) : file_read(f, offset, ram, bytes, err);
}

static poet_status file_sync(void *ctx, poet_err *err)
{
    file_store *f = ctx;
    if (fdatasync(f->fd)) return poet_fail(err, POET_ERR_IO, "storage '%s': sync failed: %s", f->path, strerror(errno));
    return POET_OK;
}

static void file_close(void *ctx)
{
    file_store *f = ctx;
    close(f->fd);
    free(f);
}

/* Whether the open file is empty or poet's own. */
static poet_status check_ours(int fd, const char *path, poet_err *err)
{
    struct stat st;
    char head[sizeof STORE_MAGIC];
    if (fstat(fd, &st) != 0) return poet_fail(err, POET_ERR_IO, "storage '%s': %s", path, strerror(errno));
    if (!S_ISREG(st.st_mode)) return poet_fail(err, POET_ERR_IO, "storage '%s' is not a regular file", path);
    if (st.st_size == 0) return POET_OK;
    if (pread(fd, head, sizeof head, 0) == (ssize_t)sizeof head && memcmp(head, STORE_MAGIC, sizeof head) == 0)
        return POET_OK;
    return poet_fail(err, POET_ERR_INVALID, "storage '%s' holds data that is not poet's storage; poet does not "
                                            "overwrite it (give a new path, or remove the file)", path);
}

/* Sizes fd for capacity_bytes of slots and writes the header. */
static poet_status take_file(int fd, const char *path, uint64_t capacity_bytes, poet_storage *out, poet_err *err)
{
    file_store *f = calloc(1, sizeof *f);
    if (!f) {
        close(fd);
        return poet_fail(err, POET_ERR_NOMEM, "out of memory opening storage");
    }
    f->fd = fd;
    f->cap = capacity_bytes;
    snprintf(f->path, sizeof f->path, "%s", path);
    if (capacity_bytes > (uint64_t)INT64_MAX - STORE_HEADER_BYTES || ftruncate(fd, slot_at(capacity_bytes)) ||
        pwrite(fd, STORE_MAGIC, sizeof STORE_MAGIC, 0) != (ssize_t)sizeof STORE_MAGIC) {
        poet_status st = poet_fail(err, POET_ERR_IO, "cannot size storage file '%s' to %llu bytes: %s", path,
                                   (unsigned long long)capacity_bytes, strerror(errno));
        file_close(f);
        return st;
    }
    *out = storage_of(f, capacity_bytes, file_start, file_sync, file_close);
    return POET_OK;
}

poet_status poet_storage_open_file(const char *path, uint64_t capacity_bytes, poet_storage *out, poet_err *err)
{
    int fd = open(path, O_RDWR | O_CREAT | O_NONBLOCK | O_NOCTTY | O_CLOEXEC, 0600);
    if (fd < 0) return poet_fail(err, POET_ERR_IO, "cannot open storage file '%s': %s", path, strerror(errno));
    poet_status st = check_ours(fd, path, err);
    if (st) {
        close(fd);
        return st;
    }
    return take_file(fd, path, capacity_bytes, out, err);
}

poet_status poet_storage_open_temp(const char *dir, uint64_t capacity_bytes, poet_storage *out, poet_err *err)
{
    const char *env = getenv("TMPDIR");
    if (!dir) dir = env && *env ? env : "/tmp";
    int fd = -1;
#ifdef O_TMPFILE
    fd = open(dir, O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
#endif
    if (fd < 0) { /* no unnamed files here: a fresh name (O_EXCL), removed at once */
        char path[4096];
        snprintf(path, sizeof path, "%s/poet-storage-XXXXXX", dir);
        if ((fd = mkstemp(path)) >= 0) unlink(path);
    }
    if (fd < 0) return poet_fail(err, POET_ERR_IO, "cannot make temporary storage in '%s': %s", dir, strerror(errno));
    return take_file(fd, "(temporary)", capacity_bytes, out, err);
}

/* ---- memory ---- */

typedef struct mem_store {
    uint64_t cap;
    long started;
    unsigned char bytes[];
} mem_store;

static poet_status mem_start(void *ctx, bool write, uint64_t offset, void *ram, size_t bytes, long *ticket,
                             poet_err *err)
{
    mem_store *m = ctx;
    *ticket = m->started++;
    poet_status st = out_of_range(m->cap, offset, bytes, err);
    if (!st && write) memcpy(m->bytes + offset, ram, bytes);
    if (!st && !write) memcpy(ram, m->bytes + offset, bytes);
    return st;
}

static poet_status mem_sync(void *ctx, poet_err *err)
{
    (void)ctx, (void)err;
    return POET_OK;
}

static void mem_close(void *ctx) { free(ctx); }

poet_status poet_storage_open_memory(uint64_t capacity_bytes, poet_storage *out, poet_err *err)
{
    if (capacity_bytes > (uint64_t)SIZE_MAX - sizeof(mem_store))
        return poet_fail(err, POET_ERR_LIMIT, "in-memory storage of %llu bytes is too large",
                         (unsigned long long)capacity_bytes);
    mem_store *m = calloc(1, sizeof *m + (size_t)capacity_bytes);
    if (!m) return poet_fail(err, POET_ERR_NOMEM, "out of memory for %llu bytes of in-memory storage",
                             (unsigned long long)capacity_bytes);
    m->cap = capacity_bytes;
    *out = storage_of(m, capacity_bytes, mem_start, mem_sync, mem_close);
    return POET_OK;
}

/* ---- fault injection ---- */

typedef struct faulty {
    poet_storage inner;
    poet_storage_faults *f;
} faulty;

static poet_status injected(const char *what, long n, poet_err *err)
{
    return poet_fail(err, POET_ERR_IO, "storage: %s number %ld failed (injected fault)", what, n);
}

static poet_status faulty_start(void *ctx, bool write, uint64_t offset, void *ram, size_t bytes, long *ticket,
                                poet_err *err)
{
    faulty *q = ctx;
    long *seen = write ? &q->f->writes : &q->f->reads;
    if (++*seen == (write ? q->f->fail_write_at : q->f->fail_read_at)) {
        *ticket = -1;
        return injected(write ? "write" : "read", *seen, err);
    }
    return q->inner.io.start(q->inner.io.ctx, write, offset, ram, bytes, ticket, err);
}

static poet_status faulty_wait(void *ctx, long ticket, poet_err *err)
{
    faulty *q = ctx;
    return q->inner.io.wait(q->inner.io.ctx, ticket, err);
}

static void faulty_reset(void *ctx)
{
    faulty *q = ctx;
    q->inner.io.reset(q->inner.io.ctx);
}

static poet_status faulty_sync(void *ctx, poet_err *err)
{
    faulty *q = ctx;
    if (++q->f->syncs == q->f->fail_sync_at) return injected("sync", q->f->syncs, err);
    return q->inner.io.sync(q->inner.io.ctx, err);
}

static void faulty_close(void *ctx)
{
    faulty *q = ctx;
    poet_storage_close(&q->inner);
    free(q);
}

poet_status poet_storage_with_faults(poet_storage *inner, poet_storage_faults *f, poet_storage *out, poet_err *err)
{
    faulty *q = malloc(sizeof *q);
    if (!q) return poet_fail(err, POET_ERR_NOMEM, "out of memory wrapping storage");
    q->inner = *inner;
    q->f = f;
    memset(inner, 0, sizeof *inner);
    /* a wrapper waits and forgets as its inner storage does, not as the back-ends that copy in start */
    *out = (poet_storage){{POET_DEV_STORAGE_VERSION, q, q->inner.io.capacity_bytes, faulty_start, faulty_wait,
                           faulty_sync, faulty_reset},
                          faulty_close};
    return POET_OK;
}

void poet_storage_close(poet_storage *s)
{
    if (s && s->close) s->close(s->io.ctx);
    if (s) memset(s, 0, sizeof *s);
}
