/* poet's example firmware: trains the device image found in flash on the
 * batches of a data file, paging to an SD card (or to RAM), and reports on
 * the console. Written for QEMU's netduinoplus2 (STM32F405), where
 * semihosting stands in for the console, the card and the command line;
 * `poet emulate` writes the image and the data and runs it.
 *
 * usage (semihosting command line):
 *   firmware [--patches=FILE] [--steps=N --data=FILE] [--storage=FILE|ram]
 *            [--weights=FILE] [--state=FILE] [--memory=BYTES] [--fail-write=N] [--fail-read=N]
 *            [--profile] [--rates=FILE] [--attend=FILE] [--store=FILE] [--test=FILE]
 *   firmware --layer=FILE --layer-out=FILE
 *   firmware --check-images=FILE
 * --patches applies the partial updates of `poet update` (patches one after
 * the other in FILE) before any training; a refused one stops the run with
 * the weights of the last applied. Each step prints "poet-step K LOSSBITS"
 * (its loss as the bits of a float), for the host's progress line. --test
 * evaluates the trained model in inference mode on a file of test batches
 * (u32 examples, then batches padded to the image's rows) and reports the
 * examples it classified correctly.
 * --memory hands the library fewer bytes than the pool holds; --fail-*
 * make the Nth transfer of the card fail. --store is a card that outlives
 * the run (the device's model store): the model saved there is loaded
 * first, and after patches or training the model is saved there, so that
 * an update survives a reset and the next patch finds the weights it was
 * made for. --rates sets a learning rate per tensor (u32 count, then
 * two floats per forward node: weights, bias) and --attend, at one step,
 * keeps of some layers only the rows whose gradient is largest (u32 step,
 * u32 count, then count pairs of u32 node and rows kept): p-Meta-style
 * adaptation, as bench/fewshot.c runs it on the host. --layer runs a compact weight
 * format (poet/sparse.h, poet/alq.h) on a case from the host (layer_check). --check-images runs
 * changed copies of the image in flash (tests/test_boundaries.c writes
 * them: a field set to a boundary value, the CRC made right) through
 * inspect, open and one step, and prints each verdict. Exit status: 0 done; 1 poet
 * refused or a step failed (the weights written are those of the last
 * completed step); 2 bad arguments or files. */
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "board.h"
#include "poet/device.h"
#include "poet/alq.h"
#include "poet/sparse.h"
#include "semihost.h"
#include "storage.h"

extern unsigned char __data_start[], __bss_end[], __pool_start[], __pool_end[], __image_start[], __image_end[];

enum { POOL_PAINT = 0xA5 };

typedef struct args {
    long steps, memory, fail_write, fail_read;
    const char *data, *storage, *weights, *state, *patches, *layer, *layer_out, *rates, *attend, *store, *cases, *test;
    const char *times; /* with --profile: per-node ticks of the training steps, to this file */
    bool profile;
} args;

static char cmdline[512];

/* ---- a little text output without stdio ---- */

static char line[256]; /* a line is written out in pieces of this, the newline ending it */
static size_t used, line_chars; /* in line; since the newline */

static void put_str(const char *s)
{
    for (; *s; s++, line_chars++) {
        if (used + 1 == sizeof line) sh_puts(line), used = 0;
        line[used++] = *s, line[used] = 0;
    }
}

static void put_u64(uint64_t v)
{
    char d[21];
    int k = 0;
    do d[k++] = (char)('0' + v % 10), v /= 10;
    while (v);
    char s[22];
    int n = 0;
    while (k) s[n++] = d[--k];
    s[n] = 0;
    put_str(s);
}

static void put_field(const char *name, uint64_t v)
{
    put_str(line_chars > 14 ? ", \"" : "\"");
    put_str(name);
    put_str("\": ");
    put_u64(v);
}

static void flush(void)
{
    put_str("\n");
    sh_puts(line);
    used = line_chars = 0;
    line[0] = 0;
}

static int fail(const char *what, const char *detail)
{
    put_str("poet-firmware: ");
    put_str(what);
    put_str(detail);
    flush();
    return 2;
}

static int refuse(const char *what, const char *detail)
{
    fail(what, detail);
    return 1;
}

/* ---- arguments ---- */

