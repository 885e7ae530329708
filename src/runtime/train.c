/* The training loop: epochs of shuffled batches, evaluation, checkpoints. */
#define _POSIX_C_SOURCE 200809L
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "poet/runtime.h"
#include "../base/hash.h"
#include "../host/clock.h"
#include "../base/checked.h"

typedef struct loop {
    poet_engine *e;
    const poet_dataset *d;
    const poet_train_options *o;
    uint64_t seed;
    int rows, classes;
    uint64_t per; /* floats per example */
    long batches; /* per epoch */
    int *order;   /* n_train */
    int *idx;     /* rows */
    float *x;
    int32_t *y;
    double step_s, eval_s;
} loop;

/* The generator behind SplitMix64: hash the state, then step it. */
static uint64_t next_rand(uint64_t *s)
{
    uint64_t r = mix64(*s);
    *s += 0x9E3779B97F4A7C15ull;
    return r;
}

/* The order of an epoch depends only on the seed and the epoch, so that a
 * resumed run (or a device fed by `poet emulate`) sees the batches an
 * uninterrupted one would. */
void poet_train_order(uint64_t seed, long epoch, int n, int *order)
{
    uint64_t s = seed * 0x100000001B3ull + (uint64_t)epoch;
    for (int i = 0; i < n; i++) order[i] = i;
    for (int i = n - 1; i > 0; i--) {
        int j = (int)(next_rand(&s) % (uint64_t)(i + 1));
        int t = order[i];
        order[i] = order[j];
        order[j] = t;
    }
}

void poet_train_gather(float *x, int32_t *y, int rows, uint64_t per, const float *xs, const int32_t *ys, const int *idx)
{
    for (int r = 0; r < rows; r++) {
        memcpy(x + (size_t)r * per, xs + (size_t)idx[r] * per, (size_t)per * sizeof(float));
        y[r] = ys[idx[r]];
    }
}

static void gather(loop *l, const float *xs, const int32_t *ys, const int *idx)
{
    poet_train_gather(l->x, l->y, l->rows, l->per, xs, ys, idx);
}

/* The last batch is padded with its first example. */
poet_status poet_evaluate(poet_engine *e, const float *xs, const int32_t *ys, const int *idx, int n, double *loss,
                          double *accuracy, poet_err *err)
{
    int rows, classes;
    uint64_t per;
    poet_dev_batch_shape(poet_engine_device(e), &rows, &per, &classes);
    int *pick = malloc((size_t)rows * sizeof *pick);
    float *x = malloc((size_t)rows * (size_t)per * sizeof *x);
    int32_t *y = malloc((size_t)rows * sizeof *y);
    poet_status st = pick && x && y ? POET_OK : poet_fail(err, POET_ERR_NOMEM, "out of memory for a batch");
    double s = 0;
    long ok = 0;
    for (int at = 0; !st && at < n; at += rows) {
        int m = n - at < rows ? n - at : rows;
        for (int r = 0; r < rows; r++) pick[r] = idx ? idx[at + (r < m ? r : 0)] : at + (r < m ? r : 0);
        poet_train_gather(x, y, rows, per, xs, ys, pick);
        double bs;
        int c;
        st = poet_engine_eval(e, x, y, m, &bs, &c, err);
        s += bs;
        ok += c;
    }
    free(pick), free(x), free(y);
    *loss = n ? s / n : NAN;
    *accuracy = n ? (double)ok / n : NAN;
    return st;
}

static poet_status evaluate(loop *l, double *loss, double *accuracy, poet_err *err)
{
    double t0 = host_now_s();
    poet_status st = poet_evaluate(l->e, l->d->test_x, l->d->test_y, NULL, l->d->n_test, loss, accuracy, err);
    l->eval_s += host_now_s() - t0;
    return st;
}

static poet_status check_fit(loop *l, poet_err *err)
{
    uint64_t per = (uint64_t)l->d->channels * (uint64_t)l->d->height * (uint64_t)l->d->width;
    if (per != l->per || l->d->classes > l->classes)
        return poet_fail(err, POET_ERR_INVALID,
                         "data set '%s' has %llu values per example and %d classes; the model takes %llu and %d",
                         l->d->name, (unsigned long long)per, l->d->classes, (unsigned long long)l->per, l->classes);
    if (l->d->n_train < l->rows || l->d->n_test < 1)
        return poet_fail(err, POET_ERR_INVALID, "data set '%s' has fewer training examples than a batch of %d",
                         l->d->name, l->rows);
    return POET_OK;
}

static poet_checkpoint_meta meta_at(const loop *l, long step, long epoch, long batch)
{
    return (poet_checkpoint_meta){.graph_hash = poet_dev_graph_hash(poet_engine_device(l->e)), .seed = l->seed, .step = step,
                                  .epoch = epoch, .batch_in_epoch = batch, .train_examples = (uint64_t)l->d->n_train};
}

static poet_status save(loop *l, long step, long epoch, long batch, poet_err *err)
{
    if (!l->o->checkpoint) return POET_OK;
    poet_checkpoint_meta m = meta_at(l, step, epoch, batch);
    return poet_checkpoint_write(l->o->checkpoint, l->e, &m, err);
}

