/* What the fuzz targets (fuzz_parsers.c, fuzz_fields.c) and the boundary
 * sweep (tests/test_boundaries.c) do with an input. */
#ifndef POET_TESTS_FUZZ_EXERCISE_H
#define POET_TESTS_FUZZ_EXERCISE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "poet/poet.h"

/* Every parser on data; what parses is put to work. */
void exercise_parsers(const uint8_t *data, size_t size);

/* A parsed schedule (with its embedded graph, or g->T == 0): validated and
 * simulated against the graph, encoded and decoded back (which must give
 * it again). */
void exercise_schedule(poet_schedule *s, poet_instance *g);

typedef enum image_verdict { IMAGE_REFUSED, IMAGE_CHECKED, IMAGE_OPENED, IMAGE_RAN } image_verdict;
/* A device image (with its checksum made right when fix_crc): inspected,
 * opened and trained for a step and evaluated where it fits 256 KiB. */
image_verdict exercise_device_image(const uint8_t *data, size_t size, bool fix_crc);

/* A patch checked, and applied when valid, against one device of
 * mlp_digits at batch 8 (tests/fuzz/corpus/patch.bin is one for it);
 * whether it was applied. */
bool exercise_patch(const uint8_t *data, size_t size, bool fix_crc);

#endif
