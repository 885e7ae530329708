/* poet import: reads an ONNX model into poet's training graph and reports
 * what it became (src/onnx/, docs/onnx.md). */
#include <stdio.h>

#include "session.h"

static const char IMPORT_HELP[] =
    "usage: poet import FILE.onnx [--batch N] [--input NAME] [--output NAME] [--json]\n"
    "Reads an ONNX model with its weights into poet's training graph (softmax\n"
    "cross-entropy over the output; docs/onnx.md) and reports what it became. The\n"
    "same file goes to --onnx FILE of graph, plan, sweep, train, export and emulate.\n"
    "  --batch N      rows of a batch (default: the model's fixed batch, or 1)\n"
    "  --input NAME   the data input (default: the first that is not an initializer)\n"
    "  --output NAME  the logits (default: the first output)\n";

int cmd_import(int argc, char **argv)
{
    const char *file = NULL, *batch = NULL, *input = NULL, *output = NULL;
    bool json = false, help = false;
    if (argc > 0 && argv[0][0] != '-') file = argv[0], argc--, argv++;
    opt opts[] = {{"--batch", true, &batch, NULL}, {"--input", true, &input, NULL}, {"--output", true, &output, NULL},
                  {"--json", false, NULL, &json}, {NULL, false, NULL, NULL}};
    int rc = parse_opts("import", argc, argv, opts, &help);
    if (rc || help) return help ? (fputs(IMPORT_HELP, stdout), 0) : rc;
    if (!file) return usage_error("import", "give the ONNX file first", NULL);
    int b = 0;
    if (batch && !parse_int(batch, 1, 65536, &b)) return usage_error("import", "--batch must be 1 to 65536, got", batch);
    poet_onnx_options o = {b, input, output, NULL};
    poet_onnx_model *m = NULL;
    poet_err err = {0};
    if (poet_onnx_import(file, &o, &m, &err)) return lib_error(&err);
    poet_onnx_summary s;
    poet_onnx_summarize(m, &s);
    const poet_graph *g = poet_onnx_graph(m);
    int count[POET_OP_COUNT] = {0};
    for (int v = 0; v < g->n_forward; v++) count[g->nodes[v].op]++;
    if (json) {
        cJSON *j = cJSON_CreateObject(), *ops = NULL, *dims = NULL;
        cJSON_AddStringToObject(j, "file", file);
        cJSON_AddNumberToObject(j, "opset", s.opset);
        cJSON_AddNumberToObject(j, "onnx_nodes", s.onnx_nodes);
        cJSON_AddNumberToObject(j, "folded", s.folded);
        cJSON_AddNumberToObject(j, "forward_nodes", s.forward_nodes);
        cJSON_AddNumberToObject(j, "nodes", g->n_nodes);
        cJSON_AddNumberToObject(j, "initializers", s.initializers);
        cJSON_AddNumberToObject(j, "params", (double)s.params);
        cJSON_AddNumberToObject(j, "buffers", (double)s.buffers);
        cJSON_AddStringToObject(j, "input", s.input);
        dims = cJSON_AddArrayToObject(j, "input_shape");
        for (int k = 0; k < s.input_ndim; k++) cJSON_AddItemToArray(dims, cJSON_CreateNumber((double)s.input_dims[k]));
        cJSON_AddStringToObject(j, "output", s.output);
        if (*s.output_op) cJSON_AddStringToObject(j, "output_op_in_loss", s.output_op);
        ops = cJSON_AddObjectToObject(j, "ops");
        for (int k = 0; k < POET_OP_COUNT; k++)
            if (count[k]) cJSON_AddNumberToObject(ops, poet_op_name((poet_op)k), count[k]);
        rc = print_json(j);
    } else {
        printf("%s: opset %d, %d ONNX nodes (%d folded at import)\n", file, s.opset, s.onnx_nodes, s.folded);
        printf("  input '%s' [", s.input);
        for (int k = 0; k < s.input_ndim; k++) printf("%s%lld", k ? ", " : "", (long long)s.input_dims[k]);
        printf("], output '%s' under softmax cross-entropy", s.output);
        if (*s.output_op) printf(" (which takes over its final %s)", s.output_op);
        printf("\n");
        printf("  %d forward nodes and the loss, %d in all with the backward pass:", s.forward_nodes - 1, g->n_nodes);
        for (int k = 0; k < POET_OP_COUNT; k++)
            if (count[k]) printf(" %s %d", poet_op_name((poet_op)k), count[k]);
        printf("\n  %llu parameters (%d initializers), %llu buffer values\n", (unsigned long long)s.params,
               s.initializers, (unsigned long long)s.buffers);
    }
    poet_onnx_free(m);
    return rc;
}
