/* Device profiles and POET's per-node cost model. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../host/fileio.h"
#include "../host/json.h"
#include "profile_json.h"
#include "poet/cost.h"

/* The constants of POET's poet/chipsets.py, as its reference instances print
 * them (full precision), so that costs match bit for bit. jetsontx2 has no
 * compute figures in POET; ours are documented in docs/devices.md. POET's
 * fields in its order; no built-in profile is calibrated. */
#define POET_PROFILE(nm, desc, fps, fpj, pil, pib, pol, pob, mem_w, w, elem, ram, flash, fixed, image)               \
    {.name = nm, .description = desc, .flops_per_s = fps, .flops_per_j = fpj, .pagein_latency_s = pil,          \
     .pagein_bytes_per_s = pib, .pageout_latency_s = pol, .pageout_bytes_per_s = pob, .memory_power_w = mem_w,    \
     .power_w = w, .bytes_per_element = elem, .ram_bytes = ram, .flash_bytes = flash, .fixed_ram_bytes = fixed,  \
     .image_flash_bytes = image}
static const poet_profile BUILTIN[] = {
    POET_PROFILE("m0", "Arduino MKR1000, Cortex-M0+ at 48 MHz, no FPU; SD card storage", 166666.66666666666,
     2525252.525252525, 0.000109, 4616510, 0.00011300000000000001, 4440000, 0.33, 0.066, 4, 32768, 0, 0, 0),
    POET_PROFILE("m4", "nRF52840, Cortex-M4F at 64 MHz; SD card storage", 6369910.145264308, 580010757.690879, 0.000109,
     4616510, 0.00011300000000000001, 4440000, 0.33, 0.010982399999999998, 4, 262144, 0, 0, 0),
    POET_PROFILE("a72", "Raspberry Pi 4, Cortex-A72; SD card with write cache", 2000000000, 40115792.06701159,
     5.095610000000001e-06, 45500000, 1.85314e-05, 24500000, 0.15, 3, 4, 4294967296, 0, 0, 0),
    POET_PROFILE("a72nocache", "Raspberry Pi 4, Cortex-A72; SD card without write cache", 120347376.20103474,
     40115792.06701159, 5.095610000000001e-06, 45500000, 0.00423532, 17100000, 0.15, 3, 4, 4294967296, 0, 0, 0),
    POET_PROFILE("jetsontx2", "NVIDIA Jetson TX2, one Cortex-A57 core at 2.0 GHz; eMMC storage (compute figures: docs/devices.md)",
     2.0e9, 2.0e9 / 0.766, 0.00054, 108500000, 0.002396, 94370000, 0.309, 0.766, 4, 8589934592, 0, 0, 0),
    /* the board `poet emulate` runs: the m4's figures scaled to 168 MHz and the STM32F405's 40 mA there
     * (3.3 V); the SD card of the m0 and m4; RAM as the firmware leaves it; the image in the second half of
     * the 1 MiB flash (examples/firmware/stm32f405.ld; docs/devices.md) */
    POET_PROFILE("stm32f405", "STM32F405 (QEMU's netduinoplus2), Cortex-M4F at 168 MHz, 192 KiB RAM, 1 MiB flash; SD card storage",
     6369910.145264308 * 168 / 64, 6369910.145264308 * 168 / 64 / 0.132, 0.000109, 4616510, 0.00011300000000000001,
     4440000, 0.33, 0.132, 4, 196608, 0, 9216, 524288),
};

enum { N_BUILTIN = (int)(sizeof BUILTIN / sizeof *BUILTIN) };

int poet_profile_count(void) { return N_BUILTIN; }

const poet_profile *poet_profile_builtin(int i) { return i >= 0 && i < N_BUILTIN ? &BUILTIN[i] : NULL; }

/* A second an op call or a unit at most: a cost of 1e300 makes every sum infinite. */
static bool cost_ok(double v, double hi) { return v == v && v >= 0 && v <= hi; }

int poet_cost_kind(const poet_graph *g, const poet_node *n)
{
    const poet_node *f = n->op == POET_OP_GRAD ? &g->nodes[n->fwd] : n;
    return f->op == POET_OP_CONV2D && f->attrs.groups > 1 ? POET_COST_GROUPED_CONV2D : (int)f->op;
}

const char *poet_cost_kind_name(int kind)
{
    return kind == POET_COST_GROUPED_CONV2D ? "conv2d_grouped" : poet_op_name((poet_op)kind);
}

