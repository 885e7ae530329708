/* Structure-aware mutation of poet's binary files: device images,
 * checkpoints, binary schedules and patches. Each is read as a list of its
 * integer fields (the header's and every record's); a mutant sets one field
 * to a boundary value (0, 1, max-1, max, 2^31, 2^32, 2^63, 2^64-8, the
 * value +-1, ...) and makes the CRC-32 right again, so that the parser's
 * field checks behind the CRC are what it meets. Used by the deterministic
 * sweep of tests/test_boundaries.c and by the libFuzzer mutator of
 * tests/fuzz/fuzz_fields.c. */
#ifndef POET_TESTS_FUZZ_FIELDS_H
#define POET_TESTS_FUZZ_FIELDS_H

#include <stddef.h>
#include <stdint.h>

typedef enum field_kind { KIND_NONE, KIND_IMAGE, KIND_CHECKPOINT, KIND_SCHEDULE, KIND_PATCH } field_kind;

typedef struct field {
    size_t at;
    int width;        /* bytes of a little-endian field; 0: a varint */
    const char *name; /* for reports: "header.workspace_bytes", "node.fwd", ... */
    uint32_t record;  /* which record of its kind (node, instruction, ...) it is in; 0 for the header's */
} field;

/* What buf is, from its first bytes. */
field_kind fields_kind(const uint8_t *buf, size_t len);
const char *fields_kind_name(field_kind k);

/* The integer fields of buf (read as kind k; records as far as buf holds
 * them): a malloc'd array the caller frees, and its length in *n. */
field *fields_of(field_kind k, const uint8_t *buf, size_t len, size_t *n);

/* The field's value in buf. */
uint64_t field_get(const uint8_t *buf, size_t len, const field *f);

/* A copy of buf (malloc'd, length in *out_len) with f set to v and its
 * trailing CRC-32 made right; NULL when out of memory. */
uint8_t *field_set(const uint8_t *buf, size_t len, const field *f, uint64_t v, size_t *out_len);

enum { BOUNDARY_MAX = 32 };
/* Boundary values for f, whose value is now cur, other than cur; count
 * returned (at most BOUNDARY_MAX). */
int field_boundaries(const field *f, uint64_t cur, uint64_t *vals);

/* Calls fn with each mutant of buf: every field at each of its boundary
 * values (fields_of, field_boundaries, field_set); the number of mutants,
 * or -1 when out of memory. */
typedef void mutant_fn(void *ctx, const field *f, uint64_t value, const uint8_t *mutant, size_t len);
long fields_sweep(field_kind k, const uint8_t *buf, size_t len, mutant_fn *fn, void *ctx);

#endif