static bool number(const char *s, long *out)
{
    long v = 0;
    if (!*s) return false;
    for (; *s && *s != ' '; s++) {
        if (*s < '0' || *s > '9' || v > 100000000) return false;
        v = v * 10 + (*s - '0');
    }
    *out = v;
    return true;
}

static const char *value_of(char *word, const char *key)
{
    size_t n = strlen(key);
    return strncmp(word, key, n) == 0 ? word + n : NULL;
}

static bool parse(args *a)
{
    *a = (args){.storage = "ram"};
    if (sh_cmdline(cmdline, sizeof cmdline) != 0) return false;
    for (char *w = cmdline; *w;) {
        char *end = w;
        while (*end && *end != ' ') end++;
        bool more = *end == ' ';
        *end = 0;
        const char *v;
        bool ok = true;
        if ((v = value_of(w, "--steps="))) ok = number(v, &a->steps);
        else if ((v = value_of(w, "--memory="))) ok = number(v, &a->memory);
        else if ((v = value_of(w, "--fail-write="))) ok = number(v, &a->fail_write);
        else if ((v = value_of(w, "--fail-read="))) ok = number(v, &a->fail_read);
        else if ((v = value_of(w, "--data="))) a->data = v;
        else if ((v = value_of(w, "--storage="))) a->storage = v;
        else if ((v = value_of(w, "--weights="))) a->weights = v;
        else if ((v = value_of(w, "--state="))) a->state = v;
        else if ((v = value_of(w, "--patches="))) a->patches = v;
        else if ((v = value_of(w, "--layer="))) a->layer = v;
        else if ((v = value_of(w, "--rates="))) a->rates = v;
        else if ((v = value_of(w, "--attend="))) a->attend = v;
        else if ((v = value_of(w, "--store="))) a->store = v;
        else if ((v = value_of(w, "--test="))) a->test = v;
        else if ((v = value_of(w, "--times="))) a->times = v;
        else if ((v = value_of(w, "--layer-out="))) a->layer_out = v;
        else if ((v = value_of(w, "--check-images="))) a->cases = v;
        else if (strcmp(w, "--profile") == 0) a->profile = true;
        else if (w != cmdline) ok = false; /* the first word names the program */
        if (!ok) return false;
        w = more ? end + 1 : end;
    }
    if (a->layer) return a->layer_out && !a->steps && !a->patches;
    if (a->cases) return !a->steps && !a->patches && !a->store;
    return (a->steps > 0 && a->data) || (a->patches && !a->steps) || (a->store && !a->steps);
}

/* ---- the run ---- */

static double ticks_as_seconds(void) { return (double)board_ticks(); } /* "seconds" are cycles here */

/* Instructions per SysTick cycle: under `-icount shift=0` one instruction
 * takes 1 ns of virtual time, so this is 1e9 / the core clock; measured
 * on a loop of known length rather than assumed. */
static uint64_t instructions_per_kilotick(void)
{
    uint64_t t0 = board_ticks();
    uint32_t n = 200000;
    __asm__ volatile("1: subs %0, %0, #1\n\tbne 1b" : "+r"(n)::"cc"); /* two instructions a turn */
    uint64_t dt = board_ticks() - t0;
    return dt ? 400000ull * 1000 / dt : 0;
}

static uint32_t arena_peak_painted(const poet_dev *d)
{
    const unsigned char *a = poet_dev_arena(d);
    uint32_t n = (uint32_t)poet_dev_get_stats(d)->arena_bytes;
    while (n && a[n - 1] == POOL_PAINT) n--;
    return n;
}

static void write_floats(const float *w, uint64_t count, const char *path)
{
    int h = path ? sh_open(path, SH_WRITE_BINARY) : -1;
    if (h >= 0) {
        sh_write(h, w, (size_t)count * sizeof(float));
        sh_close(h);
    }
}

/* The parameter vector, part by part: the parts in flash are read where
 * they lie, with no copy in RAM. */
static void write_weights(const poet_dev *d, const char *path)
{
    int h = path ? sh_open(path, SH_WRITE_BINARY) : -1;
    for (uint32_t v = 0; h >= 0 && v < poet_dev_forward_nodes(d); v++)
        for (int part = 0; part < 2; part++) {
            uint64_t count;
            const float *w = poet_dev_params_read(d, (int)v, part, &count);
            if (w) sh_write(h, w, (size_t)count * sizeof(float));
        }
    if (h >= 0) sh_close(h);
}

