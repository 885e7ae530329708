#define _POSIX_C_SOURCE 200809L
/* poet train: plan a schedule for a budget, then train under it. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/stat.h>
#include <unistd.h>

#include "session.h"

static const char TRAIN_HELP[] =
    "usage: poet train (--model NAME | --onnx FILE) --device DEV\n"
    "                  (--budget BYTES|PCT%|ram [--planner NAME] [--runtime-factor F]\n"
    "                   [--runtime-model M]\n"
    "                   [--time-limit S] | --schedule FILE)\n"
    "                  [--train SPEC] [--data NAME|FILE [--labels FILE]] [--data-dir DIR]\n"
    "                  [--test-data FILE [--test-labels FILE] | --test-split F]\n"
    "                  [--epochs N | --steps N] [--batch N] [--seed S]\n"
    "                  [--optimizer sgd|adam] [--lr X] [--frozen flash|ram] [--fused-update]\n"
    "                  [--checkpoint DIR] [--checkpoint-every N] [--resume | --overwrite]\n"
    "                  [--storage FILE] [--onnx-out FILE] [--json] [--quiet]\n"
    "                  [--compress SPEC [--compress-epochs N]]\n"
    "Plans a schedule for one training iteration under the budget (bytes, or a\n"
    "percentage of the keep-all activation peak), then trains the model on real\n"
    "data inside an arena of the planned size, paging to a storage file and\n"
    "recomputing as the schedule says. Models: poet models (trainable ones).\n"
    "  --train SPEC        what trains: all (default), biases, last:N, ratio:R or mask:FILE\n"
    "                    (+frozen-bn, +masks, +ratio:R)\n"
    "                      (docs/partial.md); frozen tensors keep their weights\n"
RUNTIME_MODEL_HELP
FROZEN_HELP
    "  --budget            as poet plan reads it (ram: the arena the RAM leaves)\n"
    "  --schedule FILE     train under a schedule from poet plan --out instead of\n"
    "                      planning (checked against the model, device and batch)\n"
DATA_HELP
    "                      (default: the model's data set)\n";
static const char TRAIN_HELP_MORE[] = /* two strings: C11 promises literals of 4095 bytes */
    "  --epochs N          passes over the training set (default 1)\n"
    "  --steps N           train N steps in all instead\n"
    "  --optimizer         sgd (momentum 0.9, lr 0.05) or adam (lr 0.001)\n"
    "  --checkpoint DIR    write DIR/checkpoint.poet atomically after each epoch\n"
    "                      and every N steps (--checkpoint-every, default 100)\n"
    "  --resume            continue from DIR/checkpoint.poet, bit-exactly, under\n"
    "                      the schedule saved in DIR/schedule.json (not planned again);\n"
    "                      the run must use the data, seed and optimizer it was written with\n"
    "  --overwrite         start afresh in a DIR that holds a checkpoint, replacing it\n"
    "                      (without --resume or --overwrite such a DIR is refused; one run\n"
    "                      at a time holds DIR)\n"
    "  --storage FILE      the file standing in for flash, used where the schedule pages\n"
    "                      (default: DIR/storage.bin, or an unnamed temporary file); a\n"
    "                      non-empty file that is not poet's storage is refused\n"
    "  --onnx FILE         your model (docs/onnx.md): its initializers are the initial\n"
    "                      weights; --data is required\n"
    "  --onnx-out FILE     write the ONNX model with the trained weights (--onnx only)\n"
    "  --compress SPEC     then compress the trained model, under the same schedule,\n"
    "                      for N more epochs (default: --epochs) and report each\n"
    "                      result on the test set: dress:0,50,75,90 (nested sparse\n"
    "                      subnets, docs/sparse.md), alq:B, ste:B (B bits a weight\n"
    "                      on average, groups of 64) or bwn (docs/alq.md); the\n"
    "                      engine keeps the compressed weights (the dense backbone\n"
    "                      for dress) for --onnx-out; not checkpointed\n";

typedef struct train_args {
    train_opts t;
    const char *epochs, *steps, *checkpoint, *every, *storage, *onnx_out, *compress, *compress_epochs;
    bool json, resume, overwrite, quiet;
} train_args;

typedef struct parsed {
    train_values v;
    int epochs;
    long steps, every;
    int compress_epochs;
    bool dress;                   /* --compress dress:LIST, else a quantizer */
    poet_dress_options dress_opt; /* epochs and seed filled in later */
    poet_quant_options quant_opt;
} parsed;

