/* The input and output rules of poet/file.h. Linux first (O_TMPFILE),
 * POSIX where that is missing. */
#define _GNU_SOURCE
#include "fileio.h"

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

enum { MAX_LINK_HOPS = 40 }; /* as the kernel's own limit */

static const char *kind_of(mode_t m)
{
    return S_ISDIR(m) ? "a directory" : S_ISFIFO(m) ? "a FIFO" : S_ISSOCK(m) ? "a socket"
           : S_ISCHR(m) || S_ISBLK(m) ? "a device" : "of another kind";
}

/* ---- input ---- */

poet_status poet_open_input(const char *path, uint64_t max_bytes, int *fd, uint64_t *size, poet_err *err)
{
    int f = open(path, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
    if (f < 0) return poet_fail(err, POET_ERR_IO, "cannot open '%s': %s", path, strerror(errno));
    struct stat st;
    poet_status rc = POET_OK;
    if (fstat(f, &st) != 0)
        rc = poet_fail(err, POET_ERR_IO, "cannot open '%s': %s", path, strerror(errno));
    else if (!S_ISREG(st.st_mode))
        rc = poet_fail(err, POET_ERR_IO, "'%s' is not a regular file but %s: poet reads regular files only", path,
                       kind_of(st.st_mode));
    else if ((uint64_t)st.st_size > max_bytes)
        rc = poet_fail(err, POET_ERR_LIMIT, "'%s' is larger than the limit of %llu MiB", path,
                       (unsigned long long)(max_bytes >> 20));
    else if (fcntl(f, F_SETFL, fcntl(f, F_GETFL) & ~O_NONBLOCK) != 0)
        rc = poet_fail(err, POET_ERR_IO, "cannot read '%s': %s", path, strerror(errno));
    if (rc) {
        close(f);
        return rc;
    }
    *fd = f;
    *size = (uint64_t)st.st_size;
    return POET_OK;
}

/* Exactly n bytes from fd; false at an error or an early end. */
static bool read_all(int fd, char *buf, size_t n)
{
    for (size_t done = 0; done < n;) {
        ssize_t r = read(fd, buf + done, n - done);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) return false;
        done += (size_t)r;
    }
    return true;
}

poet_status poet_read_file(const char *path, char **data, size_t *len, poet_err *err)
{
    return poet_read_file_max(path, POET_MAX_FILE_BYTES, data, len, err);
}

poet_status poet_read_file_max(const char *path, uint64_t max_bytes, char **data, size_t *len, poet_err *err)
{
    int fd;
    uint64_t size;
    poet_status st = poet_open_input(path, max_bytes, &fd, &size, err);
    if (st) return st;
    size_t n = (size_t)size;
    char *buf = malloc(n + 1);
    if (!buf) st = poet_fail(err, POET_ERR_NOMEM, "out of memory reading '%s'", path);
    else if (!read_all(fd, buf, n)) st = poet_fail(err, POET_ERR_IO, "cannot read '%s' (did it change?)", path);
    close(fd);
    if (st) {
        free(buf);
        return st;
    }
    buf[n] = '\0';
    *data = buf;
    *len = n;
    return POET_OK;
}

/* ---- output ---- */

/* dir/name, or name alone where it is absolute. */
static char *joined(const char *dir, const char *name)
{
    size_t a = strlen(dir), b = strlen(name);
    char *p = malloc(a + b + 2);
    if (!p) return NULL;
    if (name[0] == '/') memcpy(p, name, b + 1);
    else memcpy(p, dir, a), p[a] = '/', memcpy(p + a + 1, name, b + 1);
    return p;
}

/* The directory part of path ("." for a bare name). */
static char *dir_of(const char *path)
{
    const char *slash = strrchr(path, '/');
    if (!slash) return strdup(".");
    size_t n = slash == path ? 1 : (size_t)(slash - path);
    char *d = malloc(n + 1);
    if (d) memcpy(d, path, n), d[n] = 0;
    return d;
}

/* The file that writing path replaces: path, or the end of the chain of
 * symbolic links it starts; into *target, which the caller frees. */
