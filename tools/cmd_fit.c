#define _POSIX_C_SOURCE 200809L
/* poet fit: what trains on a device. For each --train spec and batch, the
 * smallest whole RAM a schedule trains in (the firmware's part, what
 * training keeps beside the activations, the placed arena), whether that
 * fits the device, and the largest batch that does. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

static const char FIT_HELP[] =
    "usage: poet fit (--model NAME | --onnx FILE) --device DEV [--batch N]... [--train SPEC]...\n"
    "                [--max-batch N] [--runtime-factor F] [--runtime-model M] [--planner NAME]\n"
    "                [--frozen WHERE] [--fused-update] [--time-limit S] [--json]\n"
    "For each --train spec (default: all, last:2, last:1 and biases, each also\n"
    "with +frozen-bn+masks) and each batch (default: 1, 2, 4, ... up to\n"
    "--max-batch, 64 by default, stopping where even the state beside the\n"
    "activations outgrows the RAM), the smallest whole RAM a\n"
    "schedule trains in on DEV: the firmware's part (the profile's fixed_ram_bytes),\n"
    "weights, gradients, optimizer state (SGD), statistics, the batch, workspace and\n"
    "control as the device lays them out (the frozen parameters read in place from\n"
    "flash with --frozen flash, the default), and the arena of the schedule planned at\n"
    "the smallest budget its planner meets; whether that fits DEV's RAM (and the\n"
    "parameters its flash, where the profile states image_flash_bytes); and per\n"
    "spec the largest batch that fits (exactly: between the default batches, which\n"
    "double, fit bisects). The figures are the ones --budget ram and poet emulate\n"
    "use.\n"
    "  --batch N         a batch to try (repeat for several)\n"
    "  --train SPEC      a spec to try (repeat): all, biases, last:N, ratio:R,\n"
    "                    mask:FILE, then +frozen-bn, +masks (docs/partial.md)\n"
    "  --max-batch N     the largest batch tried by default (1 to 65536)\n"
    "  --runtime-factor F  the runtime limit of the plans (default 1.5)\n"
RUNTIME_MODEL_HELP
FROZEN_HELP
    "  --planner NAME    default fast; --time-limit S: per plan (default 5)\n";

enum { MAX_TRIES = 16, PROBES = 7 };

typedef struct fit_args {
    const char *model, *onnx, *device, *max_batch, *factor, *planner, *time_limit, *runtime_model, *frozen;
    const char *batches[MAX_TRIES], *specs[MAX_TRIES];
    int n_batches, n_specs;
    bool json, help, fused_update;
} fit_args;

/* One (spec, batch): the smallest arena a schedule was found for, and the whole. */
typedef struct fit_row {
    const char *spec;
    int batch;
    bool planned;       /* a schedule exists (with the arena below) */
    uint64_t arena, total;
    uint64_t image_params_bytes; /* parameters and statistics: what the device image holds at least */
    ram_use ram;
    char why[sizeof ((poet_plan_result *)0)->note];  /* when not planned */
} fit_row;

typedef struct fit_setup {
    poet_profile dev;
    double rho, limit_s;
    bool counts_paging;
    poet_frozen_home frozen;
    bool fused_update;
    const char *planner;
} fit_setup;

/* The placed arena of a schedule under budget, or false when none is found. */
static bool plan_at(const poet_instance *inst, const fit_setup *f, uint64_t budget, uint64_t *arena, char *why,
                    size_t cap)
{
    poet_err err = {0};
    poet_problem p;
    if (poet_problem_init(&p, inst, budget, f->rho, &err)) return snprintf(why, cap, "%s", err.msg), false;
    p.runtime_counts_paging = f->counts_paging;
    poet_plan_options o = {.time_limit_s = f->limit_s, .threads = 1, .deterministic = true};
    poet_plan_result r;
    memset(&r, 0, sizeof r);
    poet_sim sim;
    bool ok = !poet_plan(f->planner, &p, &o, &r, &err) &&
              (r.status == POET_PLAN_OPTIMAL || r.status == POET_PLAN_FEASIBLE) &&
              !poet_simulate(&p, &r.schedule, &sim, NULL, &err);
    if (ok) *arena = sim.placed_peak_bytes;
    else snprintf(why, cap, "%s", err.msg[0] ? err.msg : r.note);
    poet_plan_result_free(&r);
    poet_problem_free(&p);
    return ok;
}

/* The smallest budget the planner meets: the floor when it does, else a
 * bisection between the floor and the keep-all peak (always met). */
