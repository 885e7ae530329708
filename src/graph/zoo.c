/* The model zoo. The paper's models reproduce the layer lists of POET's
 * poet/architectures/ files in the original code (the same layers, order and
 * shapes, quirks included, so that our forward nodes match the reference
 * instances); bert and transformer use real attention primitives
 * (docs/graph.md). The small models are meant to be trained here. */
#include <stdio.h>
#include <string.h>

#include "poet/graph.h"

static int add1(poet_graph *g, poet_op op, int x, const poet_attrs *a)
{
    return poet_graph_add(g, op, &x, 1, a, NULL);
}

static int input4(poet_graph *g, int64_t c, int64_t h, int64_t w)
{
    poet_attrs a = {.ndim = 4, .dim = {g->batch, (int32_t)c, (int32_t)h, (int32_t)w}};
    return poet_graph_add(g, POET_OP_INPUT, NULL, 0, &a, "input");
}

static int input2(poet_graph *g, int64_t rows, int64_t features)
{
    poet_attrs a = {.ndim = 2, .dim = {(int32_t)rows, (int32_t)features}};
    return poet_graph_add(g, POET_OP_INPUT, NULL, 0, &a, "input");
}

static int conv(poet_graph *g, int x, int cout, int k, int stride, int pad)
{
    poet_attrs a = {.features = cout, .kernel = k, .stride = stride, .pad = pad};
    return add1(g, POET_OP_CONV2D, x, &a);
}

static int bn(poet_graph *g, int x) { return add1(g, POET_OP_BATCHNORM2D, x, NULL); }
static int relu(poet_graph *g, int x) { return add1(g, POET_OP_RELU, x, NULL); }
static int flatten(poet_graph *g, int x) { return add1(g, POET_OP_FLATTEN, x, NULL); }

static int pool(poet_graph *g, poet_op op, int x, int k, int stride)
{
    poet_attrs a = {.kernel = k, .stride = stride};
    return add1(g, op, x, &a);
}

static int linear(poet_graph *g, int x, int out)
{
    poet_attrs a = {.features = out};
    return add1(g, POET_OP_LINEAR, x, &a);
}

static int dropout(poet_graph *g, int x, float p)
{
    poet_attrs a = {.p = p};
    return add1(g, POET_OP_DROPOUT, x, &a);
}

static int add2(poet_graph *g, poet_op op, int x, int y, const poet_attrs *a)
{
    int in[2] = {x, y};
    return poet_graph_add(g, op, in, 2, a, NULL);
}

static int loss(poet_graph *g, int logits) { return add1(g, POET_OP_SOFTMAX_CE, logits, NULL); }

/* ---- POET's models ---- */

static int build_linear(poet_graph *g)
{
    static const int widths[] = {10, 120, 100, 200, 10, 10};
    int x = input2(g, g->batch, 784);
    for (size_t i = 0; i < sizeof widths / sizeof *widths; i++) x = relu(g, linear(g, x, widths[i]));
    return loss(g, x);
}

static int build_vgg16(poet_graph *g, int size, int classes)
{
    /* output channels per conv; 0 is a 2x2 max pool */
    static const int plan[] = {64, 64, 0, 128, 128, 0, 256, 256, 256, 0, 512, 512, 512, 0, 512, 512, 512, 0};
    int x = input4(g, 3, size, size);
    for (size_t i = 0; i < sizeof plan / sizeof *plan; i++)
        x = plan[i] ? relu(g, conv(g, x, plan[i], 3, 1, 1)) : pool(g, POET_OP_MAXPOOL2D, x, 2, 2);
    x = flatten(g, x);
    x = dropout(g, relu(g, linear(g, x, 4096)), 0.5f);
    x = dropout(g, relu(g, linear(g, x, 4096)), 0.5f);
    return loss(g, linear(g, x, classes));
}

/* POET's ImageNet basic block: the skip joins relu1 and bn2 inside the block. */
static int resnet_block(poet_graph *g, int x, int planes, int stride)
{
    int r1 = relu(g, bn(g, conv(g, x, planes, 3, stride, 1)));
    int b2 = bn(g, conv(g, r1, planes, 3, 1, 1));
    return relu(g, add2(g, POET_OP_ADD, r1, b2, NULL));
}

