#define _POSIX_C_SOURCE 200809L
/* poet emulate: train a planned model on the emulated STM32F405 (QEMU's
 * netduinoplus2) with the example firmware, and compare its weights with the
 * host's. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "board_io.h"
#include "board_times.h"
#include "session.h"

#ifndef POET_FIRMWARE_DIR
#define POET_FIRMWARE_DIR "build/firmware"
#endif

/* ---- poet emulate ---- */

static const char EMULATE_HELP[] =
    "usage: poet emulate (--model NAME | --onnx FILE) (--budget BYTES|PCT%|ram | --schedule FILE)\n"
    "                    [--steps N] [--batch N] [--seed S] [--data-dir DIR]\n"
    "                    [--data NAME|FILE [--labels FILE]] [--test-data FILE\n"
    "                    [--test-labels FILE] | --test-split F] [--device DEV]\n"
    "                    [--planner NAME] [--runtime-factor F] [--runtime-model M]\n"
    "                    [--time-limit S]\n"
    "                    [--optimizer sgd|adam] [--lr X] [--chunk N] [--train SPEC]\n"
    "                    [--storage sd|ram] [--json] [--keep DIR] [--timeout S]\n"
    "                    [--firmware ELF] [--qemu PATH] [--no-host]\n"
    "                    [--memory BYTES] [--fail-write N] [--fail-read N] [--profile]\n"
    "                    [--rates FILE] [--attend FILE] [--onnx-out FILE]\n"
    "                    [--test-examples N] [--quiet] [--calibrate FILE]\n"
    "Plans a training iteration (costs from --device, default stm32f405: this board;\n"
    "--budget ram: its RAM less what the firmware keeps, measured from --firmware),\n"
    "writes the device image and N batches of the data set in the order poet train\n"
    "feeds them, then trains on QEMU's netduinoplus2 (STM32F405, Cortex-M4F, 192 KiB\n"
    "of RAM) with the example firmware, paging to an SD card (a file, through\n"
    "semihosting) or to RAM. Reports the RAM used, instructions per step\n"
    "(-icount shift=0), the weights' SHA-256 and the test accuracy the board\n"
    "measures, beside the host's for the same steps under the same schedule and\n"
    "under keep-all (--no-host skips those). A progress line shows the board's\n"
    "steps (on a terminal; when piped a line every 10 s; --quiet: none).\n"
    "A model that does not fit the board is refused before QEMU starts.\n"
    "  --steps N       training steps (default 5)\n"
RUNTIME_MODEL_HELP
FROZEN_HELP
DATA_HELP
    "  --train SPEC    what trains: all, biases, last:N, ratio:R or mask:FILE, then\n"
    "                +frozen-bn, +masks, +ratio:R (docs/partial.md)\n"
    "  --test-examples N  evaluate the trained model on the board on the first N\n"
    "                  test examples (default 1000, or all if fewer; 0: none)\n"
    "  --keep DIR      keep the image, data, storage and weights files there\n"
    "  --onnx-out FILE the --onnx model with the weights and statistics the board\n"
    "                  ended with\n"
    "  --memory BYTES  hand the device library only this much of the pool\n"
    "  --fail-write N  the SD card's Nth write fails (fault injection); --fail-read too\n"
    "  --profile       time every node too: the instructions a step of each op\n"
    "                  measured beside the --device profile's prediction\n"
    "  --calibrate FILE  --profile, then write a device profile with per-op costs\n"
    "                  fit to what the board measured (docs/devices.md): plan,\n"
    "                  train and emulate take it with --device\n"
    "  --rates FILE    a learning rate per tensor: u32 count (2 a forward node),\n"
    "                  then floats (weights', bias's), little-endian\n"
    "  --attend FILE   at one step, only the rows with the largest gradient train\n"
    "                  from then on: u32 step (from 0), u32 count, then count\n"
    "                  pairs of u32 node and rows kept (docs/partial.md)\n";

enum { RAM_LIMIT_BYTES = 192 * 1024 };

typedef struct emulate_args {
    train_opts t;
    const char *steps, *chunk, *storage, *keep, *timeout, *firmware, *qemu, *memory, *fail_write, *fail_read;
    const char *rates, *attend, *onnx_out;
    const char *test_examples, *calibrate;
    bool json, no_host, profile, quiet, help;
} emulate_args;

/* --rates and --attend as the firmware reads them: little-endian words. */
typedef struct adaptation {
    float *rates;   /* 2 a forward node, or NULL */
    uint32_t *attend; /* step, count, then (node, rows kept) pairs; or NULL */
} adaptation;

typedef struct emulation {
    session s;
    adaptation ad;
    train_values v;
    long steps, timeout_s;
    bool sd;
    uint8_t *img;
    size_t img_len;
    poet_dev_memory need;
    board_map map;
    poet_dataset d;
    char dir[4096];
    bool temp_dir;
    cJSON *device; /* the firmware's report */
    enum { PROGRESS_NONE, PROGRESS_LINES, PROGRESS_BAR } progress;
    double next_progress;
    int test_n;           /* test examples evaluated on the board (and the host) */
    double host_accuracy; /* the host's, on the same examples under the same schedule */
    int exit_code;
} emulation;