static poet_status output_target(const char *path, char **target, poet_err *err)
{
    char *at = strdup(path);
    for (int hops = 0; at; hops++) {
        struct stat st;
        if (lstat(at, &st) != 0) {
            if (errno == ENOENT) break; /* a new file */
            poet_status rc = poet_fail(err, POET_ERR_IO, "cannot write '%s': %s", path, strerror(errno));
            free(at);
            return rc;
        }
        if (S_ISREG(st.st_mode)) break;
        if (!S_ISLNK(st.st_mode) || hops == MAX_LINK_HOPS) {
            bool self = strcmp(at, path) == 0;
            poet_status rc = S_ISLNK(st.st_mode)
                                 ? poet_fail(err, POET_ERR_IO, "cannot write '%s': too many symbolic links", path)
                                 : poet_fail(err, POET_ERR_IO, "cannot write '%s': %s%s%s is %s, which poet does not "
                                                               "replace with a file", path, self ? "it" : "its target '",
                                             self ? "" : at, self ? "" : "'", kind_of(st.st_mode));
            free(at);
            return rc;
        }
        char link[4096];
        ssize_t n = readlink(at, link, sizeof link - 1);
        if (n < 0) {
            poet_status rc = poet_fail(err, POET_ERR_IO, "cannot write '%s': %s", path, strerror(errno));
            free(at);
            return rc;
        }
        link[n] = 0;
        char *dir = dir_of(at);
        free(at);
        at = dir ? joined(dir, link) : NULL;
        free(dir);
    }
    if (!at) return poet_fail(err, POET_ERR_NOMEM, "out of memory writing '%s'", path);
    *target = at;
    return POET_OK;
}

static poet_status check_dir(const char *path, const char *target, poet_err *err)
{
    char *dir = dir_of(target);
    if (!dir) return poet_fail(err, POET_ERR_NOMEM, "out of memory writing '%s'", path);
    struct stat st;
    poet_status rc = POET_OK;
    if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode))
        rc = poet_fail(err, POET_ERR_IO, "cannot write '%s': directory '%s' does not exist", path, dir);
    else if (access(dir, W_OK | X_OK) != 0)
        rc = poet_fail(err, POET_ERR_IO, "cannot write '%s': directory '%s' is not writable: %s", path, dir,
                       strerror(errno));
    free(dir);
    return rc;
}

poet_status poet_check_output(const char *path, poet_err *err)
{
    char *target = NULL;
    poet_status st = output_target(path, &target, err);
    if (!st) st = check_dir(path, target, err);
    free(target);
    return st;
}

static bool write_all(int fd, const void *data, size_t len)
{
    const char *p = data;
    for (size_t left = len; left > 0;) {
        ssize_t w = write(fd, p, left);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) return false;
        p += w;
        left -= (size_t)w;
    }
    return true;
}

/* The data into fd with the mode a plain create would give (or the
 * replaced file's), synced; errno tells a failure. */
static bool fill(int fd, const void *data, size_t len, mode_t mode)
{
    return fchmod(fd, mode) == 0 && write_all(fd, data, len) && fsync(fd) == 0;
}

/* Renames tmp over target and syncs their directory, so that the rename
 * itself survives a power cut. */
static bool put_in_place(const char *tmp, const char *target)
{
    if (rename(tmp, target) != 0) return false;
    char *dir = dir_of(target);
    int d = dir ? open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC) : -1;
    free(dir);
    if (d >= 0) fsync(d), close(d);
    return true;
}

/* Through a file without a name until it is whole (O_TMPFILE): a write
 * killed midway leaves nothing. *tried is false where the system has no
 * such files (or no /proc to name one by), for the caller to fall back. */
static poet_status write_unnamed(const char *path, const char *target, const void *data, size_t len, mode_t mode,
                                 bool *tried, poet_err *err)
{
    *tried = false;
#ifdef O_TMPFILE
    char *dir = dir_of(target);
    int fd = dir ? open(dir, O_TMPFILE | O_WRONLY | O_CLOEXEC, 0600) : -1;
    free(dir);
    if (fd < 0) return POET_OK;
    char proc[64], *tmp = malloc(strlen(target) + 48);
    snprintf(proc, sizeof proc, "/proc/self/fd/%d", fd);
    bool ok = tmp && fill(fd, data, len, mode);
    int saved = errno;
    bool named = false;
    for (unsigned k = 0; ok && !named && k < 100; k++) { /* a free name for the moment before the rename */
        snprintf(tmp, strlen(target) + 48, "%s.tmp%ld.%u", target, (long)getpid(), k);
        named = linkat(AT_FDCWD, proc, AT_FDCWD, tmp, AT_SYMLINK_FOLLOW) == 0;
        if (!named && errno != EEXIST) break;
    }
    close(fd);
    if (ok && !named) { /* no /proc, or a file system that cannot link it: the caller writes another way */
        free(tmp);
        return POET_OK;
    }
    *tried = true;
    poet_status st = POET_OK;
    if (!ok) st = poet_fail(err, POET_ERR_IO, "cannot write '%s': %s", path, strerror(saved));
    else if (!put_in_place(tmp, target)) {
        st = poet_fail(err, POET_ERR_IO, "cannot write '%s': %s", path, strerror(errno));
        unlink(tmp);
    }
    free(tmp);
    return st;
#else
    (void)path, (void)target, (void)data, (void)len, (void)mode, (void)err;
    return POET_OK;
#endif
}