/* POET's bottleneck: the skip joins bn3 and relu1 (zero-padded in the paper). */
static int resnet_bottleneck(poet_graph *g, int x, int planes, int expand, int stride)
{
    int r1 = relu(g, bn(g, conv(g, x, planes, 1, stride, 0)));
    int r2 = relu(g, bn(g, conv(g, r1, planes, 3, 1, 1)));
    int b3 = bn(g, conv(g, r2, expand, 1, 1, 0));
    return relu(g, add2(g, POET_OP_ADD, b3, r1, NULL));
}

static int resnet_imagenet_stem(poet_graph *g)
{
    int x = input4(g, 3, 224, 224);
    return pool(g, POET_OP_MAXPOOL2D, bn(g, conv(g, x, 64, 7, 2, 3)), 3, 2);
}

static int resnet_head(poet_graph *g, int x, int window, int classes)
{
    x = flatten(g, pool(g, POET_OP_AVGPOOL2D, x, window, 1));
    return loss(g, linear(g, x, classes));
}

static int build_resnet18(poet_graph *g)
{
    int x = resnet_imagenet_stem(g);
    static const int planes[] = {64, 64, 128, 128, 256, 256, 512, 512};
    for (int i = 0; i < 8; i++) x = resnet_block(g, x, planes[i], (i % 2 == 0 && i > 0) ? 2 : 1);
    return resnet_head(g, x, 7, 1000);
}

static int build_resnet50(poet_graph *g)
{
    int x = resnet_imagenet_stem(g);
    static const int blocks[] = {3, 4, 6, 3}, planes[] = {64, 128, 256, 512};
    for (int s = 0; s < 4; s++)
        for (int b = 0; b < blocks[s]; b++) x = resnet_bottleneck(g, x, planes[s], 4 * planes[s], (b == 0 && s > 0) ? 2 : 1);
    return resnet_head(g, x, 7, 1000);
}

/* POET's CIFAR block: a conv shortcut in every block. */
static int resnet_cifar_block(poet_graph *g, int x, int planes, int stride)
{
    int r1 = relu(g, bn(g, conv(g, x, planes, 3, stride, 1)));
    int r2 = relu(g, bn(g, conv(g, r1, planes, 3, 1, 1)));
    int b3 = bn(g, conv(g, x, planes, 3, stride, 1));
    return relu(g, add2(g, POET_OP_ADD, r2, b3, NULL));
}

static int build_resnet18_cifar(poet_graph *g)
{
    int x = bn(g, conv(g, input4(g, 3, 32, 32), 16, 3, 1, 1));
    static const int planes[] = {16, 16, 32, 32, 64, 64};
    for (int i = 0; i < 6; i++) x = resnet_cifar_block(g, x, planes[i], (i % 2 == 0 && i > 0) ? 2 : 1);
    return resnet_head(g, x, 8, 10);
}

/* torchvision's ResNet-18 as its ONNX export lays it out (bias-free convs,
 * padded max pool, 1x1 downsample shortcuts), so that an imported
 * torchvision model can be compared with the zoo node by node
 * (docs/graph.md). */
static int conv_nobias(poet_graph *g, int x, int cout, int k, int stride, int pad)
{
    poet_attrs a = {.features = cout, .kernel = k, .stride = stride, .pad = pad, .flags = POET_ATTR_NO_BIAS};
    return add1(g, POET_OP_CONV2D, x, &a);
}

static int torchvision_block(poet_graph *g, int x, int cin, int planes, int stride)
{
    int y = relu(g, bn(g, conv_nobias(g, x, planes, 3, stride, 1)));
    y = bn(g, conv_nobias(g, y, planes, 3, 1, 1));
    int skip = stride != 1 || cin != planes ? bn(g, conv_nobias(g, x, planes, 1, stride, 0)) : x;
    return relu(g, add2(g, POET_OP_ADD, y, skip, NULL));
}

static int build_resnet18_torchvision(poet_graph *g)
{
    int x = relu(g, bn(g, conv_nobias(g, input4(g, 3, 224, 224), 64, 7, 2, 3)));
    poet_attrs mp = {.kernel = 3, .stride = 2, .pad = 1};
    x = add1(g, POET_OP_MAXPOOL2D, x, &mp);
    static const int planes[] = {64, 64, 128, 128, 256, 256, 512, 512};
    for (int i = 0, cin = 64; i < 8; cin = planes[i], i++) x = torchvision_block(g, x, cin, planes[i], i % 2 == 0 && i > 0 ? 2 : 1);
    poet_attrs keep = {.flags = POET_ATTR_KEEPDIMS};
    x = flatten(g, add1(g, POET_OP_GLOBAL_AVGPOOL, x, &keep));
    return loss(g, linear(g, x, 1000));
}