static int check_emulate_args(const emulate_args *a, emulation *em)
{
    const char *cmd = "emulate";
    int rc = train_opts_check(cmd, &a->t, &em->v);
    if (rc) return rc;
    int n = 5, timeout = 600;
    if (a->steps && !parse_int(a->steps, 1, 1000000, &n)) return usage_error(cmd, "--steps must be 1 to 1e6, got", a->steps);
    if (a->timeout && !parse_int(a->timeout, 1, 86400, &timeout))
        return usage_error(cmd, "--timeout must be 1 to 86400 seconds, got", a->timeout);
    if (!parse_chunk(a->chunk, &em->v.chunk)) return usage_error(cmd, "--chunk must be 0 to 2^20 positions, got", a->chunk);
    if (a->storage && strcmp(a->storage, "sd") != 0 && strcmp(a->storage, "ram") != 0)
        return usage_error(cmd, "--storage must be sd or ram, got", a->storage);
    int x;
    const char *counts[] = {a->memory, a->fail_write, a->fail_read};
    for (int i = 0; i < 3; i++)
        if (counts[i] && !parse_int(counts[i], 1, 100000000, &x))
            return usage_error(cmd, "--memory, --fail-write and --fail-read take a count from 1, got", counts[i]);
    if (a->keep && strchr(a->keep, ',')) return usage_error(cmd, "--keep DIR must not contain a comma:", a->keep);
    int tests = 1000;
    if (a->test_examples && !parse_int(a->test_examples, 0, 1000000, &tests))
        return usage_error(cmd, "--test-examples must be 0 to 1e6, got", a->test_examples);
    em->test_n = tests;
    em->progress = a->quiet ? PROGRESS_NONE : isatty(2) ? PROGRESS_BAR : PROGRESS_LINES;
    em->steps = n, em->timeout_s = timeout;
    em->sd = !a->storage || strcmp(a->storage, "sd") == 0;
    if (a->onnx_out && !a->t.onnx) return usage_error(cmd, "--onnx-out writes back an --onnx model; a zoo model has none", NULL);
    if (!em->v.data) return usage_error(cmd, "give --data (digits, fashion-mnist or a file: docs/data.md)", NULL);
    return 0;
}

static int load_board(emulation *em, const char *firmware)
{
    char *elf = NULL;
    size_t n = 0;
    poet_err err = {0};
    if (poet_read_file(firmware, &elf, &n, &err)) {
        fprintf(stderr, "poet: no firmware at %s (build it with scripts/build.sh, which needs gcc-arm-none-eabi; "
                        "or give --firmware)\n", firmware);
        return 1;
    }
    bool ok = read_board_map((const uint8_t *)elf, n, &em->map);
    free(elf);
    if (!ok) fprintf(stderr, "poet: %s is not poet's firmware (its memory map symbols are missing)\n", firmware);
    return ok ? 0 : 1;
}

/* What the firmware keeps of the board's RAM: its static data and stack. */
static uint64_t board_fixed_bytes(const board_map *m)
{
    return (uint64_t)(m->stack_top - m->ram_start) - (m->pool_end - m->pool_start);
}

/* Refuses, before QEMU starts, what the board cannot hold. */
static int check_fit(const emulation *em)
{
    const board_map *m = &em->map;
    uint64_t pool = m->pool_end - m->pool_start, need = em->need.total_bytes + (em->sd ? 0 : em->need.storage_bytes);
    uint64_t fixed = board_fixed_bytes(m), timers = em->v.node_ram_bytes * (uint64_t)em->s.g->n_nodes;
    if (need <= pool && timers > pool - need) {
        fprintf(stderr, "poet emulate: --profile's per-node timers (%llu bytes) do not fit beside training's %llu bytes "
                "in the board's %llu free (try --budget ram, a smaller --budget or --batch)\n",
                (unsigned long long)timers, (unsigned long long)need, (unsigned long long)pool);
        return 1;
    }
    if (need > pool) {
        fprintf(stderr,
                "poet emulate: training needs %llu bytes of RAM on the board (arena %llu, persistent %llu, workspace "
                "%llu, control %llu%s%llu) besides the firmware's %llu bytes of static data and stack; the "
                "netduinoplus2 has %d bytes, %llu of them free for it (try a smaller --budget or --batch)\n",
                (unsigned long long)need, (unsigned long long)em->need.arena_bytes,
                (unsigned long long)em->need.persistent_bytes, (unsigned long long)em->need.workspace_bytes,
                (unsigned long long)em->need.control_bytes, em->sd ? "" : ", storage in RAM ",
                em->sd ? 0ull : (unsigned long long)em->need.storage_bytes, (unsigned long long)fixed, RAM_LIMIT_BYTES,
                (unsigned long long)pool);
        return 1;
    }
    if (em->img_len > m->image_end - m->image_start) {
        fprintf(stderr, "poet emulate: the device image has %zu bytes (the model's parameters %llu of them); its "
                "flash partition holds %u\n", em->img_len, (unsigned long long)(4 * poet_graph_param_count(em->s.g)),
                (unsigned)(m->image_end - m->image_start));
        return 1;
    }
    return 0;
}

