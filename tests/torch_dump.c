/* Writes, as JSON, everything tests/torch_check.py needs to redo one
 * training step in PyTorch: each test graph and two zoo models (forward
 * nodes), the batch, the initial weights and running statistics, and what
 * poet computed: the loss, every parameter gradient, the new statistics. */
#include <cjson/cJSON.h>

#include "graphs.h"
#include "rtutil.h"

static cJSON *floats(const float *v, uint64_t n)
{
    cJSON *a = cJSON_CreateArray();
    for (uint64_t i = 0; i < n; i++) cJSON_AddItemToArray(a, cJSON_CreateNumber(v[i]));
    return a;
}

static cJSON *describe_nodes(const poet_graph *g)
{
    cJSON *nodes = cJSON_CreateArray();
    for (int v = 0; v < g->n_forward; v++) {
        const poet_node *n = &g->nodes[v];
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "op", poet_op_name(n->op));
        cJSON *in = cJSON_AddArrayToObject(o, "inputs");
        for (int j = 0; j < n->n_inputs; j++) cJSON_AddItemToArray(in, cJSON_CreateNumber(n->inputs[j]));
        cJSON *sh = cJSON_AddArrayToObject(o, "shape");
        for (int d = 0; d < n->shape.ndim; d++) cJSON_AddItemToArray(sh, cJSON_CreateNumber((double)n->shape.dim[d]));
        const poet_attrs *a = &n->attrs;
        const int32_t ints[] = {a->features, a->kh, a->kw, a->sh, a->sw, a->pt, a->pl, a->pb, a->pr, a->dh,
                                a->dw, a->groups, a->heads, a->seq, a->axis, a->start, a->end, a->flags};
        static const char *names[] = {"features", "kh", "kw", "sh", "sw", "pt", "pl", "pb", "pr", "dh",
                                      "dw", "groups", "heads", "seq", "axis", "start", "end", "flags"};
        for (size_t i = 0; i < sizeof ints / sizeof *ints; i++) cJSON_AddNumberToObject(o, names[i], ints[i]);
        const float reals[] = {a->p, a->alpha, a->beta, a->eps, a->momentum};
        static const char *rnames[] = {"p", "alpha", "beta", "eps", "momentum"};
        for (size_t i = 0; i < sizeof reals / sizeof *reals; i++) cJSON_AddNumberToObject(o, rnames[i], reals[i]);
        cJSON *dims = cJSON_AddArrayToObject(o, "dims"), *perm = cJSON_AddArrayToObject(o, "perm");
        for (int d = 0; d < a->ndim && d < POET_MAX_DIMS; d++) cJSON_AddItemToArray(dims, cJSON_CreateNumber(a->dim[d]));
        for (int d = 0; d < POET_MAX_DIMS; d++) cJSON_AddItemToArray(perm, cJSON_CreateNumber(a->perm[d]));
        cJSON_AddItemToArray(nodes, o);
    }
    return nodes;
}

static cJSON *dump(const char *name, const poet_graph *g, uint64_t seed)
{
    rig r;
    poet_optimizer still = {POET_OPT_SGD, 0, 0, 0, 0, 0, 0};
    rig_start(&r, g, "keep-all", 0, NULL, still, seed);
    if (!r.ok) return NULL;
    const poet_node *logits = &g->nodes[g->nodes[g->loss].inputs[0]];
    uint64_t n_in = poet_shape_numel(&g->nodes[0].shape);
    float *x = malloc(n_in * sizeof *x);
    int32_t *y = malloc((size_t)logits->shape.dim[0] * sizeof *y);
    rt_batch(g, seed, x, y);
    cJSON *o = cJSON_CreateObject(), *params = cJSON_CreateObject(), *running = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "name", name);
    cJSON_AddNumberToObject(o, "seed", (double)seed);
    cJSON_AddItemToObject(o, "nodes", describe_nodes(g));
    cJSON_AddItemToObject(o, "x", floats(x, n_in));
    cJSON *labels = cJSON_AddArrayToObject(o, "labels");
    for (int64_t i = 0; i < logits->shape.dim[0]; i++) cJSON_AddItemToArray(labels, cJSON_CreateNumber(y[i]));
    char key[16];
    uint64_t s = seed;
    for (int v = 0; v < g->n_forward; v++) {
        uint64_t n = 0;
        float *w = poet_dev_params(poet_engine_device(r.e), v, false, &n);
        snprintf(key, sizeof key, "%d", v);
        if (n) cJSON_AddItemToObject(params, key, floats(w, n));
        float *b = poet_dev_buffers(poet_engine_device(r.e), v, &n);
        /* statistics other than the initial (0, 1), which a batch norm on
         * its running statistics would hardly tell from none */
        for (uint64_t i = 0; g->nodes[v].op == POET_OP_BATCHNORM2D && i < n; i++)
            b[i] = i < n / 2 ? 0.5f * rt_uniform(&s) : 1.0f + 0.75f * rt_uniform(&s);
        if (n) cJSON_AddItemToObject(running, key, floats(b, n));
    }
    cJSON_AddItemToObject(o, "params", params);
    cJSON_AddItemToObject(o, "running", running);
    double loss = NAN;
    poet_err err = {0};
    if (poet_engine_step(r.e, x, y, &loss, &err)) fprintf(stderr, "%s: %s\n", name, err.msg);
    cJSON_AddNumberToObject(o, "loss", loss);
    cJSON *grads = cJSON_AddObjectToObject(o, "grads"), *after = cJSON_AddObjectToObject(o, "running_after");
    for (int v = 0; v < g->n_forward; v++) {
        uint64_t n = 0;
        float *gw = poet_dev_params(poet_engine_device(r.e), v, true, &n);
        snprintf(key, sizeof key, "%d", v);
        if (n) cJSON_AddItemToObject(grads, key, floats(gw, n));
        float *b = poet_dev_buffers(poet_engine_device(r.e), v, &n);
        if (n) cJSON_AddItemToObject(after, key, floats(b, n));
    }
    free(x), free(y);
    rig_free(&r);
    return o;
}

int main(void)
{
    cJSON *all = cJSON_CreateArray();
    poet_graph g;
    poet_err err = {0};
    for (int k = 0; k < N_TEST_GRAPHS; k++) {
        if (test_graph_build(k, &g, &err)) return fprintf(stderr, "%s\n", err.msg), 1;
        cJSON_AddItemToArray(all, dump(test_graph_name(k), &g, 31 + (uint64_t)k));
        poet_graph_free(&g);
    }
    /* and partial training: frozen tensors, batch norms on running statistics */
    static const char *models[][2] = {{"cnn_fashion", "all"},
                                      {"resnet_small", "all"},
                                      {"resnet_small", "biases+frozen-bn"},
                                      {"cnn_fashion", "last:4+frozen-bn"},
                                      {"resnet_small", "last:5"}};
    for (size_t k = 0; k < sizeof models / sizeof *models; k++) {
        char name[64];
        snprintf(name, sizeof name, "%s --train %s", models[k][0], models[k][1]);
        if (poet_zoo_build(models[k][0], 4, &g, &err) || poet_graph_set_trainable(&g, models[k][1], &err))
            return fprintf(stderr, "%s: %s\n", name, err.msg), 1;
        cJSON_AddItemToArray(all, dump(name, &g, 77));
        poet_graph_free(&g);
    }
    char *text = cJSON_PrintUnformatted(all);
    cJSON_Delete(all);
    if (!text) return 1;
    puts(text);
    free(text);
    return 0;
}
