/* Fate search: the fast planner's constructive half for graphs too large
 * for the exact MILP (docs/fast.md, "Fate search", says what each fate
 * does and which graphs it was made for). Each forward tensor the backward
 * pass reads, and each gradient a later backward node reads, gets a fate:
 * keep, hold (kept to the last stage whose recomputation chain reads it),
 * recompute (three kinds, by where the reach applies), page, page or
 * recompute (whichever a use finds cheaper), page across forward gaps. The
 * schedule follows from the fates stage by stage and is measured with
 * POET's own accounting (the validator's), so a search over fates is a
 * search over exact schedules: greedily give the fate that buys the most
 * memory per joule to a tensor until every stage fits, then change single
 * fates, and swap pairs of them, while that lowers the energy; from the
 * cheapest few of those, an iterated local search, without and then with
 * the fates that choose by use. */
#define _POSIX_C_SOURCE 200809L
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../schedule/accounting.h"
#include "fates.h"
#include "progress.h"
#include "../base/hash.h" /* mix64 */
#include "../host/clock.h"

/* The search's seconds are work at a nominal rate (node-words of build
 * passes a second: 3.5e7 to 6.5e7 on the 2-core machines this repository
 * is tested on, unloaded, from 27 to 362 nodes), so that what it returns
 * depends on its inputs alone, not on the machine or its load; the wall
 * clock stops it at FATES_SAFETY times the seconds asked for. */
#define FATES_WORK_PER_S 5e7
#define FATES_SAFETY 4

enum {
    N_REACH = 5,
    FATE_KEEP = 0,
    FATE_HOLD,     /* kept, and past its last reader to its last use by a recomputation */
    FATE_RECOMPUTE,
    FATE_ONCE = FATE_RECOMPUTE + N_REACH - 1, /* the longest reach: recomputed once for the backward pass, held */
    FATE_RECOMPUTE_FWD = FATE_RECOMPUTE + N_REACH, /* recomputed between forward readers too */
    FATE_RECOMPUTE_BWD = FATE_RECOMPUTE_FWD + N_REACH, /* held to its first backward reader, then by reach */
    FATE_PAGE = FATE_RECOMPUTE_BWD + N_REACH,
    FATE_PAGE_HELD = FATE_PAGE + N_REACH - 1, /* paged in once, held to its last use */
    FATE_PAGE_OR_RECOMPUTE = FATE_PAGE + N_REACH, /* paged, or recomputed for a use where that costs less */
    FATE_PAGE_FWD = FATE_PAGE_OR_RECOMPUTE + N_REACH, /* paged, and in again for forward readers too */
    N_FATES = FATE_PAGE_FWD + N_REACH
};
/* recompute and page fates: held from one use to the next this many stages
 * away at most (the last: to the last use) */
static const int REACH[N_REACH] = {0, 1, 2, 4, 1 << 30};

static bool is_page(int fate) { return fate >= FATE_PAGE; }

static bool or_recompute(int fate) { return fate >= FATE_PAGE_OR_RECOMPUTE && fate < FATE_PAGE_FWD; }

static bool is_page_fwd(int fate) { return fate >= FATE_PAGE_FWD; }

static bool is_fwd(int fate) { return fate >= FATE_RECOMPUTE_FWD && fate < FATE_RECOMPUTE_BWD; }

static bool is_bwd(int fate) { return fate >= FATE_RECOMPUTE_BWD && fate < FATE_PAGE; }

static int reach(int fate) { return REACH[(fate - FATE_RECOMPUTE) % N_REACH]; }

enum { MAX_FAILED_KICKS = 200, N_STARTS = 3 };

typedef struct score {
    bool built;            /* the fates make a schedule of the variant */
    double energy_j, time_s;
    uint64_t excess;       /* bytes over the budget, summed over stages */
} score;