static void path_in(const emulation *em, const char *name, char *out, size_t cap)
{
    snprintf(out, cap, "%s/%s", em->dir, name);
}

/* One batch as the firmware reads it: the rows' inputs, then their labels. */
static void put_batch(uint8_t *at, int rows, uint64_t per, const float *xs, const int32_t *ys, const int *idx)
{
    poet_train_gather((float *)(void *)at, (int32_t *)(void *)(at + (size_t)rows * per * sizeof(float)), rows, per, xs,
                      ys, idx);
}

/* The batches of steps 0..N-1, exactly as poet train feeds them. */
static int write_batches(emulation *em)
{
    const poet_graph *g = em->s.g;
    const poet_node *logits = &g->nodes[g->nodes[g->loss].inputs[0]];
    int rows = (int)logits->shape.dim[0]; /* open_data checked that the data set fits */
    uint64_t per = g->nodes[0].bytes / 4 / (uint64_t)rows;
    const poet_dataset *d = &em->d;
    long batches = d->n_train / rows;
    int *order = malloc((size_t)d->n_train * sizeof *order);
    size_t one = (size_t)rows * (per * sizeof(float) + sizeof(int32_t));
    uint8_t *buf = malloc(one * (size_t)em->steps);
    if (!order || !buf) {
        free(order), free(buf);
        return lib_error(&(poet_err){POET_ERR_NOMEM, "out of memory for the batches"});
    }
    for (long k = 0; k < em->steps; k++) {
        long epoch = k / batches, j = k % batches;
        if (j == 0 || k == 0) poet_train_order(em->v.seed, epoch, d->n_train, order);
        put_batch(buf + (size_t)k * one, rows, per, d->train_x, d->train_y, order + j * rows);
    }
    char path[4200];
    path_in(em, "data.bin", path, sizeof path);
    poet_err err = {0};
    int rc = poet_write_file_atomic(path, buf, one * (size_t)em->steps, &err) ? lib_error(&err) : 0;
    free(order), free(buf);
    return rc;
}

/* The first test_n test examples (all, if fewer) as the firmware's --test
 * reads them: u32 count, then batches of the image's rows, the last one
 * padded as poet_evaluate pads it. */
static int write_test(emulation *em)
{
    const poet_dataset *d = &em->d;
    const poet_graph *g = em->s.g;
    int rows = (int)g->nodes[0].shape.dim[0];
    uint64_t per = g->nodes[0].bytes / 4 / (uint64_t)rows;
    if (em->test_n > d->n_test) em->test_n = d->n_test;
    int n = em->test_n, batches = (n + rows - 1) / rows;
    size_t one = (size_t)rows * (per * sizeof(float) + sizeof(int32_t));
    uint8_t *buf = malloc(4 + one * (size_t)batches);
    if (!buf) return lib_error(&(poet_err){POET_ERR_NOMEM, "out of memory for the test batches"});
    uint32_t count = (uint32_t)n;
    memcpy(buf, &count, 4); /* little-endian, as the board reads it */
    int *pick = malloc((size_t)rows * sizeof *pick);
    if (!pick) return free(buf), lib_error(&(poet_err){POET_ERR_NOMEM, "out of memory for the test batches"});
    uint8_t *p = buf + 4;
    for (int at = 0; at < n; at += rows, p += one) {
        for (int r = 0; r < rows; r++) pick[r] = at + (at + r < n ? r : 0);
        put_batch(p, rows, per, d->test_x, d->test_y, pick);
    }
    free(pick);
    char path[4200];
    path_in(em, "test.bin", path, sizeof path);
    poet_err err = {0};
    int rc = poet_write_file_atomic(path, buf, (size_t)(p - buf), &err) ? lib_error(&err) : 0;
    free(buf);
    return rc;
}

/* The board's lines: its report, its steps (the progress line: redrawn on
 * a terminal, every 10 s and at the last step when piped), its messages. */
static void board_line(void *ctx, char *line)
{
    emulation *em = ctx;
    long step;
    unsigned long bits;
    if (strncmp(line, "poet-device ", 12) == 0) {
        cJSON_Delete(em->device);
        em->device = cJSON_Parse(line + 12);
    } else if (sscanf(line, "poet-step %ld %lu", &step, &bits) == 2) {
        float loss;
        uint32_t b = (uint32_t)bits;
        memcpy(&loss, &b, sizeof loss);
        bool last = step == em->steps, tty = em->progress == PROGRESS_BAR;
        if (em->progress == PROGRESS_NONE || (!last && monotonic_s() < em->next_progress)) return;
        fprintf(stderr, "%sboard step %ld/%ld (%.0f%%) loss %.4f%s", tty ? "\r" : "", step, em->steps,
                100.0 * (double)step / (double)em->steps, loss, tty && !last ? "" : "\n");
        em->next_progress = monotonic_s() + (tty ? 0.2 : 10);
    } else if (*line) {
        fprintf(stderr, "%s\n", line); /* the firmware's messages, QEMU's errors */
    }
}

