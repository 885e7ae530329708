/* One engine for the baselines: walk the stages in order; in stage t compute
 * node t and whatever of its ancestors is not in RAM; keep for stage t+1
 * what a later stage reads; while POET's accounting of stage t exceeds the
 * budget, evict a tensor resident at the stage start by the mode's rule:
 * recompute it when next read, or page it out (in an earlier stage where it
 * was resident) and back in just before its next reader. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../schedule/accounting.h"
#include "greedy.h"

typedef struct engine {
    const poet_problem *p;
    poet_schedule *s;
    greedy_mode mode;
    uint64_t budget;
    int *touch;        /* last stage a node was computed, read or paged in */
    int *since;        /* first stage of its current stay in RAM */
    int *stored_from;  /* stage from which it is on storage, T if never */
    int *last_fwd_use; /* last forward reader (Chen), or the node itself */
    bool *checkpoint;  /* Chen's checkpoints */
    bool *recomputed;  /* computed again after its own stage */
    double *tau_prefix; /* sum of compute times of nodes [0, i) */
    double debt_s;      /* compute time of recomputations promised by evictions */
    double transfer_s;  /* the transfers so far, as the runtime budget counts them */
    bool time_bound;    /* an eviction was refused for the runtime budget's sake */
    double *owed_s;
    double compute_s;   /* compute time of the stages built so far */
    uint64_t *C, *K, *drop; /* this stage: computed, kept for the next, not to keep */
    int words;
} engine;

typedef enum { EVICT_NONE, EVICT_DROP, EVICT_REMAT, EVICT_PAGE } evict_kind;

static bool reads_in(const engine *e, const uint64_t *C, int v)
{
    for (int c = e->p->out_start[v]; c < e->p->out_start[v + 1]; c++)
        if (bit_get(C, e->p->out[c])) return true;
    return false;
}

/* Adds node i and its missing ancestors to C. */
static bool require(engine *e, const uint64_t *S, int i, int t)
{
    if (bit_get(S, i) || bit_get(e->C, i)) return true;
    if (e->mode == GREEDY_PAGING && i != t) return false; /* nothing is recomputed */
    bit_set(e->C, i);
    for (int c = e->p->in_start[i]; c < e->p->in_start[i + 1]; c++)
        if (!require(e, S, e->p->in[c], t)) return false;
    return true;
}

static bool keep_wanted(const engine *e, int i, int t)
{
    if (e->p->last_use[i] <= t) return false;
    bool recomputed = e->recomputed[i] || (i != t && bit_get(e->C, i));
    if (e->mode == GREEDY_CHEN && !e->p->inst->nodes[i].is_backward && !e->checkpoint[i] && !recomputed)
        return e->last_fwd_use[i] > t;
    return true;
}

static void plan_keep(engine *e, const uint64_t *S, int t)
{
    memset(e->K, 0, (size_t)e->words * sizeof(uint64_t));
    for (int w = 0; w < e->words; w++) {
        uint64_t cand = (S[w] | e->C[w]) & ~e->drop[w];
        for (uint64_t b = cand; b; b &= b - 1) {
            int i = w * 64 + __builtin_ctzll(b);
            if (keep_wanted(e, i, t)) bit_set(e->K, i);
        }
        e->K[w] |= sched_row(e->s, POET_MIN, t)[w];
    }
}

static int next_reader(const engine *e, int v, int t)
{
    for (int c = e->p->out_start[v]; c < e->p->out_start[v + 1]; c++)
        if (e->p->out[c] > t) return e->p->out[c];
    return -1;
}

/* Compute time of nodes [a, b): the time a transfer can hide behind. */
static double compute_between(const engine *e, int a, int b)
{
    return b > a ? e->tau_prefix[b] - e->tau_prefix[a] : 0;
}

static double base_rest(const engine *e, int t) { return e->tau_prefix[e->p->T] - e->tau_prefix[t + 1]; }

