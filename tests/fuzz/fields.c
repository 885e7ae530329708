/* See fields.h. The layouts are the formats' own: src/device/image.h (device
 * images), src/device/patch.h (patches), docs/runtime.md (checkpoints) and
 * docs/schedules.md (binary schedules). */
#include "fields.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "../../src/device/image.h"
#include "../../src/device/patch.h"

/* ---- little-endian fields and varints ---- */

static uint64_t le(const uint8_t *p, int w)
{
    uint64_t v = 0;
    for (int i = 0; i < w; i++) v |= (uint64_t)p[i] << (8 * i);
    return v;
}

/* A varint at p (at most end - p bytes): its value, and its length in *n
 * (0 where malformed). */
static uint64_t varint(const uint8_t *p, const uint8_t *end, size_t *n)
{
    uint64_t v = 0;
    for (size_t k = 0; k < 10 && p + k < end; k++) {
        v |= (uint64_t)(p[k] & 0x7f) << (7 * k);
        if (!(p[k] & 0x80)) {
            *n = k + 1;
            return v;
        }
    }
    *n = 0;
    return 0;
}

static size_t put_varint(uint8_t *p, uint64_t v)
{
    size_t n = 0;
    for (; v >= 0x80; v >>= 7) p[n++] = (uint8_t)(v | 0x80);
    p[n++] = (uint8_t)v;
    return n;
}

/* ---- the list being built ---- */

typedef struct list {
    field *f;
    size_t n, cap;
    bool oom;
} list;

static void add_in(list *l, size_t at, int width, const char *name, uint32_t record)
{
    if (l->oom) return;
    if (l->n == l->cap) {
        size_t cap = l->cap ? 2 * l->cap : 64;
        field *g = realloc(l->f, cap * sizeof *g);
        if (!g) {
            l->oom = true;
            return;
        }
        l->f = g, l->cap = cap;
    }
    l->f[l->n++] = (field){at, width, name, record};
}

static void add(list *l, size_t at, int width, const char *name) { add_in(l, at, width, name, 0); }

/* ---- device images ---- */

#define HEADER_FIELD(name) {offsetof(img_header, name), (int)sizeof(((img_header *)0)->name), "header." #name, 0}
#define PROGRAM_FIELDS(pg)                                                                                     \
    HEADER_FIELD(pg.n_instr), HEADER_FIELD(pg.n_buffers), HEADER_FIELD(pg.instr_at), HEADER_FIELD(pg.buffers_at), \
        HEADER_FIELD(pg.arena_bytes)

static const field IMAGE_HEADER[] = {
    HEADER_FIELD(version),     HEADER_FIELD(header_bytes),   HEADER_FIELD(image_bytes),   HEADER_FIELD(graph_hash),
    HEADER_FIELD(n_nodes),     HEADER_FIELD(n_forward),      HEADER_FIELD(loss),          HEADER_FIELD(input),
    HEADER_FIELD(rows),        HEADER_FIELD(classes),        HEADER_FIELD(nodes_at),      HEADER_FIELD(slots_at),
    HEADER_FIELD(params_at),   HEADER_FIELD(state_at),       HEADER_FIELD(schedule_at),   HEADER_FIELD(schedule_bytes),
    HEADER_FIELD(optimizer),   HEADER_FIELD(lr),             HEADER_FIELD(momentum),      HEADER_FIELD(beta1),
    HEADER_FIELD(beta2),       HEADER_FIELD(eps),            HEADER_FIELD(weight_decay),  HEADER_FIELD(n_trained),
    HEADER_FIELD(channels_at), HEADER_FIELD(seed),           HEADER_FIELD(n_params),      HEADER_FIELD(n_state),
    HEADER_FIELD(batch_numel), HEADER_FIELD(storage_bytes),  HEADER_FIELD(workspace_bytes), HEADER_FIELD(budget_bytes),
    HEADER_FIELD(n_resident),  HEADER_FIELD(fused_grad_floats), PROGRAM_FIELDS(train), PROGRAM_FIELDS(eval),
};

