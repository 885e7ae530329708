#include "setting.h"

#include <stdio.h>
#include <stdlib.h>

int bench_setting(int argc, char **argv, const char *tool, poet_instance *inst, poet_problem *p)
{
    if (argc < 4) {
        fprintf(stderr, "usage: %s INSTANCE.json BUDGET_BYTES RUNTIME_FACTOR [SECONDS]\n", tool);
        return 2;
    }
    poet_err err = {0};
    if (poet_instance_read_file(argv[1], inst, &err)) {
        fprintf(stderr, "%s: %s\n", tool, err.msg);
        return 1;
    }
    if (poet_problem_init(p, inst, strtoull(argv[2], NULL, 10), atof(argv[3]), &err)) {
        fprintf(stderr, "%s: %s\n", tool, err.msg);
        poet_instance_free(inst);
        return 1;
    }
    return 0;
}
