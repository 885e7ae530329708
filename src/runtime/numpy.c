/* NumPy's .npy and .npz formats (numpy.lib.format), read from memory. A
 * header is a Python dictionary literal; an .npz is a zip archive whose
 * entries NumPy writes as zip64 (stored, or deflated by savez_compressed). */
#define _POSIX_C_SOURCE 200809L
#include "data_formats.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "../base/checked.h"

enum { NPY_MAX_HEADER = 1 << 16 };
#define MAX_INFLATED_BYTES ((uint64_t)1 << 30) /* one array of an .npz, unpacked */

/* ---- .npy ---- */

static void skip_space(const char **p) { while (**p == ' ') (*p)++; }

/* A quoted string of the header's dictionary into out. */
static bool header_string(const char **p, char *out, size_t cap)
{
    char q = **p;
    if (q != '\'' && q != '"') return false;
    const char *end = strchr(*p + 1, q);
    if (!end || (size_t)(end - *p - 1) >= cap) return false;
    memcpy(out, *p + 1, (size_t)(end - *p - 1));
    out[end - *p - 1] = 0;
    *p = end + 1;
    return true;
}

/* (d0, d1, ...): NumPy writes (N,) for one dimension and () for none. */
static bool header_shape(const char **p, nd_array *a)
{
    if (**p != '(') return false;
    (*p)++;
    a->rank = 0;
    a->count = 1;
    for (skip_space(p); **p != ')'; skip_space(p)) {
        if (a->rank == NPY_MAX_RANK || !isdigit((unsigned char)**p)) return false;
        uint64_t d = 0;
        for (; isdigit((unsigned char)**p); (*p)++)
            if (!ck_mul(d, 10, &d) || !ck_add(d, (uint64_t)(**p - '0'), &d)) return false;
        a->dims[a->rank++] = d;
        if (!ck_mul(a->count, d, &a->count)) return false;
        skip_space(p);
        if (**p == ',') (*p)++;
        else if (**p != ')') return false;
    }
    (*p)++;
    return true;
}

static bool parse_descr(const char *s, nd_array *a)
{
    if (!strchr("<>|=", s[0]) || !strchr("fiub", s[1]) || !isdigit((unsigned char)s[2]) || s[3]) return false;
    a->kind = s[1];
    a->item = s[2] - '0';
    a->swap = s[0] == '>' && a->item > 1;
    if (a->kind == 'f') return a->item == 4 || a->item == 8;
    if (a->kind == 'b') return a->item == 1;
    return a->item == 1 || a->item == 2 || a->item == 4 || a->item == 8;
}

/* The dictionary {'descr': ..., 'fortran_order': ..., 'shape': (...), }. */
static poet_status parse_header(const char *h, const char *path, nd_array *a, poet_err *err)
{
    const char *p = h;
    char key[32], descr[16] = "";
    bool has_shape = false, fortran = false, has_order = false;
    skip_space(&p);
    if (*p++ != '{') goto bad;
    for (skip_space(&p); *p != '}'; skip_space(&p)) {
        if (!header_string(&p, key, sizeof key)) goto bad;
        skip_space(&p);
        if (*p++ != ':') goto bad;
        skip_space(&p);
        if (strcmp(key, "descr") == 0) {
            if (!header_string(&p, descr, sizeof descr)) goto bad;
        } else if (strcmp(key, "fortran_order") == 0) {
            has_order = strncmp(p, "True", 4) == 0 || strncmp(p, "False", 5) == 0;
            if (!has_order) goto bad;
            fortran = *p == 'T';
            p += fortran ? 4 : 5;
        } else if (strcmp(key, "shape") == 0) {
            if (!(has_shape = header_shape(&p, a))) goto bad;
        } else {
            goto bad;
        }
        skip_space(&p);
        if (*p == ',') p++;
        else if (*p != '}') goto bad;
    }
    if (!has_shape || !has_order || !descr[0]) goto bad;
    if (!parse_descr(descr, a))
        return poet_fail(err, POET_ERR_INVALID, "'%s' holds dtype '%s'; poet reads float32, float64, integers and bool",
                         path, descr);
    if (fortran && a->rank > 1)
        return poet_fail(err, POET_ERR_INVALID, "'%s' is in Fortran order; save np.ascontiguousarray(a) instead", path);
    return POET_OK;
bad:
    return poet_fail(err, POET_ERR_PARSE, "'%s' has a malformed .npy header", path);
}

