/* cbc.h for a poet built without COIN-OR (POET_WITH_CBC off): every solve
 * ends with no answer, as one that ran out of time does, so the planners
 * go on with what else they have (fast: the fate search, the baselines and
 * GLPK's covering bounds); the milp planner is refused. */
#include "cbc.h"

#include <math.h>

/* A solve that ended without an answer: no solution, no bound. */
static void nothing(solved *out) { *out = (solved){.ended = true, .obj = NAN, .bound = NAN}; }

void cbc_solve_apart(const solve_job *job, solved *out)
{
    nothing(out);
    if (job->here) job->here(job->here_ctx, job->deadline, out);
}

void clp_solve_relaxation(const lp *l, double seconds, double obj_scale, solved *out)
{
    (void)l, (void)seconds, (void)obj_scale;
    nothing(out);
}

bool cbc_available(void) { return false; }