/* ---- transformers: BERT-base blocks (post-layernorm) ---- */
enum { BERT_SEQ = 512, BERT_HIDDEN = 768, BERT_HEADS = 12 };

static int encoder_block(poet_graph *g, int x, int hidden, int heads, int seq)
{
    poet_attrs at = {.heads = heads, .seq = seq};
    int q = linear(g, x, hidden), k = linear(g, x, hidden), v = linear(g, x, hidden);
    poet_attrs last = {.axis = -1};
    int p = add1(g, POET_OP_SOFTMAX, add2(g, POET_OP_ATTN_SCORES, q, k, &at), &last);
    int o = linear(g, add2(g, POET_OP_ATTN_CONTEXT, p, v, &at), hidden);
    int h = add1(g, POET_OP_LAYERNORM, add2(g, POET_OP_ADD, x, o, NULL), NULL);
    int f = linear(g, add1(g, POET_OP_GELU, linear(g, h, 4 * hidden), NULL), hidden);
    return add1(g, POET_OP_LAYERNORM, add2(g, POET_OP_ADD, h, f, NULL), NULL);
}

static int build_encoder(poet_graph *g, int blocks)
{
    int x = input2(g, (int64_t)g->batch * BERT_SEQ, BERT_HIDDEN);
    for (int i = 0; i < blocks; i++) x = encoder_block(g, x, BERT_HIDDEN, BERT_HEADS, BERT_SEQ);
    return loss(g, x); /* POET has no output head either: the loss reads the last block */
}

static int build_bert(poet_graph *g) { return build_encoder(g, 12); }
static int build_transformer(poet_graph *g) { return build_encoder(g, 1); }
static int build_vgg16_imagenet(poet_graph *g) { return build_vgg16(g, 224, 1000); }
static int build_vgg16_cifar(poet_graph *g) { return build_vgg16(g, 32, 10); }

/* ---- small models trained here ---- */

static int build_mlp_digits(poet_graph *g)
{
    int x = relu(g, linear(g, input2(g, g->batch, 64), 32));
    return loss(g, linear(g, x, 10));
}

/* Deep Partial Updating's MLP: 84480 weights, 522 biases. */
static int build_mlp_digits_wide(poet_graph *g)
{
    int x = relu(g, linear(g, input2(g, g->batch, 64), 256));
    x = relu(g, linear(g, x, 256));
    return loss(g, linear(g, x, 10));
}

/* Two conv-bn-relu pairs per resolution, so that training needs several
 * times the memory of its largest layer: a model where a tight budget bites. */
static int build_cnn_digits(poet_graph *g)
{
    int x = input4(g, 1, 8, 8);
    x = relu(g, bn(g, conv(g, x, 8, 3, 1, 1)));
    x = pool(g, POET_OP_MAXPOOL2D, relu(g, bn(g, conv(g, x, 8, 3, 1, 1))), 2, 2);
    x = relu(g, bn(g, conv(g, x, 16, 3, 1, 1)));
    x = relu(g, bn(g, conv(g, x, 16, 3, 1, 1)));
    return loss(g, linear(g, flatten(g, x), 10));
}

static int build_mlp_fashion(poet_graph *g)
{
    int x = relu(g, linear(g, input2(g, g->batch, 784), 128));
    return loss(g, linear(g, x, 10));
}

static int build_cnn_fashion(poet_graph *g)
{
    int x = input4(g, 1, 28, 28);
    x = pool(g, POET_OP_MAXPOOL2D, relu(g, bn(g, conv(g, x, 16, 3, 1, 1))), 2, 2);
    x = pool(g, POET_OP_MAXPOOL2D, relu(g, bn(g, conv(g, x, 32, 3, 1, 1))), 2, 2);
    x = dropout(g, relu(g, linear(g, flatten(g, x), 64)), 0.25f);
    return loss(g, linear(g, x, 10));
}

/* A real residual block: identity shortcut, or a strided 1x1 conv when the
 * shape changes. */
static int residual_block(poet_graph *g, int x, int cin, int planes, int stride)
{
    int y = relu(g, bn(g, conv(g, x, planes, 3, stride, 1)));
    y = bn(g, conv(g, y, planes, 3, 1, 1));
    int skip = (stride != 1 || cin != planes) ? bn(g, conv(g, x, planes, 1, stride, 0)) : x;
    return relu(g, add2(g, POET_OP_ADD, y, skip, NULL));
}

