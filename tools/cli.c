#define _POSIX_C_SOURCE 200809L
/* Helpers shared by the commands: errors, JSON output, option parsing. */
#include "cli.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <strings.h>

int usage_error(const char *cmd, const char *msg, const char *arg)
{
    fprintf(stderr, "poet %s: %s%s%s (see poet %s --help)\n", cmd, msg, arg ? " " : "", arg ? arg : "", cmd);
    return EXIT_USAGE;
}

int lib_error(const poet_err *err)
{
    fprintf(stderr, "poet: %s\n", err->msg[0] ? err->msg : poet_status_str(err->status));
    return 1;
}

/* Prints a JSON document (and frees it); fails only when out of memory. */
int print_json(cJSON *doc)
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

/* A number on the command line starts with a digit, a point or a minus
 * sign and a digit: strtol and strtod would skip spaces and signs, and
 * strtoull reads " -1" as 2^64-1. */
static bool numeric_start(const char *s)
{
    const char *p = s && *s == '-' ? s + 1 : s;
    if (p && *p == '.') p++;
    return p && isdigit((unsigned char)*p);
}

bool parse_long(const char *s, long lo, long hi, long *out)
{
    char *end = NULL;
    errno = 0;
    long v = numeric_start(s) ? strtol(s, &end, 10) : 0;
    if (!numeric_start(s) || *end || errno || v < lo || v > hi) return false;
    *out = v;
    return true;
}

bool parse_int(const char *s, long lo, long hi, int *out)
{
    long v;
    if (!parse_long(s, lo, hi, &v)) return false;
    *out = (int)v;
    return true;
}

bool parse_u64(const char *s, uint64_t *out)
{
    char *end = NULL;
    errno = 0;
    unsigned long long v = s && isdigit((unsigned char)*s) ? strtoull(s, &end, 10) : 0;
    if (!s || !isdigit((unsigned char)*s) || *end || errno) return false;
    *out = v;
    return true;
}

bool parse_real(const char *s, double *out)
{
    char *end = NULL;
    double v = numeric_start(s) ? strtod(s, &end) : 0;
    if (!numeric_start(s) || *end) return false;
    *out = v;
    return true;
}

bool parse_time_limit(const char *s, double *seconds)
{
    double v;
    if (!parse_real(s, &v) || !(v > 0 && v <= MAX_TIME_LIMIT_S)) return false;
    *seconds = v;
    return true;
}

double monotonic_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

bool parse_frozen(const char *s, poet_frozen_home *out)
{
    if (s && strcmp(s, "flash") != 0 && strcmp(s, "ram") != 0) return false;
    *out = s && strcmp(s, "ram") == 0 ? POET_FROZEN_IN_RAM : POET_FROZEN_IN_FLASH;
    return true;
}

bool parse_runtime_model(const char *s, bool *counts_paging)
{
    if (s && strcmp(s, "serial") != 0 && strcmp(s, "compute") != 0) return false;
    *counts_paging = !s || strcmp(s, "serial") == 0;
    return true;
}

/* ---- option parsing: --name value and --flag ---- */

bool opt_output_file;

static int check_outputs(const opt *opts)
{
    for (const opt *p = opts; p->name; p++)
        if (p->flag == &opt_output_file && *p->value) {
            poet_err err = {0};
            if (poet_check_output(*p->value, &err)) return lib_error(&err);
        }
    return 0;
}

int parse_opts(const char *cmd, int argc, char **argv, opt *opts, bool *help)
{
    if (argc == 1 && strcmp(argv[0], "--help-options") == 0) { /* for tests/cli.sh: --help must name all of these */
        for (const opt *p = opts; p->name; p++) printf("%s\n", p->name);
        exit(0);
    }
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
    return check_outputs(opts);
}

/* BYTES with an optional unit (as dd reads them: K is 1024, KB 1000), or
 * PCT% of the keep-all peak. */
