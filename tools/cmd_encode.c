#define _POSIX_C_SOURCE 200809L
/* poet encode: a schedule in the compact binary form for devices. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "saved.h"
static const char ENCODE_HELP[] =
    "usage: poet encode FILE --out BIN\n"
    "Writes a saved schedule in poet's compact binary form for devices.\n";

int cmd_encode(int argc, char **argv)
{
    const char *file = NULL, *out = NULL;
    bool help = false;
    if (argc > 0 && argv[0][0] != '-') file = argv[0], argc--, argv++;
    opt opts[] = {OUTPUT_OPT("--out", out), {NULL, false, NULL, NULL}};
    int rc = parse_opts("encode", argc, argv, opts, &help);
    if (rc || help) return help ? (fputs(ENCODE_HELP, stdout), 0) : rc;
    if (!file || !out) return usage_error("encode", "give the schedule file and --out BIN", NULL);
    loaded l;
    if ((rc = load_schedule("encode", file, &(graph_src){0}, false, &l))) return rc;
    uint8_t *data = NULL;
    size_t len = 0;
    poet_err err = {0};
    if (poet_schedule_encode(&l.s, &data, &len, &err) || poet_write_file_atomic(out, data, len, &err))
        rc = lib_error(&err);
    else
        printf("wrote %s: %zu bytes\n", out, len);
    free(data);
    loaded_free(&l);
    return rc;
}
