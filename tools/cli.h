/* Helpers shared by the command-line tool's commands. */
#ifndef POET_TOOLS_CLI_H
#define POET_TOOLS_CLI_H

#include <cjson/cJSON.h>
#include <stdbool.h>
#include <stdint.h>

#include "poet/poet.h"

enum { EXIT_USAGE = 2 };

/* "poet CMD: MSG ARG (see poet CMD --help)" on stderr; returns EXIT_USAGE. */
int usage_error(const char *cmd, const char *msg, const char *arg);
/* "poet: MSG" on stderr; returns 1. */
int lib_error(const poet_err *err);
/* Prints a JSON document (and frees it); fails only when out of memory. */
int print_json(cJSON *doc);
bool parse_int(const char *s, long lo, long hi, int *out);
/* BYTES, or PCT% of keep_all. */
bool parse_budget(const char *s, uint64_t keep_all, uint64_t *out);

/* ---- option parsing: --name value and --flag ---- */
typedef struct opt {
    const char *name;
    bool takes_value;
    const char **value; /* for options with a value */
    bool *flag;         /* for flags */
} opt;

int parse_opts(const char *cmd, int argc, char **argv, opt *opts, bool *help);

/* Where a graph comes from: a zoo model or an ONNX file (with a device and
 * a batch), or a graph file. */
typedef struct graph_src {
    const char *model, *onnx, *device, *batch, *instance;
} graph_src;

#define GRAPH_SRC_OPTS(s)                                                                                   \
    {"--model", true, &(s).model, NULL}, {"--onnx", true, &(s).onnx, NULL}, {"--device", true, &(s).device, NULL}, \
        {"--batch", true, &(s).batch, NULL}, {"--instance", true, &(s).instance, NULL}

/* The training graph of a zoo model or an ONNX file (whose model, with its
 * weights, goes to *m; NULL for a zoo model). *g points at zoo or into *m.
 * 0 or an exit code. */
int load_graph(const char *cmd, const char *model, const char *onnx, int batch, poet_graph *zoo, poet_onnx_model **m,
               const poet_graph **g);

/* The costed graph a graph_src names; 0 or an exit code. */
int load_instance(const char *cmd, const graph_src *src, poet_instance *inst);

int cmd_train(int argc, char **argv);
int cmd_sweep(int argc, char **argv);
int cmd_export(int argc, char **argv);
int cmd_import(int argc, char **argv);
int cmd_emulate(int argc, char **argv);

#endif
