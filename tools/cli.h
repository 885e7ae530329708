/* Helpers shared by the command-line tool's commands. */
#ifndef POET_TOOLS_CLI_H
#define POET_TOOLS_CLI_H

#include <cjson/cJSON.h>
#include <stdbool.h>
#include <stdint.h>

#include "poet/poet.h"

/* 1: an error; 2: bad usage; 3: no schedule (an infeasible budget, or none
 * found in time), unless the command was told to allow it. */
enum { EXIT_USAGE = 2, EXIT_NO_SCHEDULE = 3 };

/* "poet CMD: MSG ARG (see poet CMD --help)" on stderr; returns EXIT_USAGE. */
int usage_error(const char *cmd, const char *msg, const char *arg);
/* "poet: MSG" on stderr; returns 1. */
int lib_error(const poet_err *err);
/* Prints a JSON document (and frees it); fails only when out of memory. */
int print_json(cJSON *doc);
bool parse_int(const char *s, long lo, long hi, int *out);
bool parse_long(const char *s, long lo, long hi, long *out);
/* An unsigned 64-bit integer: digits only. */
bool parse_u64(const char *s, uint64_t *out);
/* The whole of s as a number (strtod's syntax); the caller checks its range. */
bool parse_real(const char *s, double *out);
enum { MAX_TIME_LIMIT_S = 86400 }; /* a day: --time-limit of every command */
/* --time-limit S: seconds in (0, MAX_TIME_LIMIT_S]. */
bool parse_time_limit(const char *s, double *seconds);
/* Seconds on the monotonic clock, for progress lines. */
double monotonic_s(void);
/* --runtime-model serial|compute (NULL: serial): whether the runtime budget
 * counts transfers (poet_problem.runtime_counts_paging). */
bool parse_runtime_model(const char *s, bool *counts_paging);
/* --frozen flash|ram (NULL: flash): where the parameters that do not
 * train live on the device (poet_frozen_home). */
bool parse_frozen(const char *s, poet_frozen_home *out);
#define FROZEN_HELP                                                                                               \
    "  --frozen WHERE      where the parameters that do not train live: flash (default),\n"                   \
    "                      read in place from the device image, no RAM; or ram, copied\n"                     \
    "  --fused-update      each layer's optimizer step in the backward pass, once its\n"                      \
    "                      gradient is complete: one layer's gradients in RAM, not all\n"
#define RUNTIME_MODEL_HELP                                                                                        \
    "  --runtime-model M   what --runtime-factor bounds: serial (default), compute plus\n"                     \
    "                      every transfer, the step's time at worst; or compute, POET's\n"                     \
    "                      accounting (compute alone), for comparisons with POET\n"
/* BYTES (with a unit: 64KiB, 256k, 1.5MB; see BUDGET_UNITS), or PCT% of
 * keep_all. */
bool parse_budget(const char *s, uint64_t keep_all, uint64_t *out);
#define BUDGET_UNITS "K, M, G and KiB, MiB, GiB are powers of 1024; KB, MB, GB powers of 1000; any case"
/* Bytes as people read them: "512 B", "187.5 KiB", "6.29 MiB"; returns out. */
const char *format_bytes(uint64_t bytes, char out[32]);
/* What training needs in a device's RAM beside its activation arena. */
typedef struct ram_use {
    bool exact;              /* from the graph, as the device lays out its memory (poet_export_memory) */
    poet_dev_memory beside;  /* exact: the device's needs with an empty arena */
    uint64_t estimate_bytes; /* !exact (a graph file): poet_instance_persistent_bytes */
    uint64_t fixed_bytes;    /* the firmware's own: the profile's fixed_ram_bytes, or measured */
} ram_use;
enum { DEVICE_CHUNK = 16 }; /* output positions: 4.5-6 instructions per multiply-add on the M4 (BENCHMARKS.md) */
/* How the device lays out what training keeps beside the arena
 * (poet_export_options' sizes). */
typedef struct device_layout {
    poet_optimizer_kind optimizer;
    uint32_t chunk;
    poet_frozen_home frozen;
    bool fused_update;
} device_layout;
/* What the commands plan with unless told otherwise. */
#define DEVICE_LAYOUT_DEFAULT ((device_layout){POET_OPT_SGD, DEVICE_CHUNK, POET_FROZEN_IN_FLASH, false})
/* g may be NULL (a graph file): then the instance's estimate. fixed_bytes
 * UINT64_MAX: the profile's. 0 or an exit code. */
int ram_use_of(const poet_graph *g, const poet_instance *inst, const device_layout *l, uint64_t fixed_bytes,
               ram_use *out);
/* The whole RAM training takes on the device with this arena. */
uint64_t ram_total(const ram_use *r, uint64_t arena_bytes);
/* --budget as given: BYTES, PCT% of the keep-all peak, or "ram": the
 * largest arena with which the whole of ram_total fits the device's RAM.
 * 0 or an exit code. */