bool parse_budget(const char *s, uint64_t keep_all, uint64_t *out)
{
    static const struct {
        const char *unit;
        double bytes;
    } units[] = {{"", 1},           {"B", 1},           {"K", 1024}, {"KiB", 1024}, {"KB", 1000},
                 {"M", 1048576},    {"MiB", 1048576},   {"MB", 1e6}, {"G", 1073741824},
                 {"GiB", 1073741824}, {"GB", 1e9}};
    char *end = NULL;
    errno = 0;
    double v = numeric_start(s) ? strtod(s, &end) : -1;
    if (!numeric_start(s) || errno || !(v >= 0) || v > (double)POET_MAX_BUDGET_BYTES) return false;
    if (strcmp(end, "%") == 0) {
        if (v > 1e6) return false;
        *out = (uint64_t)floor(v / 100.0 * (double)keep_all);
        return true;
    }
    for (size_t i = 0; i < sizeof units / sizeof *units; i++) {
        double bytes = v * units[i].bytes;
        if (strcasecmp(end, units[i].unit) != 0) continue; /* 64kb is 64KB */
        if (bytes > (double)POET_MAX_BUDGET_BYTES || (units[i].bytes == 1 && v != floor(v))) return false;
        *out = (uint64_t)floor(bytes);
        return true;
    }
    return false;
}

const char *format_bytes(uint64_t bytes, char out[32])
{
    if (bytes < 1024) snprintf(out, 32, "%llu B", (unsigned long long)bytes);
    else if (bytes < 1024 * 1024) snprintf(out, 32, "%.1f KiB", (double)bytes / 1024);
    else if (bytes < 1024ull * 1024 * 1024) snprintf(out, 32, "%.2f MiB", (double)bytes / (1024.0 * 1024));
    else snprintf(out, 32, "%.2f GiB", (double)bytes / (1024.0 * 1024 * 1024));
    return out;
}

int ram_use_of(const poet_graph *g, const poet_instance *inst, const device_layout *l, uint64_t fixed_bytes,
               ram_use *out)
{
    memset(out, 0, sizeof *out);
    out->fixed_bytes = fixed_bytes == UINT64_MAX ? inst->device.fixed_ram_bytes : fixed_bytes;
    out->estimate_bytes = poet_instance_persistent_bytes(inst, poet_optimizer_slots(l->optimizer));
    if (!g) return 0;
    poet_export_options o = {.optimizer = poet_optimizer_default(l->optimizer), .chunk_positions = l->chunk,
                             .frozen = l->frozen, .fused_update = l->fused_update};
    poet_err err = {0};
    if (poet_export_memory(g, &o, 0, &out->beside, &err)) return lib_error(&err);
    out->exact = true;
    return 0;
}

uint64_t ram_total(const ram_use *r, uint64_t arena_bytes)
{
    /* the device places what follows the arena 8-byte aligned */
    return r->fixed_bytes + (r->exact ? r->beside.total_bytes + (arena_bytes + 7) / 8 * 8
                                      : r->estimate_bytes + arena_bytes);
}

int resolve_budget(const char *cmd, const char *text, const poet_problem *p, const ram_use *r, uint64_t *out)
{
    const poet_profile *d = &p->inst->device;
    if (!text || strcmp(text, "ram") != 0) {
        if (parse_budget(text, p->keep_all_peak_bytes, out)) return 0;
        return usage_error(cmd, "--budget must be bytes (like 200000, 64KiB, 1.5MB), a percentage like 50%, or ram; got",
                           text);
    }
    if (!d->ram_bytes) {
        fprintf(stderr, "poet %s: --budget ram: device '%s' does not state its RAM (ram_bytes in its profile)\n", cmd,
                d->name);
        return EXIT_USAGE;
    }
    uint64_t beside = ram_total(r, 0);
    if (d->ram_bytes <= beside) {
        char have[32], need[32];
        fprintf(stderr, "poet: %s's %s of RAM do not even hold what training keeps beside the activations (%s: %s)\n",
                d->name, format_bytes(d->ram_bytes, have), format_bytes(beside, need),
                r->exact ? "the firmware, weights, gradients, optimizer state, the batch, workspace and control"
                         : "weights, gradients and optimizer state");
        return 1;
    }
    *out = r->exact ? (d->ram_bytes - beside) / 8 * 8 : d->ram_bytes - beside;
    return 0;
}

