#define _POSIX_C_SOURCE 200809L
#include "fileio.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

poet_status poet_read_file(const char *path, char **data, size_t *len, poet_err *err)
{
    return poet_read_file_max(path, POET_MAX_FILE_BYTES, data, len, err);
}

poet_status poet_read_file_max(const char *path, uint64_t max_bytes, char **data, size_t *len, poet_err *err)
{
    FILE *f = fopen(path, "rb");
    if (!f) return poet_fail(err, POET_ERR_IO, "cannot open '%s': %s", path, strerror(errno));
    struct stat st;
    if (fstat(fileno(f), &st) != 0 || !S_ISREG(st.st_mode)) {
        fclose(f);
        return poet_fail(err, POET_ERR_IO, "'%s' is not a regular file", path);
    }
    if ((uint64_t)st.st_size > max_bytes) {
        fclose(f);
        return poet_fail(err, POET_ERR_LIMIT, "'%s' is larger than the limit of %llu MiB", path,
                         (unsigned long long)(max_bytes >> 20));
    }
    size_t n = (size_t)st.st_size;
    char *buf = malloc(n + 1);
    if (!buf) {
        fclose(f);
        return poet_fail(err, POET_ERR_NOMEM, "out of memory reading '%s'", path);
    }
    size_t got = fread(buf, 1, n, f);
    int bad = ferror(f);
    fclose(f);
    if (bad || got != n) {
        free(buf);
        return poet_fail(err, POET_ERR_IO, "cannot read '%s'", path);
    }
    buf[n] = '\0';
    *data = buf;
    *len = n;
    return POET_OK;
}

poet_status poet_write_file_atomic(const char *path, const void *data, size_t len, poet_err *err)
{
    size_t plen = strlen(path);
    char *tmp = malloc(plen + 16);
    if (!tmp) return poet_fail(err, POET_ERR_NOMEM, "out of memory writing '%s'", path);
    snprintf(tmp, plen + 16, "%s.tmpXXXXXX", path);
    int fd = mkstemp(tmp);
    if (fd < 0) {
        poet_status st = poet_fail(err, POET_ERR_IO, "cannot write '%s': %s", path, strerror(errno));
        free(tmp);
        return st;
    }
    /* mkstemp makes the file private: give it the mode a plain create would */
    struct stat old;
    mode_t mask = umask(0);
    umask(mask);
    fchmod(fd, stat(path, &old) == 0 ? (old.st_mode & 07777) : (0666 & ~mask));
    const char *p = data;
    size_t left = len;
    int ok = 1;
    while (ok && left > 0) {
        ssize_t w = write(fd, p, left);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) ok = 0;
        else {
            p += w;
            left -= (size_t)w;
        }
    }
    int saved = errno;
    if (ok && fsync(fd) != 0) ok = 0, saved = errno;
    if (close(fd) != 0 && ok) ok = 0, saved = errno;
    if (ok && rename(tmp, path) != 0) ok = 0, saved = errno;
    if (!ok) {
        unlink(tmp);
        free(tmp);
        return poet_fail(err, POET_ERR_IO, "cannot write '%s': %s", path, strerror(saved));
    }
    free(tmp);
    return POET_OK;
}