static uint32_t le(const uint8_t *b, int n)
{
    uint32_t v = 0;
    for (int i = n - 1; i >= 0; i--) v = v << 8 | b[i];
    return v;
}

poet_status data_parse_npy(const named_file *f, nd_array *a, poet_err *err)
{
    memset(a, 0, sizeof *a);
    const uint8_t *b = f->bytes;
    if (f->len < 10 || memcmp(b, "\x93NUMPY", 6) != 0 || b[6] < 1 || b[6] > 3)
        return poet_fail(err, POET_ERR_PARSE, "'%s' is not a NumPy .npy file (format 1 to 3)", f->path);
    size_t start = b[6] == 1 ? 10 : 12;
    if (f->len < start) return poet_fail(err, POET_ERR_PARSE, "'%s' is truncated in its header", f->path);
    uint32_t hlen = le(b + 8, b[6] == 1 ? 2 : 4);
    if (hlen > NPY_MAX_HEADER || hlen > f->len - start)
        return poet_fail(err, POET_ERR_PARSE, "'%s' states a header of %u bytes, beyond the file", f->path, hlen);
    char *h = malloc((size_t)hlen + 1);
    if (!h) return poet_fail(err, POET_ERR_NOMEM, "out of memory reading '%s'", f->path);
    memcpy(h, b + start, hlen);
    h[hlen] = 0;
    poet_status st = memchr(h, 0, hlen) ? poet_fail(err, POET_ERR_PARSE, "'%s' has a NUL in its header", f->path)
                                        : parse_header(h, f->path, a, err);
    free(h);
    if (st) return st;
    uint64_t bytes, end;
    size_t at = start + hlen;
    if (!ck_mul(a->count, (uint64_t)a->item, &bytes) || !ck_add(at, bytes, &end) || end > f->len)
        return poet_fail(err, POET_ERR_PARSE, "'%s' is truncated: its shape needs more bytes than it holds", f->path);
    if (end < f->len)
        return poet_fail(err, POET_ERR_PARSE, "'%s' has %llu bytes after its array", f->path,
                         (unsigned long long)(f->len - end));
    a->data = b + at;
    return POET_OK;
}

double data_element(const nd_array *a, uint64_t i)
{
    uint8_t v[8];
    const uint8_t *p = a->data + i * (uint64_t)a->item;
    for (int k = 0; k < a->item; k++) v[k] = p[a->swap ? a->item - 1 - k : k];
    int64_t s = 0;
    uint64_t u = 0;
    for (int k = a->item - 1; k >= 0; k--) u = u << 8 | v[k];
    switch (a->kind) {
    case 'f':
        if (a->item == 4) {
            float x;
            uint32_t w = (uint32_t)u;
            memcpy(&x, &w, 4);
            return x;
        } else {
            double x;
            memcpy(&x, &u, 8);
            return x;
        }
    case 'i':
        s = a->item == 8 ? (int64_t)u : (int64_t)(u ^ (1ull << (8 * a->item - 1))) - (int64_t)(1ull << (8 * a->item - 1));
        return (double)s;
    default:
        return (double)u;
    }
}

/* ---- .npz: a zip archive of .npy files ---- */

static uint64_t le64(const uint8_t *b) { return (uint64_t)le(b + 4, 4) << 32 | le(b, 4); }

typedef struct zip_dir {
    uint64_t entries, size, offset;
} zip_dir;