typedef struct run {
    poet_dev *d;
    poet_dev_memory need;
    unsigned char *spare, *spare_end; /* pool bytes the library does not use */
    uint32_t *attend;                 /* step, count, then (node, rows kept) pairs; NULL: none */
    uint8_t *mask;                    /* the train mask the attention writes */
    long patches;
    long store_loaded, store_saved; /* 1: the model came from the store / went to it */
    long steps_done;
    float loss;
    uint64_t test_examples, test_correct;
    float test_loss_sum;
    uint64_t step_ticks;
    double *node_ticks; /* compute, then transfer, per node (--times); in the spare pool */
} run;

static void report(const run *r, const args *a)
{
    const poet_dev_stats *s = poet_dev_get_stats(r->d);
    char sha[65];
    poet_dev_weights_sha256(r->d, sha);
    uint32_t loss_bits;
    memcpy(&loss_bits, &r->loss, sizeof loss_bits);
    put_str("poet-device {");
    put_field("steps", (uint64_t)r->steps_done);
    put_field("patches", (uint64_t)r->patches);
    put_field("store_loaded", (uint64_t)r->store_loaded);
    put_field("store_saved", (uint64_t)r->store_saved);
    put_field("loss_bits", loss_bits);
    put_field("ram_static_bytes", (uint64_t)(__bss_end - __data_start));
    put_field("stack_peak_bytes", board_stack_peak_bytes());
    put_field("stack_bytes", board_stack_bytes());
    put_field("pool_bytes", (uint64_t)(__pool_end - __pool_start));
    put_field("arena_bytes", r->need.arena_bytes);
    put_field("arena_peak_bytes", arena_peak_painted(r->d));
    put_field("arena_touched_bytes", s->arena_peak_bytes);
    put_field("persistent_bytes", r->need.persistent_bytes);
    put_field("workspace_bytes", r->need.workspace_bytes);
    put_field("control_bytes", r->need.control_bytes);
    put_field("memory_bytes", r->need.total_bytes);
    put_field("timer_bytes", r->node_ticks ? 2 * (uint64_t)poet_dev_nodes(r->d) * sizeof(double) : 0);
    put_field("flash_params_bytes", r->need.flash_bytes);
    /* the parameters read in place are never written: the image's CRC-32 still holds after training */
    put_field("image_intact", poet_dev_inspect(__image_start, (size_t)poet_dev_image_length(__image_start), &(poet_dev_memory){0},
                                               NULL) == POET_OK);
    put_field("recomputations", (uint64_t)s->recomputations);
    put_field("page_outs", (uint64_t)s->page_outs);
    put_field("page_ins", (uint64_t)s->page_ins);
    put_field("paged_out_bytes", s->paged_out_bytes);
    put_field("paged_in_bytes", s->paged_in_bytes);
    put_field("step_ticks", r->step_ticks);
    if (a->test) {
        uint32_t test_loss_bits;
        memcpy(&test_loss_bits, &r->test_loss_sum, sizeof test_loss_bits);
        put_field("test_examples", r->test_examples);
        put_field("test_correct", r->test_correct);
        put_field("test_loss_sum_bits", test_loss_bits);
    }
    put_field("instructions_per_kilotick", instructions_per_kilotick());
    if (a->profile) {
        put_field("conv_forward_ticks", (uint64_t)s->op_s[POET_OP_CONV2D]);
        put_field("conv_backward_ticks", (uint64_t)s->grad_op_s[POET_OP_CONV2D]);
        put_field("kernel_ticks", (uint64_t)s->compute_s);
    }
    put_str(", \"weights_sha256\": \"");
    put_str(sha);
    put_str("\"}");
    flush();
}

/* One step; at the attention's step the gradient first picks the rows
 * that train from then on. */
static poet_status adaptive_step(run *r, long k, const float *x, const int32_t *y, poet_err *err)
{
    if (r->attend && (uint32_t)k == r->attend[0])
        return poet_dev_step_attending(r->d, x, y, r->attend + 2, r->attend[1], r->mask, &r->loss, err);
    return poet_dev_step(r->d, x, y, &r->loss, err);
}

