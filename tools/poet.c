/* poet: the command-line tool, a thin layer over the library. */
#include <cjson/cJSON.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "poet/poet.h"

enum { EXIT_USAGE = 2 };

static int usage_error(const char *cmd, const char *msg, const char *arg)
{
    fprintf(stderr, "poet %s: %s%s%s (see poet %s --help)\n", cmd, msg, arg ? " " : "", arg ? arg : "", cmd);
    return EXIT_USAGE;
}

static int lib_error(const poet_err *err)
{
    fprintf(stderr, "poet: %s\n", err->msg[0] ? err->msg : poet_status_str(err->status));
    return 1;
}

/* Prints a JSON document (and frees it); fails only when out of memory. */
static int print_json(cJSON *doc)
{
    char *text = doc ? cJSON_Print(doc) : NULL;
    cJSON_Delete(doc);
    if (!text) {
        fprintf(stderr, "poet: out of memory\n");
        return 1;
    }
    puts(text);
    free(text);
    return 0;
}

static bool parse_int(const char *s, long lo, long hi, int *out)
{
    char *end = NULL;
    errno = 0;
    long v = s ? strtol(s, &end, 10) : 0;
    if (!s || !*s || *end || errno || v < lo || v > hi) return false;
    *out = (int)v;
    return true;
}

/* ---- option parsing: --name value and --flag ---- */
typedef struct opt {
    const char *name;
    bool takes_value;
    const char **value; /* for options with a value */
    bool *flag;         /* for flags */
} opt;

static int parse_opts(const char *cmd, int argc, char **argv, opt *opts, bool *help)
{
    for (int i = 0; i < argc; i++) {
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            *help = true;
            return 0;
        }
        opt *o = NULL;
        for (opt *p = opts; p->name && !o; p++)
            if (strcmp(argv[i], p->name) == 0) o = p;
        if (!o) return usage_error(cmd, argv[i][0] == '-' ? "unknown option" : "unexpected argument", argv[i]);
        if (!o->takes_value) {
            *o->flag = true;
            continue;
        }
        if (i + 1 >= argc) return usage_error(cmd, "missing value after", argv[i]);
        *o->value = argv[++i];
    }
    return 0;
}

/* ---- poet models ---- */
static const char MODELS_HELP[] =
    "usage: poet models [--json]\n"
    "Lists the built-in models. `trainable` says whether the runtime can train\n"
    "it; `reference` whether POET's reference instances include it.\n";

static int cmd_models(int argc, char **argv)
{
    bool json = false, help = false;
    opt opts[] = {{"--json", false, NULL, &json}, {NULL, false, NULL, NULL}};
    int rc = parse_opts("models", argc, argv, opts, &help);
    if (rc || help) return help ? (fputs(MODELS_HELP, stdout), 0) : rc;
    if (!json) {
        printf("%-15s %-6s %-9s %-9s %s\n", "model", "batch", "trainable", "reference", "description");
        for (int i = 0; i < poet_zoo_count(); i++) {
            const poet_model_info *m = poet_zoo_info(i);
            printf("%-15s %-6d %-9s %-9s %s\n", m->name, m->default_batch, m->trainable ? "yes" : "no",
                   m->reference ? "yes" : "no", m->description);
        }
        return 0;
    }
    cJSON *arr = cJSON_CreateArray();
    for (int i = 0; arr && i < poet_zoo_count(); i++) {
        const poet_model_info *m = poet_zoo_info(i);
        cJSON *o = cJSON_CreateObject();
        cJSON_AddItemToArray(arr, o);
        cJSON_AddStringToObject(o, "name", m->name);
        cJSON_AddStringToObject(o, "description", m->description);
        if (m->dataset)
            cJSON_AddStringToObject(o, "dataset", m->dataset);
        else
            cJSON_AddNullToObject(o, "dataset");
        cJSON_AddNumberToObject(o, "default_batch", m->default_batch);
        cJSON_AddBoolToObject(o, "trainable", m->trainable);
        cJSON_AddBoolToObject(o, "reference", m->reference);
    }
    return print_json(arr);
}

/* ---- poet devices ---- */
static const char DEVICES_HELP[] =
    "usage: poet devices [--json]\n"
    "Lists the built-in device profiles. A profile of your own is a JSON file\n"
    "(docs/devices.md) that any --device option accepts as a path.\n";

