#define _POSIX_C_SOURCE 200809L
/* The nearest fix for a budget below a model's floor (the largest stage):
 * the largest smaller batch, and the first lighter --train spec at the same
 * batch, whose floor fits. A floor is necessary, not sufficient (the
 * placement and the runtime limit may ask for more): poet fit plans. With --budget ram the whole RAM must fit the
 * device, since what training keeps beside the arena shrinks with the batch
 * and the spec too. */
#include "advice.h"

#include <stdio.h>
#include <string.h>

/* What model at batch under spec needs at least (its floor, or with
 * whole_ram the whole RAM at its floor), and whether that fits; false when
 * the graph cannot be built (a spec the model does not have). */
static bool probe(const fix_question *q, const char *spec, int batch, uint64_t *need, bool *fits)
{
    poet_err err = {0};
    poet_graph zoo;
    poet_onnx_model *m = NULL;
    const poet_graph *g = NULL;
    if (build_graph(q->model, q->onnx, spec, batch, &zoo, &m, &g, &err)) return false;
    poet_instance inst;
    poet_instance_stats st;
    ram_use ram;
    bool ok = !poet_instance_from_graph(g, q->dev, &inst, &err);
    if (ok) {
        ok = !poet_instance_stats_compute(&inst, &st, &err) &&
             (!q->whole_ram || !ram_use_of(g, &inst, &q->layout, q->fixed_ram_bytes, &ram));
        poet_instance_free(&inst);
    }
    if (ok) {
        *need = q->whole_ram ? ram_total(&ram, st.min_budget_bytes) : st.min_budget_bytes;
        *fits = *need <= (q->whole_ram ? q->dev->ram_bytes : q->budget);
    }
    if (m) poet_onnx_free(m);
    else poet_graph_free(&zoo);
    return ok;
}

/* The largest batch below q->batch whose need fits (needs grow with the
 * batch), or 0. */
static int largest_batch(const fix_question *q, uint64_t *need)
{
    bool fits;
    if (q->batch < 2 || !probe(q, q->train, 1, need, &fits) || !fits) return 0;
    int lo = 1, hi = q->batch; /* lo fits, hi does not */
    uint64_t f;
    while (hi - lo > 1) {
        int mid = lo + (hi - lo) / 2;
        if (probe(q, q->train, mid, &f, &fits) && fits) lo = mid, *need = f;
        else hi = mid;
    }
    return lo;
}

void suggest_fix(const fix_question *q)
{
    static const char *lighter[] = {"all+masks", "last:2", "last:1", "biases", "biases+frozen-bn+masks"};
    char line[512], b[32];
    const char *what = q->whole_ram ? "of RAM at its floor" : "its floor";
    size_t at = 0;
    uint64_t need;
    int batch = largest_batch(q, &need);
    if (batch)
        at += (size_t)snprintf(line + at, sizeof line - at, "--batch %d (%s %s)", batch, format_bytes(need, b), what);
    for (size_t k = 0; k < sizeof lighter / sizeof *lighter; k++) {
        bool fits;
        if (q->train && strcmp(q->train, lighter[k]) == 0) continue;
        if (!probe(q, lighter[k], q->batch, &need, &fits) || !fits) continue;
        snprintf(line + at, sizeof line - at, "%s--train %s at batch %d (%s %s)", at ? ", or " : "", lighter[k],
                 q->batch, format_bytes(need, b), what);
        at = 1;
        break;
    }
    if (at) fprintf(stderr, "poet: note: the nearest fix: %s%s\n", line, q->whole_ram ? " (poet fit shows them all)" : "");
    else fprintf(stderr, "poet: note: neither a smaller batch nor a lighter --train spec brings the floor within the budget\n");
}

void explain_ram(const poet_profile *dev, const ram_use *r, uint64_t arena, uint64_t floor)
{
    char all[32], fixed[32], beside[32], left[32], need[32];
    fprintf(stderr, "poet: note: %s's %s of RAM: firmware %s + beside the arena %s", dev->name, format_bytes(dev->ram_bytes, all),
            format_bytes(r->fixed_bytes, fixed), format_bytes(ram_total(r, 0) - r->fixed_bytes, beside));
    if (r->exact)
        fprintf(stderr, " (persistent %llu B, workspace %llu B, control %llu B)",
                (unsigned long long)r->beside.persistent_bytes, (unsigned long long)r->beside.workspace_bytes,
                (unsigned long long)r->beside.control_bytes);
    fprintf(stderr, " leave %s for the arena; the floor is %s\n", format_bytes(arena, left), format_bytes(floor, need));
}