/* The device's batch buffers, and the bytes a batch of them reads. */
typedef struct batch_io {
    float *x;
    int32_t *y;
    int rows;
    size_t xb, yb;
} batch_io;

static batch_io batch_of(run *r)
{
    batch_io b;
    int classes;
    uint64_t per_row;
    poet_dev_batch_shape(r->d, &b.rows, &per_row, &classes);
    poet_dev_batch_buffers(r->d, &b.x, &b.y);
    b.xb = (size_t)b.rows * (size_t)per_row * sizeof(float), b.yb = (size_t)b.rows * sizeof(int32_t);
    return b;
}

static int train(run *r, const args *a, int data)
{
    batch_io b = batch_of(r);
    float *x = b.x;
    int32_t *y = b.y;
    size_t xb = b.xb, yb = b.yb;
    for (long k = 0; k < a->steps; k++) {
        if (sh_read(data, x, xb) != 0 || sh_read(data, y, yb) != 0) return fail("the data file ends before step ", "");
        poet_err err = {0};
        uint64_t t0 = board_ticks();
        if (adaptive_step(r, k, x, y, &err)) {
            put_str("poet-firmware: step ");
            put_u64((uint64_t)k + 1);
            put_str(" failed: ");
            put_str(err.msg);
            flush();
            return 1;
        }
        r->step_ticks += board_ticks() - t0;
        r->steps_done++;
        uint32_t bits;
        memcpy(&bits, &r->loss, sizeof bits);
        put_str("poet-step ");
        put_u64((uint64_t)k + 1);
        put_str(" ");
        put_u64(bits);
        flush();
    }
    return 0;
}

/* The test batches of --test, in inference mode: the image's own program. */
static int evaluate(run *r, const char *path)
{
    batch_io b = batch_of(r);
    float *x = b.x;
    int32_t *y = b.y;
    int rows = b.rows;
    size_t xb = b.xb, yb = b.yb;
    uint32_t n = 0;
    int h = sh_open(path, SH_READ_BINARY);
    if (h < 0 || sh_read(h, &n, 4) != 0) return fail("cannot read the test file ", path);
    int rc = 0;
    for (uint32_t at = 0; !rc && at < n; at += (uint32_t)rows) {
        int m = n - at < (uint32_t)rows ? (int)(n - at) : rows, correct = 0;
        float loss_sum = 0;
        poet_err err = {0};
        if (sh_read(h, x, xb) != 0 || sh_read(h, y, yb) != 0) rc = fail("the test file ends early: ", path);
        else if (poet_dev_eval(r->d, x, y, m, &loss_sum, &correct, &err)) rc = refuse("evaluating: ", err.msg);
        r->test_examples += rc ? 0 : (uint64_t)m;
        r->test_correct += (uint64_t)correct;
        r->test_loss_sum += loss_sum;
    }
    sh_close(h);
    return rc;
}

/* The first `words` words of a file, into the pool's spare bytes; its
 * first `head` words are read first to say how many: words(head) gives
 * the total. */
static uint32_t *read_words(run *r, const char *path, uint32_t head, uint32_t (*words)(const uint32_t *head))
{
    uint32_t first[2];
    int h = sh_open(path, SH_READ_BINARY);
    if (h < 0) return NULL;
    bool ok = sh_read(h, first, 4ull * head) == 0;
    uint32_t total = ok ? words(first) : 0;
    uint64_t bytes = 4ull * total;
    ok = ok && total >= head && bytes <= (uint64_t)(r->spare_end - r->spare);
    uint32_t *w = (uint32_t *)r->spare;
    if (ok) memcpy(w, first, 4ull * head), ok = sh_read(h, w + head, bytes - 4ull * head) == 0;
    sh_close(h);
    if (!ok) return NULL;
    r->spare += (bytes + 7) / 8 * 8;
    return w;
}

static uint32_t rates_words(const uint32_t *head) { return head[0] < (1u << 20) ? 1 + head[0] : 0; }
static uint32_t attend_words(const uint32_t *head) { return head[1] < (1u << 16) ? 2 + 2 * head[1] : 0; }

/* The model store on its own card: the model saved there, if any, replaces
 * the image's. */