/* Through a named temporary file beside the target. */
static poet_status write_named(const char *path, const char *target, const void *data, size_t len, mode_t mode,
                               poet_err *err)
{
    size_t n = strlen(target) + 16;
    char *tmp = malloc(n);
    if (!tmp) return poet_fail(err, POET_ERR_NOMEM, "out of memory writing '%s'", path);
    snprintf(tmp, n, "%s.tmpXXXXXX", target);
    int fd = mkstemp(tmp);
    bool ok = fd >= 0 && fill(fd, data, len, mode);
    int saved = errno;
    if (fd >= 0 && close(fd) != 0 && ok) ok = false, saved = errno;
    if (ok && !put_in_place(tmp, target)) ok = false, saved = errno;
    if (!ok && fd >= 0) unlink(tmp);
    free(tmp);
    return ok ? POET_OK : poet_fail(err, POET_ERR_IO, "cannot write '%s': %s", path, strerror(saved));
}

poet_status poet_write_file_atomic(const char *path, const void *data, size_t len, poet_err *err)
{
    char *target = NULL;
    poet_status st = output_target(path, &target, err);
    if (!st) st = check_dir(path, target, err);
    if (st) {
        free(target);
        return st;
    }
    struct stat old;
    mode_t mask = umask(0);
    umask(mask);
    mode_t mode = stat(target, &old) == 0 ? (old.st_mode & 07777) : (0666 & ~mask);
    bool tried;
    st = write_unnamed(path, target, data, len, mode, &tried, err);
    if (!tried) st = write_named(path, target, data, len, mode, err);
    free(target);
    return st;
}

/* ---- locks ---- */

poet_status poet_lock_dir(const char *dir, int *lock, poet_err *err)
{
    char *path = joined(dir, "lock");
    int fd = path ? open(path, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0644) : -1;
    poet_status st = POET_OK;
    if (!path) st = poet_fail(err, POET_ERR_NOMEM, "out of memory locking '%s'", dir);
    else if (fd < 0) st = poet_fail(err, POET_ERR_IO, "cannot lock '%s': %s", path, strerror(errno));
    else if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
        int why = errno;
        char holder[32] = "";
        ssize_t n = pread(fd, holder, sizeof holder - 1, 0);
        holder[n > 0 ? n : 0] = 0;
        holder[strcspn(holder, "\n")] = 0;
        st = why == EWOULDBLOCK
                 ? poet_fail(err, POET_ERR_IO, "'%s' is in use by poet process %s (another run with the same "
                             "directory); wait for it to end", dir, holder[0] ? holder : "(unknown)")
                 : poet_fail(err, POET_ERR_IO, "cannot lock '%s': %s", path, strerror(why));
    } else {
        char pid[32];
        int len = snprintf(pid, sizeof pid, "%ld\n", (long)getpid());
        if (ftruncate(fd, 0) != 0 || pwrite(fd, pid, (size_t)len, 0) != len)
            st = poet_fail(err, POET_ERR_IO, "cannot write '%s': %s", path, strerror(errno));
    }
    if (st && fd >= 0) close(fd);
    free(path);
    if (!st) *lock = fd;
    return st;
}

void poet_unlock(int lock)
{
    if (lock >= 0) close(lock);
}

poet_status host_read_parsed(const char *path, text_parser parse, void *out, poet_err *err)
{
    char *text = NULL;
    size_t len = 0;
    poet_status st = poet_read_file(path, &text, &len, err);
    if (st) return st;
    poet_err inner = {0};
    st = parse(out, text, len, &inner);
    free(text);
    return st ? poet_fail(err, st, "%s: %s", path, inner.msg) : POET_OK;
}
