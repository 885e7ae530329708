/* For tests/onnx_check.py: imports an ONNX model, then with its weights
 *   - writes the logits of the batch in inference mode (DIR/eval_logits.bin);
 *   - runs one training step at lr 0 and writes its loss (DIR/loss.txt) and
 *     the gradients in place of the weights (DIR/grads.onnx);
 *   - trains three steps with SGD (lr 0.05, momentum 0.9) and writes the
 *     model (DIR/trained.onnx) and its logits (DIR/trained_logits.bin).
 * usage: onnx_dump MODEL.onnx BATCH X.bin Y.bin DIR */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rtutil.h"

static int fail(const char *what, const poet_err *err)
{
    fprintf(stderr, "onnx_dump: %s: %s\n", what, err ? err->msg : "");
    return 1;
}

static bool read_all(const char *path, void *dst, size_t bytes)
{
    FILE *f = fopen(path, "rb");
    bool ok = f && fread(dst, 1, bytes, f) == bytes;
    if (f) fclose(f);
    return ok;
}

static bool write_all(const char *dir, const char *name, const void *src, size_t bytes)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    bool ok = f && fwrite(src, 1, bytes, f) == bytes;
    if (f) fclose(f);
    return ok;
}

/* An engine on the imported model under keep-all. */
static bool start(rig *r, poet_onnx_model *m, poet_optimizer opt)
{
    memset(r, 0, sizeof *r);
    poet_err err = {0};
    poet_profile dev;
    const poet_graph *g = poet_onnx_graph(m);
    if (poet_profile_find("m4", &dev, &err) || poet_instance_from_graph(g, &dev, &r->inst, &err) ||
        poet_problem_init(&r->p, &r->inst, 0, 1e6, &err))
        return fail("graph", &err), false;
    /* room to place it: the arena's placement can need more than the peak (a DenseNet-like concat chain) */
    r->p.budget_bytes = 2 * r->p.keep_all_peak_bytes;
    poet_plan_options o = {.threads = 1, .deterministic = true};
    if (poet_plan("keep-all", &r->p, &o, &r->plan, &err)) return fail("plan", &err), false;
    uint64_t n;
    poet_engine_config cfg = {g, &r->p, &r->plan.schedule, NULL, opt, 1, 0, poet_onnx_params(m, &n),
                              poet_onnx_buffers(m, &n), POET_FROZEN_IN_RAM, false};
    if (poet_engine_new(&cfg, &r->e, &err)) return fail("engine", &err), false;
    return r->ok = true;
}

int main(int argc, char **argv)
{
    if (argc != 6) return fprintf(stderr, "usage: onnx_dump MODEL.onnx BATCH X.bin Y.bin DIR\n"), 2;
    poet_err err = {0};
    poet_onnx_options o = {atoi(argv[2]), NULL, NULL, NULL};
    poet_onnx_model *m = NULL;
    if (poet_onnx_import(argv[1], &o, &m, &err)) return fail(argv[1], &err);
    rig r;
    if (!start(&r, m, (poet_optimizer){POET_OPT_SGD, 0, 0, 0, 0, 0, 0})) return 1;
    int rows, classes;
    uint64_t per;
    poet_dev_batch_shape(poet_engine_device(r.e), &rows, &per, &classes);
    size_t nx = (size_t)poet_shape_numel(&poet_onnx_graph(m)->nodes[0].shape);
    float *x = malloc(nx * sizeof *x), *logits = malloc((size_t)rows * (size_t)classes * sizeof *logits);
    int32_t *y = malloc((size_t)rows * sizeof *y);
    if (!read_all(argv[3], x, nx * sizeof *x) || !read_all(argv[4], y, (size_t)rows * sizeof *y))
        return fail("the batch files are shorter than the model's batch", NULL);
    double loss;
    uint64_t n;
    char path[4096];
    poet_dev *d = poet_engine_device(r.e);
    if (poet_dev_predict(poet_engine_device(r.e), x, logits, &err)) return fail("predict", &err);
    write_all(argv[5], "eval_logits.bin", logits, (size_t)rows * (size_t)classes * sizeof *logits);
    if (poet_engine_step(r.e, x, y, &loss, &err)) return fail("step", &err);
    snprintf(path, sizeof path, "%s/loss.txt", argv[5]);
    FILE *f = fopen(path, "w");
    if (f) fprintf(f, "%.9g\n", loss), fclose(f);
    snprintf(path, sizeof path, "%s/grads.onnx", argv[5]);
    if (poet_onnx_write(m, poet_dev_gradients(d, &n), poet_dev_state(d, &n), path, &err)) return fail("write", &err);
    rig_free(&r);
    if (!start(&r, m, (poet_optimizer){POET_OPT_SGD, 0.05f, 0.9f, 0, 0, 0, 0})) return 1;
    for (int k = 0; k < 3; k++)
        if (poet_engine_step(r.e, x, y, &loss, &err)) return fail("step", &err);
    d = poet_engine_device(r.e);
    snprintf(path, sizeof path, "%s/trained.onnx", argv[5]);
    if (poet_onnx_write(m, poet_dev_weights(d, &n), poet_dev_state(d, &n), path, &err)) return fail("write", &err);
    if (poet_dev_predict(poet_engine_device(r.e), x, logits, &err)) return fail("predict", &err);
    write_all(argv[5], "trained_logits.bin", logits, (size_t)rows * (size_t)classes * sizeof *logits);
    rig_free(&r);
    free(x), free(y), free(logits);
    poet_onnx_free(m);
    printf("onnx_dump: %s: %d rows, %d classes\n", argv[1], rows, classes);
    return 0;
}
