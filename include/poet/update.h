/* Deep partial updating: the server side (docs/update.md).
 *
 * A model on a device goes stale while the server gathers data, and the
 * link to the device carries only a few percent of the weights a round.
 * Each round the server retrains the deployed model on all its data, picks
 * the k*I weights (of I convolution and linear weights) whose change
 * matters most, rewinds the others to what the device holds, fine-tunes
 * only the picked ones, and sends them as a patch (poet/device.h applies
 * it). The selection follows Qu et al., "Deep Partial Updating" (ECCV
 * 2022): the global contribution (w_final - w_start)^2 and the local one,
 * the sum over steps of -(step applied) * (gradient), each normalized, half
 * and half. Written from the paper's description. */
#ifndef POET_UPDATE_H
#define POET_UPDATE_H

#include "poet/device.h"
#include "poet/patch.h"
#include "poet/train.h"

#ifdef __cplusplus
extern "C" {
#endif

/* What decides the weights sent. FULL sends every weight; the others send
 * k*I of them: DPU by both contributions, GLOBAL by the global one only,
 * RANDOM a random subset, PRUNE the largest trained weights with the rest
 * set to zero (a pruned model). */
typedef enum poet_update_method {
    POET_UPDATE_FULL,
    POET_UPDATE_DPU,
    POET_UPDATE_GLOBAL,
    POET_UPDATE_RANDOM,
    POET_UPDATE_PRUNE,
    POET_UPDATE_METHODS
} poet_update_method;

const char *poet_update_method_name(poet_update_method m); /* full, dpu, gcpu, rpu, prune */
bool poet_update_method_parse(const char *name, poet_update_method *m);

typedef struct poet_update_options {
    poet_update_method method;
    double k;         /* share of the weights a round sends, (0, 1] */
    int epochs;       /* of retraining, then again of fine-tuning */
    bool reinit;      /* retrain from a fresh initialization (its seed is sent) when the data
                       * has more than doubled since the last one */
    uint64_t seed;    /* shuffles, random subsets and initialization seeds follow from it */
    bool always_send; /* send every round: no skipping when the rewound model is worse on validation */
    double global_share; /* DPU's metric: this share of the global contribution, the rest of the
                          * local one, in [0, 1]; the paper's is 0.5, and 1 ranks as GCPU does */
} poet_update_options;

typedef struct poet_update_report {
    int round;                 /* from 1; round 1 deploys the first model whole */
    int examples;              /* training examples this round */
    bool sent;                 /* false: skipped, some weights were rewound and the rewound model's
                                * validation accuracy was below the deployed one's */
    bool reinit;               /* retrained from a fresh initialization */
    uint64_t weights, changed; /* I, and the weights the patch sets */
    uint64_t patch_bytes;      /* 0 when skipped */
    /* validation loss and accuracy: of the deployed model before the round,
     * of the retrained model with only the picked weights kept, and of the
     * deployed model after the round */
    double base_loss, base_accuracy;
    double rewound_loss, rewound_accuracy;
    double loss, accuracy;
} poet_update_report;

typedef struct poet_update_server poet_update_server;

/* cfg says what to train and how (graph, problem, schedule, optimizer,
 * seed, and in params/buffers the model the devices hold at first, or NULL
 * for the seed's initialization); the server keeps its own engine. */
poet_status poet_update_server_new(const poet_engine_config *cfg,
                                   const poet_update_options *o, poet_update_server **out, poet_err *err);
void poet_update_server_free(poet_update_server *s);

/* One round on the training examples train[0..n_train) of d, validated on
 * d's training examples val[0..n_val). Writes the patch to send (*patch,
 * freed by the caller; NULL when the round is skipped). */
poet_status poet_update_round(poet_update_server *s, const poet_dataset *d, const int *train, int n_train,
                              const int *val, int n_val, uint8_t **patch, size_t *patch_len, poet_update_report *r,
                              poet_err *err);

/* The model the devices hold now: its weights (poet_dev_weights order) and
 * its accuracy on n examples (x: rows of the model's input; NULL idx: the
 * first n). */
const float *poet_update_deployed(const poet_update_server *s, uint64_t *count);
/* ... and its buffers (batch norm statistics, constants). */
const float *poet_update_deployed_state(const poet_update_server *s, uint64_t *count);
poet_status poet_update_accuracy(poet_update_server *s, const float *x, const int32_t *y, const int *idx, int n,
                                 double *accuracy, poet_err *err);

/* The device image the devices start from (the initially deployed model). */
const uint8_t *poet_update_image(const poet_update_server *s, size_t *len);

#ifdef __cplusplus
}
#endif
#endif