static int open_store(run *r, const char *path, sd_card *card, poet_dev_storage *st)
{
    poet_err err = {0};
    if (sd_card_open(card, path, poet_dev_store_bytes(r->d), true, st, &err)) return fail("", err.msg);
    if (card->created) return 0;
    poet_status s = poet_dev_store_load(r->d, st, 0, &err);
    if (s == POET_ERR_NOT_FOUND) return 0;
    if (s) return refuse("loading the model: ", err.msg);
    r->store_loaded = 1;
    return 0;
}

/* --rates and --attend. */
static int adaptation(run *r, const args *a)
{
    if (a->rates) {
        uint32_t *w = read_words(r, a->rates, 1, rates_words);
        if (!w || w[0] != 2 * poet_dev_forward_nodes(r->d)) return fail("a rates file needs two floats a forward node: ", a->rates);
        poet_dev_set_rates(r->d, (const float *)(w + 1));
    }
    if (a->attend) {
        uint32_t *w = read_words(r, a->attend, 2, attend_words);
        uint64_t P;
        poet_dev_weights(r->d, &P);
        if (!w || (uint64_t)(r->spare_end - r->spare) < P / 8 + 1) return fail("cannot read or place ", a->attend);
        r->attend = w, r->mask = r->spare;
        memset(r->mask, 0xff, (size_t)(P / 8 + 1));
        r->spare += (P / 8 + 1 + 7) / 8 * 8;
    }
    return 0;
}

static int start_timers(run *r);

static int open_dev(run *r, const args *a, poet_dev_storage *st, sd_card *card, ram_store *ram)
{
    const void *image = __image_start;
    uint64_t len = poet_dev_image_length(image);
    poet_err err = {0};
    if (!len || len > (uint64_t)(__image_end - __image_start)) return refuse("no device image in flash", "");
    if (poet_dev_inspect(image, (size_t)len, &r->need, &err)) return refuse("", err.msg);
    size_t pool = (size_t)(__pool_end - __pool_start), give = a->memory ? (size_t)a->memory : pool;
    if (give > pool) give = pool;
    memset(__pool_start, POOL_PAINT, pool);
    poet_dev_storage *use = NULL;
    if (r->need.storage_bytes && strcmp(a->storage, "ram") == 0) { /* storage at the pool's end */
        if (r->need.storage_bytes > give) return refuse("no room in RAM for the storage", "");
        give -= (size_t)r->need.storage_bytes;
        ram_store_open(ram, __pool_start + give, r->need.storage_bytes, st);
        use = st;
    } else if (r->need.storage_bytes) {
        card->fail_write_at = a->fail_write, card->fail_read_at = a->fail_read;
        if (sd_card_open(card, a->storage, r->need.storage_bytes, false, st, &err)) return fail("", err.msg);
        use = st;
    }
    if (poet_dev_open(image, (size_t)len, __pool_start, give, use, a->profile ? ticks_as_seconds : NULL, &r->d, &err))
        return refuse("", err.msg);
    r->spare = __pool_start + (r->need.total_bytes + 7) / 8 * 8, r->spare_end = __pool_start + give;
    return a->times && a->profile ? start_timers(r) : 0;
}

/* Per-node timers in the spare pool: a calibration's measurements. */
static int start_timers(run *r)
{
    uint64_t n = poet_dev_nodes(r->d), bytes = 2 * n * sizeof(double);
    if (bytes > (uint64_t)(r->spare_end - r->spare)) return refuse("no spare RAM for the per-node timers", "");
    r->node_ticks = (double *)(void *)r->spare;
    r->spare += bytes;
    memset(r->node_ticks, 0, (size_t)bytes);
    poet_dev_set_node_timers(r->d, r->node_ticks, r->node_ticks + n);
    return 0;
}

/* The training steps' ticks: per node compute, then per node transfers,
 * then the optimizer's, the transfers', the waits' and the kernels' in
 * all, as doubles; the timers stop (inference is not training). */
static void write_times(run *r, const char *path)
{
    if (!r->node_ticks) return;
    const poet_dev_stats *s = poet_dev_get_stats(r->d);
    double totals[4] = {s->update_s, s->transfer_s, s->wait_s, s->compute_s};
    int h = sh_open(path, SH_WRITE_BINARY);
    if (h >= 0) {
        sh_write(h, r->node_ticks, 2 * (size_t)poet_dev_nodes(r->d) * sizeof(double));
        sh_write(h, totals, sizeof totals);
        sh_close(h);
    }
    poet_dev_set_node_timers(r->d, NULL, NULL);
}

