#define _POSIX_C_SOURCE 200809L
/* poet graph: a training graph, its memory and energy. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
static const char GRAPH_HELP[] =
    "usage: poet graph (--model NAME | --onnx FILE) --device DEV [--batch N] | --instance FILE\n"
    "                  [--train SPEC] [--json] [--dot FILE] [--out FILE] [--nodes FILE]\n"
    "Builds the training graph (forward, loss and backward) of a zoo model or an\n"
    "ONNX model priced on a device, or reads a graph file (POET's reference format\n"
    "or poet's own),\n"
    "and reports its size, the keep-all peak under POET's stage accounting, the\n"
    "smallest budget any schedule could meet, and full-memory energy and time.\n"
    "  --device DEV   a built-in device (poet devices) or a .json profile\n"
    "  --train SPEC   what trains: all (default), biases, last:N, ratio:R or mask:FILE\n"
    "                    (+frozen-bn, +masks, +ratio:R)\n"
    "                 (docs/partial.md); the backward pass follows it\n"
    "  --dot FILE     write the graph for Graphviz\n"
    "  --out FILE     write the costed graph in poet's own format\n"
    "  --nodes FILE   write the forward nodes (op, shape, bytes, FLOPs, parameters)\n"
    "                 as JSON (--model or --onnx)\n";

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
        print_bytes("floor (largest stage)", (double)s->min_budget_bytes);
        printf("  %-26s %.6g J\n", "full-memory energy", s->full_memory_energy_j);
        printf("  %-26s %.6g s\n", "full-memory compute time", s->full_memory_time_s);
        print_bytes("parameters", s->parameter_bytes);
        print_bytes("of those, trained", s->gradient_bytes);
        print_bytes("persistent state (SGD)", (double)poet_instance_persistent_bytes(inst, 1));
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
    cJSON_AddNumberToObject(o, "persistent_bytes", (double)poet_instance_persistent_bytes(inst, 1));
    return print_json(o);
}

/* The forward nodes of a zoo or ONNX model as JSON, for comparing graphs. */
static int write_nodes(const graph_src *src, const char *path)
{
    int b = 0;
    if (src->instance) return usage_error("graph", "--nodes needs --model or --onnx", NULL);
    if (src->batch && !parse_int(src->batch, 1, 65536, &b)) return usage_error("graph", "--batch must be 1 to 65536, got", src->batch);
    poet_graph zoo;
    poet_onnx_model *m = NULL;
    const poet_graph *g = NULL;
    int rc = load_graph("graph", src->model, src->onnx, src->train, b, &zoo, &m, &g);
    if (rc) return rc;
    cJSON *arr = cJSON_CreateArray();
    for (int v = 0; arr && v < g->n_forward; v++) {
        const poet_node *n = &g->nodes[v];
        cJSON *o = cJSON_CreateObject(), *shape = cJSON_AddArrayToObject(o, "shape");
        cJSON_AddStringToObject(o, "name", n->name);
        cJSON_AddStringToObject(o, "op", poet_op_name(n->op));
        for (int k = 0; k < n->shape.ndim; k++) cJSON_AddItemToArray(shape, cJSON_CreateNumber((double)n->shape.dim[k]));
        cJSON_AddNumberToObject(o, "bytes", (double)n->bytes);
        cJSON_AddNumberToObject(o, "flops", n->flops);
        cJSON_AddNumberToObject(o, "params", (double)n->params);
        cJSON_AddItemToArray(arr, o);
    }
    char *text = arr ? cJSON_Print(arr) : NULL;
    cJSON_Delete(arr);
    poet_err err = {0};
    if (!text) rc = lib_error(&(poet_err){POET_ERR_NOMEM, "out of memory"});
    else if (poet_write_file_atomic(path, text, strlen(text), &err)) rc = lib_error(&err);
    free(text);
    if (m) poet_onnx_free(m);
    else poet_graph_free(&zoo);
    return rc;
}

int cmd_graph(int argc, char **argv)
{
    graph_src src = {0};
    const char *dot = NULL, *out = NULL, *nodes = NULL;
    bool json = false, help = false;
    opt opts[] = {GRAPH_SRC_OPTS(src),                 OUTPUT_OPT("--dot", dot),
                  OUTPUT_OPT("--out", out),         {"--json", false, NULL, &json},
                  {"--nodes", true, &nodes, NULL},
                  {NULL, false, NULL, NULL}};
    int rc = parse_opts("graph", argc, argv, opts, &help);
    if (rc || help) return help ? (fputs(GRAPH_HELP, stdout), 0) : rc;
    if (nodes && (rc = write_nodes(&src, nodes))) return rc;
    poet_instance inst;
    if ((rc = load_instance("graph", &src, &inst))) return rc;
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