typedef struct search {
    const poet_problem *p;
    bool remat, paging;
    int T, words;
    uint64_t enabled;      /* bit f: fate f may be given */
    uint64_t *cap;         /* per stage, the budget it must fit: less than the user's where placement needs more */
    int *lf, *fb;          /* last forward reader (or itself); first backward reader, -1 if none */
    uint64_t *freaders;    /* per tensor, a row of stages: its forward readers */
    bool *fgap;            /* a forward reader more than one stage after the previous one (or the producer) */
    unsigned char *fate;
    int *stack;            /* scratch: a stack */
    uint64_t *concerns;    /* per stage t, a row: the paged tensors paged out in t or used in t+1 */
    uint64_t *readers;     /* per tensor, a row of stages: its backward readers */
    uint64_t *uses;        /* per tensor: its readers and, if paged, the stages whose recomputations read it */
    bool new_use;          /* the last pass of build found a use not in uses */
    uint64_t *over, *hot;  /* bytes over the budget per stage: of the last build, of the current fates */
    uint64_t *res, *next;  /* resident set at the start of this stage and the next */
    uint64_t *seen;        /* scratch: the tensors a chain has reached */
    double *rest_s;        /* per stage t: the compute time of the stages after t */
    double slack_s;        /* the runtime budget less the compute time of one pass */
    poet_schedule s;       /* the schedule of the current fates */
    score record;          /* the best fates this descent has met, and when it first met them */
    double record_at;
    double target_j;       /* a lower bound on the energy: fates that meet it end the search */
    double placed_j;       /* the energy of the schedule in s when it places within the budget, else INFINITY */
    bool met;
    double work, work_limit; /* work done (node-words of build passes) and allowed: what ends the search */
    bool cut;                /* the wall clock's safety stop ended it instead */
} search;

static bool fits(const search *c, const score *v)
{
    return v->built && v->excess == 0 && v->time_s <= c->p->runtime_budget_s * (1 + 1e-9);
}

/* Whether a paged tensor has stages in which it is neither needed nor on
 * its way in: it leaves RAM after max(lf, i+1) and returns in fb-1. */
static bool can_page(const search *c, int i)
{
    int out = c->lf[i] > i + 1 ? c->lf[i] : i + 1;
    return c->fb[i] >= 0 && c->fb[i] - 1 > out;
}

/* The first stage after t in row, or INT_MAX. */
static int next_after(const uint64_t *row, int words, int t)
{
    for (int w = (t + 1) >> 6; w < words; w++) {
        uint64_t b = row[w] & (w == (t + 1) >> 6 ? ~(uint64_t)0 << ((t + 1) & 63) : ~(uint64_t)0);
        if (b) return w * 64 + __builtin_ctzll(b);
    }
    return INT_MAX;
}

static bool allowed(const search *c, int i, int fate)
{
    if (fate == FATE_KEEP) return true;
    if (!(c->enabled >> fate & 1)) return false;
    if (fate == FATE_HOLD) return c->remat && !c->p->inst->nodes[i].is_backward;
    /* recomputed at least once: not where that alone takes longer than the runtime budget leaves */
    if (fate >= FATE_RECOMPUTE && fate < FATE_PAGE && c->p->inst->nodes[i].time_s > c->slack_s) return false;
    /* also a tensor only forward nodes read */
    if (is_fwd(fate)) return c->remat && c->fgap[i] && !c->p->inst->nodes[i].is_backward;
    /* a forward reader on storage's side of the page-out: two stages after it at least */
    if (is_page_fwd(fate)) return c->paging && c->fgap[i] && c->lf[i] > i + 2 && !c->p->inst->nodes[i].is_backward;
    if (c->fb[i] < 0) return false;
    if (is_page(fate)) return c->paging && can_page(c, i) && (!or_recompute(fate) || c->remat);
    /* kept but for gaps between backward readers: where there are two */
    if (is_bwd(fate)) return c->remat && next_after(c->readers + (size_t)i * c->words, c->words, c->fb[i]) < INT_MAX;
    return c->remat && c->fb[i] > c->lf[i] + 1;
}

/* Whether paged tensor i can be paged in during stage t: it is paged out
 * in stage i+1, so on storage from i+2. */
static bool on_storage(int i, int t) { return t > i + 1; }

/* Marks t and every input chain that is not resident as computed in stage t,
 * and records the stage as a use of each paged tensor the chain reaches
 * first (not of those above it, which the page-in will spare). */
static void closure(search *c, int t, uint64_t *R)
{
    int n = 0;
    c->stack[n++] = 2 * t;
    bit_set(R, t);
    while (n) {
        int k = c->stack[--n] >> 1;
        bool below = c->stack[n] & 1;
        for (int e = c->p->in_start[k]; e < c->p->in_start[k + 1]; e++) {
            int u = c->p->in[e];
            if (bit_get(c->res, u) || bit_get(R, u)) continue;
            /* a chain stops at a tensor paged in or held for it */
            bool stops = (is_page(c->fate[u]) && on_storage(u, t - 1)) || c->fate[u] == FATE_HOLD;
            uint64_t *uses = c->uses + (size_t)u * c->words;
            if (stops && !below && !bit_get(uses, t)) bit_set(uses, t), c->new_use = true;
            bit_set(R, u);
            c->stack[n++] = 2 * u + (below || stops);
        }
    }
}

