#define _POSIX_C_SOURCE 200809L
/* poet decode: a binary schedule as JSON. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "saved.h"
static const char DECODE_HELP[] =
    "usage: poet decode BIN --out FILE [--instance FILE | (--model NAME | --onnx FILE) --device DEV\n"
    "                   [--batch N] [--train SPEC]]\n"
    "Writes a binary schedule as JSON; with a graph, the JSON embeds it so that\n"
    "simulate and show need nothing else.\n";

int cmd_decode(int argc, char **argv)
{
    graph_src src = {0};
    const char *file = NULL, *out = NULL;
    bool help = false;
    if (argc > 0 && argv[0][0] != '-') file = argv[0], argc--, argv++;
    opt opts[] = {GRAPH_SRC_OPTS(src), OUTPUT_OPT("--out", out), {NULL, false, NULL, NULL}};
    int rc = parse_opts("decode", argc, argv, opts, &help);
    if (rc || help) return help ? (fputs(DECODE_HELP, stdout), 0) : rc;
    if (!file || !out) return usage_error("decode", "give the binary file and --out FILE", NULL);
    loaded l;
    if ((rc = load_schedule("decode", file, &src, false, &l))) return rc;
    poet_err err = {0};
    if (l.graph.T && l.s.graph_hash && poet_instance_hash(&l.graph) != l.s.graph_hash) {
        fprintf(stderr, "poet: %s was planned for a different graph than the one given\n", file);
        rc = 1;
    } else {
        char *text = poet_schedule_to_json(&l.s, l.graph.T ? &l.graph : NULL);
        if (!text) rc = lib_error(&(poet_err){POET_ERR_NOMEM, "out of memory"});
        else if (poet_write_file_atomic(out, text, strlen(text), &err)) rc = lib_error(&err);
        free(text);
    }
    loaded_free(&l);
    return rc;
}