/* --compress SPEC. */
static bool parse_compress(const char *spec, parsed *p)
{
    char *end;
    if (strncmp(spec, "dress:", 6) == 0) {
        uint32_t bp[POET_SPARSE_MAX_LEVELS];
        int n;
        if (!parse_sparsity_levels(spec + 6, bp, &n)) return false;
        p->dress = true, p->dress_opt.n_levels = (uint32_t)n;
        for (int k = 0; k < n; k++) p->dress_opt.sparsity_bp[k] = (uint16_t)bp[k];
        return true;
    }
    poet_quant_options o = {POET_QUANT_ALQ, 64, 3, 1, 0, 0, 10, 1e-3f, 0};
    if (strcmp(spec, "bwn") == 0) o.method = POET_QUANT_BWN;
    else if (strncmp(spec, "alq:", 4) == 0 || strncmp(spec, "ste:", 4) == 0) {
        o.method = spec[0] == 'a' ? POET_QUANT_ALQ : POET_QUANT_STE;
        o.target_bits = strtod(spec + 4, &end);
        if (end == spec + 4 || *end || !(o.target_bits > 0 && o.target_bits <= (spec[0] == 'a' ? 3 : 6))) return false;
    } else {
        return false;
    }
    p->quant_opt = o;
    return true;
}

static int check_args(const train_args *a, parsed *p)
{
    const char *cmd = "train";
    p->epochs = 1, p->steps = 0, p->every = 100;
    int rc = train_opts_check(cmd, &a->t, &p->v);
    if (rc) return rc;
    if (a->epochs && a->steps) return usage_error(cmd, "give --epochs or --steps, not both", NULL);
    if (a->epochs && !parse_int(a->epochs, 1, 100000, &p->epochs))
        return usage_error(cmd, "--epochs must be 1 to 100000, got", a->epochs);
    if (a->steps && !parse_long(a->steps, 1, 1000000000L, &p->steps))
        return usage_error(cmd, "--steps must be 1 to 1e9, got", a->steps);
    if (a->every && !parse_long(a->every, 1, 1000000000L, &p->every))
        return usage_error(cmd, "--checkpoint-every must be 1 to 1e9 steps, got", a->every);
    if (a->compress && !parse_compress(a->compress, p))
        return usage_error(cmd, "--compress must be dress:LIST (increasing % below 100), alq:B (0 < B <= 3), ste:B "
                                "(0 < B <= 6) or bwn, got", a->compress);
    if (a->compress_epochs && !a->compress) return usage_error(cmd, "--compress-epochs needs --compress", NULL);
    p->compress_epochs = p->epochs;
    if (a->compress_epochs && !parse_int(a->compress_epochs, 1, 100000, &p->compress_epochs))
        return usage_error(cmd, "--compress-epochs must be 1 to 100000, got", a->compress_epochs);
    if (a->resume && !a->checkpoint) return usage_error(cmd, "--resume needs --checkpoint DIR", NULL);
    if (a->overwrite && !a->checkpoint) return usage_error(cmd, "--overwrite needs --checkpoint DIR", NULL);
    if (a->overwrite && a->resume) return usage_error(cmd, "give --resume or --overwrite, not both", NULL);
    if (a->onnx_out && !a->t.onnx) return usage_error(cmd, "--onnx-out needs --onnx FILE", NULL);
    if (!p->v.data) return usage_error(cmd, "give --data (digits, fashion-mnist or a file: docs/data.md)", NULL);
    return 0;
}

/* Everything a run holds, released in one place. */
typedef struct run {
    session s;
    poet_engine *e;
    poet_dataset d;
    char ckpt[4096], storage[4096];
    int lock; /* on the checkpoint directory, or -1 */
} run;

static void run_free(run *r)
{
    poet_engine_free(r->e);
    poet_unlock(r->lock);
    poet_dataset_free(&r->d);
    session_free(&r->s);
}

static int file_error(const char *what, const char *path)
{
    fprintf(stderr, "poet train: %s '%s'\n", what, path);
    return 1;
}

/* The checkpoint directory, locked for this run (a second run with the
 * same directory would overwrite its storage and checkpoints), and what it
 * holds: a checkpoint is continued with --resume, replaced with
 * --overwrite, and never replaced silently. */