static int run_qemu(emulation *em, const emulate_args *a)
{
    char img[4200], data[4200], store[4200], weights[4200], state[4200], loader[4400], semi[4096 * 6];
    path_in(em, "image.bin", img, sizeof img);
    path_in(em, "data.bin", data, sizeof data);
    path_in(em, "storage.bin", store, sizeof store);
    path_in(em, "weights.bin", weights, sizeof weights);
    path_in(em, "state.bin", state, sizeof state);
    char test[4200];
    path_in(em, "test.bin", test, sizeof test);
    poet_err err = {0};
    if (poet_write_file_atomic(img, em->img, em->img_len, &err)) return lib_error(&err);
    snprintf(loader, sizeof loader, "loader,file=%s,addr=0x%08x,force-raw=on", img, (unsigned)em->map.image_start);
    int k = snprintf(semi, sizeof semi,
                     "enable=on,target=native,arg=poet-firmware,arg=--steps=%ld,arg=--data=%s,arg=--weights=%s,"
                     "arg=--storage=%s,arg=--state=%s",
                     em->steps, data, weights, em->sd ? store : "ram", state);
    if (em->test_n) k += snprintf(semi + k, sizeof semi - (size_t)k, ",arg=--test=%s", test);
    const char *extra[][2] = {{"--memory=", a->memory}, {"--fail-write=", a->fail_write}, {"--fail-read=", a->fail_read},
                              {"--rates=", a->rates}, {"--attend=", a->attend}};
    for (int i = 0; i < 5; i++)
        if (extra[i][1]) k += snprintf(semi + k, sizeof semi - (size_t)k, ",arg=%s%s", extra[i][0], extra[i][1]);
    char times[4200];
    path_in(em, "times.bin", times, sizeof times);
    if (a->profile) snprintf(semi + k, sizeof semi - (size_t)k, ",arg=--profile,arg=--times=%s", times);
    char *argv[] = {(char *)(a->qemu ? a->qemu : "qemu-system-arm"), "-M", "netduinoplus2", "-display", "none",
                    "-serial", "null", "-monitor", "none", "-icount", "shift=0", "-semihosting-config", semi,
                    "-device", loader, "-kernel", (char *)a->firmware, NULL};
    em->next_progress = monotonic_s() + (em->progress == PROGRESS_BAR ? 0 : 10);
    int status = run_lines(argv, em->timeout_s, board_line, em);
    if (status == -2) return lib_error(&(poet_err){POET_ERR_NOMEM, "cannot start QEMU"});
    em->exit_code = status;
    if (status == -1) fprintf(stderr, "poet emulate: QEMU did not finish within %ld s\n", em->timeout_s);
    else if (status == 127) fprintf(stderr, "poet emulate: cannot run %s (install qemu-system-arm)\n", argv[0]);
    else if (!em->device) fprintf(stderr, "poet emulate: the board exited (%d) without a report it could read\n", status);
    return em->device ? 0 : 1;
}

static double num(const cJSON *o, const char *name)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, name);
    return cJSON_IsNumber(v) ? v->valuedouble : 0;
}

/* A file of little-endian words: count of them in *n. */
static int read_words(const char *path, uint32_t **out, size_t *n)
{
    poet_err err = {0};
    char *data = NULL;
    size_t len = 0;
    if (poet_read_file(path, &data, &len, &err)) return lib_error(&err);
    *n = len / 4;
    *out = malloc(4 * (*n + 1));
    if (!*out) return free(data), lib_error(&(poet_err){POET_ERR_NOMEM, "out of memory"});
    for (size_t i = 0; i < *n; i++) (*out)[i] = board_le32((const uint8_t *)data + 4 * i);
    free(data);
    return len % 4 ? usage_error("emulate", "a file of 32-bit words has a length that is not a multiple of 4:", path) : 0;
}

/* Reads --rates and --attend, checked against the model's forward nodes,
 * before QEMU runs. */
static int adaptation_load(const emulate_args *a, uint32_t nodes, adaptation *ad)
{
    uint32_t *rates = NULL;
    size_t n = 0, m = 0;
    int rc = a->rates ? read_words(a->rates, &rates, &n) : 0;
    if (!rc && rates && (n != 1 + 2ull * nodes || rates[0] != 2 * nodes)) {
        char need[80];
        snprintf(need, sizeof need, "%u (two a forward node), got %zu", 2 * nodes, n ? n - 1 : 0);
        rc = usage_error("emulate", "--rates FILE must hold a u32 count and that many floats: this model needs", need);
    }
    if (!rc && rates) {
        ad->rates = malloc(4ull * 2 * nodes);
        if (!ad->rates) rc = lib_error(&(poet_err){POET_ERR_NOMEM, "out of memory"});
        else memcpy(ad->rates, rates + 1, 4ull * 2 * nodes);
    }
    free(rates);
    if (!rc && a->attend && !(rc = read_words(a->attend, &ad->attend, &m)) && (m < 2 || m != 2 + 2ull * ad->attend[1]))
        rc = usage_error("emulate", "--attend FILE must hold u32 step, u32 count and count (node, rows) pairs:", a->attend);
    for (uint32_t i = 0; !rc && ad->attend && i < ad->attend[1]; i++)
        if (ad->attend[2 + 2 * i] >= nodes)
            rc = usage_error("emulate", "--attend FILE names a node that is not a forward node:", a->attend);
    return rc;
}