#define NODE_FIELD(name) {offsetof(knode, name), (int)sizeof(((knode *)0)->name), "node." #name, 0}
static const field NODE[] = {
    NODE_FIELD(op), NODE_FIELD(n_inputs), NODE_FIELD(ndim), NODE_FIELD(wrt), NODE_FIELD(fwd), NODE_FIELD(param_at),
    NODE_FIELD(params), NODE_FIELD(buffer_at), NODE_FIELD(buffers), NODE_FIELD(numel), NODE_FIELD(reads),
    NODE_FIELD(grad_at), {offsetof(knode, home), 4, "node.home[0]", 0}, {offsetof(knode, home) + 4, 4, "node.home[1]", 0},
};

static bool within(size_t len, uint64_t at, uint64_t count, uint64_t size)
{
    return at <= len && count <= (len - at) / size;
}

static void add_table(list *l, size_t base, const field *t, size_t n, uint32_t record)
{
    for (size_t k = 0; k < n; k++) add_in(l, base + t[k].at, t[k].width, t[k].name, record);
}

static void image_program(list *l, const uint8_t *buf, size_t len, const kprogram *pg)
{
    if (within(len, pg->instr_at, pg->n_instr, sizeof(kinstr)))
        for (uint32_t k = 0; k < pg->n_instr; k++) {
            size_t at = pg->instr_at + (size_t)k * sizeof(kinstr);
            add_in(l, at + offsetof(kinstr, op), 1, "instr.op", k);
            add_in(l, at + offsetof(kinstr, flags), 1, "instr.flags", k);
            add_in(l, at + offsetof(kinstr, node), 2, "instr.node", k);
            add_in(l, at + offsetof(kinstr, buffer), 4, "instr.buffer", k);
        }
    if (within(len, pg->buffers_at, pg->n_buffers, sizeof(kbuffer)))
        for (uint32_t b = 0; b < pg->n_buffers; b++) {
            size_t at = pg->buffers_at + (size_t)b * sizeof(kbuffer);
            add_in(l, at + offsetof(kbuffer, offset), 8, "buffer.offset", b);
            add_in(l, at + offsetof(kbuffer, bytes), 8, "buffer.bytes", b);
        }
    (void)buf;
}

static void image_fields(list *l, const uint8_t *buf, size_t len)
{
    add_table(l, 0, IMAGE_HEADER, sizeof IMAGE_HEADER / sizeof *IMAGE_HEADER, 0);
    if (len < sizeof(img_header)) return;
    img_header h;
    memcpy(&h, buf, sizeof h);
    if (within(len, h.nodes_at, h.n_nodes, sizeof(knode))) {
        uint64_t channels = 0;
        for (uint32_t v = 0; v < h.n_nodes; v++) {
            size_t at = h.nodes_at + (size_t)v * sizeof(knode);
            add_table(l, at, NODE, sizeof NODE / sizeof *NODE, v);
            for (int j = 0; j < POET_MAX_INPUTS; j++)
                add_in(l, at + offsetof(knode, inputs) + 4 * (size_t)j, 4, "node.inputs", v);
            for (int j = 0; j < POET_MAX_DIMS; j++) add_in(l, at + offsetof(knode, dim) + 4 * (size_t)j, 4, "node.dim", v);
            for (size_t j = 0; j < sizeof(poet_attrs) / 4; j++)
                add_in(l, at + offsetof(knode, attrs) + 4 * j, 4, "node.attrs", v);
            knode n;
            memcpy(&n, buf + at, sizeof n);
            uint64_t end = (uint64_t)(uint32_t)n.attrs.start + (uint64_t)(uint32_t)n.attrs.features;
            if (n.op == POET_OP_CHANNEL_SELECT && end > channels) channels = end;
        }
        if (h.channels_at && within(len, h.channels_at, channels, 4))
            for (uint64_t k = 0; k < channels; k++) add_in(l, h.channels_at + 4 * k, 4, "channel", (uint32_t)k);
    }
    if (within(len, h.slots_at, h.n_nodes, 8))
        for (uint32_t v = 0; v < h.n_nodes; v++) add_in(l, h.slots_at + 8 * (size_t)v, 8, "slot", v);
    image_program(l, buf, len, &h.train);
    image_program(l, buf, len, &h.eval);
}

/* ---- checkpoints (docs/runtime.md) ---- */