static int prepare_checkpoint(run *r, const train_args *a)
{
    poet_err err = {0};
    struct stat st;
    bool existed = stat(a->checkpoint, &st) == 0;
    if (a->resume && !existed) return file_error("--resume: there is no checkpoint directory (a typo?):", a->checkpoint);
    if (existed && !S_ISDIR(st.st_mode)) return file_error("--checkpoint must name a directory; this is a file:", a->checkpoint);
    if (!existed && mkdir(a->checkpoint, 0755) != 0) {
        fprintf(stderr, "poet: cannot create checkpoint directory '%s': %s\n", a->checkpoint, strerror(errno));
        return 1;
    }
    if (poet_lock_dir(a->checkpoint, &r->lock, &err)) return lib_error(&err);
    snprintf(r->ckpt, sizeof r->ckpt, "%s/checkpoint.poet", a->checkpoint);
    bool has = access(r->ckpt, F_OK) == 0;
    if (has && !a->resume && !a->overwrite)
        return file_error("the directory holds the checkpoint of an earlier run (--resume continues it, --overwrite "
                          "starts afresh and replaces it):", a->checkpoint);
    if (!has && a->resume)
        return file_error("--resume: the directory holds no checkpoint to resume (a typo? leave out --resume to start "
                          "a run there):", a->checkpoint);
    return poet_check_output(r->ckpt, &err) ? lib_error(&err) : 0;
}

/* The files of the checkpoint directory and of storage, checked before
 * any work (parse_opts checks --onnx-out): a bad path found after training
 * would lose the run. */
static int prepare_files(run *r, const train_args *a)
{
    int rc = a->checkpoint ? prepare_checkpoint(r, a) : 0;
    if (rc) return rc;
    if (a->storage) snprintf(r->storage, sizeof r->storage, "%s", a->storage);
    else if (a->checkpoint) snprintf(r->storage, sizeof r->storage, "%s/storage.bin", a->checkpoint);
    return 0;
}

/* Storage only where the schedule pages: a file named by --storage or kept
 * in the checkpoint directory, else an unnamed temporary one. */
static int start_engine(run *r, const parsed *q)
{
    poet_err err = {0};
    poet_storage st = {0}, *use = NULL;
    uint64_t cap = 0;
    for (int i = 0; i < r->s.inst.T; i++) cap += r->s.inst.nodes[i].bytes; /* enough for any schedule */
    if (r->s.sim.paged_out_bytes) {
        if (r->storage[0] ? poet_storage_open_file(r->storage, cap, &st, &err) : poet_storage_open_temp(NULL, cap, &st, &err))
            return lib_error(&err);
        use = &st;
    }
    poet_engine_config cfg = {r->s.g, &r->s.p, &r->s.plan.schedule, use, q->v.opt, q->v.seed, 0, session_params(&r->s),
                              session_buffers(&r->s), q->v.frozen, q->v.fused_update};
    if (poet_engine_new(&cfg, &r->e, &err)) {
        poet_storage_close(&st);
        return lib_error(&err);
    }
    return 0;
}

/* The imported model with the trained weights and statistics. */
static int write_onnx(run *r, const char *path)
{
    if (!path) return 0;
    poet_err err = {0};
    uint64_t n;
    poet_dev *d = poet_engine_device(r->e);
    if (poet_onnx_write(r->s.onnx, poet_dev_weights(d, &n), poet_dev_state(d, &n), path, &err)) return lib_error(&err);
    return 0;
}

typedef struct progress_ctx {
    bool bar, lines;
    cJSON *epochs;    /* per epoch: train loss, test loss and accuracy */
    double next_line; /* lines: when the next may be written (a pipe gets one every 10 s) */
} progress_ctx;

/* Steps of the run, not of the epoch: --steps 1500 ends at 1500/1500. */
static void on_progress(void *ctx, const poet_train_progress *p)
{
    progress_ctx *c = ctx;
    long total = p->total_steps > 0 ? p->total_steps : 1;
    if (c->bar) {
        int width = 30, done = (int)(width * p->step / total);
        fprintf(stderr, "\repoch %d/%d [%.*s%*s] step %ld/%ld loss %.4f", p->epoch, p->epochs, done,
                "==============================", width - done, "", p->step, p->total_steps, p->loss);
        if (p->epoch_done || p->step == p->total_steps) fputc('\n', stderr);
    }
    if (c->lines && (p->step == p->total_steps || (!p->epoch_done && monotonic_s() >= c->next_line))) {
        fprintf(stderr, "epoch %d/%d step %ld/%ld (%.0f%%) loss %.4f\n", p->epoch, p->epochs, p->step, p->total_steps,
                100.0 * (double)p->step / (double)total, p->loss);
        c->next_line = monotonic_s() + 10;
    }
    if (p->epoch_done && c->epochs) {
        cJSON *o = cJSON_CreateObject();
        cJSON_AddNumberToObject(o, "epoch", p->epoch);
        cJSON_AddNumberToObject(o, "step", (double)p->step);
        cJSON_AddNumberToObject(o, "train_loss", p->train_loss);
        cJSON_AddNumberToObject(o, "test_loss", p->test_loss);
        cJSON_AddNumberToObject(o, "test_accuracy", p->test_accuracy);
        cJSON_AddItemToArray(c->epochs, o);
    }
    if (p->epoch_done && (c->bar || c->lines))
        fprintf(stderr, "epoch %d: train loss %.4f, test loss %.4f, test accuracy %.2f%%\n", p->epoch, p->train_loss,
                p->test_loss, 100 * p->test_accuracy);
}