int poet_cost_kind_from_name(const char *name)
{
    if (strcmp(name, poet_cost_kind_name(POET_COST_GROUPED_CONV2D)) == 0) return POET_COST_GROUPED_CONV2D;
    poet_op op = poet_op_from_name(name);
    return op == POET_OP_COUNT ? -1 : (int)op;
}

static poet_status validate_calibration(const poet_profile *d, poet_err *err)
{
    for (int k = 0; k < POET_COST_KINDS; k++)
        for (int g = 0; g < 2; g++)
            if (d->op[k][g].measured && !(cost_ok(d->op[k][g].call_s, 1e3) && cost_ok(d->op[k][g].unit_s, 1e3)))
                return poet_fail(err, POET_ERR_INVALID, "device '%s': op %s%s: costs %g s a call and %g s a unit must "
                                 "be in [0, 1000]", d->name, poet_cost_kind_name(k), g ? " (gradient)" : "",
                                 d->op[k][g].call_s, d->op[k][g].unit_s);
    struct {
        const char *what;
        double v;
    } more[] = {{"compute_power_w", d->compute_power_w}, {"update_s_per_param", d->update_s_per_param},
                {"step_s", d->step_s}, {"instructions_per_s", d->instructions_per_s}};
    for (size_t i = 0; i < sizeof more / sizeof *more; i++)
        if (!cost_ok(more[i].v, i == 3 ? 1e15 : 1e6))
            return poet_fail(err, POET_ERR_INVALID, "device '%s': %s = %g is outside [0, %g]", d->name, more[i].what,
                             more[i].v, i == 3 ? 1e15 : 1e6);
    if (poet_profile_calibrated(d) && !(d->compute_power_w > 0))
        return poet_fail(err, POET_ERR_INVALID, "device '%s': measured op costs need compute_power_w above 0", d->name);
    return POET_OK;
}

poet_status poet_profile_validate(const poet_profile *d, poet_err *err)
{
    struct {
        const char *what;
        double v, lo, hi;
        bool open_lo;
    } checks[] = {
        /* rates of at least 1e-3 a second or a joule: one of 1e-300 makes every cost infinite */
        {"flops_per_s", d->flops_per_s, 1e-3, 1e21, false},
        {"flops_per_j", d->flops_per_j, 1e-3, 1e21, false},
        {"pagein_latency_s", d->pagein_latency_s, 0, 1e3, false},
        {"pagein_bytes_per_s", d->pagein_bytes_per_s, 1e-3, 1e15, false},
        {"pageout_latency_s", d->pageout_latency_s, 0, 1e3, false},
        {"pageout_bytes_per_s", d->pageout_bytes_per_s, 1e-3, 1e15, false},
        {"memory_power_w", d->memory_power_w, 0, 1e6, false},
        {"power_w", d->power_w, 0, 1e6, false},
    };
    for (size_t i = 0; i < sizeof checks / sizeof *checks; i++) {
        double v = checks[i].v;
        bool ok = v == v && v <= checks[i].hi && (checks[i].open_lo ? v > checks[i].lo : v >= checks[i].lo);
        if (!ok)
            return poet_fail(err, POET_ERR_INVALID, "device '%s': %s = %g is outside %s%g, %g]", d->name,
                             checks[i].what, v, checks[i].open_lo ? "(" : "[", checks[i].lo, checks[i].hi);
    }
    if (d->fixed_ram_bytes && d->fixed_ram_bytes >= d->ram_bytes)
        return poet_fail(err, POET_ERR_INVALID, "device '%s': fixed_ram_bytes (%llu) must be less than ram_bytes (%llu)",
                         d->name, (unsigned long long)d->fixed_ram_bytes, (unsigned long long)d->ram_bytes);
    if (d->bytes_per_element < 1 || d->bytes_per_element > 8)
        return poet_fail(err, POET_ERR_INVALID, "device '%s': bytes_per_element must be 1 to 8", d->name);
    return validate_calibration(d, err);
}

bool poet_profile_calibrated(const poet_profile *d)
{
    for (int k = 0; k < POET_COST_KINDS; k++)
        if (d->op[k][0].measured || d->op[k][1].measured) return true;
    return false;
}

static const char *const OP_COST_KEYS[] = {"call_s", "unit_s", "grad_call_s", "grad_unit_s", NULL};

/* "ops": {"conv2d": {"call_s": .., "unit_s": .., "grad_call_s": .., "grad_unit_s": ..}, ...}: a pair given
 * is measured, a pair left out is not. */