/* The end-of-central-directory record, and zip64's where the sizes need it
 * (NumPy writes zip64 entries). */
static bool find_directory(const uint8_t *b, size_t n, zip_dir *d)
{
    if (n < 22) return false;
    size_t lo = n > 22 + 65535 ? n - 22 - 65535 : 0;
    for (size_t at = n - 22 + 1; at-- > lo;) {
        if (le(b + at, 4) != 0x06054b50) continue;
        *d = (zip_dir){le(b + at + 10, 2), le(b + at + 12, 4), le(b + at + 16, 4)};
        if (d->entries != 0xffff && d->size != 0xffffffffu && d->offset != 0xffffffffu) return true;
        if (at < 20 || le(b + at - 20, 4) != 0x07064b50) return false;
        uint64_t z = le64(b + at - 20 + 8);
        if (z > n || n - z < 56 || le(b + z, 4) != 0x06064b50) return false;
        *d = (zip_dir){le64(b + z + 32), le64(b + z + 40), le64(b + z + 48)};
        return true;
    }
    return false;
}

typedef struct zip_entry {
    char name[64];
    uint16_t method, flags;
    uint32_t crc;
    uint64_t csize, usize, local;
} zip_entry;

/* The zip64 extra field gives the sizes and offset the entry marks 0xffffffff. */
static bool zip64_extra(const uint8_t *x, size_t n, zip_entry *e)
{
    for (size_t at = 0; at + 4 <= n;) {
        size_t id = le(x + at, 2), len = le(x + at + 2, 2);
        if (len > n - at - 4) return false;
        if (id == 1) {
            const uint8_t *v = x + at + 4, *end = v + len;
            uint64_t *fields[] = {&e->usize, &e->csize, &e->local};
            for (int i = 0; i < 3; i++) {
                if (*fields[i] != 0xffffffffu) continue;
                if (end - v < 8) return false;
                *fields[i] = le64(v), v += 8;
            }
        }
        at += 4 + len;
    }
    return true;
}

/* The entry of the central directory at *at, which it steps past. */
static bool read_entry(const uint8_t *b, uint64_t *at, uint64_t dir_end, zip_entry *e)
{
    if (*at > dir_end || dir_end - *at < 46 || le(b + *at, 4) != 0x02014b50) return false;
    const uint8_t *c = b + *at;
    size_t name = le(c + 28, 2), extra = le(c + 30, 2), comment = le(c + 32, 2);
    uint64_t next = *at + 46 + name + extra + comment;
    if (next > dir_end) return false;
    *e = (zip_entry){.flags = (uint16_t)le(c + 8, 2), .method = (uint16_t)le(c + 10, 2), .crc = le(c + 16, 4),
                     .csize = le(c + 20, 4), .usize = le(c + 24, 4), .local = le(c + 42, 4)};
    size_t keep = name < sizeof e->name ? name : sizeof e->name - 1;
    memcpy(e->name, c + 46, keep);
    e->name[keep] = 0;
    if (name >= sizeof e->name) e->name[0] = 0; /* no array poet looks for has so long a name */
    *at = next;
    return zip64_extra(c + 46 + name, extra, e);
}