/* Whether i, present in stage t, is still in RAM at the start of t+1. After
 * its last forward reader, a recomputed tensor stays for a use within reach;
 * a paged one leaves once on storage and, paged in for its first use, stays
 * to its last. */
static bool stays(const search *c, int i, int t)
{
    int f = c->fate[i];
    if (f == FATE_KEEP) return t < c->p->last_use[i];
    const uint64_t *uses = c->uses + (size_t)i * c->words;
    if (f == FATE_HOLD) return t < c->p->last_use[i] || next_after(uses, c->words, t) < INT_MAX;
    if (t < c->lf[i] && is_fwd(f)) return next_after(c->freaders + (size_t)i * c->words, c->words, t) - t <= reach(f);
    if (is_page_fwd(f)) {
        /* out in stage i+1, it can be in again for stage i+3 at the soonest */
        if (t <= i || (t == i + 1 && bit_get(uses, i + 2))) return true;
    } else if (t < c->lf[i] || (is_page(f) && t <= i) || (is_bwd(f) && t < c->fb[i])) {
        return true;
    }
    /* the longest reach recomputes once for the backward pass and holds from there: not kept across the gap */
    if (f == FATE_ONCE && t == c->lf[i]) return false;
    int next = next_after(uses, c->words, t);
    if (next == INT_MAX) return false;
    if (is_page(f) && t < next_after(uses, c->words, -1)) return false; /* on storage until its first use */
    return next - t <= reach(f);
}

/* The energy of recomputing i from the tensors in RAM (in) and those it
 * reaches in turn, and its time (*seconds), or INFINITY where the chain
 * reaches a tensor on storage in stage t (it would be paged in instead). */
static double chain_j(search *c, int i, int t, const uint64_t *in, double *seconds)
{
    memset(c->seen, 0, (size_t)c->words * sizeof(uint64_t));
    double joules = 0;
    *seconds = 0;
    int n = 0;
    c->stack[n++] = i, bit_set(c->seen, i);
    while (n) {
        int k = c->stack[--n];
        joules += c->p->inst->nodes[k].compute_j, *seconds += c->p->inst->nodes[k].time_s;
        for (int e = c->p->in_start[k]; e < c->p->in_start[k + 1]; e++) {
            int u = c->p->in[e];
            if (bit_get(in, u) || bit_get(c->seen, u)) continue;
            if (is_page(c->fate[u]) && on_storage(u, t)) return INFINITY;
            bit_set(c->seen, u), c->stack[n++] = u;
        }
    }
    return joules;
}

/* One pass of build, with the uses known so far. */
static score build_pass(search *c)
{
    c->work += (double)c->T * (double)(c->words + 4);
    const poet_problem *p = c->p;
    const poet_cnode *n = p->inst->nodes;
    score v = {.built = true};
    size_t row_bytes = (size_t)c->words * sizeof(uint64_t);
    for (int m = 0; m < POET_N_MATRICES; m++) memset(c->s.m[m], 0, (size_t)c->T * row_bytes);
    memset(c->res, 0, row_bytes);
    /* a use in t+1 found by this pass is found in stage t+1, after stage t
     * looked: the rows can be made before the pass */
    memset(c->concerns, 0, (size_t)c->T * row_bytes);
    for (int i = 0; i < c->T; i++) {
        if (!is_page(c->fate[i])) continue;
        if (i + 1 < c->T) bit_set(c->concerns + (size_t)(i + 1) * c->words, i);
        FOR_EACH_BIT(c->uses + (size_t)i * c->words, c->words, u)
        {
            if (u > 0) bit_set(c->concerns + (size_t)(u - 1) * c->words, i);
        }
    }
    for (int t = 0; t < c->T; t++) {
        uint64_t *R = sched_row_mut(&c->s, POET_R, t);
        memcpy(sched_row_mut(&c->s, POET_SRAM, t), c->res, row_bytes);
        closure(c, t, R);
        memset(c->next, 0, row_bytes);
        for (int w = 0; w < c->words; w++) {
            for (uint64_t b = c->res[w] | R[w]; b; b &= b - 1) {
                int i = w * 64 + __builtin_ctzll(b);
                if (stays(c, i, t)) bit_set(c->next, i);
            }
        }
        FOR_EACH_BIT(R, c->words, i)
        {
            v.energy_j += n[i].compute_j, v.time_s += n[i].time_s;
            if (i != t && !c->remat) v.built = false;
        }
        /* page-outs and page-ins of the paged tensors this stage concerns */
        FOR_EACH_BIT(c->concerns + (size_t)t * c->words, c->words, i)
        {
            if (t == i + 1) {
                bit_set(sched_row_mut(&c->s, POET_MOUT, t), i), v.energy_j += n[i].pageout_j;
                v.time_s += poet_transfer_counted_s(p, n[i].pageout_s);
            }
            /* in again for its next use, unless it is in RAM */
            bool used_next = t + 1 < c->T && bit_get(c->uses + (size_t)i * c->words, t + 1);
            bool missing = used_next && on_storage(i, t) && !bit_get(c->next, i) && !bit_get(c->res, i) &&
                           !bit_get(R, i);
            /* left to the next stage's chain where that costs less and the
             * runtime budget has room for it beside the stages to come */
            double chain_s;
            if (missing && or_recompute(c->fate[i]) && chain_j(c, i, t + 1, c->next, &chain_s) < n[i].pagein_j &&
                v.time_s + chain_s + c->rest_s[t] <= p->runtime_budget_s)
                continue;
            if (missing) {
                bit_set(sched_row_mut(&c->s, POET_MIN, t), i), v.energy_j += n[i].pagein_j;
                v.time_s += poet_transfer_counted_s(p, n[i].pagein_s);
                bit_set(c->next, i);
            }
        }
        const uint64_t *K = t + 1 < c->T ? c->next : NULL;
        uint64_t peak = stage_memory(p, t, c->res, R, K, NULL, NULL);
        c->over[t] = peak > c->cap[t] ? peak - c->cap[t] : 0;
        v.excess += c->over[t];
        memcpy(c->res, c->next, row_bytes);
    }
    return v;
}