static void adaptation_free(adaptation *ad) { free(ad->rates), free(ad->attend); }

/* The same steps on the host, under the given schedule; the SHA-256 of the
 * weights, and (accuracy not NULL) the test accuracy on the board's examples. */
/* as_today: every parameter in RAM and the update after the pass, a
 * second path to the same bits. */
static int host_weights(emulation *em, const poet_problem *p, const poet_schedule *s, bool as_today, char sha[65],
                        double *accuracy)
{
    poet_engine *e = NULL;
    poet_err err = {0};
    poet_engine_config cfg = {em->s.g, p, s, NULL, em->v.opt, em->v.seed, 0, session_params(&em->s),
                              session_buffers(&em->s), as_today ? POET_FROZEN_IN_RAM : em->v.frozen,
                              !as_today && em->v.fused_update};
    char path[4200];
    path_in(em, "data.bin", path, sizeof path);
    char *data = NULL;
    size_t len = 0;
    int rows, classes;
    uint64_t per;
    int rc = 0;
    const adaptation *ad = &em->ad;
    uint8_t *mask = NULL;
    uint64_t P = 0;
    if (poet_engine_new(&cfg, &e, &err) || poet_read_file(path, &data, &len, &err)) {
        rc = lib_error(&err);
    } else if (poet_dev_weights(poet_engine_device(e), &P), !(mask = malloc(P / 8 + 1))) {
        rc = lib_error(&(poet_err){POET_ERR_NOMEM, "out of memory"});
    } else {
        memset(mask, 0xff, P / 8 + 1);
        if (ad->rates) poet_dev_set_rates(poet_engine_device(e), ad->rates);
        poet_dev_batch_shape(poet_engine_device(e), &rows, &per, &classes);
        size_t xb = (size_t)rows * per * sizeof(float), one = xb + (size_t)rows * sizeof(int32_t);
        float *x = malloc(xb);
        int32_t *y = malloc((size_t)rows * sizeof *y);
        poet_dev *d = poet_engine_device(e);
        for (long k = 0; !rc && x && y && k < em->steps && (size_t)(k + 1) * one <= len; k++) {
            memcpy(x, data + (size_t)k * one, xb);
            memcpy(y, data + (size_t)k * one + xb, (size_t)rows * sizeof *y);
            float loss;
            bool attend = ad->attend && ad->attend[0] == (uint32_t)k;
            poet_status st = attend ? poet_dev_step_attending(d, x, y, ad->attend + 2, ad->attend[1], mask, &loss, &err)
                                    : poet_dev_step(d, x, y, &loss, &err);
            if (st) rc = lib_error(&err);
        }
        poet_dev_weights_sha256(poet_engine_device(e), sha);
        double test_loss;
        if (!rc && accuracy && em->test_n &&
            poet_evaluate(e, em->d.test_x, em->d.test_y, NULL, em->test_n, &test_loss, accuracy, &err))
            rc = lib_error(&err);
        free(x), free(y);
    }
    free(data);
    poet_engine_free(e);
    free(mask);
    return rc;
}

static int keep_all_weights(emulation *em, char sha[65])
{
    poet_problem p;
    poet_plan_result r = {0};
    poet_err err = {0};
    poet_plan_options o = {.threads = 1, .deterministic = true};
    int rc = 0;
    if (poet_problem_init(&p, &em->s.inst, 0, em->v.rho, &err)) return lib_error(&err);
    p.budget_bytes = p.keep_all_peak_bytes;
    if (poet_plan("keep-all", &p, &o, &r, &err)) rc = lib_error(&err);
    else rc = host_weights(em, &p, &r.schedule, true, sha, NULL);
    poet_plan_result_free(&r);
    poet_problem_free(&p);
    return rc;
}

/* --profile: what each op took on the board beside the profile's
 * prediction; --calibrate: the profile fit to it. */
static int add_board_times(emulation *em, const emulate_args *a, cJSON *o, long steps, double ipk)
{
    char path[4200];
    path_in(em, "times.bin", path, sizeof path);
    board_times t;
    int rc = board_times_read(path, &em->s, steps, num(em->device, "step_ticks"), ipk / 1000.0, &t);
    if (rc) return rc;
    add_op_instructions_json(o, &em->s, &t);
    if (a->calibrate && (rc = write_calibrated_profile(&em->s, &t, a->calibrate))) {
        board_times_free(&t);
        return rc;
    }
    board_times_free(&t);
    return 0;
}