static const field CHECKPOINT_HEADER[] = {
    {8, 4, "checkpoint.version", 0},       {12, 4, "checkpoint.graph_hash", 0}, {16, 8, "checkpoint.seed", 0},
    {24, 8, "checkpoint.step", 0},         {32, 8, "checkpoint.epoch", 0},      {40, 8, "checkpoint.batch_in_epoch", 0},
    {48, 8, "checkpoint.state_bytes", 0},  {56, 8, "checkpoint.train_examples", 0}, {64, 4, "checkpoint.optimizer", 0},
    {68, 4, "checkpoint.lr", 0},           {72, 4, "checkpoint.momentum", 0},   {76, 4, "checkpoint.beta1", 0},
    {80, 4, "checkpoint.beta2", 0},        {84, 4, "checkpoint.eps", 0},        {88, 4, "checkpoint.weight_decay", 0},
};

static void checkpoint_fields(list *l, size_t len)
{
    add_table(l, 0, CHECKPOINT_HEADER, sizeof CHECKPOINT_HEADER / sizeof *CHECKPOINT_HEADER, 0);
    if (len >= 92 + 12) add(l, len - 12, 8, "checkpoint.state_step"); /* the state's step count ends it */
}

/* ---- patches (src/device/patch.h) ---- */

static const field PATCH_HEADER[] = {
    {PATCH_VERSION_AT, 4, "patch.version", 0},       {PATCH_GRAPH_AT, 4, "patch.graph", 0},
    {PATCH_LENGTH_AT, 8, "patch.length", 0},         {PATCH_ROUND_AT, 4, "patch.round", 0},
    {PATCH_REST_AT, 1, "patch.rest", 0},             {PATCH_BITMAP_AT, 1, "patch.bitmap", 0},
    {PATCH_INDEX_BITS_AT, 1, "patch.index_bits", 0}, {PATCH_ZERO_AT, 1, "patch.zero", 0},
    {PATCH_SEED_AT, 8, "patch.seed", 0},             {PATCH_PARAMS_AT, 8, "patch.params", 0},
    {PATCH_WEIGHTS_AT, 8, "patch.weights", 0},       {PATCH_CHANGED_AT, 8, "patch.changed", 0},
    {PATCH_LAYERS_AT, 4, "patch.layers", 0},         {PATCH_STATE_AT, 4, "patch.state", 0},
};

/* ---- binary schedules (docs/schedules.md) ---- */

/* The varints and fixed fields of a schedule, walked in order. */
static void schedule_fields(list *l, const uint8_t *buf, size_t len)
{
    if (len < 8) return;
    const uint8_t *p = buf + 4, *end = buf + len - 4;
    size_t n;
    uint64_t v;
#define VARINT(name) (v = varint(p, end, &n), n ? (add(l, (size_t)(p - buf), 0, name), p += n, true) : false)
    if (!VARINT("schedule.T") || !VARINT("schedule.budget") || end - p < 12) return;
    add(l, (size_t)(p - buf), 8, "schedule.runtime_factor");
    add(l, (size_t)(p - buf) + 8, 4, "schedule.graph_hash");
    p += 12;
    if (!VARINT("schedule.planner_bytes") || v > (uint64_t)(end - p)) return;
    p += v;
    static const char *const LIST[3][2] = {{"recompute.count", "recompute.entry"},
                                           {"page_in.count", "page_in.entry"},
                                           {"page_out.count", "page_out.entry"}};
    for (int e = 0; e < 4; e++) {
        if (!VARINT(e < 3 ? LIST[e][0] : "hold.count")) return;
        for (uint64_t k = 0, count = v; k < count; k++)
            for (int j = 0; j < (e < 3 ? 2 : 3); j++)
                if (!VARINT(e < 3 ? LIST[e][1] : "hold.entry")) return;
    }
#undef VARINT
}

/* ---- the interface ---- */

field_kind fields_kind(const uint8_t *buf, size_t len)
{
    if (len >= 8 && memcmp(buf, POET_IMAGE_MAGIC, 8) == 0) return KIND_IMAGE;
    if (len >= 8 && memcmp(buf, "POETCKPT", 8) == 0) return KIND_CHECKPOINT;
    if (len >= 8 && memcmp(buf, POET_PATCH_MAGIC, 8) == 0) return KIND_PATCH;
    if (len >= 8 && buf[3] == 0x50 && buf[2] == 0x53) return KIND_SCHEDULE; /* version word "PS" then the format */
    return KIND_NONE;
}