static int build_resnet_small(poet_graph *g)
{
    int x = relu(g, bn(g, conv(g, input4(g, 1, 28, 28), 8, 3, 1, 1)));
    x = residual_block(g, x, 8, 8, 1);
    x = residual_block(g, x, 8, 16, 2);
    x = add1(g, POET_OP_GLOBAL_AVGPOOL, residual_block(g, x, 16, 16, 1), NULL);
    return loss(g, linear(g, x, 10));
}

typedef struct zoo_entry {
    poet_model_info info;
    int (*build)(poet_graph *g);
} zoo_entry;

static const zoo_entry ZOO[] = {
    {{"linear", "POET's MLP: 784-10-120-100-200-10-10 with ReLUs", NULL, 1, false, true}, build_linear},
    {{"vgg16", "VGG-16, 224x224 ImageNet, 1000 classes", NULL, 1, false, true}, build_vgg16_imagenet},
    {{"vgg16_cifar", "VGG-16, 32x32 CIFAR-10", NULL, 1, false, true}, build_vgg16_cifar},
    {{"resnet18", "ResNet-18 as in POET, 224x224 ImageNet", NULL, 1, false, true}, build_resnet18},
    {{"resnet18_cifar", "ResNet-18 as in POET for CIFAR-10: 16/32/64 channels, conv shortcuts", NULL, 1, false,
      true},
     build_resnet18_cifar},
    {{"resnet50", "ResNet-50 as in POET, 224x224 ImageNet", NULL, 1, false, true}, build_resnet50},
    {{"resnet18_torchvision", "ResNet-18 as torchvision builds it (its ONNX export, node by node)", NULL, 1, false,
      false},
     build_resnet18_torchvision},
    {{"bert", "BERT-base: 12 encoder blocks, seq 512, hidden 768, 12 heads", NULL, 1, false, true}, build_bert},
    {{"transformer", "one BERT-base encoder block", NULL, 1, false, true}, build_transformer},
    {{"mlp_digits", "MLP 64-32-10 for the 8x8 digits", "digits", 32, true, false}, build_mlp_digits},
    {{"mlp_digits_wide", "MLP 64-256-256-10 for the 8x8 digits (partial updating's)", "digits", 32, true, false},
     build_mlp_digits_wide},
    {{"cnn_digits", "CNN (4 conv+bn+relu, 1 pool, 1 linear) for the 8x8 digits", "digits", 32, true, false}, build_cnn_digits},
    {{"mlp_fashion", "MLP 784-128-10 for Fashion-MNIST", "fashion-mnist", 32, true, false}, build_mlp_fashion},
    {{"cnn_fashion", "CNN (2 conv+bn+pool, 2 linear) for Fashion-MNIST", "fashion-mnist", 32, true, false},
     build_cnn_fashion},
    {{"resnet_small", "small ResNet (8-16 channels, 3 residual blocks) for Fashion-MNIST", "fashion-mnist", 32, true, false},
     build_resnet_small},
};

enum { ZOO_COUNT = (int)(sizeof ZOO / sizeof *ZOO) };

int poet_zoo_count(void) { return ZOO_COUNT; }

const poet_model_info *poet_zoo_info(int i) { return i >= 0 && i < ZOO_COUNT ? &ZOO[i].info : NULL; }

static const zoo_entry *zoo_find(const char *name)
{
    for (int i = 0; i < ZOO_COUNT; i++)
        if (name && strcmp(ZOO[i].info.name, name) == 0) return &ZOO[i];
    return NULL;
}

const poet_model_info *poet_zoo_find(const char *name)
{
    const zoo_entry *e = zoo_find(name);
    return e ? &e->info : NULL;
}

poet_status poet_zoo_build(const char *name, int batch, poet_graph *out, poet_err *err)
{
    const zoo_entry *e = zoo_find(name);
    if (!e) return poet_fail(err, POET_ERR_NOT_FOUND, "unknown model '%s' (see `poet models`)", name ? name : "");
    poet_status st = poet_graph_init(out, name, batch > 0 ? batch : e->info.default_batch, err);
    if (st) return st;
    int loss_node = e->build(out);
    if (loss_node < 0) {
        st = poet_fail(err, out->err.status, "%s", out->err.msg);
        poet_graph_free(out);
        return st;
    }
    if ((st = poet_graph_autodiff(out, loss_node, err))) poet_graph_free(out);
    return st;
}