static int report(emulation *em, const emulate_args *a)
{
    const cJSON *dv = em->device;
    char sha[65] = "", host[65] = "", keep[65] = "";
    const cJSON *dsha = cJSON_GetObjectItemCaseSensitive(dv, "weights_sha256");
    snprintf(sha, sizeof sha, "%s", cJSON_IsString(dsha) ? dsha->valuestring : "");
    /* the weights file the firmware wrote must hash to what it reported */
    char path[4200], *w = NULL, file_sha[65] = "";
    size_t wl = 0;
    path_in(em, "weights.bin", path, sizeof path);
    poet_err err = {0};
    if (!poet_read_file(path, &w, &wl, &err)) poet_sha256_hex(w, wl, file_sha);
    free(w);
    long steps = (long)num(dv, "steps");
    int rc = 0;
    if (!a->no_host && steps == em->steps) {
        if ((rc = host_weights(em, &em->s.p, &em->s.plan.schedule, false, host, &em->host_accuracy)) ||
            (rc = keep_all_weights(em, keep)))
            return rc;
    }
    uint32_t bits = (uint32_t)num(dv, "loss_bits");
    float loss;
    memcpy(&loss, &bits, sizeof loss);
    double ipk = num(dv, "instructions_per_kilotick"), ips = steps ? num(dv, "step_ticks") * ipk / 1000.0 / steps : 0;
    /* what the board commits: static data, the stack it reserves, the block poet carves, --profile's timers */
    uint64_t ram = (uint64_t)(num(dv, "ram_static_bytes") + num(dv, "stack_bytes") + num(dv, "memory_bytes") +
                              num(dv, "timer_bytes")) +
                   (em->sd ? 0 : em->need.storage_bytes);
    uint64_t predicted = ram_total(&em->s.ram, em->s.sim.placed_peak_bytes) + (em->sd ? 0 : em->need.storage_bytes);
    bool same = !a->no_host && strcmp(sha, host) == 0 && strcmp(sha, keep) == 0;
    bool intact = num(dv, "image_intact") == 1; /* nothing wrote the parameters read in place */
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "model", em->s.g->model);
    cJSON_AddStringToObject(o, "board", "netduinoplus2");
    cJSON_AddStringToObject(o, "profile", em->s.inst.device.name);
    cJSON_AddNumberToObject(o, "batch", em->s.g->batch);
    cJSON_AddNumberToObject(o, "budget_bytes", (double)em->s.p.budget_bytes);
    cJSON_AddNumberToObject(o, "keep_all_peak_bytes", (double)em->s.p.keep_all_peak_bytes);
    cJSON_AddNumberToObject(o, "steps", (double)steps);
    cJSON_AddNumberToObject(o, "final_loss", steps ? (double)loss : 0);
    cJSON_AddStringToObject(o, "weights_sha256", sha);
    cJSON_AddBoolToObject(o, "weights_file_matches", strcmp(sha, file_sha) == 0);
    if (!a->no_host) {
        cJSON_AddStringToObject(o, "host_weights_sha256", host);
        cJSON_AddStringToObject(o, "keep_all_weights_sha256", keep);
        cJSON_AddBoolToObject(o, "bit_identical", same);
    }
    double examples = num(dv, "test_examples"), accuracy = examples ? num(dv, "test_correct") / examples : 0;
    bool test_same = a->no_host || !em->test_n || accuracy == em->host_accuracy;
    if (em->test_n) {
        cJSON_AddNumberToObject(o, "test_examples", examples);
        cJSON_AddNumberToObject(o, "test_accuracy", accuracy);
        if (!a->no_host) cJSON_AddNumberToObject(o, "host_test_accuracy", em->host_accuracy);
    }
    cJSON_AddNumberToObject(o, "image_bytes", (double)em->img_len);
    static const char *copied[] = {"ram_static_bytes", "stack_peak_bytes", "stack_bytes", "arena_bytes",
                                   "arena_peak_bytes", "persistent_bytes", "workspace_bytes", "control_bytes", "memory_bytes",
                                   "flash_params_bytes",
                                   "recomputations", "page_outs", "page_ins", "paged_out_bytes", "paged_in_bytes",
                                   "conv_forward_ticks", "conv_backward_ticks", "kernel_ticks"};
    for (size_t i = 0; i < sizeof copied / sizeof *copied; i++)
        if (cJSON_GetObjectItemCaseSensitive(dv, copied[i])) cJSON_AddNumberToObject(o, copied[i], num(dv, copied[i]));
    cJSON_AddBoolToObject(o, "image_intact", intact);
    cJSON_AddNumberToObject(o, "planned_arena_bytes", (double)em->s.sim.placed_peak_bytes);
    cJSON_AddNumberToObject(o, "storage_in_ram_bytes", em->sd ? 0 : (double)em->need.storage_bytes);
    cJSON_AddNumberToObject(o, "ram_total_bytes", (double)ram);
    cJSON_AddNumberToObject(o, "predicted_ram_total_bytes", (double)predicted);
    cJSON_AddNumberToObject(o, "ram_limit_bytes", RAM_LIMIT_BYTES);
    cJSON_AddNumberToObject(o, "paged_bytes", num(dv, "paged_out_bytes") + num(dv, "paged_in_bytes"));
    cJSON_AddNumberToObject(o, "instructions_per_step", ips);
    cJSON_AddNumberToObject(o, "instructions_per_kilotick", ipk);
    cJSON_AddNumberToObject(o, "predicted_compute_s_per_step", em->s.sim.compute_time_s);
    cJSON_AddNumberToObject(o, "exit_code", em->exit_code);
    if (a->profile && steps > 0 && (rc = add_board_times(em, a, o, steps, ipk))) {
        cJSON_Delete(o);
        return rc;
    }
    if (a->json) {
        rc = print_json(o);
    } else {
        printf("%s (batch %d) on the emulated netduinoplus2, schedule for %llu B (%s): %ld steps, loss %.4f\n",
               em->s.g->model, em->s.g->batch, (unsigned long long)em->s.p.budget_bytes, em->v.planner, steps, loss);
        char b[10][32];
        printf("  RAM %s of %s (%llu B; the plan said %llu B): static %s, stack %s (%s of it used), arena %s "
               "(%s written), persistent %s, workspace %s, control %s\n",
               format_bytes(ram, b[0]), format_bytes(RAM_LIMIT_BYTES, b[1]), (unsigned long long)ram,
               (unsigned long long)predicted, format_bytes((uint64_t)num(dv, "ram_static_bytes"), b[2]),
               format_bytes((uint64_t)num(dv, "stack_bytes"), b[3]),
               format_bytes((uint64_t)num(dv, "stack_peak_bytes"), b[4]),
               format_bytes((uint64_t)num(dv, "arena_bytes"), b[5]),
               format_bytes((uint64_t)num(dv, "arena_peak_bytes"), b[6]),
               format_bytes((uint64_t)num(dv, "persistent_bytes"), b[7]),
               format_bytes((uint64_t)num(dv, "workspace_bytes"), b[8]),
               format_bytes((uint64_t)num(dv, "control_bytes"), b[9]));
        if (num(dv, "flash_params_bytes") > 0)
            printf("  frozen parameters read in place from flash: %s (the image %s after training)\n",
                   format_bytes((uint64_t)num(dv, "flash_params_bytes"), b[0]), intact ? "intact" : "CHANGED");
        printf("  %.0f recomputations, %s paged out, %s paged in; %.0f instructions per step "
               "(the %s profile predicts %.3f s of compute per step)\n",
               num(dv, "recomputations"), format_bytes((uint64_t)num(dv, "paged_out_bytes"), b[0]),
               format_bytes((uint64_t)num(dv, "paged_in_bytes"), b[1]), ips, em->s.inst.device.name,
               em->s.sim.compute_time_s);
        if (em->test_n)
            printf("  test accuracy on the board %.2f%% (%.0f of %d test examples, inference on the device)%s\n",
                   100 * accuracy, examples, em->d.n_test, a->no_host ? "" : test_same ? ", as on the host" : ", NOT the host's");
        printf("  weights sha256 %s%s\n", sha,
               a->no_host ? "" : same ? " (the host's, under this schedule and keep-all)" : " (NOT the host's)");
        if (cJSON_GetObjectItemCaseSensitive(o, "op_instructions"))
            printf("  the %s profile predicts %.0f instructions a step, %+.1f%% of the board's (each op's: --json)%s%s\n",
                   em->s.inst.device.name, num(o, "predicted_instructions_per_step"),
                   100 * (num(o, "predicted_instructions_per_step") / ips - 1),
                   a->calibrate ? "; calibrated profile written to " : "", a->calibrate ? a->calibrate : "");
        cJSON_Delete(o);
    }
    if (!rc && strcmp(sha, file_sha) != 0) {
        fprintf(stderr, "poet emulate: the weights file does not hash to what the device reported\n");
        rc = 1;
    }
    if (!rc && !intact) {
        fprintf(stderr, "poet emulate: the device image in flash changed during training\n");
        rc = 1;
    }
    if (!rc && !test_same) {
        fprintf(stderr, "poet emulate: the board's test accuracy (%.4f) is not the host's (%.4f)\n", accuracy,
                em->host_accuracy);
        rc = 1;
    }
    return rc ? rc : em->exit_code ? 1 : (!a->no_host && !same) ? 1 : 0;
}

