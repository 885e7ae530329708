/* One libFuzzer target for every parser that reads what users hand poet:
 * graph files (poet's and POET's), device profiles, schedules in JSON and
 * binary. A schedule that parses with its graph is also validated and, when
 * valid, simulated. Built with -DPOET_FUZZ=ON (clang); replay.c runs the
 * corpus as a regression test in every build. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "poet/poet.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void exercise_schedule(poet_schedule *s, poet_instance *g)
{
    poet_problem p;
    if (g->T && !poet_problem_init(&p, g, s->budget_bytes, s->runtime_factor, NULL)) {
        poet_sim sim;
        if (!poet_schedule_validate(&p, s, NULL)) poet_simulate(&p, s, &sim, NULL, NULL);
        poet_problem_free(&p);
    }
    uint8_t *bin = NULL;
    size_t len = 0;
    if (!poet_schedule_encode(s, &bin, &len, NULL)) {
        poet_schedule back;
        if (poet_schedule_decode(bin, len, &back, NULL) || !poet_schedule_equal(s, &back)) abort();
        poet_schedule_free(&back);
    }
    free(bin);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *text = (const char *)data;
    poet_instance inst;
    if (!poet_instance_parse_json(text, size, &inst, NULL)) {
        poet_instance_stats st;
        poet_instance_stats_compute(&inst, &st, NULL);
        poet_instance_free(&inst);
    }
    poet_device dev;
    poet_device_parse_json(text, size, &dev, NULL);
    poet_schedule s;
    poet_instance g;
    if (!poet_schedule_parse_json(text, size, &s, &g, NULL)) {
        exercise_schedule(&s, &g);
        poet_schedule_free(&s);
        poet_instance_free(&g);
    }
    if (!poet_schedule_decode(data, size, &s, NULL)) poet_schedule_free(&s);
    poet_checkpoint_meta meta;
    size_t state_len;
    poet_checkpoint_parse(data, size, &meta, &state_len, NULL);
    return 0;
}
