/* The fast planner's covering bounds alone, aggregate, staged and staged
 * whole (milp.h), each with the same time, so that they can be compared with
 * each other and with proven optima (bench/cover_bound.py runs it over the
 * random-graph table).
 *
 * usage: poet-cover-bound INSTANCE.json BUDGET_BYTES RUNTIME_FACTOR [SECONDS]
 * Prints the bounds in joules (JSON; null where not solved in time, where
 * the model has no solution (no schedule meets both budgets), or, for the
 * staged ones, where the model is too large). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "../src/plan/milp.h"
#include "setting.h"

static void print_j(const char *key, double j, const char *end)
{
    if (isfinite(j)) printf("\"%s\": %.12g%s", key, j, end);
    else printf("\"%s\": null%s", key, end);
}

int main(int argc, char **argv)
{
    poet_instance inst;
    poet_problem p;
    int rc = bench_setting(argc, argv, "poet-cover-bound", &inst, &p);
    if (rc) return rc;
    double seconds = argc > 4 ? atof(argv[4]) : 30;
    milp_options mo = {true, true, NULL};
    printf("{");
    print_j("aggregate_j", milp_cover_bound(&p, &mo, COVER_AGGREGATE, seconds, 0), ", ");
    print_j("staged_j", milp_cover_bound(&p, &mo, COVER_STAGED, seconds, 0), ", ");
    print_j("staged_whole_j", milp_cover_bound(&p, &mo, COVER_STAGED_WHOLE, seconds, 0), "}\n");
    poet_problem_free(&p);
    poet_instance_free(&inst);
    return 0;
}