/* Prints the run's report; with json and keep, hands the JSON object to
 * *keep instead, for more to be added before it is printed. */
static int report(const run *r, const poet_train_report *tr, cJSON *epochs, bool json, cJSON **keep)
{
    const poet_engine_stats *s = poet_engine_get_stats(r->e);
    char sha[65];
    poet_dev_weights_sha256(poet_engine_device(r->e), sha);
    const char *planner = r->s.plan.schedule.planner;
    if (!json) {
        printf("%s on %s (%s), planner %s: budget %llu B of keep-all %llu B\n", r->s.g->model, r->s.inst.device.name,
               r->d.name, planner, (unsigned long long)r->s.p.budget_bytes, (unsigned long long)r->s.p.keep_all_peak_bytes);
        printf("  data: %d training examples, %d test", r->d.n_train, r->d.n_test);
        if (r->d.held_out > 0) printf(" (%g%% of %s held out)", 100 * r->d.held_out, r->d.name);
        printf("\n");
        if (!isnan(tr->initial_test_accuracy))
            printf("  before training: test loss %.4f, test accuracy %.2f%%\n", tr->initial_test_loss,
                   100 * tr->initial_test_accuracy);
        printf("  trained %ld steps (from step %ld): final loss %.4f, test loss %.4f, test accuracy %.2f%%\n", tr->steps,
               tr->resumed_at, tr->final_loss, tr->test_loss, 100 * tr->test_accuracy);
        printf("  arena %llu B, peak written %llu B; persistent %llu B; storage %llu B\n",
               (unsigned long long)s->arena_bytes, (unsigned long long)s->arena_peak_bytes,
               (unsigned long long)s->persistent_bytes, (unsigned long long)s->storage_bytes);
        char out[32], in[32];
        printf("  %ld recomputations, %s paged out, %s paged in\n", s->recomputations,
               format_bytes(s->paged_out_bytes, out), format_bytes(s->paged_in_bytes, in));
        printf("  device energy %.6g J (%.6g J per step planned); host %.2f s (kernels %.2f s, waiting %.2f s)\n",
               s->device_energy_j, r->s.sim.energy_j, tr->host_seconds, s->host_compute_s, s->host_wait_s);
        printf("  weights sha256 %s\n", sha);
        cJSON_Delete(epochs);
        return 0;
    }
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "model", r->s.g->model);
    cJSON_AddStringToObject(o, "data", r->d.name);
    cJSON_AddNumberToObject(o, "train_examples", r->d.n_train);
    cJSON_AddNumberToObject(o, "test_examples", r->d.n_test);
    cJSON_AddNumberToObject(o, "held_out", r->d.held_out);
    cJSON_AddStringToObject(o, "device", r->s.inst.device.name);
    cJSON_AddStringToObject(o, "planner", planner);
    cJSON_AddNumberToObject(o, "steps", (double)tr->steps);
    cJSON_AddNumberToObject(o, "resumed_at_step", (double)tr->resumed_at);
    cJSON_AddNumberToObject(o, "final_loss", tr->final_loss);
    cJSON_AddNumberToObject(o, "test_loss", tr->test_loss);
    cJSON_AddNumberToObject(o, "test_accuracy", tr->test_accuracy);
    if (!isnan(tr->initial_test_accuracy)) {
        cJSON_AddNumberToObject(o, "initial_test_loss", tr->initial_test_loss);
        cJSON_AddNumberToObject(o, "initial_test_accuracy", tr->initial_test_accuracy);
    }
    cJSON_AddStringToObject(o, "weights_sha256", sha);
    cJSON_AddNumberToObject(o, "budget_bytes", (double)r->s.p.budget_bytes);
    cJSON_AddNumberToObject(o, "keep_all_peak_bytes", (double)r->s.p.keep_all_peak_bytes);
    cJSON_AddNumberToObject(o, "arena_bytes", (double)s->arena_bytes);
    cJSON_AddNumberToObject(o, "arena_peak_bytes", (double)s->arena_peak_bytes);
    cJSON_AddNumberToObject(o, "persistent_bytes", (double)s->persistent_bytes);
    cJSON_AddNumberToObject(o, "storage_bytes", (double)s->storage_bytes);
    cJSON_AddNumberToObject(o, "paged_bytes", (double)(s->paged_out_bytes + s->paged_in_bytes));
    cJSON_AddNumberToObject(o, "paged_out_bytes", (double)s->paged_out_bytes);
    cJSON_AddNumberToObject(o, "paged_in_bytes", (double)s->paged_in_bytes);
    cJSON_AddNumberToObject(o, "recomputations", (double)s->recomputations);
    cJSON_AddNumberToObject(o, "device_energy_j", s->device_energy_j);
    cJSON_AddNumberToObject(o, "device_compute_s", s->device_compute_s);
    cJSON_AddNumberToObject(o, "device_transfer_s", s->device_transfer_s);
    cJSON_AddNumberToObject(o, "planned_energy_per_step_j", r->s.sim.energy_j);
    cJSON_AddNumberToObject(o, "planned_time_per_step_s", r->s.sim.time_with_paging_s);
    cJSON_AddNumberToObject(o, "host_seconds", tr->host_seconds);
    cJSON_AddNumberToObject(o, "host_step_seconds", tr->step_seconds);
    cJSON_AddNumberToObject(o, "host_eval_seconds", tr->eval_seconds);
    cJSON_AddNumberToObject(o, "host_kernel_seconds", s->host_compute_s);
    cJSON_AddNumberToObject(o, "host_wait_seconds", s->host_wait_s);
    cJSON_AddItemToObject(o, "epochs", epochs ? epochs : cJSON_CreateArray());
    cJSON *ops = cJSON_AddObjectToObject(o, "host_kernel_seconds_by_op");
    for (int k = 0; k < POET_OP_COUNT; k++)
        if (s->host_op_s[k] > 0) cJSON_AddNumberToObject(ops, poet_op_name((poet_op)k), s->host_op_s[k]);
    if (keep) return *keep = o, 0;
    return print_json(o);
}