/* Writes the schedule of the current fates into c->s and measures it.
 * Where a recomputation chain reaches a paged tensor, that stage becomes one
 * of its uses, so that the next pass pages it in for that stage instead;
 * uses only grow, so the passes settle (a few at most: each adds uses only
 * for chains that the previous one recomputed). */
static score build(search *c)
{
    memcpy(c->uses, c->readers, (size_t)c->T * c->words * sizeof(uint64_t));
    for (int i = 0; i < c->T; i++) {
        if (!is_page_fwd(c->fate[i])) continue;
        for (int w = 0; w < c->words; w++) c->uses[(size_t)i * c->words + w] |= c->freaders[(size_t)i * c->words + w];
    }
    score v;
    for (int pass = 0; pass < 4; pass++) {
        c->new_use = false;
        v = build_pass(c);
        if (!c->new_use) break;
    }
    return v;
}

/* a better than b: fits where b does not, else less energy (fitting), else less excess */
static bool better(const search *c, const score *a, const score *b)
{
    bool fa = fits(c, a), fb = fits(c, b);
    if (fa != fb) return fa;
    if (fa) return a->energy_j < b->energy_j * (1 - 1e-12);
    return false;
}

/* Notes when the search first meets fates better than any before, and
 * whether they meet the target. */
static void note(search *c, const score *v)
{
    if (!better(c, v, &c->record)) return;
    c->record = *v, c->record_at = host_now_s();
    c->met = v->energy_j <= c->target_j;
    progress_report(NULL, v->energy_j, NAN);
}

/* The search goes on until it meets its target or has done its work; the
 * deadline is a safety stop, where the result then depends on the
 * machine's speed (c->cut). */
static bool has_work_left(search *c, double deadline)
{
    if (c->work >= c->work_limit) return false;
    if (host_now_s() >= deadline) c->cut = true;
    return !c->cut;
}

static bool go_on(search *c, double deadline) { return !c->met && has_work_left(c, deadline); }

/* Whether i, under keep, is in RAM in a stage that is over the budget. */
static bool relieves(const search *c, int i)
{
    for (int t = (c->fgap[i] ? i : c->lf[i]) + 1; t <= c->p->last_use[i]; t++)
        if (c->hot[t]) return true;
    return false;
}

/* Beyond this many nodes the search takes shortcuts (shrink, descend, fates_plan). */
enum { LAZY_NODES = 400 };
static const double LAZY_SLACK = 0.05;

static bool large(const search *c) { return c->T > LAZY_NODES; }

/* Joules that giving tensor i fate f adds to cur per byte of excess it
 * removes; INFINITY where it removes none or misses the runtime budget. */