/* The patches of a file, one after the other, each read into the pool's
 * spare bytes (its header says its length) and applied. */
static int apply_patches(run *r, const char *path)
{
    int h = sh_open(path, SH_READ_BINARY);
    if (h < 0) return fail("cannot open the patch file ", path);
    int rc = 0;
    size_t head = 24, room = (size_t)(r->spare_end - r->spare);
    if (room < head) rc = refuse("no spare RAM to read a patch into", "");
    while (rc == 0) {
        int left = sh_read(h, r->spare, head); /* bytes not read */
        if (left == (int)head) break;          /* the end of the file, between patches */
        uint64_t len = 0;
        for (int i = 7; i >= 0; i--) len = len << 8 | r->spare[16 + i];
        poet_err err = {0};
        if (left || len < head)
            rc = refuse("the patch file holds something other than patches", "");
        else if (len > room)
            rc = refuse("a patch does not fit the spare RAM", "");
        else if (sh_read(h, r->spare + head, (size_t)(len - head)) != 0)
            rc = refuse("the patch file ends inside a patch", "");
        else if (poet_dev_patch_apply(r->d, r->spare, (size_t)len, &err))
            rc = refuse("", err.msg);
        else
            r->patches++;
    }
    sh_close(h);
    return rc;
}

/* ---- compact weight formats ----
 * A case file: u32 kind (1: nested sparse, 2: multi-bit), then the kind's
 * part, then f32 bias[rows] and x[batch x cols]. The device builds or reads
 * the layer, runs it, and writes its outputs to the out file, which must be
 * the host's bit for bit (tests/device.sh). Every array lies in the pool. */

typedef struct layer_case {
    int h;
    unsigned char *at; /* next free pool byte */
    bool bad;
} layer_case;

static void *take(layer_case *c, uint64_t bytes)
{
    bytes = (bytes + 3) / 4 * 4;
    if (c->bad || bytes > (uint64_t)(__pool_end - c->at)) return c->bad = true, NULL;
    void *p = c->at;
    c->at += bytes;
    return p;
}

static void *read_into(layer_case *c, uint64_t bytes)
{
    void *p = take(c, bytes);
    if (p && sh_read(c->h, p, (size_t)bytes)) c->bad = true;
    return c->bad ? NULL : p;
}

static int write_out(const char *out, const void *y, uint64_t bytes)
{
    int o = sh_open(out, SH_WRITE_BINARY);
    if (o < 0) return fail("cannot write ", out);
    int bad = sh_write(o, y, (size_t)bytes);
    sh_close(o);
    return bad ? fail("cannot write ", out) : 0;
}

/* u32 rows, cols, batch, levels; u32 sparsity (basis points) per level;
 * f32 dense weights (rows x cols). Packs them here, runs every level
 * (outputs: levels x batch x rows floats), and times a switch. */
static int sparse_case(layer_case *c, const char *out)
{
    uint32_t *hdr = read_into(c, 16);
    if (!hdr || !hdr[0] || !hdr[1] || !hdr[2] || !hdr[3] || hdr[3] > POET_SPARSE_MAX_LEVELS || hdr[1] > 65536)
        return fail("a malformed sparse case", "");
    uint32_t rows = hdr[0], cols = hdr[1], batch = hdr[2], levels = hdr[3];
    uint32_t *bp32 = read_into(c, 4ull * levels);
    float *w = read_into(c, 4ull * rows * cols), *bias = read_into(c, 4ull * rows);
    float *x = read_into(c, 4ull * batch * cols), *values = take(c, 4ull * rows * cols);
    float *y = take(c, 4ull * levels * batch * rows);
    uint16_t *columns = take(c, 2ull * rows * cols), bp[POET_SPARSE_MAX_LEVELS];
    if (c->bad) return fail("a truncated or too large sparse case", "");
    for (uint32_t k = 0; k < levels; k++) bp[k] = (uint16_t)bp32[k];
    poet_sparse_layer l;
    poet_err err = {0};
    if (poet_sparse_pack(w, bias, rows, cols, bp, levels, values, columns, &l, &err)) return refuse("", err.msg);
    for (uint32_t k = 0; k < levels; k++) {
        poet_sparse_set_level(&l, k, &err);
        poet_sparse_forward(&l, x, batch, y + (uint64_t)k * batch * rows);
    }
    enum { SWITCHES = 1000 };
    uint64_t t0 = board_ticks();
    for (uint32_t i = 0; i < SWITCHES; i++) poet_sparse_set_level(&l, i % levels, &err);
    uint64_t dt = board_ticks() - t0;
    put_str("poet-device {");
    put_field("sparse_levels", levels);
    put_field("sparse_switch_ticks_x1000", dt);
    put_str("}");
    flush();
    return write_out(out, y, 4ull * levels * batch * rows);
}

