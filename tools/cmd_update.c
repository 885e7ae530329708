#define _POSIX_C_SOURCE 200809L
/* poet update: rounds of deep partial updating, as a server runs them. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

#include "session.h"

static const char UPDATE_HELP[] =
    "usage: poet update (--model NAME | --onnx FILE) [--data NAME|FILE [--labels FILE]]\n"
    "                   [--data-dir DIR] [--test-data FILE [--test-labels FILE] | --test-split F]\n"
    "                   [--method full|dpu|gcpu|rpu|prune] [--k X] [--global-share A]\n"
    "                   [--epochs N] [--rounds N] [--start N] [--step N] [--val N]\n"
    "                   [--reinit] [--always-send]\n"
    "                   [--device DEV] [--budget B | --schedule FILE] [--batch N]\n"
    "                   [--seed S] [--optimizer sgd|adam] [--lr X] [--out DIR [--overwrite]] [--json]\n"
    "                   [--planner NAME] [--runtime-factor F] [--runtime-model M] [--time-limit S]\n"
    "                   [--train SPEC]\n"
    "Deep partial updating (docs/update.md): the server keeps deployed devices\n"
    "current while its data grows, sending a few percent of the weights a round.\n"
    "Round r retrains the deployed model on the first START + (r-1)*STEP examples\n"
    "of the training set, keeps the k*I weights (of I convolution and linear\n"
    "weights) that matter most, rewinds the rest to what the devices hold,\n"
    "fine-tunes the kept ones and sends them with every bias as a patch. Round 1\n"
    "deploys the first model whole. A round whose rewound model is less accurate\n"
    "on validation than the deployed one sends nothing (unless --always-send).\n"
RUNTIME_MODEL_HELP
FROZEN_HELP
    "  --method        dpu (default): global and local contributions; gcpu: global\n"
    "                  only; rpu: a random subset; prune: the largest weights, the\n"
    "                  rest zero; full: every weight\n"
    "  --k X           share of the weights sent, in (0, 1] (default 0.01)\n"
    "  --global-share A  dpu's metric: A x global + (1 - A) x local contribution,\n"
    "                  A in [0, 1] (default 0.5, the paper's; under SGD on the\n"
    "                  digits 1 does best, under Adam 0.5: BENCHMARKS.md)\n"
    "  --epochs N      of retraining, then of fine-tuning (default 10)\n"
    "  --rounds N      (default 10); --start N (default 200); --step N (default 100)\n"
    "  --val N         the last N training examples validate (default 300)\n"
    "  --reinit        retrain from a fresh initialization (devices re-create it from\n"
    "                  the seed the patch carries) when the data has more than\n"
    "                  doubled since the last one\n"
    "  --device, --budget, --schedule   the schedule of the device image that\n"
    "                  devices train with (default: a72, 100%)\n"
    "  --out DIR       write DIR/image.poet (what devices start from) and\n"
    "                  DIR/round-NN.patch for each round that sends; a DIR with an\n"
    "                  earlier run's files is refused (a device would apply its old\n"
    "                  patches) unless --overwrite, which removes them first\n"
    "Reports test accuracy and bytes sent per round.\n";

typedef struct update_args {
    train_opts t;
    const char *method, *k, *global_share, *epochs, *rounds, *start, *step, *val, *out;
    bool reinit, always_send, json, overwrite;
} update_args;

typedef struct update_values {
    train_values v;
    poet_update_options o;
    int rounds, start, step, val;
} update_values;

static int check_args(update_args *a, update_values *u)
{
    const char *cmd = "update";
    if (!a->t.device) a->t.device = "a72";
    if (!a->t.budget && !a->t.schedule) a->t.budget = "100%";
    int rc = train_opts_check(cmd, &a->t, &u->v);
    if (rc) return rc;
    if (!u->v.data) return usage_error(cmd, "give --data (digits, fashion-mnist or a file: docs/data.md)", NULL);
    if (a->t.train) return usage_error(cmd, "--train: poet update chooses what each round trains (--method, --k)", NULL);
    if (a->t.fused_update)
        return usage_error(cmd, "--fused-update: each round chooses what to send from the whole gradient, which a "
                                "fused update does not keep", NULL);
    u->o = (poet_update_options){POET_UPDATE_DPU, 0.01, 10, a->reinit, u->v.seed, a->always_send, 0.5};
    u->rounds = 10, u->start = 200, u->step = 100, u->val = 300;
    if (a->method && !poet_update_method_parse(a->method, &u->o.method))
        return usage_error(cmd, "--method must be full, dpu, gcpu, rpu or prune, got", a->method);
    if (a->k && !(parse_real(a->k, &u->o.k) && u->o.k > 0 && u->o.k <= 1))
        return usage_error(cmd, "--k must be a share in (0, 1], got", a->k);
    double *share = &u->o.global_share;
    if (a->global_share && !(parse_real(a->global_share, share) && *share >= 0 && *share <= 1))
        return usage_error(cmd, "--global-share must be a share in [0, 1], got", a->global_share);
    if (a->global_share && u->o.method != POET_UPDATE_DPU)
        return usage_error(cmd, "--global-share weighs dpu's metric; --method is", poet_update_method_name(u->o.method));
    if (a->epochs && !parse_int(a->epochs, 1, 100000, &u->o.epochs))
        return usage_error(cmd, "--epochs must be 1 to 100000, got", a->epochs);
    if (a->rounds && !parse_int(a->rounds, 1, 100000, &u->rounds))
        return usage_error(cmd, "--rounds must be 1 to 100000, got", a->rounds);
    if (a->start && !parse_int(a->start, 1, 1 << 30, &u->start))
        return usage_error(cmd, "--start must be a positive number of examples, got", a->start);
    if (a->step && !parse_int(a->step, 0, 1 << 30, &u->step))
        return usage_error(cmd, "--step must be a number of examples, got", a->step);
    if (a->val && !parse_int(a->val, 1, 1 << 30, &u->val))
        return usage_error(cmd, "--val must be a positive number of examples, got", a->val);
    return 0;
}

static int write_out(const char *dir, const char *name, const void *data, size_t len)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    poet_err err = {0};
    return poet_write_file_atomic(path, data, len, &err) ? lib_error(&err) : 0;
}

/* The deployed model after the round: what a device that applied every
 * patch so far holds, hashed as poet_dev_weights_sha256 hashes it. */