/* The imported model with the weights and statistics the board ended with. */
static int write_onnx(const emulation *em, const char *out)
{
    char wpath[4200], spath[4200], *w = NULL, *st = NULL;
    size_t wl = 0, sl = 0;
    uint64_t np = 0, ns = 0;
    path_in(em, "weights.bin", wpath, sizeof wpath);
    path_in(em, "state.bin", spath, sizeof spath);
    poet_onnx_params(em->s.onnx, &np);
    poet_onnx_buffers(em->s.onnx, &ns);
    poet_err err = {0};
    int rc = 0;
    if (poet_read_file(wpath, &w, &wl, &err) || (ns && poet_read_file(spath, &st, &sl, &err))) rc = lib_error(&err);
    else if (wl != 4 * np || sl != 4 * ns)
        rc = lib_error(&(poet_err){POET_ERR_INVALID, "the board wrote weights or statistics of another size than the model's"});
    else if (poet_onnx_write(em->s.onnx, (const float *)(void *)w, (const float *)(void *)(st ? st : w), out, &err))
        rc = lib_error(&err);
    free(w), free(st);
    return rc;
}

static int make_dir(emulation *em, const char *keep)
{
    if (keep) {
        if (mkdir(keep, 0755) && errno != EEXIST) {
            fprintf(stderr, "poet: cannot create '%s': %s\n", keep, strerror(errno));
            return 1;
        }
        snprintf(em->dir, sizeof em->dir, "%s", keep);
        return 0;
    }
    const char *tmp = getenv("TMPDIR");
    snprintf(em->dir, sizeof em->dir, "%s/poet-emulate-XXXXXX", tmp && *tmp && !strchr(tmp, ',') ? tmp : "/tmp");
    if (!mkdtemp(em->dir)) {
        fprintf(stderr, "poet: cannot create a temporary directory: %s\n", strerror(errno));
        return 1;
    }
    em->temp_dir = true;
    return 0;
}