static poet_status op_costs_from_cjson(const cJSON *ops, poet_profile *d, const char *what, poet_err *err)
{
    if (!ops) return POET_OK;
    if (!cJSON_IsObject(ops)) return poet_fail(err, POET_ERR_INVALID, "%s: ops must be an object", what);
    const cJSON *c;
    cJSON_ArrayForEach(c, ops)
    {
        int k = poet_cost_kind_from_name(c->string);
        if (k < 0) return poet_fail(err, POET_ERR_INVALID, "%s: ops: unknown op '%s'", what, c->string);
        poet_status st = json_only_keys(c, OP_COST_KEYS, what, err);
        for (int g = 0; g < 2 && !st; g++) {
            bool has = cJSON_GetObjectItemCaseSensitive(c, OP_COST_KEYS[2 * g]) ||
                       cJSON_GetObjectItemCaseSensitive(c, OP_COST_KEYS[2 * g + 1]);
            poet_op_cost *o = &d->op[k][g];
            const double big = 1e300;
            if (has && !(st = json_number(c, OP_COST_KEYS[2 * g], -big, big, true, 0, &o->call_s, what, err)))
                st = json_number(c, OP_COST_KEYS[2 * g + 1], -big, big, true, 0, &o->unit_s, what, err);
            o->measured = has;
        }
        if (st) return st;
    }
    return POET_OK;
}

static bool op_costs_to_cjson(cJSON *o, const poet_profile *d)
{
    if (!poet_profile_calibrated(d)) return true;
    cJSON *ops = cJSON_AddObjectToObject(o, "ops");
    for (int k = 0; ops && k < POET_COST_KINDS; k++) {
        if (!d->op[k][0].measured && !d->op[k][1].measured) continue;
        cJSON *c = cJSON_AddObjectToObject(ops, poet_cost_kind_name(k));
        for (int g = 0; c && g < 2; g++)
            if (d->op[k][g].measured && !(json_add_exact(c, OP_COST_KEYS[2 * g], d->op[k][g].call_s) &&
                                          json_add_exact(c, OP_COST_KEYS[2 * g + 1], d->op[k][g].unit_s)))
                return false;
        if (!c) return false;
    }
    return ops && json_add_exact(o, "compute_power_w", d->compute_power_w) &&
           json_add_exact(o, "update_s_per_param", d->update_s_per_param) && json_add_exact(o, "step_s", d->step_s) &&
           json_add_exact(o, "instructions_per_s", d->instructions_per_s);
}

poet_status profile_from_cjson(const cJSON *obj, poet_profile *out, const char *what, poet_err *err)
{
    static const char *const keys[] = {"format", "version", "name", "description", "flops_per_s", "flops_per_j",
                                       "pagein_latency_s", "pagein_bytes_per_s", "pageout_latency_s",
                                       "pageout_bytes_per_s", "memory_power_w", "power_w", "bytes_per_element",
                                       "ram_bytes", "flash_bytes", "fixed_ram_bytes", "image_flash_bytes", "ops",
                                       "compute_power_w", "update_s_per_param", "step_s", "instructions_per_s", NULL};
    if (!cJSON_IsObject(obj)) return poet_fail(err, POET_ERR_INVALID, "%s: expected an object", what);
    poet_profile d;
    memset(&d, 0, sizeof d);
    char format[32];
    int64_t version = 0, elem = 4, ram = 0, flash = 0, fixed = 0, image = 0;
    poet_status st = json_only_keys(obj, keys, what, err);
    if (!st && !(st = json_string(obj, "format", true, NULL, format, sizeof format, what, err)) &&
        strcmp(format, "poet-device") != 0)
        st = poet_fail(err, POET_ERR_INVALID, "%s: format must be \"poet-device\", got \"%s\"", what, format);
    if (!st && !(st = json_integer(obj, "version", 0, 1000000, true, 0, &version, what, err)) && version != 1)
        st = poet_fail(err, POET_ERR_UNSUPPORTED, "%s: version %lld is not supported (this poet reads 1)", what,
                       (long long)version);
    const double big = 1e300;
    if (!st) st = json_string(obj, "name", true, NULL, d.name, sizeof d.name, what, err);
    if (!st) st = json_string(obj, "description", false, "", d.description, sizeof d.description, what, err);
    if (!st) st = json_number(obj, "flops_per_s", -big, big, true, 0, &d.flops_per_s, what, err);
    if (!st) st = json_number(obj, "flops_per_j", -big, big, true, 0, &d.flops_per_j, what, err);
    if (!st) st = json_number(obj, "pagein_latency_s", -big, big, true, 0, &d.pagein_latency_s, what, err);
    if (!st) st = json_number(obj, "pagein_bytes_per_s", -big, big, true, 0, &d.pagein_bytes_per_s, what, err);
    if (!st) st = json_number(obj, "pageout_latency_s", -big, big, true, 0, &d.pageout_latency_s, what, err);
    if (!st) st = json_number(obj, "pageout_bytes_per_s", -big, big, true, 0, &d.pageout_bytes_per_s, what, err);
    if (!st) st = json_number(obj, "memory_power_w", -big, big, true, 0, &d.memory_power_w, what, err);
    if (!st) st = json_number(obj, "power_w", -big, big, false, 0, &d.power_w, what, err);
    if (!st) st = json_integer(obj, "bytes_per_element", 1, 8, false, 4, &elem, what, err);
    if (!st) st = json_integer(obj, "ram_bytes", 0, (int64_t)1 << 53, false, 0, &ram, what, err);
    if (!st) st = json_integer(obj, "flash_bytes", 0, (int64_t)1 << 53, false, 0, &flash, what, err);
    if (!st) st = json_integer(obj, "fixed_ram_bytes", 0, (int64_t)1 << 53, false, 0, &fixed, what, err);
    if (!st) st = json_integer(obj, "image_flash_bytes", 0, (int64_t)1 << 53, false, 0, &image, what, err);
    if (!st) st = json_number(obj, "compute_power_w", -big, big, false, 0, &d.compute_power_w, what, err);
    if (!st) st = json_number(obj, "update_s_per_param", -big, big, false, 0, &d.update_s_per_param, what, err);
    if (!st) st = json_number(obj, "step_s", -big, big, false, 0, &d.step_s, what, err);
    if (!st) st = json_number(obj, "instructions_per_s", -big, big, false, 0, &d.instructions_per_s, what, err);
    if (!st) st = op_costs_from_cjson(cJSON_GetObjectItemCaseSensitive(obj, "ops"), &d, what, err);
    if (st) return st;
    d.bytes_per_element = (int)elem;
    d.ram_bytes = (uint64_t)ram, d.flash_bytes = (uint64_t)flash, d.fixed_ram_bytes = (uint64_t)fixed;
    d.image_flash_bytes = (uint64_t)image;
    if (!d.name[0]) return poet_fail(err, POET_ERR_INVALID, "%s: name must not be empty", what);
    if ((st = poet_profile_validate(&d, err))) return st;
    *out = d;
    return POET_OK;
}

