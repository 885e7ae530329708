/* POET's reference instances: poet reads each as it is and reproduces its
 * derived figures; zoo models match the reference's forward layers. */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "poet/poet.h"

static const char *MODELS[] = {"linear", "vgg16", "vgg16_cifar", "resnet18", "resnet18_cifar", "resnet50",
                               "bert", "transformer"};
static const char *PLATFORMS[] = {"m0", "m4", "a72", "a72nocache"};

static cJSON *load_json(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *buf = malloc((size_t)n + 1);
    size_t got = buf ? fread(buf, 1, (size_t)n, f) : 0;
    fclose(f);
    cJSON *doc = NULL;
    if (buf && got == (size_t)n) {
        buf[n] = 0;
        doc = cJSON_Parse(buf);
    }
    free(buf);
    return doc;
}

static double num(const cJSON *o, const char *k) { return cJSON_GetObjectItemCaseSensitive(o, k)->valuedouble; }

static bool rel_eq(double a, double b, double tol) { return fabs(a - b) <= tol * fmax(fabs(a), fabs(b)); }

static void check_derived(const char *path, const cJSON *doc)
{
    poet_instance inst;
    poet_err err = {0};
    poet_status st = poet_instance_read_file(path, &inst, &err);
    CHECK_MSG(st == POET_OK, "%s", err.msg);
    if (st) return;
    poet_instance_stats s;
    CHECK(poet_instance_stats_compute(&inst, &s, &err) == POET_OK);
    const cJSON *d = cJSON_GetObjectItemCaseSensitive(doc, "derived");
    CHECK_MSG(s.nodes == (int)num(doc, "T"), "%s", path);
    CHECK_MSG(s.edges == (int)num(doc, "num_edges"), "%s", path);
    CHECK_MSG((double)s.keep_all_peak_bytes == num(d, "peak_ram_no_remat_no_paging_bytes"), "%s", path);
    CHECK_MSG((double)s.min_budget_bytes == num(d, "ram_lower_bound_bytes"), "%s", path);
    CHECK_MSG(rel_eq(s.full_memory_energy_j, num(d, "full_memory_energy_joules"), 1e-9), "%s", path);
    CHECK_MSG(rel_eq(s.full_memory_time_s, num(doc, "total_runtime_fwd_bwd"), 1e-9), "%s", path);
    CHECK_MSG((double)s.forward_activation_bytes == num(doc, "total_ram_fwd_bytes"), "%s", path);
    CHECK_MSG(s.parameter_bytes == num(doc, "parameter_bytes"), "%s", path);
    poet_instance_free(&inst);
}

static bool shape_eq(const poet_shape *s, const cJSON *arr)
{
    if (cJSON_GetArraySize(arr) != s->ndim) return false;
    int i = 0;
    for (const cJSON *it = arr->child; it; it = it->next, i++)
        if (it->valuedouble != (double)s->dim[i]) return false;
    return true;
}

/* Layer idx of "layer<idx>_<Class>": its position in POET's layer list, the
 * order in which our zoo builds the same model. */
static int layer_index(const char *name) { return atoi(name + strlen("layer")); }

static void check_zoo_matches(const char *model, const char *platform, const cJSON *doc)
{
    poet_graph g;
    poet_profile dev;
    poet_instance inst;
    poet_err err = {0};
    CHECK(poet_profile_find(platform, &dev, &err) == POET_OK);
    CHECK(poet_zoo_build(model, 1, &g, &err) == POET_OK);
    CHECK(poet_instance_from_graph(&g, &dev, &inst, &err) == POET_OK);
    int matched = 0;
    for (const cJSON *n = cJSON_GetObjectItemCaseSensitive(doc, "nodes")->child; n; n = n->next) {
        if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(n, "is_backward"))) continue;
        const char *type = cJSON_GetObjectItemCaseSensitive(n, "type")->valuestring;
        if (strcmp(type, "CrossEntropyLoss") == 0) continue; /* docs/graph.md: per-row loss */
        int i = layer_index(cJSON_GetObjectItemCaseSensitive(n, "name")->valuestring);
        CHECK_MSG(i < g.n_forward, "%s: layer %d", model, i);
        if (i >= g.n_forward) continue;
        const poet_node *ours = &g.nodes[i];
        const poet_cnode *c = &inst.nodes[i];
        bool ok = shape_eq(&ours->shape, cJSON_GetObjectItemCaseSensitive(n, "out_shape")) &&
                  (double)c->bytes == num(n, "ram_bytes") && c->flops == num(n, "flop") &&
                  c->compute_j == num(n, "compute_joules") && c->time_s == num(n, "cpu_cost_ms") &&
                  c->pagein_j == num(n, "pagein_joules") && c->pageout_j == num(n, "pageout_joules") &&
                  (double)(ours->params + ours->buffers) * 4 == num(n, "param_bytes");
        CHECK_MSG(ok, "%s on %s: layer %d (%s) differs from the reference", model, platform, i, type);
        matched += ok;
    }
    CHECK(matched > 0);
    /* the loss is the one forward node that differs: same FLOPs, per-row output */
    CHECK(inst.parameter_bytes == num(doc, "parameter_bytes"));
    poet_instance_free(&inst);
    poet_graph_free(&g);
}

/* bert and transformer use real attention primitives (docs/graph.md):
 * compare what is comparable, the blocks' boundaries and parameter count. */
static void check_encoder_blocks(const char *model, const cJSON *doc)
{
    poet_graph g;
    poet_err err = {0};
    CHECK(poet_zoo_build(model, 1, &g, &err) == POET_OK);
    int ref_adds = 0, our_adds = 0;
    for (const cJSON *n = cJSON_GetObjectItemCaseSensitive(doc, "nodes")->child; n; n = n->next)
        if (strcmp(cJSON_GetObjectItemCaseSensitive(n, "type")->valuestring, "SkipAddLayer") == 0) {
            ref_adds++;
            CHECK(shape_eq(&g.nodes[0].shape, cJSON_GetObjectItemCaseSensitive(n, "out_shape")));
        }
    for (int i = 0; i < g.n_forward; i++)
        if (g.nodes[i].op == POET_OP_ADD) {
            our_adds++;
            CHECK(g.nodes[i].shape.dim[0] == 512 && g.nodes[i].shape.dim[1] == 768);
        }
    CHECK(ref_adds == our_adds && our_adds > 0);
    /* ours adds Q/K/V biases and layernorm scales: within 0.1% */
    double ours = 4.0 * (double)(poet_graph_param_count(&g) + poet_graph_buffer_count(&g));
    CHECK_MSG(rel_eq(ours, num(doc, "parameter_bytes"), 1e-3), "%s: %g vs %g", model, ours,
              num(doc, "parameter_bytes"));
    poet_graph_free(&g);
}

int main(void)
{
    for (size_t m = 0; m < sizeof MODELS / sizeof *MODELS; m++)
        for (size_t p = 0; p < sizeof PLATFORMS / sizeof *PLATFORMS; p++) {
            char path[512];
            snprintf(path, sizeof path, "%s/reference/%s__%s.json", POET_TEST_DATA, MODELS[m], PLATFORMS[p]);
            cJSON *doc = load_json(path);
            CHECK_MSG(doc != NULL, "cannot load %s", path);
            if (!doc) continue;
            check_derived(path, doc);
            if (strcmp(MODELS[m], "bert") == 0 || strcmp(MODELS[m], "transformer") == 0)
                check_encoder_blocks(MODELS[m], doc);
            else
                check_zoo_matches(MODELS[m], PLATFORMS[p], doc);
            cJSON_Delete(doc);
        }
    return check_report();
}
