#define _POSIX_C_SOURCE 200809L
/* poet models: the zoo. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
static const char MODELS_HELP[] =
    "usage: poet models [--json]\n"
    "Lists the built-in models. `trainable` says whether the runtime can train\n"
    "it; `reference` whether POET's reference instances include it.\n";

int cmd_models(int argc, char **argv)
{
    bool json = false;
    int rc = list_opts("models", MODELS_HELP, argc, argv, &json);
    if (rc >= 0) return rc;
    if (!json) {
        printf("%-15s %-6s %-9s %-9s %s\n", "model", "batch", "trainable", "reference", "description");
        for (int i = 0; i < poet_zoo_count(); i++) {
            const poet_model_info *m = poet_zoo_info(i);
            printf("%-15s %-6d %-9s %-9s %s\n", m->name, m->default_batch, m->trainable ? "yes" : "no",
                   m->reference ? "yes" : "no", m->description);
        }
        return 0;
    }
    cJSON *arr = cJSON_CreateArray();
    for (int i = 0; arr && i < poet_zoo_count(); i++) {
        const poet_model_info *m = poet_zoo_info(i);
        cJSON *o = cJSON_CreateObject();
        cJSON_AddItemToArray(arr, o);
        cJSON_AddStringToObject(o, "name", m->name);
        cJSON_AddStringToObject(o, "description", m->description);
        if (m->dataset)
            cJSON_AddStringToObject(o, "dataset", m->dataset);
        else
            cJSON_AddNullToObject(o, "dataset");
        cJSON_AddNumberToObject(o, "default_batch", m->default_batch);
        cJSON_AddBoolToObject(o, "trainable", m->trainable);
        cJSON_AddBoolToObject(o, "reference", m->reference);
    }
    return print_json(arr);
}