const char *fields_kind_name(field_kind k)
{
    static const char *const NAMES[] = {"other", "device image", "checkpoint", "binary schedule", "patch"};
    return NAMES[k];
}

field *fields_of(field_kind k, const uint8_t *buf, size_t len, size_t *n)
{
    list l = {0};
    if (k == KIND_IMAGE) image_fields(&l, buf, len);
    if (k == KIND_CHECKPOINT) checkpoint_fields(&l, len);
    if (k == KIND_PATCH) add_table(&l, 0, PATCH_HEADER, sizeof PATCH_HEADER / sizeof *PATCH_HEADER, 0);
    if (k == KIND_SCHEDULE) schedule_fields(&l, buf, len);
    size_t keep = 0; /* fields wholly before the CRC */
    for (size_t i = 0; !l.oom && i < l.n; i++)
        if (len >= 4 && l.f[i].at + (size_t)(l.f[i].width ? l.f[i].width : 1) <= len - 4) l.f[keep++] = l.f[i];
    *n = l.oom ? 0 : keep;
    if (l.oom) free(l.f), l.f = NULL;
    return l.f;
}

uint64_t field_get(const uint8_t *buf, size_t len, const field *f)
{
    size_t n;
    return f->width ? le(buf + f->at, f->width) : varint(buf + f->at, buf + len, &n);
}

uint8_t *field_set(const uint8_t *buf, size_t len, const field *f, uint64_t v, size_t *out_len)
{
    size_t old = (size_t)f->width, n;
    if (!f->width) varint(buf + f->at, buf + len, &old);
    uint8_t enc[16];
    size_t new_len = f->width ? (size_t)f->width : put_varint(enc, v);
    size_t total = len - old + new_len;
    uint8_t *out = malloc(total + 8);
    if (!out) return NULL;
    memcpy(out, buf, f->at);
    if (f->width)
        for (int i = 0; i < f->width; i++) out[f->at + (size_t)i] = (uint8_t)(v >> (8 * i));
    else
        memcpy(out + f->at, enc, new_len);
    memcpy(out + f->at + new_len, buf + f->at + old, len - f->at - old);
    uint32_t crc = (uint32_t)crc32(0L, out, (uInt)(total - 4));
    for (int i = 0; i < 4; i++) out[total - 4 + (size_t)i] = (uint8_t)(crc >> (8 * i));
    (void)n;
    *out_len = total;
    return out;
}

int field_boundaries(const field *f, uint64_t cur, uint64_t *vals)
{
    int bits = f->width ? 8 * f->width : 64;
    uint64_t umax = bits == 64 ? UINT64_MAX : (1ull << bits) - 1, smax = umax >> 1;
    uint64_t cand[] = {0,          1,          2,          cur - 1,    cur + 1,         smax,        smax + 1,
                       umax - 7,   umax - 1,   umax,       127,        128,             1ull << 16,  1ull << 24,
                       1ull << 30, 1ull << 31, 1ull << 32, 1ull << 40, 1ull << 48,      1ull << 63,  cur * 2,
                       cur << 32,  cur | 1ull << 31};
    int n = 0;
    for (size_t k = 0; k < sizeof cand / sizeof *cand && n < BOUNDARY_MAX; k++) {
        uint64_t v = cand[k] & umax;
        bool seen = v == cur;
        for (int j = 0; j < n && !seen; j++) seen = vals[j] == v;
        if (!seen) vals[n++] = v;
    }
    return n;
}

long fields_sweep(field_kind k, const uint8_t *buf, size_t len, mutant_fn *fn, void *ctx)
{
    size_t n = 0;
    field *fs = fields_of(k, buf, len, &n);
    long count = fs || !n ? 0 : -1;
    for (size_t i = 0; fs && i < n; i++) {
        uint64_t vals[BOUNDARY_MAX];
        int nv = field_boundaries(&fs[i], field_get(buf, len, &fs[i]), vals);
        for (int j = 0; j < nv && count >= 0; j++) {
            size_t mlen;
            uint8_t *m = field_set(buf, len, &fs[i], vals[j], &mlen);
            if (!m) count = -1;
            else fn(ctx, &fs[i], vals[j], m, mlen), count++;
            free(m);
        }
    }
    free(fs);
    return count;
}