static cJSON *round_json(const poet_update_report *r, double test, const poet_update_server *srv)
{
    uint64_t n;
    const float *w = poet_update_deployed(srv, &n);
    char sha[65];
    poet_sha256_hex(w, 4 * n, sha);
    cJSON *o = cJSON_CreateObject();
    cJSON_AddNumberToObject(o, "round", r->round);
    cJSON_AddNumberToObject(o, "examples", r->examples);
    cJSON_AddBoolToObject(o, "sent", r->sent);
    cJSON_AddBoolToObject(o, "reinit", r->reinit);
    cJSON_AddNumberToObject(o, "changed", (double)r->changed);
    cJSON_AddNumberToObject(o, "patch_bytes", (double)r->patch_bytes);
    cJSON_AddNumberToObject(o, "val_accuracy_before", r->base_accuracy);
    cJSON_AddNumberToObject(o, "val_accuracy_rewound", r->rewound_accuracy);
    cJSON_AddNumberToObject(o, "val_accuracy", r->accuracy);
    cJSON_AddNumberToObject(o, "test_accuracy", test);
    cJSON_AddStringToObject(o, "weights_sha256", sha);
    return o;
}

/* The rounds; the fixed split: validation is the last --val training
 * examples, round r trains on the first start + (r-1) * step of the rest. */
