/* One libFuzzer target for every parser that reads what users hand poet:
 * graph files (poet's and POET's), device profiles, schedules in JSON and
 * binary, checkpoints, device images, ONNX models and data files (.npy,
 * .npz, CSV). A schedule that parses with its
 * graph is also validated and, when valid, simulated; a device image is
 * checked twice, as it came and with its checksum made right (so that the
 * fuzzer reaches the field checks behind the CRC), and one that passes is
 * trained for a step; a patch is checked (and applied when valid) against one
 * device of mlp_digits, as it came and with its checksum made right. Built with -DPOET_FUZZ=ON (clang); replay.c runs the
 * corpus as a regression test in every build. */
#include <stdint.h>

#include "exercise.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    exercise_parsers(data, size);
    return 0;
}