/* --compress: the trained model made nested-sparse or multi-bit under the
 * same engine, each result measured on the test set; into *out (JSON) and
 * on stdout unless json. */
static int compress(run *r, const parsed *q, bool json, cJSON **out)
{
    poet_err err = {0};
    cJSON *o = cJSON_CreateObject();
    *out = o;
    double loss, acc;
    if (q->dress) {
        poet_dress_options d = q->dress_opt;
        d.epochs = q->compress_epochs, d.seed = q->v.seed;
        poet_dress *t;
        if (poet_dress_new(r->e, r->s.g, &d, &t, &err)) return lib_error(&err);
        poet_status st = poet_dress_train(t, &r->d, &err);
        cJSON *levels = cJSON_AddArrayToObject(o, "levels");
        for (uint32_t k = 0; !st && k < d.n_levels; k++) {
            if ((st = poet_dress_evaluate(t, &r->d, k, &loss, &acc, &err))) break;
            cJSON *l = cJSON_CreateObject();
            cJSON_AddNumberToObject(l, "sparsity", d.sparsity_bp[k] / 1e4);
            cJSON_AddNumberToObject(l, "test_accuracy", acc);
            cJSON_AddItemToArray(levels, l);
            if (!json) printf("  DRESS-style level %5.2f%% sparse: test accuracy %.2f%%\n", d.sparsity_bp[k] / 100.0, 100 * acc);
        }
        poet_dress_free(t);
        return st ? lib_error(&err) : 0;
    }
    poet_quant_options qo = q->quant_opt;
    qo.epochs = q->compress_epochs;
    qo.prune_epochs = qo.method != POET_QUANT_ALQ ? 0 : q->compress_epochs >= 3 ? q->compress_epochs / 3 : 1;
    qo.seed = q->v.seed;
    poet_quant *t;
    if (poet_quant_new(r->e, r->s.g, &qo, &t, &err)) return lib_error(&err);
    poet_status st = poet_quant_train(t, &r->d, &err);
    if (!st) st = poet_evaluate(r->e, r->d.test_x, r->d.test_y, NULL, r->d.n_test, &loss, &acc, &err);
    if (!st) {
        static const char *names[] = {"alq", "ste", "bwn"};
        cJSON_AddStringToObject(o, "method", names[qo.method]);
        cJSON_AddNumberToObject(o, "bits", poet_quant_bits(t));
        cJSON_AddNumberToObject(o, "bytes", (double)poet_quant_bytes(t));
        cJSON_AddNumberToObject(o, "test_accuracy", acc);
        if (!json)
            printf("  %s: %.3f bits a weight on average, %llu B of packed layers: test accuracy %.2f%%\n", names[qo.method],
                   poet_quant_bits(t), (unsigned long long)poet_quant_bytes(t), 100 * acc);
    }
    poet_quant_free(t);
    return st ? lib_error(&err) : 0;
}

