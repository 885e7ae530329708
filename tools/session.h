/* What train, export and emulate share: their common options, and a model
 * (from the zoo or imported from ONNX) planned for a device and a budget. */
#ifndef POET_TOOLS_SESSION_H
#define POET_TOOLS_SESSION_H

#include "cli.h"

/* The options that say what to train and how. */
typedef struct train_opts {
    const char *model, *onnx, *device, *budget, *data, *data_dir, *planner, *factor, *batch, *seed, *optimizer, *lr;
    const char *time_limit, *schedule, *train, *runtime_model, *frozen;
    const char *labels, *test_data, *test_labels, *test_split; /* DATA_OPTS' */
    bool fused_update;
} train_opts;

#define TRAIN_OPTS(t)                                                                                                \
    {"--model", true, &(t).model, NULL}, {"--onnx", true, &(t).onnx, NULL}, {"--device", true, &(t).device, NULL}, \
        {"--budget", true, &(t).budget, NULL}, {"--planner", true, &(t).planner, NULL},                             \
        {"--runtime-factor", true, &(t).factor, NULL}, {"--batch", true, &(t).batch, NULL},                         \
        {"--seed", true, &(t).seed, NULL}, {"--optimizer", true, &(t).optimizer, NULL},                             \
        {"--lr", true, &(t).lr, NULL}, {"--time-limit", true, &(t).time_limit, NULL},                             \
        {"--schedule", true, &(t).schedule, NULL}, {"--train", true, &(t).train, NULL},                             \
        {"--runtime-model", true, &(t).runtime_model, NULL}, {"--frozen", true, &(t).frozen, NULL},         \
        {"--fused-update", false, NULL, &(t).fused_update}

/* ... and those of the commands that train on a data set. */
#define DATA_OPTS(t)                                                                                              \
    {"--data", true, &(t).data, NULL}, {"--data-dir", true, &(t).data_dir, NULL},                                \
        {"--labels", true, &(t).labels, NULL}, {"--test-data", true, &(t).test_data, NULL},                      \
        {"--test-labels", true, &(t).test_labels, NULL}, {"--test-split", true, &(t).test_split, NULL}

/* The help lines of DATA_OPTS. */
#define DATA_HELP                                                                                                 \
    "  --data NAME|FILE    digits, fashion-mnist, or your examples (docs/data.md):\n"                            \
    "                      .npy inputs [N, ...] (then --labels FILE.npy of [N]\n"                               \
    "                      integers), .npz with x and y, or .csv rows 'label,values'\n"                        \
    "  --test-data FILE    the test set (--test-labels FILE.npy for .npy inputs);\n"                           \
    "                      without it, --test-split F (default 0.2) of the examples\n"

/* ... their values, checked. */
typedef struct train_values {
    int batch; /* 0: the model's */
    uint64_t seed;
    double rho, time_limit_s; /* time_limit_s 0: the planner's default */
    poet_optimizer opt;
    const char *planner, *data;
    uint32_t chunk;           /* the device's im2col chunk (--chunk; DEVICE_CHUNK) */
    uint64_t fixed_ram_bytes; /* the firmware's RAM; UINT64_MAX: the profile's */
    uint64_t node_ram_bytes;  /* what the firmware keeps beside it per graph node (emulate --profile's timers) */
    bool counts_paging;       /* --runtime-model serial */
    poet_frozen_home frozen;  /* --frozen */
    bool fused_update;        /* --fused-update */
} train_values;

/* The device layout these values ask for. */
static inline device_layout layout_of_values(const train_values *v)
{
    return (device_layout){v->opt.kind, v->chunk, v->frozen, v->fused_update};
}

/* Checks the options (cmd names the command in messages); 0 or an exit code. */
int train_opts_check(const char *cmd, const train_opts *t, train_values *v);

/* The data set of --data and its options, checked against graph g; 0 or an
 * exit code. */
int open_data(const char *cmd, const train_opts *t, const train_values *v, const poet_graph *g, poet_dataset *d);

/* A model planned for a device and a budget. */
typedef struct session {
    const poet_graph *g;    /* the zoo model's, or the imported one's */
    poet_graph zoo;
    poet_onnx_model *onnx;  /* an imported model with its weights, or NULL */
    poet_instance inst;
    poet_problem p;
    poet_plan_result plan;
    poet_sim sim;
    ram_use ram;            /* what training needs in the device's RAM beside the arena */
} session;

/* Builds, plans (or reads and validates the schedule of --schedule) and
 * simulates; an infeasible budget is explained (with the smallest budget
 * that would work) and returns EXIT_NO_SCHEDULE. 0 or an exit code. */
int session_plan(const char *cmd, session *s, const train_opts *t, const train_values *v);
/* The imported model's weights and buffers, or NULL (a zoo model: from the seed). */
const float *session_params(const session *s);
const float *session_buffers(const session *s);
void session_free(session *s);

/* ---- the device image, shared by export and emulate ---- */
/* --chunk N: output positions per im2col chunk, 0 for whole images (NULL: DEVICE_CHUNK). */
bool parse_chunk(const char *s, uint32_t *out);
/* The device image of a planned session, and the memory it needs on the device. */
int export_image(const session *s, const train_values *v, uint8_t **img, size_t *len, poet_dev_memory *need);
/* The memory fields of a device image's needs, into a JSON object. */
void add_memory_json(cJSON *o, const poet_dev_memory *m);

#endif