typedef struct choice {
    int v;
    evict_kind kind;
    double score;
} choice;

/* The action the mode takes for resident tensor v in stage t, and its
 * score (bytes freed per joule, times how long the bytes stay freed). */
static choice evaluate(engine *e, int v, int t, double stage_s)
{
    const poet_cnode *n = &e->p->inst->nodes[v];
    choice c = {v, EVICT_NONE, 0};
    int u = next_reader(e, v, t);
    if (u < 0) return (choice){v, EVICT_DROP, INFINITY};
    int p = e->touch[v], s = p >= e->since[v] ? p : e->since[v];
    bool can_page = (e->mode == GREEDY_PAGING || e->mode == GREEDY_HYBRID) && s < t;
    double page_j = (e->stored_from[v] < e->p->T ? 0 : n->pageout_j) + n->pagein_j;
    double page_s = (e->stored_from[v] < e->p->T ? 0 : n->pageout_s) + n->pagein_s;
    bool hides = page_s <= compute_between(e, s, u);
    double slack = e->p->runtime_budget_s - (e->compute_s + stage_s + base_rest(e, t) + e->debt_s + e->transfer_s);
    bool remat_mode = e->mode == GREEDY_REMAT || e->mode == GREEDY_HYBRID, can_remat = remat_mode && n->time_s <= slack;
    bool in_time = poet_transfer_counted_s(e->p, page_s) <= slack;
    e->time_bound |= (can_page && !in_time) || (remat_mode && !can_remat);
    can_page = can_page && in_time;
    if (can_page && (hides || !can_remat))
        c.kind = EVICT_PAGE, c.score = (double)n->bytes * (u - t) / (page_j + 1e-30);
    else if (can_remat)
        c.kind = EVICT_REMAT, c.score = (double)n->bytes * (t - p) / (n->compute_j + 1e-30);
    return c;
}

static choice choose_victim(engine *e, const uint64_t *S, int t)
{
    double stage_s = 0;
    FOR_EACH_BIT(e->C, e->words, k) stage_s += e->p->inst->nodes[k].time_s;
    choice best = {-1, EVICT_NONE, -1};
    FOR_EACH_BIT(S, e->words, v)
    {
        if (e->p->inst->nodes[v].bytes == 0 || reads_in(e, e->C, v)) continue;
        choice c = evaluate(e, v, t, stage_s);
        if (c.kind != EVICT_NONE && c.score > best.score) best = c;
    }
    if (best.kind != EVICT_NONE || !(e->mode == GREEDY_REMAT || e->mode == GREEDY_HYBRID)) return best;
    /* nothing resident to evict: stop keeping what this stage recomputed */
    FOR_EACH_BIT(e->C, e->words, v)
    if (v != t && bit_get(e->K, v) && e->p->inst->nodes[v].bytes > 0 && !bit_get(sched_row(e->s, POET_MIN, t), v))
        return (choice){v, EVICT_REMAT, 0};
    return best;
}

static void clear_resident(engine *e, int v, int from, int to)
{
    for (int r = from; r <= to; r++) poet_sched_set(e->s, POET_SRAM, r, v, false);
}

static void evict(engine *e, uint64_t *S, choice c, int t)
{
    int v = c.v, p = e->touch[v];
    if (bit_get(e->C, v)) { /* recomputed in this stage: do not keep it */
        bit_set(e->drop, v);
        return;
    }
    if (c.kind == EVICT_PAGE) {
        int s = p >= e->since[v] ? p : e->since[v];
        const poet_cnode *n = &e->p->inst->nodes[v];
        e->transfer_s += poet_transfer_counted_s(e->p, n->pagein_s + (e->stored_from[v] == e->p->T ? n->pageout_s : 0));
        if (e->stored_from[v] == e->p->T) {
            poet_sched_set(e->s, POET_MOUT, s, v, true);
            e->stored_from[v] = s + 1;
        }
        clear_resident(e, v, s + 1, t);
        poet_sched_set(e->s, POET_MIN, next_reader(e, v, t) - 1, v, true);
    } else {
        clear_resident(e, v, p + 1, t);
        if (c.kind == EVICT_REMAT) {
            e->owed_s[v] += e->p->inst->nodes[v].time_s;
            e->debt_s += e->p->inst->nodes[v].time_s;
        }
    }
    bit_clear(S, v);
}