static double shrink_rate(search *c, const score *cur, int i, int f)
{
    int was = c->fate[i];
    c->fate[i] = (unsigned char)f;
    score v = build(c);
    c->fate[i] = (unsigned char)was;
    if (!v.built || v.excess >= cur->excess || v.time_s > c->p->runtime_budget_s * (1 + 1e-9)) return INFINITY;
    return (v.energy_j - cur->energy_j) / (double)(cur->excess - v.excess);
}

/* A fate change and its rate, as last measured: a min-heap of them. */
typedef struct change {
    double rate;
    int i, f;
} change;

/* ties go to the lower tensor, then the lower fate */
static bool before(const change *a, const change *b)
{
    if (a->rate != b->rate) return a->rate < b->rate;
    return a->i != b->i ? a->i < b->i : a->f < b->f;
}

static void heap_push(change *h, int *n, change x)
{
    int k = (*n)++;
    for (; k > 0 && before(&x, &h[(k - 1) / 2]); k = (k - 1) / 2) h[k] = h[(k - 1) / 2];
    h[k] = x;
}

static change heap_pop(change *h, int *n)
{
    change top = h[0], x = h[--*n];
    int k = 0;
    for (int l; (l = 2 * k + 1) < *n; k = l) {
        if (l + 1 < *n && before(&h[l + 1], &h[l])) l++;
        if (!before(&h[l], &x)) break;
        h[k] = h[l];
    }
    h[k] = x;
    return top;
}

/* Every fate change of a tensor that is in RAM where a stage is over the
 * budget (given up, it may still be: held between two close readers, or
 * paged in once for all), with its rate, into h. */
static void measure_changes(search *c, const score *cur, change *h, int *n, double deadline)
{
    memcpy(c->hot, c->over, (size_t)c->T * sizeof *c->hot);
    /* a graph beyond LAZY_NODES takes seconds to measure: the deadline may come first */
    for (int i = 0; i < c->T && (!large(c) || go_on(c, deadline)); i++) {
        if (!relieves(c, i)) continue;
        for (int f = FATE_RECOMPUTE; f < N_FATES; f++) {
            if (f == c->fate[i] || !allowed(c, i, f)) continue;
            double rate = shrink_rate(c, cur, i, f);
            if (isfinite(rate)) heap_push(h, n, (change){rate, i, f});
        }
    }
}

/* Until every stage fits: the fate change that removes the most excess per
 * joule it adds. Each step measures every change again, one build each;
 * beyond LAZY_NODES nodes (DenseNet-121 from ONNX, 1595 nodes: 8500
 * changes at 1 ms a build, hundreds of steps) only the best so far is
 * measured again, and taken if it is still the best within LAZY_SLACK of
 * its rate (lazy greedy: each step removes excess, so every rate drifts up
 * a little, and taking only the strictly best measured everything again);
 * every change again once none is left. */
static score shrink(search *c, score cur, double deadline)
{
    change *h = malloc((size_t)c->T * N_FATES * sizeof *h);
    int n = 0;
    while (h && cur.built && cur.excess > 0 && go_on(c, deadline)) {
        if (!large(c)) n = 0;
        if (n == 0 && (measure_changes(c, &cur, h, &n, deadline), n == 0)) break;
        change best = heap_pop(h, &n);
        if (best.f == c->fate[best.i]) continue; /* measured before that tensor took it */
        if (large(c)) {
            best.rate = shrink_rate(c, &cur, best.i, best.f);
            if (!isfinite(best.rate)) continue;
            if (n > 0 && best.rate > h[0].rate + LAZY_SLACK * fabs(h[0].rate)) {
                heap_push(h, &n, best);
                continue;
            }
        }
        c->fate[best.i] = (unsigned char)best.f;
        cur = build(c);
    }
    free(h);
    return cur;
}

/* Single fate changes, then (with pairs) swaps of one tensor back to keep
 * and another given up, first improvement, until none helps. */
