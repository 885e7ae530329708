/* Internal: the device image, the one artefact a device needs to train
 * (docs/device.md): the graph's ops and shapes, the schedule as its
 * instruction stream with arena offsets, the initial weights and the memory
 * it takes. The host writes it (src/runtime/image_write.c); the device reads
 * it in place, from flash or RAM, after checking every field
 * (src/device/device.c). Every record has a fixed layout of 4- and 8-byte
 * little-endian fields, identical on x86-64 and 32-bit Arm, so that no copy
 * is made to read it. Freestanding. */
#ifndef POET_SRC_DEVICE_IMAGE_H
#define POET_SRC_DEVICE_IMAGE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "poet/ops.h"

#define POET_IMAGE_MAGIC "POETIMG"  /* and a NUL: 8 bytes */
#define POET_IMAGE_VERSION 5u
#define POET_IMAGE_ALIGN 8u         /* every section starts at a multiple */

/* What a grad node's inputs are, in this order: the incoming gradient,
 * the forward node's inputs 0 and 1, its output, the node after it (a
 * relu's bit mask). */
enum { KR_DY = 1, KR_IN0 = 2, KR_IN1 = 4, KR_OUT = 8, KR_MASK = 16 };

/* The KR_* mask of the gradient of fwd's input wrt (-1: its parameters),
 * from the op registry: what the image writer records and the device checks. */
uint32_t image_reads_of(const poet_node *fwd, int wrt);

/* One node of the training graph: what a kernel needs to run it. */
typedef struct knode {
    uint8_t op;       /* poet_op */
    uint8_t n_inputs;
    uint8_t ndim;     /* of the output */
    int8_t wrt;       /* grad nodes: the input of fwd differentiated, or -1 */
    int32_t fwd;      /* grad nodes: the forward node; otherwise -1 */
    int32_t inputs[POET_MAX_INPUTS];
    int32_t dim[POET_MAX_DIMS];
    poet_attrs attrs;            /* as the graph has them, normalized (poet_graph_add) */
    uint32_t param_at, params;   /* floats in the parameter block; grad nodes: of fwd */
    uint32_t buffer_at, buffers; /* batch norm statistics; grad nodes: of fwd */
    uint32_t numel;              /* of the output */
    uint32_t reads;              /* grad nodes: which inputs are what (KR_*) */
    uint32_t grad_at;            /* its trained parameters' gradients and optimizer state: where they start in
                                    blocks of n_trained floats (poet_param_trained); grad nodes: of fwd */
    uint32_t home[2];            /* where its weights (0) and its bias (1) live: the float where each starts in
                                    the device's resident parameters (RAM), or KHOME_FLASH: read in place from
                                    the image, never written (frozen only); grad nodes: of fwd */
} knode;

/* A parameter tensor that the device reads where the image lies (flash)
 * and never copies: its home[] entry. */
#define KHOME_FLASH UINT32_MAX

/* Part `part` of a node's parameters (0: weights, gamma or operand; 1:
 * bias or beta, poet_param_split): its first float in the parameter
 * vector and its count. */
static inline void knode_part(const knode *n, int part, uint64_t *at, uint64_t *count)
{
    uint64_t w, b;
    poet_param_split((poet_op)n->op, &n->attrs, n->params, &w, &b);
    *at = (uint64_t)n->param_at + (part ? w : 0);
    *count = part ? b : w;
}

/* Of part `part`, the floats that train (poet_param_trained_split). */
static inline uint64_t knode_part_trained(const knode *n, int part)
{
    uint64_t tw, tb;
    poet_param_trained_split((poet_op)n->op, &n->attrs, n->params, &tw, &tb);
    return part ? tb : tw;
}

/* One instruction of a program: the operations of poet_instr_op (checked
 * equal where the host writes them), and the device's own KI_UPDATE: the
 * optimizer step of forward node `node`'s parameters, right after the last
 * instruction that reads them (a fused update; training program only). */
enum { KI_PAGEOUT, KI_COMPUTE, KI_FREE, KI_PAGEIN, KI_WAIT, KI_UPDATE };
enum { KI_FIRST = 1 }; /* flags: the node's own stage (side effects belong here) */

/* Optimizers: poet_optimizer_kind. */
enum { KOPT_SGD, KOPT_ADAM };

typedef struct kinstr {
    uint8_t op;
    uint8_t flags;
    uint16_t node;
    uint32_t buffer;
} kinstr;

typedef struct kbuffer {
    uint64_t offset, bytes;
} kbuffer;

typedef struct kprogram {
    uint32_t n_instr, n_buffers;
    uint32_t instr_at, buffers_at; /* byte offsets in the image */
    uint64_t arena_bytes;
} kprogram;