/* u32 rows, cols, group, batch; u8 terms per group; f32 scales; sign
 * bytes. Outputs: the product (batch x rows floats), then the dequantized
 * weights (rows x cols floats). */
static int multibit_case(layer_case *c, const char *out)
{
    uint32_t *hdr = read_into(c, 16);
    if (!hdr || !hdr[0] || !hdr[1] || !hdr[2] || !hdr[3]) return fail("a malformed multi-bit case", "");
    poet_alq_layer l = {hdr[0], hdr[1], hdr[2], NULL, NULL, NULL, NULL};
    uint32_t batch = hdr[3];
    uint64_t groups = (uint64_t)l.rows * poet_alq_groups_per_row(&l);
    uint8_t *terms = read_into(c, groups);
    poet_err err = {0};
    if (!terms) return fail("a truncated multi-bit case", "");
    l.terms = terms;
    if (poet_alq_check(&l, &err)) return refuse("", err.msg);
    poet_alq_size size = poet_alq_layer_size(l.rows, l.cols, l.group, terms);
    l.alpha = read_into(c, 4 * size.alphas), l.bits = read_into(c, size.bit_bytes);
    float *bias = read_into(c, 4ull * l.rows), *x = read_into(c, 4ull * batch * l.cols);
    float *y = take(c, 4ull * batch * l.rows + 4ull * l.rows * l.cols);
    if (c->bad) return fail("a truncated or too large multi-bit case", "");
    l.bias = bias;
    poet_alq_forward(&l, x, batch, y);
    poet_alq_dequantize(&l, y + (uint64_t)batch * l.rows);
    put_str("poet-device {");
    put_field("multibit_bytes", size.bytes);
    put_field("multibit_sign_bits", size.sign_bits);
    put_str("}");
    flush();
    return write_out(out, y, 4ull * batch * l.rows + 4ull * l.rows * l.cols);
}

static int layer_check(const char *in, const char *out)
{
    layer_case c = {sh_open(in, SH_READ_BINARY), __pool_start, false};
    if (c.h < 0) return fail("cannot open the layer case ", in);
    uint32_t *kind = read_into(&c, 4);
    int rc = !kind ? fail("an empty layer case ", in)
           : *kind == 1 ? sparse_case(&c, out)
           : *kind == 2 ? multibit_case(&c, out)
                        : fail("an unknown layer case ", in);
    sh_close(c.h);
    return rc;
}

/* ---- hostile images ----
 * A case file: u32 count, then per case u32 offset, u32 width (bytes),
 * u64 value, u32 CRC-32 of the changed image. Each case is the image in
 * flash copied to the pool's top, changed there, inspected, opened in the
 * rest of the pool (paging to RAM at its end) and, where that works,
 * trained a step on zeros: "poet-case K inspect S total T open S step S",
 * statuses as poet_status numbers. */

static void put_status(const char *what, poet_status st)
{
    put_str(what);
    put_str(st < 0 ? "-" : "");
    put_u64((uint64_t)(st < 0 ? -(int64_t)st : st));
}