static int cmd_devices(int argc, char **argv)
{
    bool json = false, help = false;
    opt opts[] = {{"--json", false, NULL, &json}, {NULL, false, NULL, NULL}};
    int rc = parse_opts("devices", argc, argv, opts, &help);
    if (rc || help) return help ? (fputs(DEVICES_HELP, stdout), 0) : rc;
    if (!json) {
        printf("%-11s %12s %12s %10s %10s  %s\n", "device", "MFLOP/s", "MFLOP/J", "in MB/s", "out MB/s",
               "description");
        for (int i = 0; i < poet_device_count(); i++) {
            const poet_device *d = poet_device_builtin(i);
            printf("%-11s %12.3f %12.3f %10.3f %10.3f  %s\n", d->name, d->flops_per_s / 1e6, d->flops_per_j / 1e6,
                   d->pagein_bytes_per_s / 1e6, d->pageout_bytes_per_s / 1e6, d->description);
        }
        return 0;
    }
    cJSON *arr = cJSON_CreateArray();
    for (int i = 0; arr && i < poet_device_count(); i++) {
        const poet_device *d = poet_device_builtin(i);
        cJSON *o = cJSON_CreateObject();
        cJSON_AddItemToArray(arr, o);
        cJSON_AddStringToObject(o, "name", d->name);
        cJSON_AddStringToObject(o, "description", d->description);
        cJSON_AddNumberToObject(o, "flops_per_s", d->flops_per_s);
        cJSON_AddNumberToObject(o, "flops_per_j", d->flops_per_j);
        cJSON_AddNumberToObject(o, "pagein_latency_s", d->pagein_latency_s);
        cJSON_AddNumberToObject(o, "pagein_bytes_per_s", d->pagein_bytes_per_s);
        cJSON_AddNumberToObject(o, "pageout_latency_s", d->pageout_latency_s);
        cJSON_AddNumberToObject(o, "pageout_bytes_per_s", d->pageout_bytes_per_s);
        cJSON_AddNumberToObject(o, "memory_power_w", d->memory_power_w);
        cJSON_AddNumberToObject(o, "power_w", d->power_w);
        cJSON_AddNumberToObject(o, "bytes_per_element", d->bytes_per_element);
    }
    return print_json(arr);
}

/* ---- poet graph ---- */
static const char GRAPH_HELP[] =
    "usage: poet graph (--model NAME --device DEV [--batch N] | --instance FILE)\n"
    "                  [--json] [--dot FILE] [--out FILE]\n"
    "Builds the training graph (forward, loss and backward) of a zoo model priced\n"
    "on a device, or reads a graph file (POET's reference format or poet's own),\n"
    "and reports its size, the keep-all peak under POET's stage accounting, the\n"
    "smallest budget any schedule could meet, and full-memory energy and time.\n"
    "  --device DEV   a built-in device (poet devices) or a .json profile\n"
    "  --dot FILE     write the graph for Graphviz\n"
    "  --out FILE     write the costed graph in poet's own format\n";

/* Loads the costed graph named by --model/--device/--batch or --instance. */
static int load_instance(const char *cmd, const char *model, const char *device, const char *batch,
                         const char *instance, poet_instance *inst)
{
    poet_err err = {0};
    if (!model == !instance) return usage_error(cmd, "give exactly one of --model and --instance", NULL);
    if (instance) {
        if (device || batch) return usage_error(cmd, "--device and --batch apply to --model only", NULL);
        return poet_instance_read_file(instance, inst, &err) ? lib_error(&err) : 0;
    }
    if (!device) return usage_error(cmd, "--model needs --device", NULL);
    int b = 0;
    if (batch && !parse_int(batch, 1, 65536, &b)) return usage_error(cmd, "--batch must be 1 to 65536, got", batch);
    poet_device dev;
    poet_graph g;
    if (poet_device_find(device, &dev, &err) || poet_zoo_build(model, b, &g, &err)) return lib_error(&err);
    poet_status st = poet_instance_from_graph(&g, &dev, inst, &err);
    poet_graph_free(&g);
    return st ? lib_error(&err) : 0;
}