/* Records stage t's decisions and the bookkeeping of what it touched. */
static void commit(engine *e, const uint64_t *S, int t)
{
    const poet_cnode *n = e->p->inst->nodes;
    uint64_t *R = sched_row_mut(e->s, POET_R, t), *MIN = sched_row_mut(e->s, POET_MIN, t);
    memcpy(R, e->C, (size_t)e->words * sizeof(uint64_t));
    FOR_EACH_BIT(e->C, e->words, k)
    {
        e->compute_s += n[k].time_s;
        e->touch[k] = t;
        e->since[k] = t + 1;
        if (k != t) {
            e->recomputed[k] = true;
            e->debt_s -= e->owed_s[k];
            e->owed_s[k] = 0;
        }
        for (int c = e->p->in_start[k]; c < e->p->in_start[k + 1]; c++)
            if (bit_get(S, e->p->in[c])) e->touch[e->p->in[c]] = t;
    }
    for (int w = 0; w < e->words; w++) MIN[w] &= ~(S[w] | e->C[w]); /* already in RAM: no page-in */
    FOR_EACH_BIT(MIN, e->words, i)
    {
        e->touch[i] = t;
        e->since[i] = t + 1;
    }
    if (t + 1 < e->p->T) {
        uint64_t *next = sched_row_mut(e->s, POET_SRAM, t + 1);
        for (int w = 0; w < e->words; w++) next[w] = e->K[w] & (S[w] | e->C[w] | MIN[w]);
    }
}

static bool build_stage(engine *e, int t, poet_plan_result *r)
{
    uint64_t *S = sched_row_mut(e->s, POET_SRAM, t);
    memset(e->drop, 0, (size_t)e->words * sizeof(uint64_t));
    for (;;) {
        memset(e->C, 0, (size_t)e->words * sizeof(uint64_t));
        if (!require(e, S, t, t)) {
            snprintf(r->note, sizeof r->note, "stage %d: an input of node %d is not in RAM", t, t);
            return false;
        }
        plan_keep(e, S, t);
        bool last = t + 1 == e->p->T;
        uint64_t peak = stage_memory(e->p, t, S, e->C, last ? NULL : e->K, NULL, NULL);
        if (peak <= e->budget || e->mode == GREEDY_KEEP || e->mode == GREEDY_CHEN) break;
        choice c = choose_victim(e, S, t);
        if (c.kind == EVICT_NONE) {
            snprintf(r->note, sizeof r->note, "stage %d needs %llu bytes with nothing left to evict%s", t,
                     (unsigned long long)peak,
                     e->time_bound ? " within the runtime limit (a larger --runtime-factor leaves room)" : "");
            return false;
        }
        evict(e, S, c, t);
    }
    commit(e, S, t);
    return true;
}

static void chen_checkpoints(engine *e)
{
    int n_fwd = 0;
    for (int i = 0; i < e->p->T; i++) n_fwd += !e->p->inst->nodes[i].is_backward;
    int every = (int)ceil(sqrt((double)(n_fwd > 0 ? n_fwd : 1))), seen = 0;
    for (int i = 0; i < e->p->T; i++) {
        e->last_fwd_use[i] = i;
        for (int c = e->p->out_start[i]; c < e->p->out_start[i + 1]; c++)
            if (!e->p->inst->nodes[e->p->out[c]].is_backward) e->last_fwd_use[i] = e->p->out[c];
        if (!e->p->inst->nodes[i].is_backward) e->checkpoint[i] = seen++ % every == 0;
    }
}

