#define _POSIX_C_SOURCE 200809L
/* poet planners: the registry. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
static const char PLANNERS_HELP[] =
    "usage: poet planners [--json]\n"
    "Lists every planner by name with what it does.\n";

int cmd_planners(int argc, char **argv)
{
    bool json = false;
    int rc = list_opts("planners", PLANNERS_HELP, argc, argv, &json);
    if (rc >= 0) return rc;
    cJSON *arr = json ? cJSON_CreateArray() : NULL;
    for (int i = 0; i < poet_planner_count(); i++) {
        const poet_planner_def *d = poet_planner_info(i);
        bool dflt = strcmp(d->name, poet_planner_default()) == 0;
        if (!json) {
            printf("%-10s %s%s\n", d->name, d->summary, dflt ? " (default)" : "");
            continue;
        }
        cJSON *o = cJSON_CreateObject();
        cJSON_AddItemToArray(arr, o);
        cJSON_AddStringToObject(o, "name", d->name);
        cJSON_AddStringToObject(o, "summary", d->summary);
        cJSON_AddBoolToObject(o, "default", dflt);
    }
    return json ? print_json(arr) : 0;
}