static void print_bytes(const char *label, double bytes)
{
    const char *unit[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    double v = bytes;
    int u = 0;
    while (v >= 1024 && u < 4) v /= 1024, u++;
    printf("  %-26s %.0f B (%.2f %s)\n", label, bytes, v, unit[u]);
}

static int report_graph(const poet_instance *inst, const poet_instance_stats *s, bool json)
{
    if (!json) {
        printf("%s on %s, batch %d\n", inst->model, inst->device.name, inst->batch);
        printf("  %-26s %d (%d forward, %d backward)\n", "nodes", s->nodes, s->forward_nodes,
               s->nodes - s->forward_nodes);
        printf("  %-26s %d\n", "edges", s->edges);
        print_bytes("forward activations (sum)", (double)s->forward_activation_bytes);
        print_bytes("keep-all peak", (double)s->keep_all_peak_bytes);
        print_bytes("smallest feasible budget", (double)s->min_budget_bytes);
        printf("  %-26s %.6g J\n", "full-memory energy", s->full_memory_energy_j);
        printf("  %-26s %.6g s\n", "full-memory compute time", s->full_memory_time_s);
        print_bytes("parameters", s->parameter_bytes);
        return 0;
    }
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "model", inst->model);
    cJSON_AddStringToObject(o, "device", inst->device.name);
    cJSON_AddNumberToObject(o, "batch", inst->batch);
    cJSON_AddNumberToObject(o, "nodes", s->nodes);
    cJSON_AddNumberToObject(o, "forward_nodes", s->forward_nodes);
    cJSON_AddNumberToObject(o, "edges", s->edges);
    cJSON_AddNumberToObject(o, "forward_activation_bytes", (double)s->forward_activation_bytes);
    cJSON_AddNumberToObject(o, "keep_all_peak_bytes", (double)s->keep_all_peak_bytes);
    cJSON_AddNumberToObject(o, "min_budget_bytes", (double)s->min_budget_bytes);
    cJSON_AddNumberToObject(o, "full_memory_energy_j", s->full_memory_energy_j);
    cJSON_AddNumberToObject(o, "full_memory_time_s", s->full_memory_time_s);
    cJSON_AddNumberToObject(o, "parameter_bytes", s->parameter_bytes);
    cJSON_AddNumberToObject(o, "gradient_bytes", s->gradient_bytes);
    return print_json(o);
}

static int cmd_graph(int argc, char **argv)
{
    const char *model = NULL, *device = NULL, *batch = NULL, *instance = NULL, *dot = NULL, *out = NULL;
    bool json = false, help = false;
    opt opts[] = {{"--model", true, &model, NULL},     {"--device", true, &device, NULL},
                  {"--batch", true, &batch, NULL},     {"--instance", true, &instance, NULL},
                  {"--dot", true, &dot, NULL},         {"--out", true, &out, NULL},
                  {"--json", false, NULL, &json},      {NULL, false, NULL, NULL}};
    int rc = parse_opts("graph", argc, argv, opts, &help);
    if (rc || help) return help ? (fputs(GRAPH_HELP, stdout), 0) : rc;
    poet_instance inst;
    if ((rc = load_instance("graph", model, device, batch, instance, &inst))) return rc;
    poet_err err = {0};
    poet_instance_stats s;
    if (poet_instance_stats_compute(&inst, &s, &err) || (dot && poet_instance_write_dot(&inst, dot, &err)) ||
        (out && poet_instance_write_file(&inst, out, &err)))
        rc = lib_error(&err);
    else
        rc = report_graph(&inst, &s, json);
    poet_instance_free(&inst);
    return rc;
}

/* ---- dispatch ---- */
typedef struct command {
    const char *name;
    int (*run)(int argc, char **argv);
    const char *summary;
} command;

static const command COMMANDS[] = {
    {"models", cmd_models, "list the built-in models"},
    {"devices", cmd_devices, "list the built-in device profiles"},
    {"graph", cmd_graph, "build or read a training graph and report its memory and energy"},
};

static void print_help(FILE *f)
{
    fprintf(f,
            "poet %s: plan memory-limited training on small devices (POET, ICML 2022)\n"
            "usage: poet COMMAND [OPTIONS]   (poet COMMAND --help for its options)\n\n",
            POET_VERSION);
    for (size_t i = 0; i < sizeof COMMANDS / sizeof *COMMANDS; i++)
        fprintf(f, "  %-10s %s\n", COMMANDS[i].name, COMMANDS[i].summary);
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "poet: missing command (see poet --help)\n");
        return EXIT_USAGE;
    }
    if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "help") == 0) {
        print_help(stdout);
        return 0;
    }
    if (strcmp(argv[1], "--version") == 0) {
        printf("poet %s\n", POET_VERSION);
        return 0;
    }
    for (size_t i = 0; i < sizeof COMMANDS / sizeof *COMMANDS; i++)
        if (strcmp(argv[1], COMMANDS[i].name) == 0) return COMMANDS[i].run(argc - 2, argv + 2);
    fprintf(stderr, "poet: unknown command '%s' (see poet --help)\n", argv[1]);
    return EXIT_USAGE;
}