void warn_ram(const poet_problem *p, const poet_sim *sim, const ram_use *r)
{
    const poet_profile *d = &p->inst->device;
    char a[32], b[32], c[32], e[32];
    if (d->flash_bytes && sim->paged_out_bytes > d->flash_bytes)
        fprintf(stderr, "poet: warning: the schedule pages out %s, more than %s's %s of flash\n",
                format_bytes(sim->paged_out_bytes, a), d->name, format_bytes(d->flash_bytes, b));
    uint64_t total = ram_total(r, sim->placed_peak_bytes);
    if (d->ram_bytes && total > d->ram_bytes)
        fprintf(stderr,
                "poet: warning: training needs %s of RAM (arena %s and %s beside it), more than %s's %s "
                "(--budget ram plans for what fits)\n",
                format_bytes(total, a), format_bytes(sim->placed_peak_bytes, b), format_bytes(ram_total(r, 0), c),
                d->name, format_bytes(d->ram_bytes, e));
}

bool parse_gap(const char *s, double *out)
{
    char *end = NULL;
    double v = numeric_start(s) ? strtod(s, &end) : -1;
    if (!numeric_start(s)) return false;
    if (strcmp(end, "%") == 0) v /= 100;
    else if (*end) return false;
    if (!(v >= 0 && v <= 1)) return false;
    *out = v > 0 ? v : 1e-12; /* 0: prove optimality (0 itself means the default) */
    return true;
}


/* "0,50,75,90" as increasing basis points below 10000. */
bool parse_sparsity_levels(const char *text, uint32_t *bp, int *n)
{
    *n = 0;
    for (const char *at = text;;) {
        char *end = (char *)at;
        double pct = numeric_start(at) ? strtod(at, &end) : -1;
        double q = round(pct * 100);
        if (end == at || !(pct >= 0 && pct < 100) || fabs(pct * 100 - q) > 1e-6 || *n == POET_SPARSE_MAX_LEVELS)
            return false;
        bp[*n] = (uint32_t)q;
        if (*n && bp[*n] <= bp[*n - 1]) return false;
        ++*n;
        if (!*end) return true;
        if (*end != ',') return false;
        at = end + 1;
    }
}

int read_schedule(const char *path, poet_schedule *s, poet_instance *graph)
{
    poet_err err = {0};
    char *data = NULL;
    size_t len = 0;
    memset(graph, 0, sizeof *graph);
    if (poet_read_file(path, &data, &len, &err)) return lib_error(&err);
    /* "PS" in the version word's high half, whatever its format */
    bool binary = len >= 4 && (uint8_t)data[2] == ((POET_SCHEDULE_BINARY_VERSION >> 16) & 0xff) &&
                  (uint8_t)data[3] == (POET_SCHEDULE_BINARY_VERSION >> 24);
    poet_status st = binary ? poet_schedule_decode((const uint8_t *)data, len, s, &err)
                            : poet_schedule_parse_json(data, len, s, graph, &err);
    free(data);
    if (st) {
        fprintf(stderr, "poet: %s: %s\n", path, err.msg);
        return 1;
    }
    return 0;
}

poet_status build_graph(const char *model, const char *onnx, const char *train, int batch, poet_graph *zoo,
                        poet_onnx_model **m, const poet_graph **g, poet_err *err)
{
    *m = NULL;
    if (model) {
        poet_status st = poet_zoo_build(model, batch, zoo, err);
        if (!st && train && (st = poet_graph_set_trainable(zoo, train, err))) poet_graph_free(zoo);
        if (!st) *g = zoo;
        return st;
    }
    poet_onnx_options o = {batch, NULL, NULL, train};
    poet_status st = poet_onnx_import(onnx, &o, m, err);
    if (!st) *g = poet_onnx_graph(*m);
    return st;
}

