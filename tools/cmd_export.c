#define _POSIX_C_SOURCE 200809L
/* poet export: the device image of a planned model. */
#include <stdio.h>
#include <stdlib.h>

#include "session.h"

static const char EXPORT_HELP[] =
    "usage: poet export (--model NAME | --onnx FILE) --device DEV (--budget BYTES|PCT%|ram | --schedule FILE)\n"
    "                   --out FILE\n"
    "                   [--batch N] [--seed S] [--planner NAME] [--runtime-factor F] [--time-limit S]\n"
    "                   [--runtime-model M]\n"
    "                   [--optimizer sgd|adam] [--lr X] [--chunk N] [--train SPEC] [--json]\n"
    "Plans one training iteration under the budget and writes the device image:\n"
    "the graph's ops and shapes, the schedule as an instruction stream with arena\n"
    "offsets, the initial weights (from --seed) and the memory it takes. One\n"
    "firmware trains any image (include/poet/device.h, examples/firmware/).\n"
    "  --train SPEC  what trains: all, biases, last:N, ratio:R or mask:FILE, then\n"
    "                +frozen-bn, +masks, +ratio:R (docs/partial.md)\n"
RUNTIME_MODEL_HELP
FROZEN_HELP
    "  --chunk N     the kernels' scratch holds im2col chunks of N output positions\n"
    "                (default 16; 1 is the least memory, 0 whole images, the fastest)\n";

int cmd_export(int argc, char **argv)
{
    train_opts t = {0};
    const char *out = NULL, *chunk_s = NULL;
    bool json = false, help = false;
    opt opts[] = {TRAIN_OPTS(t), OUTPUT_OPT("--out", out), {"--chunk", true, &chunk_s, NULL},
                  {"--json", false, NULL, &json}, {NULL, false, NULL, NULL}};
    int rc = parse_opts("export", argc, argv, opts, &help);
    if (rc || help) return help ? (fputs(EXPORT_HELP, stdout), 0) : rc;
    train_values v;
    if ((rc = train_opts_check("export", &t, &v))) return rc;
    if (!out) return usage_error("export", "--out FILE is required", NULL);
    if (!parse_chunk(chunk_s, &v.chunk)) return usage_error("export", "--chunk must be 0 to 2^20 positions, got", chunk_s);
    session s;
    uint8_t *img = NULL;
    size_t len = 0;
    poet_dev_memory need;
    poet_err err = {0};
    if (!(rc = session_plan("export", &s, &t, &v)) && !(rc = export_image(&s, &v, &img, &len, &need)) &&
        poet_write_file_atomic(out, img, len, &err))
        rc = lib_error(&err);
    if (!rc && json) {
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "file", out);
        cJSON_AddNumberToObject(o, "image_bytes", (double)len);
        cJSON_AddNumberToObject(o, "budget_bytes", (double)s.p.budget_bytes);
        add_memory_json(o, &need);
        rc = print_json(o);
    } else if (!rc) {
        printf("wrote %s: %zu bytes; the device needs %llu bytes of RAM (arena %llu, persistent %llu, workspace "
               "%llu, control %llu) and %llu bytes of storage\n",
               out, len, (unsigned long long)need.total_bytes, (unsigned long long)need.arena_bytes,
               (unsigned long long)need.persistent_bytes, (unsigned long long)need.workspace_bytes,
               (unsigned long long)need.control_bytes, (unsigned long long)need.storage_bytes);
    }
    free(img);
    session_free(&s);
    return rc;
}
