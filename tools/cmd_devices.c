#define _POSIX_C_SOURCE 200809L
/* poet devices: the built-in device profiles. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
static const char DEVICES_HELP[] =
    "usage: poet devices [--json]\n"
    "Lists the built-in device profiles. A profile of your own is a JSON file\n"
    "(docs/devices.md) that any --device option accepts as a path.\n";

int cmd_devices(int argc, char **argv)
{
    bool json = false;
    int rc = list_opts("devices", DEVICES_HELP, argc, argv, &json);
    if (rc >= 0) return rc;
    if (!json) {
        printf("%-11s %12s %12s %10s %10s %11s %11s  %s\n", "device", "MFLOP/s", "MFLOP/J", "in MB/s", "out MB/s",
               "RAM", "firmware", "description");
        for (int i = 0; i < poet_profile_count(); i++) {
            const poet_profile *d = poet_profile_builtin(i);
            char ram[32] = "-", fixed[32] = "-";
            if (d->ram_bytes) format_bytes(d->ram_bytes, ram);
            if (d->fixed_ram_bytes) format_bytes(d->fixed_ram_bytes, fixed);
            printf("%-11s %12.3f %12.3f %10.3f %10.3f %11s %11s  %s\n", d->name, d->flops_per_s / 1e6,
                   d->flops_per_j / 1e6, d->pagein_bytes_per_s / 1e6, d->pageout_bytes_per_s / 1e6, ram, fixed,
                   d->description);
        }
        printf("RAM: all of it; firmware: what the firmware keeps of it (static data, stack); --budget ram plans\n"
               "the rest, less what training holds beside the activations.\n");
        return 0;
    }
    cJSON *arr = cJSON_CreateArray();
    for (int i = 0; arr && i < poet_profile_count(); i++) {
        const poet_profile *d = poet_profile_builtin(i);
        cJSON *o = cJSON_CreateObject();
        cJSON_AddItemToArray(arr, o);
        cJSON_AddStringToObject(o, "name", d->name);
        cJSON_AddStringToObject(o, "description", d->description);
        cJSON_AddNumberToObject(o, "flops_per_s", d->flops_per_s);
        cJSON_AddNumberToObject(o, "flops_per_j", d->flops_per_j);
        cJSON_AddNumberToObject(o, "pagein_latency_s", d->pagein_latency_s);
        cJSON_AddNumberToObject(o, "pagein_bytes_per_s", d->pagein_bytes_per_s);
        cJSON_AddNumberToObject(o, "pageout_latency_s", d->pageout_latency_s);
        cJSON_AddNumberToObject(o, "pageout_bytes_per_s", d->pageout_bytes_per_s);
        cJSON_AddNumberToObject(o, "memory_power_w", d->memory_power_w);
        cJSON_AddNumberToObject(o, "power_w", d->power_w);
        cJSON_AddNumberToObject(o, "bytes_per_element", d->bytes_per_element);
        cJSON_AddNumberToObject(o, "ram_bytes", (double)d->ram_bytes);
        cJSON_AddNumberToObject(o, "flash_bytes", (double)d->flash_bytes);
        cJSON_AddNumberToObject(o, "fixed_ram_bytes", (double)d->fixed_ram_bytes);
    }
    return print_json(arr);
}