static void smallest_arena(const poet_instance *inst, const fit_setup *f, fit_row *row)
{
    poet_err err = {0};
    poet_problem p;
    if (poet_problem_init(&p, inst, 0, f->rho, &err)) {
        snprintf(row->why, sizeof row->why, "%s", err.msg);
        return;
    }
    uint64_t lo = p.min_budget_bytes, hi = p.keep_all_peak_bytes, arena = 0;
    poet_problem_free(&p);
    if (plan_at(inst, f, lo, &arena, row->why, sizeof row->why)) {
        row->planned = true, row->arena = arena;
        return;
    }
    if (!plan_at(inst, f, hi, &arena, row->why, sizeof row->why)) return;
    row->planned = true, row->arena = arena;
    for (int k = 0; k < PROBES && hi - lo > hi / 200; k++) { /* to within 0.5% of the keep-all peak */
        uint64_t mid = lo + (hi - lo) / 2;
        char why[sizeof ((poet_plan_result *)0)->note];
        if (plan_at(inst, f, mid, &arena, why, sizeof why)) hi = mid, row->arena = arena;
        else lo = mid;
    }
}

/* Even with no arena the device's RAM is taken: larger batches only hold more. */
static bool beside_fills(const fit_setup *f, const ram_use *r)
{
    return f->dev.ram_bytes && ram_total(r, 0) >= f->dev.ram_bytes;
}

/* The image holds every parameter: one that outgrows the flash it lies in
 * outgrows it at every batch. */
static bool flash_overflows(const fit_setup *f, const fit_row *r)
{
    return f->dev.image_flash_bytes && r->image_params_bytes > f->dev.image_flash_bytes;
}

static int fit_one(const fit_args *a, const fit_setup *f, const char *spec, int batch, fit_row *row)
{
    memset(row, 0, sizeof *row);
    row->spec = spec, row->batch = batch;
    poet_graph zoo;
    poet_onnx_model *m = NULL;
    const poet_graph *g = NULL;
    int rc = load_graph("fit", a->model, a->onnx, strcmp(spec, "all") == 0 ? NULL : spec, batch, &zoo, &m, &g);
    if (rc) return rc;
    poet_err err = {0};
    poet_instance inst;
    if (poet_instance_from_graph(g, &f->dev, &inst, &err)) rc = lib_error(&err);
    else if (!(rc = ram_use_of(g, &inst, &(device_layout){POET_OPT_SGD, DEVICE_CHUNK, f->frozen, f->fused_update}, UINT64_MAX,
                               &row->ram))) {
        char have[32], room[32];
        row->image_params_bytes = 4 * (poet_graph_param_count(g) + poet_graph_buffer_count(g));
        if (flash_overflows(f, row))
            snprintf(row->why, sizeof row->why, "its parameters and statistics alone (%s) exceed the %s of flash the "
                     "device image lies in", format_bytes(row->image_params_bytes, have),
                     format_bytes(f->dev.image_flash_bytes, room));
        else if (beside_fills(f, &row->ram))
            snprintf(row->why, sizeof row->why, "the state beside the activations alone takes the RAM");
        else
            smallest_arena(&inst, f, row);
        row->total = ram_total(&row->ram, row->planned ? row->arena : 0);
        poet_instance_free(&inst);
    }
    if (m) poet_onnx_free(m);
    else poet_graph_free(&zoo);
    return rc;
}

static bool fits_device(const fit_setup *f, const fit_row *r) { return r->planned && (!f->dev.ram_bytes || r->total <= f->dev.ram_bytes); }

static void print_row(const fit_setup *f, const fit_row *r)
{
    char t[32], fx[32], b[32], ar[32], fl[32];
    if (!r->planned) {
        printf("  %-22s %6d  %12s  no       %s\n", r->spec, r->batch, "-", r->why);
        return;
    }
    printf("  %-22s %6d  %12s  %-7s  firmware %s + beside %s (persistent %llu B, workspace %llu B, control %llu B) "
           "+ arena %s%s%s\n",
           r->spec, r->batch, format_bytes(r->total, t), fits_device(f, r) ? "yes" : "no", format_bytes(r->ram.fixed_bytes, fx),
           format_bytes(r->ram.beside.total_bytes, b), (unsigned long long)r->ram.beside.persistent_bytes,
           (unsigned long long)r->ram.beside.workspace_bytes, (unsigned long long)r->ram.beside.control_bytes,
           format_bytes(r->arena, ar), r->ram.beside.flash_bytes ? "; read in place from flash " : "",
           r->ram.beside.flash_bytes ? format_bytes(r->ram.beside.flash_bytes, fl) : "");
}