/* Where to start: the checkpoint's position, or the beginning. The
 * position must be one this loop reaches (step = epoch x batches + batch),
 * since it indexes the epoch's order. */
static poet_status start_point(loop *l, poet_checkpoint_meta *m, poet_err *err)
{
    *m = meta_at(l, 0, 0, 0);
    if (!l->o->resume || !l->o->checkpoint || access(l->o->checkpoint, F_OK) != 0) return POET_OK;
    poet_status st = poet_checkpoint_read(l->o->checkpoint, l->e, m, err);
    uint64_t at;
    if (!st && (m->batch_in_epoch >= l->batches || m->epoch > INT_MAX - 1 ||
                !ck_mul((uint64_t)m->epoch, (uint64_t)l->batches, &at) ||
                !ck_add(at, (uint64_t)m->batch_in_epoch, &at) || at != (uint64_t)m->step))
        st = poet_fail(err, POET_ERR_INVALID,
                       "checkpoint '%s' stands at step %ld, epoch %ld, batch %ld, which training with %ld batches an "
                       "epoch never reaches", l->o->checkpoint, m->step, m->epoch, m->batch_in_epoch, l->batches);
    return st;
}

static void report_progress(loop *l, poet_train_progress *p)
{
    if (l->o->progress) l->o->progress(l->o->ctx, p);
}

static poet_status run(loop *l, poet_train_report *r, poet_err *err)
{
    poet_checkpoint_meta at;
    poet_status st = start_point(l, &at, err);
    if (st) return st;
    long total = l->o->steps > 0 ? l->o->steps : (long)(l->o->epochs > 0 ? l->o->epochs : 1) * l->batches;
    int epochs = (int)((total + l->batches - 1) / l->batches);
    long step = at.step, epoch = at.epoch, batch = at.batch_in_epoch;
    r->resumed_at = step;
    r->initial_test_loss = r->initial_test_accuracy = NAN;
    if (l->o->evaluate_first && (st = evaluate(l, &r->initial_test_loss, &r->initial_test_accuracy, err))) return st;
    poet_train_progress p = {.total_steps = total, .epochs = epochs, .batches = l->batches, .test_loss = NAN,
                             .test_accuracy = NAN, .loss = NAN};
    double loss_sum = 0;
    long loss_n = 0, shuffled = -1;
    while (step < total) {
        if (shuffled != epoch) poet_train_order(l->seed, epoch, l->d->n_train, l->order), shuffled = epoch;
        memcpy(l->idx, l->order + batch * l->rows, (size_t)l->rows * sizeof(int));
        gather(l, l->d->train_x, l->d->train_y, l->idx);
        double t0 = host_now_s();
        st = poet_engine_step(l->e, l->x, l->y, &p.loss, err);
        l->step_s += host_now_s() - t0;
        if (st) return st;
        step++, batch++;
        loss_sum += p.loss, loss_n++;
        bool epoch_end = batch == l->batches, last = step == total;
        if (epoch_end) epoch++, batch = 0;
        p.step = step, p.epoch = (int)epoch + (epoch_end ? 0 : 1), p.batch = epoch_end ? l->batches : batch;
        p.epoch_done = epoch_end || last;
        if (p.epoch_done) {
            if ((st = evaluate(l, &p.test_loss, &p.test_accuracy, err))) return st;
            p.train_loss = loss_sum / (double)loss_n;
            loss_sum = 0, loss_n = 0;
        }
        if (p.epoch_done || (l->o->checkpoint_every > 0 && step % l->o->checkpoint_every == 0))
            if ((st = save(l, step, epoch, batch, err))) return st;
        report_progress(l, &p);
        p.epoch_done = false;
    }
    r->steps = step;
    r->final_loss = p.loss;
    r->test_loss = p.test_loss;
    r->test_accuracy = p.test_accuracy;
    if (isnan(r->test_loss)) st = evaluate(l, &r->test_loss, &r->test_accuracy, err); /* resumed at the end */
    return st;
}

poet_status poet_train(poet_engine *e, const poet_dataset *d, const poet_train_options *o, poet_train_report *r,
                       poet_err *err)
{
    memset(r, 0, sizeof *r);
    loop l = {.e = e, .d = d, .o = o, .seed = poet_dev_seed(poet_engine_device(e))};
    poet_dev_batch_shape(poet_engine_device(e), &l.rows, &l.per, &l.classes);
    poet_status st = check_fit(&l, err);
    if (st) return st;
    l.batches = d->n_train / l.rows;
    l.order = malloc((size_t)d->n_train * sizeof *l.order);
    l.idx = malloc((size_t)l.rows * sizeof *l.idx);
    l.x = malloc((size_t)l.rows * (size_t)l.per * sizeof *l.x);
    l.y = malloc((size_t)l.rows * sizeof *l.y);
    double t0 = host_now_s();
    if (!l.order || !l.idx || !l.x || !l.y)
        st = poet_fail(err, POET_ERR_NOMEM, "out of memory for a batch");
    else
        st = run(&l, r, err);
    r->host_seconds = host_now_s() - t0;
    r->step_seconds = l.step_s;
    r->eval_seconds = l.eval_s;
    free(l.order), free(l.idx), free(l.x), free(l.y);
    return st;
}