poet_status poet_profile_parse_json(const char *text, size_t len, poet_profile *out, poet_err *err)
{
    cJSON *doc = NULL;
    poet_status st = json_parse(text, len, "device profile", &doc, err);
    if (st) return st;
    st = profile_from_cjson(doc, out, "device profile", err);
    cJSON_Delete(doc);
    return st;
}

cJSON *profile_to_cjson(const poet_profile *d)
{
    cJSON *o = cJSON_CreateObject();
    if (!o) return NULL;
    bool ok = cJSON_AddStringToObject(o, "format", "poet-device") && json_add_exact(o, "version", 1) &&
              cJSON_AddStringToObject(o, "name", d->name) &&
              cJSON_AddStringToObject(o, "description", d->description) &&
              json_add_exact(o, "flops_per_s", d->flops_per_s) &&
              json_add_exact(o, "flops_per_j", d->flops_per_j) &&
              json_add_exact(o, "pagein_latency_s", d->pagein_latency_s) &&
              json_add_exact(o, "pagein_bytes_per_s", d->pagein_bytes_per_s) &&
              json_add_exact(o, "pageout_latency_s", d->pageout_latency_s) &&
              json_add_exact(o, "pageout_bytes_per_s", d->pageout_bytes_per_s) &&
              json_add_exact(o, "memory_power_w", d->memory_power_w) &&
              json_add_exact(o, "power_w", d->power_w) &&
              json_add_exact(o, "bytes_per_element", d->bytes_per_element) &&
              (!d->ram_bytes || json_add_exact(o, "ram_bytes", (double)d->ram_bytes)) &&
              (!d->flash_bytes || json_add_exact(o, "flash_bytes", (double)d->flash_bytes)) &&
              (!d->fixed_ram_bytes || json_add_exact(o, "fixed_ram_bytes", (double)d->fixed_ram_bytes)) &&
              (!d->image_flash_bytes || json_add_exact(o, "image_flash_bytes", (double)d->image_flash_bytes)) &&
              op_costs_to_cjson(o, d);
    if (!ok) {
        cJSON_Delete(o);
        return NULL;
    }
    return o;
}

char *poet_profile_to_json(const poet_profile *d)
{
    cJSON *o = profile_to_cjson(d);
    char *s = o ? cJSON_Print(o) : NULL;
    cJSON_Delete(o);
    return s;
}