static score improve(search *c, score cur, double deadline, bool pairs)
{
    for (bool changed = true; changed && go_on(c, deadline);) {
        changed = false;
        for (int i = 0; i < c->T && go_on(c, deadline); i++) {
            int was = c->fate[i];
            for (int f = 0; f < N_FATES; f++) {
                if (f == was || !allowed(c, i, f)) continue;
                c->fate[i] = (unsigned char)f;
                score v = build(c);
                if (better(c, &v, &cur)) {
                    cur = v, was = f, changed = true;
                    note(c, &cur);
                } else {
                    c->fate[i] = (unsigned char)was;
                }
            }
        }
        for (int i = 0; i < c->T && pairs && !changed && go_on(c, deadline); i++) {
            if (c->fate[i] == FATE_KEEP) continue;
            int was_i = c->fate[i];
            c->fate[i] = FATE_KEEP;
            for (int j = 0; j < c->T && !changed; j++) {
                if (j == i || c->fate[j] != FATE_KEEP) continue;
                for (int f = FATE_RECOMPUTE; f < N_FATES && !changed; f++) {
                    if (!allowed(c, j, f)) continue;
                    c->fate[j] = (unsigned char)f;
                    score v = build(c);
                    if (better(c, &v, &cur)) cur = v, changed = true, note(c, &cur);
                    else c->fate[j] = FATE_KEEP;
                }
            }
            if (!changed) c->fate[i] = (unsigned char)was_i;
        }
    }
    return cur;
}

static void search_free(search *c)
{
    free(c->lf), free(c->fb), free(c->freaders), free(c->fgap), free(c->fate), free(c->stack), free(c->concerns);
    free(c->res), free(c->next), free(c->seen), free(c->rest_s);
    free(c->readers), free(c->uses), free(c->over), free(c->hot), free(c->cap);
    poet_schedule_free(&c->s);
}

static bool search_init(search *c, const poet_problem *p, bool remat, bool paging)
{
    memset(c, 0, sizeof *c);
    c->p = p, c->remat = remat, c->paging = paging, c->T = p->T, c->words = (p->T + 63) / 64;
    size_t T = (size_t)p->T;
    c->lf = malloc(T * sizeof(int)), c->fb = malloc(T * sizeof(int)), c->fgap = calloc(T, sizeof(bool));
    c->freaders = calloc(T * (size_t)c->words, sizeof(uint64_t));
    c->fate = calloc(T, 1), c->stack = malloc(T * sizeof(int));
    c->concerns = malloc(T * (size_t)c->words * sizeof(uint64_t));
    c->readers = calloc(T * (size_t)c->words, sizeof(uint64_t));
    c->uses = malloc(T * (size_t)c->words * sizeof(uint64_t));
    c->over = malloc(T * sizeof(uint64_t)), c->hot = malloc(T * sizeof(uint64_t)), c->cap = malloc(T * sizeof(uint64_t));
    c->res = malloc((size_t)c->words * sizeof(uint64_t)), c->next = malloc((size_t)c->words * sizeof(uint64_t));
    c->seen = malloc((size_t)c->words * sizeof(uint64_t)), c->rest_s = malloc(T * sizeof(double));
    if (!c->lf || !c->fb || !c->freaders || !c->fgap || !c->fate || !c->stack || !c->concerns || !c->readers || !c->uses ||
        !c->res || !c->next || !c->seen || !c->rest_s || !c->over || !c->hot || !c->cap ||
        poet_schedule_init(&c->s, p->T, NULL)) {
        search_free(c);
        return false;
    }
    for (int i = 0; i < p->T; i++) {
        c->lf[i] = i, c->fb[i] = -1;
        for (int o = p->out_start[i]; o < p->out_start[i + 1]; o++) {
            int r = p->out[o];
            if (!p->inst->nodes[r].is_backward) {
                c->fgap[i] = c->fgap[i] || r > c->lf[i] + 1;
                c->lf[i] = r, bit_set(c->freaders + (size_t)i * c->words, r);
            }
            else bit_set(c->readers + (size_t)i * c->words, r), c->fb[i] = c->fb[i] < 0 ? r : c->fb[i];
        }
    }
    c->slack_s = p->runtime_budget_s * (1 + 1e-9) - p->full_memory_time_s;
    c->rest_s[p->T - 1] = 0;
    for (int t = p->T - 2; t >= 0; t--) c->rest_s[t] = c->rest_s[t + 1] + p->inst->nodes[t + 1].time_s;
    return true;
}

/* Iterated local search: from the best fates, ruin and recreate (below),
 * down to a local optimum; kept when cheaper. */