static int run_rounds(const update_args *a, const update_values *u, poet_update_server *srv, const poet_dataset *d,
                      cJSON *rounds)
{
    int pool = d->n_train - u->val;
    if (pool < u->start + (u->rounds - 1) * u->step) {
        fprintf(stderr, "poet: %s has %d training examples: %d rounds from %d, +%d each, and %d to validate need %d\n",
                d->name, d->n_train, u->rounds, u->start, u->step, u->val,
                u->start + (u->rounds - 1) * u->step + u->val);
        return 1;
    }
    int *idx = malloc(sizeof *idx * (size_t)d->n_train);
    if (!idx) return lib_error(&(poet_err){POET_ERR_NOMEM, "out of memory"});
    for (int i = 0; i < d->n_train; i++) idx[i] = i;
    int rc = 0;
    uint64_t model_bytes;
    poet_update_deployed(srv, &model_bytes);
    model_bytes *= 4;
    for (int r = 0; r < u->rounds && !rc; r++) {
        poet_err err = {0};
        uint8_t *patch = NULL;
        size_t len = 0;
        poet_update_report rep;
        double test = 0;
        if (poet_update_round(srv, d, idx, u->start + r * u->step, idx + pool, u->val, &patch, &len, &rep, &err) ||
            poet_update_accuracy(srv, d->test_x, d->test_y, NULL, d->n_test, &test, &err)) {
            rc = lib_error(&err);
            break;
        }
        char name[32];
        snprintf(name, sizeof name, "round-%02d.patch", rep.round);
        if (patch && a->out) rc = write_out(a->out, name, patch, len);
        free(patch);
        if (rounds) cJSON_AddItemToArray(rounds, round_json(&rep, test, srv));
        else
            printf("round %2d: %4d examples%s, %s %7llu B (%5.2f%% of the model) setting %llu of %llu weights; "
                   "validation %.2f%% -> %.2f%%, test %.2f%%\n",
                   rep.round, rep.examples, rep.reinit ? " (re-initialized)" : "", rep.sent ? "sent" : "skipped",
                   (unsigned long long)rep.patch_bytes, 100.0 * (double)rep.patch_bytes / (double)model_bytes,
                   (unsigned long long)rep.changed, (unsigned long long)rep.weights, 100 * rep.base_accuracy,
                   100 * rep.accuracy, 100 * test);
    }
    free(idx);
    return rc;
}

/* Whether name is one of the files a run writes into --out. */
static bool is_run_file(const char *name)
{
    int round = 0, end = 0;
    return strcmp(name, "image.poet") == 0 || (sscanf(name, "round-%d.patch%n", &round, &end) == 1 && !name[end]);
}

/* --out DIR before any work: created, locked for this run, and free of an
 * earlier run's image and patches, whose rounds a device would mix with
 * this run's (--overwrite removes them). */
static int prepare_out(const update_args *a, int *lock)
{
    poet_err err = {0};
    if (mkdir(a->out, 0755) && errno != EEXIST) {
        fprintf(stderr, "poet: cannot create directory '%s': %s\n", a->out, strerror(errno));
        return 1;
    }
    if (poet_lock_dir(a->out, lock, &err)) return lib_error(&err);
    DIR *d = opendir(a->out);
    if (!d) {
        fprintf(stderr, "poet: cannot read directory '%s': %s\n", a->out, strerror(errno));
        return 1;
    }
    int rc = 0;
    for (struct dirent *e; !rc && (e = readdir(d));) {
        if (!is_run_file(e->d_name)) continue;
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", a->out, e->d_name);
        if (!a->overwrite) {
            fprintf(stderr, "poet update: '%s' holds an earlier run's %s: give another --out, or --overwrite to "
                            "remove that run's files\n", a->out, e->d_name);
            rc = 1;
        } else if (unlink(path) != 0) {
            fprintf(stderr, "poet: cannot remove '%s': %s\n", path, strerror(errno));
            rc = 1;
        }
    }
    closedir(d);
    char image[4096];
    snprintf(image, sizeof image, "%s/image.poet", a->out);
    if (!rc && poet_check_output(image, &err)) rc = lib_error(&err);
    return rc;
}