poet_status profile_from_poet_chipset(const cJSON *c, const char *name, poet_profile *out, poet_err *err)
{
    const char *what = "POET chipset";
    if (!cJSON_IsObject(c)) return poet_fail(err, POET_ERR_INVALID, "%s: expected an object", what);
    poet_profile d;
    memset(&d, 0, sizeof d);
    snprintf(d.name, sizeof d.name, "%s", name);
    snprintf(d.description, sizeof d.description, "POET chipset '%s'", name);
    const double big = 1e300;
    int64_t elem = 4;
    poet_status st = json_number(c, "FLOPS", -big, big, true, 0, &d.flops_per_s, what, err);
    if (!st) st = json_number(c, "FLOPS_PER_WATT", -big, big, true, 0, &d.flops_per_j, what, err);
    if (!st) st = json_number(c, "PAGEIN_LATENCY", -big, big, true, 0, &d.pagein_latency_s, what, err);
    if (!st) st = json_number(c, "PAGEIN_THROUGHPUT", -big, big, true, 0, &d.pagein_bytes_per_s, what, err);
    if (!st) st = json_number(c, "PAGEOUT_LATENCY", -big, big, true, 0, &d.pageout_latency_s, what, err);
    if (!st) st = json_number(c, "PAGEOUT_THROUGHPUT", -big, big, true, 0, &d.pageout_bytes_per_s, what, err);
    if (!st) st = json_number(c, "MEMORY_POWER", -big, big, true, 0, &d.memory_power_w, what, err);
    if (!st) st = json_number(c, "POWER", -big, big, false, 0, &d.power_w, what, err);
    if (!st) st = json_integer(c, "TYPE", 1, 8, false, 4, &elem, what, err);
    if (st) return st;
    d.bytes_per_element = (int)elem;
    if ((st = poet_profile_validate(&d, err))) return st;
    *out = d;
    return POET_OK;
}

static poet_status parse_profile(void *out, const char *text, size_t len, poet_err *err)
{
    return poet_profile_parse_json(text, len, out, err);
}

poet_status poet_profile_find(const char *name_or_path, poet_profile *out, poet_err *err)
{
    const char *s = name_or_path ? name_or_path : "";
    for (int i = 0; i < N_BUILTIN; i++)
        if (strcmp(BUILTIN[i].name, s) == 0) {
            *out = BUILTIN[i];
            return POET_OK;
        }
    size_t n = strlen(s);
    bool is_path = strchr(s, '/') || (n > 5 && strcmp(s + n - 5, ".json") == 0);
    if (!is_path)
        return poet_fail(err, POET_ERR_NOT_FOUND,
                         "unknown device '%s' (built in: m0, m4, a72, a72nocache, jetsontx2; or a .json profile)", s);
    return host_read_parsed(s, parse_profile, out, err);
}

double poet_cost_compute_time_s(const poet_profile *d, double flops) { return flops / d->flops_per_s; }
double poet_cost_compute_j(const poet_profile *d, double flops) { return flops / d->flops_per_j; }

static const poet_op_cost *measured_cost(const poet_profile *d, int kind, bool grad)
{
    return (unsigned)kind < POET_COST_KINDS && d->op[kind][grad].measured ? &d->op[kind][grad] : NULL;
}

double poet_cost_node_s(const poet_profile *d, int kind, bool grad, double flops, double elements)
{
    const poet_op_cost *c = measured_cost(d, kind, grad);
    if (!c) return poet_cost_compute_time_s(d, flops);
    return c->call_s + c->unit_s * (flops > 0 ? flops : elements);
}

double poet_cost_node_j(const poet_profile *d, int kind, bool grad, double flops, double elements)
{
    if (!measured_cost(d, kind, grad)) return poet_cost_compute_j(d, flops);
    return poet_cost_node_s(d, kind, grad, flops, elements) * d->compute_power_w;
}

double poet_cost_pagein_s(const poet_profile *d, uint64_t bytes)
{
    return d->pagein_latency_s + (double)bytes / d->pagein_bytes_per_s;
}

double poet_cost_pageout_s(const poet_profile *d, uint64_t bytes)
{
    return d->pageout_latency_s + (double)bytes / d->pageout_bytes_per_s;
}

double poet_cost_pagein_j(const poet_profile *d, uint64_t bytes)
{
    return poet_cost_pagein_s(d, bytes) * d->memory_power_w;
}

double poet_cost_pageout_j(const poet_profile *d, uint64_t bytes)
{
    return poet_cost_pageout_s(d, bytes) * d->memory_power_w;
}