typedef struct img_header {
    char magic[8];
    uint32_t version, header_bytes;
    uint64_t image_bytes;           /* everything, the CRC-32 included */
    uint32_t graph_hash;            /* poet_instance_hash of the planned graph */
    uint32_t n_nodes, n_forward, loss, input;
    uint32_t rows, classes;
    uint32_t nodes_at, slots_at, params_at, state_at, schedule_at, schedule_bytes;
    uint32_t optimizer;             /* poet_optimizer_kind */
    float lr, momentum, beta1, beta2, eps, weight_decay;
    uint32_t n_trained;             /* floats of the parameters that train: gradients and optimizer state */
    uint32_t channels_at;           /* the channel_select nodes' input channels (uint32, ascending in each), or 0 */
    uint64_t seed;
    uint64_t n_params, n_state;     /* floats: parameters; batch norm statistics */
    uint64_t batch_numel;           /* floats of one batch's input */
    uint64_t storage_bytes;         /* the slots of paged tensors */
    uint64_t workspace_bytes;       /* kernels' scratch (im2col) */
    uint64_t budget_bytes;
    kprogram train, eval;
    char model[32], planner[32];
    uint64_t n_resident;            /* floats of the parameters whose home is RAM (knode.home) */
    uint64_t fused_grad_floats;     /* 0: gradients are persistent (n_trained floats), the update follows the
                                       pass; else the update is fused (KI_UPDATE) and one node's gradients at a
                                       time live in a buffer of this many floats, the largest node's */
} img_header;

/* Floats of gradients the device keeps: every trained one's, or with a
 * fused update the largest node's. */
static inline uint64_t image_grad_floats(const img_header *h)
{
    return h->fused_grad_floats ? h->fused_grad_floats : h->n_trained;
}

/* The memory a device needs for an image with this header (its sizes
 * only: counts, arena, workspace), as poet_dev_open lays it out; false
 * when they overflow. The host's prediction and the device's figure are
 * this one function. */
struct poet_dev_memory; /* poet/device.h */
bool image_memory(const img_header *h, struct poet_dev_memory *need);

/* Of a node's parameters, the convolution or linear weights, which come
 * before its bias: what a partial update chooses among. 0 for other ops. */
static inline uint64_t knode_weights(const knode *n)
{
    uint64_t w, b;
    if (n->op != POET_OP_CONV2D && n->op != POET_OP_LINEAR) return 0;
    poet_param_split((poet_op)n->op, &n->attrs, n->params, &w, &b);
    return w;
}

/* The channel_select after forward node v, which its weight gradient
 * reads (ratio:R), or NULL. */
static inline const knode *knode_select_after(const knode *nodes, uint32_t n_forward, uint32_t v)
{
    return v + 1 < n_forward && nodes[v + 1].op == POET_OP_CHANNEL_SELECT ? &nodes[v + 1] : NULL;
}

/* Entries of the image's channel lists: past the end of the last select's. */
static inline uint64_t knode_channels_listed(const knode *nodes, uint32_t n_forward)
{
    uint64_t end = 0;
    for (uint32_t v = 0; v < n_forward; v++)
        if (nodes[v].op == POET_OP_CHANNEL_SELECT && (uint64_t)nodes[v].attrs.start + (uint64_t)nodes[v].attrs.features > end)
            end = (uint64_t)nodes[v].attrs.start + (uint64_t)nodes[v].attrs.features;
    return end;
}

/* Of a forward node's parameters, the floats that train. */
static inline uint64_t knode_trained(const knode *n)
{
    return poet_param_trained((poet_op)n->op, &n->attrs, n->params);
}

/* The forward node whose parameters a computation of node u reads (u
 * itself, or the forward node of a gradient), or -1 where it reads none:
 * what a fused update must follow. */
static inline int64_t knode_params_read(const knode *nodes, uint32_t n_forward, uint32_t u)
{
    int64_t v = nodes[u].op == POET_OP_GRAD ? nodes[u].fwd : u < n_forward ? (int64_t)u : -1;
    return v >= 0 && nodes[v].params ? v : -1;
}

/* How many of nodes[0..n) have such weights (a patch that re-initializes
 * carries a bound for each). */
static inline uint32_t knode_weight_layers(const knode *nodes, uint32_t n)
{
    uint32_t layers = 0;
    for (uint32_t v = 0; v < n; v++) layers += knode_weights(&nodes[v]) > 0;
    return layers;
}

/* The fan-in of a convolution or linear node (PyTorch's initialization
 * bound is its inverse square root); 1 for other ops. */
static inline uint64_t knode_fan_in(const knode *nodes, const knode *n)
{
    const knode *x = n->n_inputs ? &nodes[n->inputs[0]] : NULL;
    if (n->op == POET_OP_CONV2D) return (uint64_t)(x->dim[1] / n->attrs.groups) * (uint64_t)n->attrs.kh * (uint64_t)n->attrs.kw;
    if (n->op == POET_OP_LINEAR) return (uint64_t)x->dim[x->ndim - 1];
    return 1;
}

/* 1/sqrt(fan_in) in double: the host's (src/runtime/image_write.c), since
 * it needs libm's square root. */
double image_init_bound(const knode *nodes, int v);

/* Fixed layouts: the same bytes on every platform poet builds for. */
_Static_assert(sizeof(knode) == 232, "knode layout");
_Static_assert(sizeof(poet_attrs) == 140, "poet_attrs: 4-byte fields only");
_Static_assert(sizeof(kinstr) == 8, "kinstr layout");
_Static_assert(sizeof(kbuffer) == 16, "kbuffer layout");
_Static_assert(sizeof(kprogram) == 24, "kprogram layout");
_Static_assert(sizeof(img_header) == 296, "img_header layout");
_Static_assert(offsetof(img_header, image_bytes) == 16, "poet_dev_image_length reads it there");

#endif
