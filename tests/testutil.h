/* Helpers for tests: small costed graphs built by hand or at random. */
#ifndef POET_TESTS_TESTUTIL_H
#define POET_TESTS_TESTUTIL_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "poet/poet.h"

/* A device where one byte pages in for 1 J and out for 2 J, a FLOP costs
 * 1 s and 1 J, so that expected figures are easy to state. */
static poet_profile unit_device(void)
{
    poet_profile d;
    memset(&d, 0, sizeof d);
    snprintf(d.name, sizeof d.name, "unit");
    d.flops_per_s = d.flops_per_j = 1;
    d.pagein_bytes_per_s = 1;
    d.pageout_bytes_per_s = 0.5;
    d.memory_power_w = 1;
    d.bytes_per_element = 4;
    return d;
}

/* T nodes with the given bytes and FLOPs; nodes >= n_forward are backward. */
static void make_instance(poet_instance *inst, int T, int n_forward, const uint64_t *bytes, const double *flops,
                          const int (*edges)[2], int n_edges)
{
    memset(inst, 0, sizeof *inst);
    snprintf(inst->model, sizeof inst->model, "handmade");
    inst->batch = 1;
    inst->device = unit_device();
    inst->T = T;
    inst->nodes = calloc((size_t)T, sizeof *inst->nodes);
    inst->edges = calloc((size_t)n_edges + 1, sizeof *inst->edges);
    inst->n_edges = n_edges;
    for (int i = 0; i < T; i++) {
        poet_cnode *c = &inst->nodes[i];
        snprintf(c->name, sizeof c->name, "n%d", i);
        snprintf(c->op, sizeof c->op, "op");
        c->is_backward = i >= n_forward;
        c->bytes = bytes[i];
        c->flops = flops[i];
        c->time_s = poet_cost_compute_time_s(&inst->device, c->flops);
        c->compute_j = poet_cost_compute_j(&inst->device, c->flops);
        c->pagein_j = poet_cost_pagein_j(&inst->device, c->bytes);
        c->pageout_j = poet_cost_pageout_j(&inst->device, c->bytes);
        c->pagein_s = poet_cost_pagein_s(&inst->device, c->bytes);
        c->pageout_s = poet_cost_pageout_s(&inst->device, c->bytes);
    }
    for (int e = 0; e < n_edges; e++) inst->edges[e] = (poet_edge){edges[e][0], edges[e][1]};
}

static unsigned rng_next(unsigned *s)
{
    *s = *s * 1103515245u + 12345u;
    return (*s >> 8) & 0xffffff;
}

/* A random training-like DAG: a forward chain with skip edges, then a
 * backward pass where node T-1-k reads its predecessor and forward node k,
 * or, one time in three, k's predecessor instead (as a convolution's
 * gradient reads its input, not its output): forward tensors that die in the
 * forward pass, so that recomputing their readers needs them back. */
static void random_instance(poet_instance *inst, int n_fwd, unsigned *seed)
{
    int T = 2 * n_fwd;
    uint64_t *bytes = malloc((size_t)T * sizeof *bytes);
    double *flops = malloc((size_t)T * sizeof *flops);
    int (*edges)[2] = malloc((size_t)(4 * T) * sizeof *edges);
    int n = 0;
    for (int i = 0; i < T; i++) {
        bytes[i] = 4 * (1 + rng_next(seed) % 64);
        flops[i] = 1 + rng_next(seed) % 100;
    }
    for (int i = 1; i < n_fwd; i++) {
        edges[n][0] = i - 1, edges[n][1] = i, n++;
        if (i >= 2 && rng_next(seed) % 3 == 0) edges[n][0] = (int)(rng_next(seed) % (unsigned)(i - 1)), edges[n][1] = i, n++;
    }
    for (int b = n_fwd; b < T; b++) {
        int mirror = T - 1 - b;
        edges[n][0] = b - 1, edges[n][1] = b, n++;
        if (mirror > 0 && rng_next(seed) % 3 == 0) mirror--;
        if (mirror < b - 1) edges[n][0] = mirror, edges[n][1] = b, n++;
    }
    make_instance(inst, T, n_fwd, bytes, flops, (const int(*)[2])edges, n);
    free(bytes);
    free(flops);
    free(edges);
}

#endif