static cJSON *row_json(const fit_setup *f, const fit_row *r)
{
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "train", r->spec);
    cJSON_AddNumberToObject(o, "batch", r->batch);
    cJSON_AddBoolToObject(o, "planned", r->planned);
    cJSON_AddBoolToObject(o, "fits", fits_device(f, r));
    cJSON_AddNumberToObject(o, "ram_total_bytes", (double)r->total);
    cJSON_AddNumberToObject(o, "fixed_ram_bytes", (double)r->ram.fixed_bytes);
    cJSON_AddNumberToObject(o, "arena_bytes", (double)r->arena);
    cJSON_AddNumberToObject(o, "persistent_bytes", (double)r->ram.beside.persistent_bytes);
    cJSON_AddNumberToObject(o, "workspace_bytes", (double)r->ram.beside.workspace_bytes);
    cJSON_AddNumberToObject(o, "control_bytes", (double)r->ram.beside.control_bytes);
    cJSON_AddNumberToObject(o, "flash_read_in_place_bytes", (double)r->ram.beside.flash_bytes);
    cJSON_AddNumberToObject(o, "image_params_bytes", (double)r->image_params_bytes);
    if (!r->planned) cJSON_AddStringToObject(o, "why", r->why);
    return o;
}

/* --batch and --train repeat; the other options go to parse_opts. */
static int parse_fit(int argc, char **argv, fit_args *a)
{
    opt opts[] = {{"--model", true, &a->model, NULL},           {"--onnx", true, &a->onnx, NULL},
                  {"--device", true, &a->device, NULL},         {"--max-batch", true, &a->max_batch, NULL},
                  {"--runtime-factor", true, &a->factor, NULL}, {"--planner", true, &a->planner, NULL},
                  {"--runtime-model", true, &a->runtime_model, NULL}, {"--frozen", true, &a->frozen, NULL},
                  {"--fused-update", false, NULL, &a->fused_update},
                  {"--time-limit", true, &a->time_limit, NULL}, {"--json", false, NULL, &a->json},
                  {NULL, false, NULL, NULL}};
    char **rest = calloc((size_t)argc + 1, sizeof *rest);
    if (!rest) return lib_error(&(poet_err){POET_ERR_NOMEM, "out of memory"});
    int n = 0, rc = 0;
    for (int i = 0; i < argc && !rc; i++) {
        bool is_batch = strcmp(argv[i], "--batch") == 0, is_spec = strcmp(argv[i], "--train") == 0;
        if (!is_batch && !is_spec) {
            rest[n++] = argv[i];
            continue;
        }
        if (i + 1 >= argc) rc = usage_error("fit", "missing value after", argv[i]);
        else if ((is_batch ? a->n_batches : a->n_specs) == MAX_TRIES)
            rc = usage_error("fit", "at most 16 of each of --batch and --train, got more of", argv[i]);
        else if (is_batch) a->batches[a->n_batches++] = argv[++i];
        else a->specs[a->n_specs++] = argv[++i];
    }
    if (!rc) rc = parse_opts("fit", n, rest, opts, &a->help);
    free(rest);
    return rc;
}

/* The batches tried for one spec: the largest that fits, the smallest
 * above it that does not (0: none yet). */
typedef struct spec_search {
    const fit_args *a;
    const fit_setup *f;
    const char *spec;
    cJSON *rows; /* --json: the rows go here, else they are printed */
    int largest, refused;
} spec_search;

static int try_batch(spec_search *sr, int batch, bool *fills)
{
    fit_row row;
    int rc = fit_one(sr->a, sr->f, sr->spec, batch, &row);
    if (rc) return rc;
    if (fits_device(sr->f, &row)) {
        if (batch > sr->largest) sr->largest = batch;
    } else if (!sr->refused || batch < sr->refused) {
        sr->refused = batch;
    }
    if (sr->rows) cJSON_AddItemToArray(sr->rows, row_json(sr->f, &row));
    else print_row(sr->f, &row);
    *fills = beside_fills(sr->f, &row.ram) || flash_overflows(sr->f, &row);
    return 0;
}