/* An entry's bytes, unpacked into *out (which the caller frees). */
static poet_status unpack(const named_file *f, const zip_entry *e, uint8_t **out, poet_err *err)
{
    const uint8_t *b = f->bytes;
    uint64_t data, end;
    if (e->local > f->len || f->len - e->local < 30 || le(b + e->local, 4) != 0x04034b50 ||
        !ck_add(e->local + 30, (uint64_t)le(b + e->local + 26, 2) + le(b + e->local + 28, 2), &data) ||
        !ck_add(data, e->csize, &end) || end > f->len)
        return poet_fail(err, POET_ERR_PARSE, "'%s': entry '%s' lies beyond the file", f->path, e->name);
    if (e->flags & 1) return poet_fail(err, POET_ERR_INVALID, "'%s': entry '%s' is encrypted", f->path, e->name);
    if (e->method != 0 && e->method != 8)
        return poet_fail(err, POET_ERR_INVALID, "'%s': entry '%s' is compressed with method %u (poet reads stored "
                                                "and deflated entries)", f->path, e->name, e->method);
    if (e->usize > MAX_INFLATED_BYTES || (e->method == 0 && e->usize != e->csize))
        return poet_fail(err, POET_ERR_PARSE, "'%s': entry '%s' states %llu bytes unpacked, over poet's %llu", f->path,
                         e->name, (unsigned long long)e->usize, (unsigned long long)MAX_INFLATED_BYTES);
    uint8_t *u = malloc(e->usize ? (size_t)e->usize : 1);
    if (!u) return poet_fail(err, POET_ERR_NOMEM, "out of memory unpacking '%s' of '%s'", e->name, f->path);
    bool ok = true;
    if (e->method == 0) {
        memcpy(u, b + data, (size_t)e->usize);
    } else {
        z_stream z = {0};
        ok = inflateInit2(&z, -15) == Z_OK;
        z.next_in = (Bytef *)(b + data), z.next_out = u;
        uint64_t in_left = e->csize, out_left = e->usize;
        int r = Z_OK;
        while (ok && r == Z_OK) { /* in steps: zlib counts in 32 bits */
            uInt in = in_left > (1u << 30) ? 1u << 30 : (uInt)in_left, outn = out_left > (1u << 30) ? 1u << 30 : (uInt)out_left;
            z.avail_in = in, z.avail_out = outn;
            r = inflate(&z, Z_NO_FLUSH);
            in_left -= in - z.avail_in, out_left -= outn - z.avail_out;
            if (r == Z_BUF_ERROR || (r == Z_OK && !in_left && z.avail_out)) ok = false;
        }
        ok = ok && r == Z_STREAM_END && !out_left && !in_left;
        inflateEnd(&z);
    }
    uLong crc = crc32(0L, Z_NULL, 0);
    for (uint64_t at = 0; ok && at < e->usize; at += 1u << 30)
        crc = crc32(crc, u + at, (uInt)(e->usize - at > (1u << 30) ? 1u << 30 : e->usize - at));
    if (!ok || crc != e->crc) {
        free(u);
        return poet_fail(err, POET_ERR_PARSE, "'%s': entry '%s' is corrupt (%s)", f->path, e->name,
                         ok ? "its CRC-32 does not match" : "it does not inflate to its stated size");
    }
    *out = u;
    return POET_OK;
}

const char *const data_npz_names[NPZ_ARRAYS] = {"x.npy", "y.npy", "x_train.npy", "y_train.npy", "x_test.npy",
                                                  "y_test.npy"};

poet_status data_read_npz(const named_file *f, uint8_t *buf[NPZ_ARRAYS], size_t len[NPZ_ARRAYS], poet_err *err)
{
    zip_dir d;
    uint64_t end;
    if (!find_directory(f->bytes, f->len, &d) || !ck_add(d.offset, d.size, &end) || end > f->len)
        return poet_fail(err, POET_ERR_PARSE, "'%s' is not a NumPy .npz (zip) archive", f->path);
    uint64_t at = d.offset;
    for (uint64_t i = 0; i < d.entries; i++) {
        zip_entry e;
        if (!read_entry(f->bytes, &at, end, &e))
            return poet_fail(err, POET_ERR_PARSE, "'%s' has a malformed zip directory (entry %llu)", f->path,
                             (unsigned long long)i);
        for (int k = 0; k < NPZ_ARRAYS; k++) {
            if (strcmp(e.name, data_npz_names[k]) != 0) continue;
            if (buf[k]) return poet_fail(err, POET_ERR_PARSE, "'%s' holds '%s' twice", f->path, e.name);
            poet_status st = unpack(f, &e, &buf[k], err);
            if (st) return st;
            len[k] = (size_t)e.usize;
        }
    }
    return POET_OK;
}

