#define _POSIX_C_SOURCE 200809L
/* Helpers shared by the commands: errors, JSON output, option parsing. */
#include "cli.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

bool parse_int(const char *s, long lo, long hi, int *out)
{
    char *end = NULL;
    errno = 0;
    long v = s ? strtol(s, &end, 10) : 0;
    if (!s || !*s || *end || errno || v < lo || v > hi) return false;
    *out = (int)v;
    return true;
}

/* ---- option parsing: --name value and --flag ---- */

int parse_opts(const char *cmd, int argc, char **argv, opt *opts, bool *help)
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

/* BYTES, or PCT% of the keep-all peak. */
bool parse_budget(const char *s, uint64_t keep_all, uint64_t *out)
{
    char *end = NULL;
    errno = 0;
    double v = s ? strtod(s, &end) : -1;
    if (!s || end == s || errno || !(v >= 0) || v > 9007199254740992.0) return false;
    if (strcmp(end, "%") == 0) {
        if (v > 1e6) return false;
        *out = (uint64_t)floor(v / 100.0 * (double)keep_all);
        return true;
    }
    if (*end || v != floor(v)) return false;
    *out = (uint64_t)v;
    return true;
}


int load_graph(const char *cmd, const char *model, const char *onnx, int batch, poet_graph *zoo, poet_onnx_model **m,
               const poet_graph **g)
{
    poet_err err = {0};
    *m = NULL;
    if (!model == !onnx) return usage_error(cmd, "give exactly one of --model and --onnx", NULL);
    if (model) {
        if (poet_zoo_build(model, batch, zoo, &err)) return lib_error(&err);
        *g = zoo;
        return 0;
    }
    poet_onnx_options o = {batch, NULL, NULL};
    if (poet_onnx_import(onnx, &o, m, &err)) return lib_error(&err);
    *g = poet_onnx_graph(*m);
    return 0;
}

/* Loads the costed graph named by --model or --onnx with --device and
 * --batch, or by --instance. */
int load_instance(const char *cmd, const graph_src *src, poet_instance *inst)
{
    poet_err err = {0};
    if ((src->model != NULL) + (src->onnx != NULL) + (src->instance != NULL) != 1)
        return usage_error(cmd, "give exactly one of --model, --onnx and --instance", NULL);
    if (src->instance) {
        if (src->device || src->batch) return usage_error(cmd, "--device and --batch apply to --model and --onnx", NULL);
        return poet_instance_read_file(src->instance, inst, &err) ? lib_error(&err) : 0;
    }
    if (!src->device) return usage_error(cmd, "--model and --onnx need --device", NULL);
    int b = 0;
    if (src->batch && !parse_int(src->batch, 1, 65536, &b))
        return usage_error(cmd, "--batch must be 1 to 65536, got", src->batch);
    poet_device dev;
    poet_graph zoo;
    poet_onnx_model *m = NULL;
    const poet_graph *g = NULL;
    if (poet_device_find(src->device, &dev, &err)) return lib_error(&err);
    int rc = load_graph(cmd, src->model, src->onnx, b, &zoo, &m, &g);
    if (rc) return rc;
    poet_status st = poet_instance_from_graph(g, &dev, inst, &err);
    if (m) poet_onnx_free(m);
    else poet_graph_free(&zoo);
    return st ? lib_error(&err) : 0;
}