static score kick(search *c, score best, double deadline, uint64_t *rng)
{
    unsigned char *saved = malloc((size_t)c->T);
    if (!saved) return best;
    /* a local optimum that many kicks did not leave is taken as final */
    for (int failed = 0; failed < MAX_FAILED_KICKS && go_on(c, deadline); failed++) {
        memcpy(saved, c->fate, (size_t)c->T);
        /* ruin: one to three tensors given up go back to keep, and one kept
         * tensor may get another fate; recreate: the greedy shrink picks
         * what to give up instead */
        int n = 0;
        for (int i = 0; i < c->T; i++)
            if (c->fate[i] != FATE_KEEP) c->stack[n++] = i;
        for (int k = 1 + (int)(mix64((*rng)++) % 3); k > 0 && n > 0; k--) {
            int at = (int)(mix64((*rng)++) % (uint64_t)n);
            c->fate[c->stack[at]] = FATE_KEEP;
            c->stack[at] = c->stack[--n];
        }
        /* a fate up to the highest enabled: fates enabled later leave the draws without them as they were */
        int top = 64 - __builtin_clzll(c->enabled);
        int i = (int)(mix64((*rng)++) % (uint64_t)c->T), f = (int)(mix64((*rng)++) % (uint64_t)top);
        if (c->fate[i] == FATE_KEEP && allowed(c, i, f)) c->fate[i] = (unsigned char)f;
        score v = improve(c, shrink(c, build(c), deadline), deadline, false);
        if (better(c, &v, &best)) best = v, failed = -1, note(c, &best);
        else memcpy(c->fate, saved, (size_t)c->T);
    }
    free(saved);
    return best;
}

/* What stage t needs at least: node t and its inputs. */
static uint64_t stage_floor(const poet_problem *p, int t)
{
    uint64_t bytes = p->inst->nodes[t].bytes;
    for (int e = p->in_start[t]; e < p->in_start[t + 1]; e++) bytes += p->inst->nodes[p->in[e]].bytes;
    return bytes;
}

/* Keeps the fates of v among the N_STARTS cheapest fitting ones met, in
 * order; a second one of the same energy is taken for the same. */
static void keep_start(search *c, const score *v, unsigned char *starts, score *start_v, int *n)
{
    if (!fits(c, v)) return;
    int at = *n;
    while (at > 0 && better(c, v, &start_v[at - 1])) at--;
    if (at > 0 && !better(c, &start_v[at - 1], v)) return; /* as cheap as one kept */
    if (at >= N_STARTS) return;
    int last = *n < N_STARTS ? (*n)++ : N_STARTS - 1;
    size_t T = (size_t)c->T;
    for (int k = last; k > at; k--) start_v[k] = start_v[k - 1], memcpy(starts + k * T, starts + (k - 1) * T, T);
    start_v[at] = *v, memcpy(starts + at * T, c->fate, T);
}

/* Descents that may use one kind of recomputation each, then all kinds;
 * the cheapest few go on to the iterated search with every fate (where one
 * start leads the local search into a poorer optimum, another may not).
 * Leaves the best schedule in c->s; returns the arena it places in, 0 if
 * none fits. */