static void emulation_free(emulation *em)
{
    if (em->temp_dir) {
        static const char *files[] = {"image.bin", "data.bin",  "storage.bin", "weights.bin",
                                      "state.bin", "test.bin", "times.bin"};
        char path[4200];
        for (size_t i = 0; i < sizeof files / sizeof *files; i++) path_in(em, files[i], path, sizeof path), unlink(path);
        rmdir(em->dir);
    }
    cJSON_Delete(em->device);
    poet_dataset_free(&em->d);
    free(em->img);
    adaptation_free(&em->ad);
    session_free(&em->s);
}

int cmd_emulate(int argc, char **argv)
{
    emulate_args a = {0};
    opt opts[] = {TRAIN_OPTS(a.t), DATA_OPTS(a.t),
                  {"--steps", true, &a.steps, NULL},       {"--chunk", true, &a.chunk, NULL},
                  {"--storage", true, &a.storage, NULL},   {"--keep", true, &a.keep, NULL},
                  {"--timeout", true, &a.timeout, NULL},   {"--firmware", true, &a.firmware, NULL},
                  {"--qemu", true, &a.qemu, NULL},         {"--memory", true, &a.memory, NULL},
                  {"--fail-write", true, &a.fail_write, NULL}, {"--fail-read", true, &a.fail_read, NULL},
                  {"--json", false, NULL, &a.json},        {"--no-host", false, NULL, &a.no_host},
                  {"--profile", false, NULL, &a.profile},  {"--rates", true, &a.rates, NULL},
                  {"--attend", true, &a.attend, NULL},     OUTPUT_OPT("--onnx-out", a.onnx_out),
                  {"--test-examples", true, &a.test_examples, NULL}, {"--quiet", false, NULL, &a.quiet},
                  OUTPUT_OPT("--calibrate", a.calibrate),
                  {NULL, false, NULL, NULL}};
    int rc = parse_opts("emulate", argc, argv, opts, &a.help);
    if (rc || a.help) return a.help ? (fputs(EMULATE_HELP, stdout), 0) : rc;
    if (!a.t.device) a.t.device = "stm32f405";
    a.profile = a.profile || a.calibrate;
    if (!a.firmware) a.firmware = POET_FIRMWARE_DIR "/poet-firmware.elf";
    emulation em;
    memset(&em, 0, sizeof em);
    if ((rc = check_emulate_args(&a, &em))) return rc;
    if (!(rc = load_board(&em, a.firmware)) && (em.v.fixed_ram_bytes = board_fixed_bytes(&em.map), true) &&
        (em.v.node_ram_bytes = a.profile ? BOARD_TIMER_BYTES_PER_NODE : 0, true) &&
        !(rc = session_plan("emulate", &em.s, &a.t, &em.v)) &&
        !(rc = adaptation_load(&a, (uint32_t)em.s.g->n_forward, &em.ad)) &&
        !(rc = export_image(&em.s, &em.v, &em.img, &em.img_len, &em.need)) && !(rc = check_fit(&em))) {
        if (!(rc = open_data("emulate", &a.t, &em.v, em.s.g, &em.d)) && !(rc = make_dir(&em, a.keep)) && !(rc = write_batches(&em)) && !(rc = write_test(&em)) && !(rc = run_qemu(&em, &a)))
            rc = report(&em, &a);
        if (!rc && a.onnx_out) rc = write_onnx(&em, a.onnx_out);
    }
    emulation_free(&em);
    return rc;
}