static void engine_free(engine *e)
{
    free(e->touch), free(e->since), free(e->stored_from), free(e->last_fwd_use), free(e->checkpoint);
    free(e->recomputed), free(e->tau_prefix), free(e->owed_s), free(e->C), free(e->K), free(e->drop);
}

static bool engine_init(engine *e, const poet_problem *p, greedy_mode mode, poet_schedule *s, uint64_t budget)
{
    int T = p->T;
    memset(e, 0, sizeof *e);
    *e = (engine){.p = p, .s = s, .mode = mode, .budget = budget, .words = s->words};
    e->touch = malloc((size_t)T * sizeof(int));
    e->since = malloc((size_t)T * sizeof(int));
    e->stored_from = malloc((size_t)T * sizeof(int));
    e->last_fwd_use = malloc((size_t)T * sizeof(int));
    e->checkpoint = calloc((size_t)T, sizeof(bool));
    e->recomputed = calloc((size_t)T, sizeof(bool));
    e->tau_prefix = malloc((size_t)(T + 1) * sizeof(double));
    e->owed_s = calloc((size_t)T, sizeof(double));
    e->C = calloc((size_t)e->words, sizeof(uint64_t));
    e->K = calloc((size_t)e->words, sizeof(uint64_t));
    e->drop = calloc((size_t)e->words, sizeof(uint64_t));
    if (!e->touch || !e->since || !e->stored_from || !e->last_fwd_use || !e->checkpoint || !e->recomputed ||
        !e->tau_prefix || !e->owed_s || !e->C || !e->K || !e->drop)
        return false;
    e->tau_prefix[0] = 0;
    for (int i = 0; i < T; i++) {
        e->touch[i] = e->since[i] = -1;
        e->stored_from[i] = T;
        e->tau_prefix[i + 1] = e->tau_prefix[i] + p->inst->nodes[i].time_s;
    }
    chen_checkpoints(e);
    return true;
}

/* Builds with an internal budget; returns false (note set) on failure. */
static poet_status build(const poet_problem *p, greedy_mode mode, uint64_t budget, poet_plan_result *r,
                         bool *built, poet_err *err)
{
    poet_status st = poet_schedule_init(&r->schedule, p->T, err);
    if (st) return st;
    engine e;
    if (!engine_init(&e, p, mode, &r->schedule, budget)) {
        engine_free(&e);
        poet_schedule_free(&r->schedule);
        return poet_fail(err, POET_ERR_NOMEM, "out of memory planning");
    }
    *built = true;
    for (int t = 0; t < p->T && *built; t++) *built = build_stage(&e, t, r);
    engine_free(&e);
    if (!*built) poet_schedule_free(&r->schedule);
    return POET_OK;
}

poet_status greedy_plan(const poet_problem *p, greedy_mode mode, poet_plan_result *r, poet_err *err)
{
    uint64_t budget = p->budget_bytes;
    bool adapts = mode != GREEDY_KEEP && mode != GREEDY_CHEN;
    for (int attempt = 0; attempt < 4; attempt++) {
        bool built = false;
        poet_status st = build(p, mode, budget, r, &built, err);
        if (st) return st;
        if (!built) break;
        /* the budgets decide; any other violation is a bug poet_plan reports */
        poet_err why = {0};
        if (!poet_schedule_validate(p, &r->schedule, &why) || !strstr(why.msg, "budget")) {
            r->status = POET_PLAN_FEASIBLE;
            return POET_OK;
        }
        snprintf(r->note, sizeof r->note, "%s", why.msg);
        uint64_t arena = placed_arena_bytes(p, &r->schedule);
        poet_schedule_free(&r->schedule);
        /* placement can need more than the stage accounting: tighten, retry */
        if (!adapts || !strstr(why.msg, "placement-budget") || arena <= p->budget_bytes ||
            arena - p->budget_bytes >= budget)
            break;
        budget -= arena - p->budget_bytes;
    }
    r->status = POET_PLAN_UNKNOWN;
    return POET_OK;
}