static uint64_t descend(search *c, double deadline)
{
    uint64_t arena = 0, rng = 1;
    uint64_t all = ((uint64_t)1 << N_FATES) - 1, page = (uint64_t)1 << FATE_PAGE_HELD, keep = 1u << FATE_KEEP;
    /* the iterated search runs without, then with the fates that page or
     * recompute by use, forward readers included: where they lead it
     * elsewhere, the first still counts */
    uint64_t fwd = (uint64_t)((1u << N_REACH) - 1) << FATE_PAGE_FWD;
    uint64_t by_use = (uint64_t)((1u << N_REACH) - 1) << FATE_PAGE_OR_RECOMPUTE | fwd, sets[2] = {all & ~by_use, all};
    size_t T = (size_t)c->T;
    /* beyond LAZY_NODES nodes a descent takes long (DenseNet-121 from
     * ONNX: 20 s) and one sweep of single changes is T x fates builds: a
     * schedule that fits but does not place ends the descents, so that the
     * time left goes to the retry with lower caps, a descent again */
    bool stop = false;
    unsigned char *starts = malloc(N_STARTS * T), *ends = malloc(2 * N_STARTS * T);
    score start_v[N_STARTS], end_v[2 * N_STARTS], none = {.built = false};
    int n = 0, n_ends = 0;
    c->record = none, c->record_at = 0, c->met = false;
    /* the first descent has every fate but recompute-once: that one's cheap first steps can lead the greedy
     * shrink where nothing fits (branch_3 of the random graphs on the m4 at 35% fits in that descent alone,
     * which must not be the one the deadline cuts); the last adds paging
     * across forward gaps (dag_6 of the random graphs on the a72 at 40% fits
     * in that descent alone) */
    for (int k = FATE_RECOMPUTE - 1; starts && ends && k <= FATE_PAGE + 1 && go_on(c, deadline); k++) {
        c->enabled = k < FATE_RECOMPUTE ? sets[0] & ~((uint64_t)1 << FATE_ONCE)
                     : k < FATE_PAGE    ? keep | page | (uint64_t)1 << k
                     : k == FATE_PAGE   ? sets[0]
                                        : sets[0] | fwd;
        memset(c->fate, FATE_KEEP, T);
        score v = shrink(c, build(c), deadline);
        note(c, &v);
        /* a large graph's schedule that does not place ends the descents */
        bool misplaced = large(c) && fits(c, &v) && (build(c), placed_arena_bytes(c->p, &c->s) > c->p->budget_bytes);
        if (fits(c, &v) && !misplaced) v = improve(c, v, deadline, true);
        keep_start(c, &v, starts, start_v, &n);
        if ((stop = misplaced)) break;
    }
    for (int k = 0; k < 2 * n && !stop && go_on(c, deadline); k++, n_ends++) {
        c->enabled = sets[k / n];
        memcpy(c->fate, starts + (size_t)(k % n) * T, T);
        end_v[k] = improve(c, kick(c, improve(c, start_v[k % n], deadline, true), deadline, &rng), deadline, true);
        memcpy(ends + (size_t)k * T, c->fate, T);
    }
    if (!n_ends && n > 0) { /* out of time before the iterated search: its starts */
        memcpy(ends, starts, (size_t)n * T), memcpy(end_v, start_v, (size_t)n * sizeof *end_v);
        n_ends = n;
    }
    /* the cheapest end that places within the budget goes to c->s (its
     * energy to placed_j); the cheapest end's arena is returned: where it
     * does not place, its excess lowers the stages' caps for another try */
    c->placed_j = INFINITY;
    while (!isfinite(c->placed_j) && n_ends > 0) {
        int at = 0;
        for (int k = 1; k < n_ends; k++) at = better(c, &end_v[k], &end_v[at]) ? k : at;
        memcpy(c->fate, ends + (size_t)at * T, T);
        build(c);
        uint64_t placed_at = placed_arena_bytes(c->p, &c->s);
        if (placed_at <= c->p->budget_bytes) {
            c->placed_j = end_v[at].energy_j;
            if (arena) c->record_at = host_now_s(); /* not the record: had from now */
        }
        if (!arena) arena = placed_at;
        end_v[at] = end_v[--n_ends], memmove(ends + (size_t)at * T, ends + (size_t)n_ends * T, T);
    }
    free(starts), free(ends);
    return arena;
}

poet_status fates_plan(const poet_problem *p, bool remat, bool paging, double seconds, double target_j,
                       poet_schedule *out, double *found_at, poet_err *err)
{
    double deadline = host_now_s() + FATES_SAFETY * seconds + 1;
    *found_at = 0;
    search c;
    if (!search_init(&c, p, remat, paging)) return poet_fail(err, POET_ERR_NOMEM, "out of memory in the fate search");
    c.target_j = target_j;
    c.work_limit = seconds * FATES_WORK_PER_S;
    /* placement can need more than the stage peak: plan each stage for
     * less by the excess, down to what its node and inputs need, until it
     * fits; beyond LAZY_NODES nodes, where a retry is a long descent again,
     * for 1% less from the start (DenseNet-121's first placed 0.2% over) */
    uint64_t first_cap = large(&c) ? p->budget_bytes - p->budget_bytes / 100 : p->budget_bytes;
    for (int t = 0; t < c.T; t++) {
        uint64_t floor_t = stage_floor(p, t); /* never above the budget, never below the floor */
        c.cap[t] = first_cap > floor_t ? first_cap : floor_t < p->budget_bytes ? floor_t : p->budget_bytes;
    }
    double have_j = INFINITY;
    for (int attempt = 0; attempt < 4 && has_work_left(&c, deadline); attempt++) {
        uint64_t arena = descend(&c, deadline);
        poet_schedule next;
        if (c.placed_j < have_j && !poet_schedule_copy(&next, &c.s, NULL)) {
            if (*found_at) poet_schedule_free(out);
            *out = next, have_j = c.placed_j, *found_at = c.record_at;
        }
        if (!arena || arena <= p->budget_bytes) break;
        bool lowered = false;
        for (int t = 0; t < c.T; t++) {
            uint64_t floor_t = stage_floor(p, t), excess = arena - p->budget_bytes;
            uint64_t to = c.cap[t] > floor_t + excess ? c.cap[t] - excess : floor_t;
            lowered = lowered || to < c.cap[t];
            c.cap[t] = to;
        }
        if (!lowered) break;
    }
    search_free(&c);
    return POET_OK;
}