/* The schedule: planned now (and kept in the checkpoint directory, so that
 * --resume trains under it again without planning), read from --schedule,
 * or, on --resume, the one the checkpoint directory keeps. */
static int plan_or_resume(run *r, const train_args *a, const parsed *q)
{
    char saved[4096 + 16];
    snprintf(saved, sizeof saved, "%s/schedule.json", a->checkpoint ? a->checkpoint : ".");
    train_opts t = a->t;
    bool resumed = a->resume && !t.schedule && access(saved, F_OK) == 0;
    if (resumed) t.schedule = saved;
    int rc = session_plan("train", &r->s, &t, &q->v);
    if (rc || !a->checkpoint || resumed) return rc;
    poet_err err = {0};
    char *text = poet_schedule_to_json(&r->s.plan.schedule, &r->s.inst);
    if (!text) return lib_error(&(poet_err){POET_ERR_NOMEM, "out of memory"});
    if (poet_write_file_atomic(saved, text, strlen(text), &err)) rc = lib_error(&err);
    free(text);
    return rc;
}

int cmd_train(int argc, char **argv)
{
    train_args a = {0};
    bool help = false;
    opt opts[] = {TRAIN_OPTS(a.t), DATA_OPTS(a.t),
                  {"--epochs", true, &a.epochs, NULL},     {"--steps", true, &a.steps, NULL},
                  {"--checkpoint", true, &a.checkpoint, NULL},
                  {"--checkpoint-every", true, &a.every, NULL}, {"--storage", true, &a.storage, NULL},
                  OUTPUT_OPT("--onnx-out", a.onnx_out), {"--compress", true, &a.compress, NULL},
                  {"--compress-epochs", true, &a.compress_epochs, NULL},
                  {"--json", false, NULL, &a.json},        {"--resume", false, NULL, &a.resume},
                  {"--overwrite", false, NULL, &a.overwrite},
                  {"--quiet", false, NULL, &a.quiet},      {NULL, false, NULL, NULL}};
    int rc = parse_opts("train", argc, argv, opts, &help);
    if (rc || help) return help ? (fputs(TRAIN_HELP, stdout), fputs(TRAIN_HELP_MORE, stdout), 0) : rc;
    parsed q;
    if ((rc = check_args(&a, &q))) return rc;
    run r;
    memset(&r, 0, sizeof r);
    r.lock = -1;
    poet_err err = {0};
    if (!(rc = prepare_files(&r, &a)) && !(rc = plan_or_resume(&r, &a, &q)))
        rc = open_data("train", &a.t, &q.v, r.s.g, &r.d);
    if (!rc) rc = start_engine(&r, &q);
    if (!rc) {
        progress_ctx pc = {isatty(2) && !a.quiet, !isatty(2) && !a.quiet, cJSON_CreateArray(), monotonic_s() + 10};
        poet_train_options o = {q.epochs, q.steps, a.checkpoint ? r.ckpt : NULL, q.every, a.resume, on_progress, &pc,
                                r.s.onnx != NULL};
        poet_train_report tr;
        if (poet_train(r.e, &r.d, &o, &tr, &err)) {
            rc = lib_error(&err);
            cJSON_Delete(pc.epochs);
        } else {
            cJSON *whole = NULL, *compressed = NULL;
            rc = report(&r, &tr, pc.epochs, a.json, a.compress ? &whole : NULL);
            if (!rc && a.compress) rc = compress(&r, &q, a.json, &compressed);
            if (!rc) rc = write_onnx(&r, a.onnx_out);
            if (whole && !rc) {
                cJSON_AddItemToObject(whole, "compress", compressed);
                rc = print_json(whole);
            } else {
                cJSON_Delete(whole), cJSON_Delete(compressed);
            }
        }
    }
    run_free(&r);
    return rc;
}