static int write_image(const char *dir, const poet_update_server *srv)
{
    if (!dir) return 0;
    size_t len;
    const uint8_t *img = poet_update_image(srv, &len);
    return write_out(dir, "image.poet", img, len);
}

int cmd_update(int argc, char **argv)
{
    update_args a = {0};
    bool help = false;
    opt opts[] = {TRAIN_OPTS(a.t), DATA_OPTS(a.t),
                  {"--method", true, &a.method, NULL}, {"--k", true, &a.k, NULL},
                  {"--global-share", true, &a.global_share, NULL},
                  {"--epochs", true, &a.epochs, NULL}, {"--rounds", true, &a.rounds, NULL},
                  {"--start", true, &a.start, NULL},   {"--step", true, &a.step, NULL},
                  {"--val", true, &a.val, NULL},       {"--out", true, &a.out, NULL},
                  {"--reinit", false, NULL, &a.reinit}, {"--always-send", false, NULL, &a.always_send},
                  {"--json", false, NULL, &a.json},    {"--overwrite", false, NULL, &a.overwrite},
                  {NULL, false, NULL, NULL}};
    int rc = parse_opts("update", argc, argv, opts, &help);
    if (rc || help) return help ? (fputs(UPDATE_HELP, stdout), 0) : rc;
    update_values u;
    if ((rc = check_args(&a, &u))) return rc;
    if (a.overwrite && !a.out) return usage_error("update", "--overwrite needs --out DIR", NULL);
    int lock = -1;
    if (a.out && (rc = prepare_out(&a, &lock))) {
        poet_unlock(lock);
        return rc;
    }
    session s;
    poet_dataset d = {0};
    poet_update_server *srv = NULL;
    poet_err err = {0};
    if ((rc = session_plan("update", &s, &a.t, &u.v))) {
        poet_unlock(lock);
        return rc;
    }
    poet_engine_config cfg = {s.g, &s.p, &s.plan.schedule, NULL, u.v.opt, u.v.seed, 0, session_params(&s),
                              session_buffers(&s), u.v.frozen, u.v.fused_update};
    if (!(rc = open_data("update", &a.t, &u.v, s.g, &d)) && poet_update_server_new(&cfg, &u.o, &srv, &err))
        rc = lib_error(&err);
    if (!rc) rc = write_image(a.out, srv);
    cJSON *doc = a.json ? cJSON_CreateObject() : NULL;
    if (!rc && doc) {
        uint64_t n;
        poet_update_deployed(srv, &n);
        cJSON_AddStringToObject(doc, "model", s.g->model);
        cJSON_AddStringToObject(doc, "data", d.name);
        cJSON_AddStringToObject(doc, "method", poet_update_method_name(u.o.method));
        cJSON_AddNumberToObject(doc, "k", u.o.k);
        if (u.o.method == POET_UPDATE_DPU) cJSON_AddNumberToObject(doc, "global_share", u.o.global_share);
        cJSON_AddNumberToObject(doc, "epochs", u.o.epochs);
        cJSON_AddNumberToObject(doc, "seed", (double)u.v.seed);
        cJSON_AddBoolToObject(doc, "reinit", u.o.reinit);
        cJSON_AddBoolToObject(doc, "always_send", u.o.always_send);
        cJSON_AddNumberToObject(doc, "params", (double)n);
        cJSON_AddNumberToObject(doc, "model_bytes", 4.0 * (double)n);
    }
    if (!rc) rc = run_rounds(&a, &u, srv, &d, doc ? cJSON_AddArrayToObject(doc, "rounds") : NULL);
    if (doc) rc = rc ? (cJSON_Delete(doc), rc) : print_json(doc);
    poet_update_server_free(srv);
    poet_dataset_free(&d);
    session_free(&s);
    poet_unlock(lock);
    return rc;
}
