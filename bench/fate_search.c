/* The fast planner's fate search alone, without the baselines, the bounds
 * or the exact polish, so that changes to the search itself can be compared
 * (bench/fate_search.py runs two builds of it over the random-graph table).
 *
 * usage: poet-fate-search INSTANCE.json BUDGET_BYTES RUNTIME_FACTOR [SECONDS]
 * Prints the energy of the schedule found, validated (JSON), or null. */
#include <stdio.h>
#include <stdlib.h>

#include "../src/plan/fates.h"
#include "setting.h"

int main(int argc, char **argv)
{
    poet_instance inst;
    poet_problem p;
    poet_err err = {0};
    int rc = bench_setting(argc, argv, "poet-fate-search", &inst, &p);
    if (rc) return rc;
    poet_schedule s = {0};
    double found_at = 0;
    poet_sim sim;
    if (fates_plan(&p, true, true, argc > 4 ? atof(argv[4]) : 4, 0, &s, &found_at, &err)) {
        fprintf(stderr, "poet-fate-search: %s\n", err.msg);
        return 1;
    }
    if (found_at > 0 && !poet_schedule_validate(&p, &s, &err) && !poet_simulate(&p, &s, &sim, NULL, NULL))
        printf("{\"energy_j\": %.12g}\n", sim.energy_j);
    else
        printf("{\"energy_j\": null}\n");
    if (found_at > 0) poet_schedule_free(&s);
    poet_problem_free(&p);
    poet_instance_free(&inst);
    return 0;
}