static poet_status run_case(unsigned char *img, size_t len, uint64_t *total, poet_status *opened, poet_status *stepped)
{
    poet_dev_memory need;
    poet_err err = {0};
    *total = 0, *opened = *stepped = POET_ERR_NOT_FOUND; /* not tried */
    poet_status st = poet_dev_inspect(img, len, &need, &err);
    if (st) return st;
    *total = need.total_bytes;
    size_t room = (size_t)(img - __pool_start);
    if (need.total_bytes > room || need.storage_bytes > room - need.total_bytes) return POET_OK;
    static ram_store ram;
    poet_dev_storage store;
    ram_store_open(&ram, __pool_start + room - (size_t)need.storage_bytes, need.storage_bytes, &store);
    poet_dev *d;
    if ((*opened = poet_dev_open(img, len, __pool_start, (size_t)need.total_bytes, &store, NULL, &d, &err))) return POET_OK;
    float *x, loss;
    int32_t *y;
    int rows, classes;
    uint64_t per;
    poet_dev_batch_shape(d, &rows, &per, &classes);
    poet_dev_batch_buffers(d, &x, &y);
    memset(x, 0, (size_t)rows * (size_t)per * sizeof *x);
    memset(y, 0, (size_t)rows * sizeof *y);
    *stepped = poet_dev_step(d, x, y, &loss, &err);
    return POET_OK;
}

static int check_images(const char *path)
{
    const unsigned char *image = __image_start;
    uint64_t len = poet_dev_image_length(image);
    size_t pool = (size_t)(__pool_end - __pool_start), top = ((size_t)len + 7) / 8 * 8;
    if (!len || len > (uint64_t)(__image_end - __image_start) || top > pool) return fail("no image in flash for the cases", "");
    unsigned char *img = __pool_end - top;
    img -= (uintptr_t)img % 8;
    int h = sh_open(path, SH_READ_BINARY);
    uint32_t count = 0;
    if (h < 0 || sh_read(h, &count, 4) != 0) return fail("cannot read the cases ", path);
    for (uint32_t k = 0; k < count; k++) {
        struct { uint32_t at, width; uint64_t value; uint32_t crc; } c;
        if (sh_read(h, &c.at, 4) || sh_read(h, &c.width, 4) || sh_read(h, &c.value, 8) || sh_read(h, &c.crc, 4) ||
            c.width > 8 || (uint64_t)c.at + c.width > len - 4)
            return fail("a malformed case in ", path);
        memcpy(img, image, (size_t)len);
        for (uint32_t i = 0; i < c.width; i++) img[c.at + i] = (unsigned char)(c.value >> (8 * i));
        for (uint32_t i = 0; i < 4; i++) img[len - 4 + i] = (unsigned char)(c.crc >> (8 * i));
        uint64_t total;
        poet_status opened, stepped, st = run_case(img, (size_t)len, &total, &opened, &stepped);
        put_str("poet-case ");
        put_u64(k);
        put_status(" inspect ", st);
        put_str(" total ");
        put_u64(total);
        put_status(" open ", opened);
        put_status(" step ", stepped);
        flush();
    }
    sh_close(h);
    return 0;
}

int main(void)
{
    args a;
    if (!parse(&a))
        return fail("usage: [--patches=FILE] [--steps=N --data=FILE] [--storage=FILE|ram] ... | --layer=FILE --layer-out=FILE", "");
    if (a.layer) return layer_check(a.layer, a.layer_out);
    if (a.cases) return check_images(a.cases);
    static run r;
    static sd_card card;
    static ram_store ram;
    poet_dev_storage st;
    int rc = open_dev(&r, &a, &st, &card, &ram);
    if (rc) return rc;
    static sd_card store_card;
    poet_dev_storage store;
    if (a.store && (rc = open_store(&r, a.store, &store_card, &store))) return rc;
    if (a.patches) rc = apply_patches(&r, a.patches);
    if (!rc) rc = adaptation(&r, &a);
    if (!rc && a.steps) {
        int data = sh_open(a.data, SH_READ_BINARY);
        if (data < 0) return fail("cannot open the data file ", a.data);
        rc = train(&r, &a, data);
        sh_close(data);
        if (!rc && a.times) write_times(&r, a.times);
    }
    if (!rc && a.test) rc = evaluate(&r, a.test);
    poet_err err = {0};
    if (a.store && (r.patches || r.steps_done)) { /* what was applied or trained, whole, even if a later part failed */
        if (poet_dev_store_save(r.d, &store, 0, &err)) rc = refuse("saving the model: ", err.msg);
        else r.store_saved = 1;
    }
    uint64_t count;
    write_weights(r.d, a.weights);
    const float *w = poet_dev_state(r.d, &count); /* batch norm statistics: what an exported model needs beside the weights */
    write_floats(w, count, a.state);
    report(&r, &a);
    return rc;
}