int load_graph(const char *cmd, const char *model, const char *onnx, const char *train, int batch, poet_graph *zoo,
               poet_onnx_model **m, const poet_graph **g)
{
    poet_err err = {0};
    *m = NULL;
    if (!model == !onnx) return usage_error(cmd, "give exactly one of --model and --onnx", NULL);
    return build_graph(model, onnx, train, batch, zoo, m, g, &err) ? lib_error(&err) : 0;
}

/* Loads the costed graph named by --model or --onnx with --device and
 * --batch, or by --instance; and with n_levels > 0, the graph's costs at
 * each DRESS-style sparsity level (basis points) into levels[]. */
int load_instances(const char *cmd, const graph_src *src, poet_instance *inst, const weight_format *wf)
{
    return load_instance_ram(cmd, src, inst, wf, NULL, NULL);
}

int load_instance_ram(const char *cmd, const graph_src *src, poet_instance *inst, const weight_format *wf,
                      const device_layout *layout, ram_use *ram)
{
    int n_levels = wf ? wf->n_levels : 0;
    poet_err err = {0};
    if ((src->model != NULL) + (src->onnx != NULL) + (src->instance != NULL) != 1)
        return usage_error(cmd, "give exactly one of --model, --onnx and --instance", NULL);
    if (src->instance) {
        if (src->device || src->batch || src->train)
            return usage_error(cmd, "--device, --batch and --train apply to --model and --onnx", NULL);
        if (n_levels || (wf && wf->bits > 0))
            return usage_error(cmd, "--sparse-levels and --weight-bits need the model's layers: --model or --onnx", NULL);
        if (poet_instance_read_file(src->instance, inst, &err)) return lib_error(&err);
        return ram ? ram_use_of(NULL, inst, layout, UINT64_MAX, ram) : 0;
    }
    if (!src->device) return usage_error(cmd, "--model and --onnx need --device", NULL);
    int b = 0;
    if (src->batch && !parse_int(src->batch, 1, 65536, &b))
        return usage_error(cmd, "--batch must be 1 to 65536, got", src->batch);
    poet_profile dev;
    poet_graph zoo;
    poet_onnx_model *m = NULL;
    const poet_graph *g = NULL;
    if (poet_profile_find(src->device, &dev, &err)) return lib_error(&err);
    int rc = load_graph(cmd, src->model, src->onnx, src->train, b, &zoo, &m, &g);
    if (rc) return rc;
    poet_status st = poet_instance_from_graph(g, &dev, inst, &err);
    if (!st && wf && wf->bits > 0 && (st = poet_instance_set_multibit(inst, g, wf->bits, wf->group, &err)))
        poet_instance_free(inst);
    for (int k = 0; k < n_levels && !st; k++)
        if ((st = poet_instance_sparse(g, &dev, wf->sparsity_bp[k], &wf->levels[k], &err))) {
            while (k-- > 0) poet_instance_free(&wf->levels[k]);
            poet_instance_free(inst);
        }
    if (!st && ram && (rc = ram_use_of(g, inst, layout, UINT64_MAX, ram))) {
        poet_instance_free(inst);
        for (int k = 0; k < n_levels; k++) poet_instance_free(&wf->levels[k]);
    }
    if (m) poet_onnx_free(m);
    else poet_graph_free(&zoo);
    return st ? lib_error(&err) : rc;
}

int load_instance(const char *cmd, const graph_src *src, poet_instance *inst)
{
    return load_instances(cmd, src, inst, NULL);
}

/* The options of the listing commands: --json and --help. Returns -1 when
 * the command should go on, else the exit code. */
int list_opts(const char *cmd, const char *help_text, int argc, char **argv, bool *json)
{
    bool help = false;
    opt opts[] = {{"--json", false, NULL, json}, {NULL, false, NULL, NULL}};
    int rc = parse_opts(cmd, argc, argv, opts, &help);
    if (rc) return rc;
    if (help) return fputs(help_text, stdout), 0;
    return -1;
}
