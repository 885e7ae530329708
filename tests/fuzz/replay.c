/* Runs the fuzz target on each file named on the command line: the seed
 * corpus and every past finding, as a regression test without libFuzzer. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "poet/file.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int main(int argc, char **argv)
{
    int failed = 0;
    for (int i = 1; i < argc; i++) {
        char *data = NULL;
        size_t len = 0;
        poet_err err = {0};
        if (poet_read_file(argv[i], &data, &len, &err)) {
            fprintf(stderr, "%s\n", err.msg);
            failed++;
            continue;
        }
        LLVMFuzzerTestOneInput((const uint8_t *)data, len);
        free(data);
    }
    printf("%d passed, %d failed\n", argc - 1 - failed, failed);
    return failed != 0;
}
