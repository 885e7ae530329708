/* poet: training an engine on real data: data sets, checkpoints and the
 * training loop (shuffling, batches, evaluation, resumption). */
#ifndef POET_TRAIN_H
#define POET_TRAIN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "poet/engine.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- data sets ---- */
typedef struct poet_dataset {
    char name[32];
    int n_train, n_test;
    int channels, height, width; /* one example */
    int classes;             /* 1 + the largest label */
    float *train_x, *test_x; /* n * channels * height * width: built-ins scaled to [0, 1], files' as they are */
    int32_t *train_y, *test_y;
    double held_out;         /* the fraction of the file's examples held out as the test set, or 0 */
} poet_dataset;

/* "digits" (python3-sklearn) or "fashion-mnist" (dataset-fashion-mnist);
 * dir overrides where the files are looked for (NULL: Debian's place). */
poet_status poet_dataset_load(const char *name, const char *dir, poet_dataset *out, poet_err *err);
void poet_dataset_free(poet_dataset *d);

#define POET_DEFAULT_TEST_SPLIT 0.2

/* A built-in data set by name, or a user's files (docs/data.md): NumPy .npy
 * inputs [N, ...] with .npy labels [N]; an .npz with arrays x and y (or
 * x_train, y_train and, as the test set, x_test, y_test); a .csv of rows
 * "label,value,...". The test set is test_data's (with test_labels for
 * .npy), an .npz's x_test, or else a test_split fraction of the examples
 * (POET_DEFAULT_TEST_SPLIT when 0), the same ones whatever the seed. */
typedef struct poet_data_source {
    const char *data, *labels;
    const char *test_data, *test_labels;
    double test_split;
    const char *dir; /* the built-ins' files */
} poet_data_source;
poet_status poet_dataset_open(const poet_data_source *src, poet_dataset *out, poet_err *err);

/* Whether a data set's examples and labels fit graph g's input and
 * classes: the same shape once dimensions of 1 are dropped (or the same
 * count of values where either side is flat), labels below its classes. */
poet_status poet_dataset_check_model(const poet_dataset *d, const poet_graph *g, poet_err *err);

/* ---- checkpoints ---- */
typedef struct poet_checkpoint_meta {
    uint32_t graph_hash;
    uint64_t seed;
    long step, epoch, batch_in_epoch; /* where training goes on */
    uint64_t train_examples;          /* of the data set, whose order each epoch shuffles */
    poet_optimizer optimizer;         /* the engine's; written and checked by the functions below */
} poet_checkpoint_meta;

/* Written atomically: the old checkpoint stays whole until the new one is.
 * The optimizer recorded is e's (meta->optimizer is not read). */
poet_status poet_checkpoint_write(const char *path, const poet_engine *e, const poet_checkpoint_meta *meta,
                                  poet_err *err);
/* Loads the checkpoint at path into e after checking it against the run it
 * resumes: meta's graph hash, seed and training examples, and e's
 * optimizer (kind and every hyperparameter) must be the checkpoint's, and
 * its state's step count its step. On success *meta is the checkpoint's. */
poet_status poet_checkpoint_read(const char *path, poet_engine *e, poet_checkpoint_meta *meta, poet_err *err);
/* Parses and checks a checkpoint image without an engine (for fuzzing). */
poet_status poet_checkpoint_parse(const uint8_t *data, size_t len, poet_checkpoint_meta *meta, size_t *state_len,
                                  poet_err *err);

/* ---- the training loop ---- */
typedef struct poet_train_progress {
    long step, total_steps;  /* steps done, of all */
    int epoch, epochs;       /* 1-based epoch in progress */
    long batch, batches;     /* within the epoch */
    double loss;             /* of the last step */
    bool epoch_done;         /* test metrics below are fresh */
    double train_loss;       /* mean over the epoch's steps run in this process */
    double test_loss, test_accuracy;
} poet_train_progress;

typedef struct poet_train_options {
    int epochs;               /* used when steps <= 0 */
    long steps;               /* > 0: train this many steps in all */
    const char *checkpoint;   /* file, or NULL */
    long checkpoint_every;    /* steps between checkpoints; <= 0: at each epoch's end only */
    bool resume;              /* start from the checkpoint when it exists */
    void (*progress)(void *ctx, const poet_train_progress *p);
    void *ctx;
    bool evaluate_first;      /* measure the test set before the first step too (pretrained weights) */
} poet_train_options;

typedef struct poet_train_report {
    long steps;               /* in all, including those before a resume */
    long resumed_at;          /* step the run started from */
    double final_loss;        /* of the last step */
    double test_loss, test_accuracy;
    double initial_test_loss, initial_test_accuracy; /* with evaluate_first; NAN otherwise */
    double host_seconds;      /* this process's training and evaluation */
    double step_seconds;      /* of which training steps */
    double eval_seconds;      /* of which test-set evaluation */
} poet_train_report;

/* The order poet_train visits the n training examples in `epoch` (from 0):
 * a permutation that depends only on the seed and the epoch. With
 * B = n / rows batches an epoch (the last partial one is dropped), step k
 * takes entries [j * rows, (j + 1) * rows) of epoch k / B's order, j = k % B. */
void poet_train_order(uint64_t seed, long epoch, int n, int *order);

/* Rows idx[0..rows) of xs (per floats each) and ys into one batch, x and y. */
void poet_train_gather(float *x, int32_t *y, int rows, uint64_t per, const float *xs, const int32_t *ys, const int *idx);

/* Mean loss and accuracy of e in inference mode over n examples: xs holds
 * one input per example (the model's input floats each) and ys one label;
 * idx picks the examples (NULL: the first n). */
poet_status poet_evaluate(poet_engine *e, const float *xs, const int32_t *ys, const int *idx, int n, double *loss,
                          double *accuracy, poet_err *err);

/* Trains e on d: shuffles each epoch from (engine seed, epoch), drops the last
 * partial batch, evaluates on the whole test set after each epoch (and at
 * the end), writes checkpoints atomically. */
poet_status poet_train(poet_engine *e, const poet_dataset *d, const poet_train_options *o, poet_train_report *r,
                       poet_err *err);

#ifdef __cplusplus
}
#endif
#endif