int resolve_budget(const char *cmd, const char *text, const poet_problem *p, const ram_use *r, uint64_t *out);
/* Warns on stderr when the whole RAM of the schedule exceeds the device's,
 * or what it pages out exceeds its flash (where its profile states them). */
void warn_ram(const poet_problem *p, const poet_sim *sim, const ram_use *r);
/* A relative gap: a fraction, or a percentage like 0.5%. */
bool parse_gap(const char *s, double *out);

/* ---- option parsing: --name value and --flag ---- */
typedef struct opt {
    const char *name;
    bool takes_value;
    const char **value; /* for options with a value */
    bool *flag;         /* for flags; &opt_output_file for an option that names a file the command writes */
} opt;

/* The mark of an output file option: parse_opts checks the path under
 * poet's output rule (poet/file.h) before the command does any work, so
 * that a bad path is not found after a long run. */
extern bool opt_output_file;
#define OUTPUT_OPT(name, var) {name, true, &(var), &opt_output_file}

int parse_opts(const char *cmd, int argc, char **argv, opt *opts, bool *help);
/* The options of the listing commands: --json and --help. Returns -1 when
 * the command should go on, else the exit code. */
int list_opts(const char *cmd, const char *help_text, int argc, char **argv, bool *json);

/* Where a graph comes from: a zoo model or an ONNX file (with a device and
 * a batch), or a graph file. */
typedef struct graph_src {
    const char *model, *onnx, *device, *batch, *instance, *train;
} graph_src;

#define GRAPH_SRC_OPTS(s)                                                                                   \
    {"--model", true, &(s).model, NULL}, {"--onnx", true, &(s).onnx, NULL}, {"--device", true, &(s).device, NULL}, \
        {"--batch", true, &(s).batch, NULL}, {"--instance", true, &(s).instance, NULL},                           \
        {"--train", true, &(s).train, NULL}

/* The training graph of a zoo model or an ONNX file (whose model, with its
 * weights, goes to *m; NULL for a zoo model), training what --train SPEC
 * says (NULL: everything). *g points at zoo or into *m. 0 or an exit code. */
int load_graph(const char *cmd, const char *model, const char *onnx, const char *train, int batch, poet_graph *zoo,
               poet_onnx_model **m, const poet_graph **g);
/* The same without a message: exactly one of model and onnx given. */
poet_status build_graph(const char *model, const char *onnx, const char *train, int batch, poet_graph *zoo,
                        poet_onnx_model **m, const poet_graph **g, poet_err *err);

/* A schedule file, JSON or binary, and the graph a JSON one embeds
 * (graph->T == 0 where it holds none). 0 or an exit code. */
int read_schedule(const char *path, poet_schedule *s, poet_instance *graph);

/* The costed graph a graph_src names; 0 or an exit code. */
int load_instance(const char *cmd, const graph_src *src, poet_instance *inst);
/* "0,50,75,90": increasing percentages below 100 in 0.01% steps, at most
 * POET_SPARSE_MAX_LEVELS, as basis points. */
bool parse_sparsity_levels(const char *text, uint32_t *bp, int *n);

/* Compact weight formats: the costs at each DRESS-style sparsity level
 * (basis points; poet_instance_sparse) go to levels[]; bits > 0 counts the
 * linear weights multi-bit in the instance (poet_instance_set_multibit). */
typedef struct weight_format {
    int n_levels;
    uint32_t sparsity_bp[POET_SPARSE_MAX_LEVELS];
    poet_instance *levels;
    double bits;
    uint32_t group;
} weight_format;
/* load_instance with a weight format (NULL: none); --instance files are
 * refused with one (they have no layers). */
int load_instances(const char *cmd, const graph_src *src, poet_instance *inst, const weight_format *wf);
/* load_instance, and what training it needs in RAM beside the arena as
 * the device lays it out (layout; NULL with ram NULL). */
int load_instance_ram(const char *cmd, const graph_src *src, poet_instance *inst, const weight_format *wf,
                      const device_layout *layout, ram_use *ram);

/* The commands, one file each (cmd_NAME.c): argc and argv after the command
 * name; the exit code. */
int cmd_models(int argc, char **argv);
int cmd_devices(int argc, char **argv);
int cmd_planners(int argc, char **argv);
int cmd_graph(int argc, char **argv);
int cmd_plan(int argc, char **argv);
int cmd_simulate(int argc, char **argv);
int cmd_show(int argc, char **argv);
int cmd_encode(int argc, char **argv);
int cmd_decode(int argc, char **argv);
int cmd_train(int argc, char **argv);
int cmd_fit(int argc, char **argv);
int cmd_sweep(int argc, char **argv);
int cmd_export(int argc, char **argv);
int cmd_import(int argc, char **argv);
int cmd_emulate(int argc, char **argv);
int cmd_update(int argc, char **argv);

#endif