int cmd_fit(int argc, char **argv)
{
    fit_args a = {0};
    int rc = parse_fit(argc, argv, &a);
    if (rc || a.help) return a.help ? (fputs(FIT_HELP, stdout), 0) : rc;
    if (!a.model == !a.onnx) return usage_error("fit", "give exactly one of --model and --onnx", NULL);
    if (!a.device) return usage_error("fit", "--device is required", NULL);
    fit_setup f = {.rho = 1.5, .limit_s = 5, .planner = a.planner ? a.planner : poet_planner_default()};
    int max_batch = 64, batches[MAX_TRIES], n_batches = 0;
    if (a.max_batch && !parse_int(a.max_batch, 1, 65536, &max_batch))
        return usage_error("fit", "--max-batch must be 1 to 65536, got", a.max_batch);
    for (int i = 0; i < a.n_batches; i++)
        if (!parse_int(a.batches[i], 1, 65536, &batches[n_batches++]))
            return usage_error("fit", "--batch must be 1 to 65536, got", a.batches[i]);
    for (int b = 1; !a.n_batches && b <= max_batch && n_batches < MAX_TRIES; b *= 2) batches[n_batches++] = b;
    if (a.factor && !(parse_real(a.factor, &f.rho) && f.rho >= 1 && f.rho <= 1e6))
        return usage_error("fit", "--runtime-factor must be a number from 1 to 1e6, got", a.factor);
    if (!parse_runtime_model(a.runtime_model, &f.counts_paging))
        return usage_error("fit", "--runtime-model must be serial or compute, got", a.runtime_model);
    f.fused_update = a.fused_update;
    if (!parse_frozen(a.frozen, &f.frozen)) return usage_error("fit", "--frozen must be flash or ram, got", a.frozen);
    if (a.time_limit && !parse_time_limit(a.time_limit, &f.limit_s))
        return usage_error("fit", "--time-limit must be seconds in (0, 86400], got", a.time_limit);
    if (!poet_planner_find(f.planner)) return usage_error("fit", "unknown planner (see poet planners):", f.planner);
    static const char *default_specs[] = {"all",    "all+frozen-bn+masks",    "last:2", "last:2+frozen-bn+masks",
                                          "last:1", "last:1+frozen-bn+masks", "biases", "biases+frozen-bn+masks"};
    const char **specs = a.n_specs ? a.specs : default_specs;
    int n_specs = a.n_specs ? a.n_specs : (int)(sizeof default_specs / sizeof *default_specs);
    poet_err err = {0};
    if (poet_profile_find(a.device, &f.dev, &err)) return lib_error(&err);
    cJSON *doc = cJSON_CreateObject(), *rows = cJSON_AddArrayToObject(doc, "fits"), *best = cJSON_AddObjectToObject(doc, "largest_batch");
    cJSON_AddStringToObject(doc, "model", a.model ? a.model : a.onnx);
    cJSON_AddStringToObject(doc, "device", f.dev.name);
    cJSON_AddNumberToObject(doc, "ram_bytes", (double)f.dev.ram_bytes);
    char ram[32];
    if (!a.json)
        printf("%s on %s (%s of RAM, runtime factor %g, planner %s)\n  %-22s %6s  %12s  %-7s  breakdown\n",
               a.model ? a.model : a.onnx, f.dev.name, f.dev.ram_bytes ? format_bytes(f.dev.ram_bytes, ram) : "no stated RAM",
               f.rho, f.planner, "train", "batch", "smallest RAM", "fits");
    for (int s = 0; s < n_specs && !rc; s++) {
        spec_search sr = {&a, &f, specs[s], a.json ? rows : NULL, 0, 0};
        for (int k = 0; k < n_batches && !rc; k++) {
            bool fills;
            if ((rc = try_batch(&sr, batches[k], &fills))) break;
            if (!a.n_batches && fills) break;
        }
        /* the default batches double: between the largest that fits and the first that does not, bisect */
        while (!rc && !a.n_batches && sr.largest && sr.refused > sr.largest + 1) {
            bool fills;
            int mid = sr.largest + (sr.refused - sr.largest) / 2;
            rc = try_batch(&sr, mid, &fills);
        }
        int largest = sr.largest;
        cJSON_AddNumberToObject(best, specs[s], largest);
        if (!a.json && !rc) {
            if (largest)
                printf("  %s: the largest batch %sthat fits is %d\n", specs[s], a.n_batches ? "of those asked " : "",
                       largest);
            else printf("  %s: no batch tried fits\n", specs[s]);
        }
    }
    if (rc || !a.json) {
        cJSON_Delete(doc);
        return rc;
    }
    return print_json(doc);
}
