/* glpk_mip.h for a poet built without GLPK (POET_WITH_GLPK off): no small
 * model is solved here, so CBC solves every covering model. */
#include <math.h>

#include "glpk_mip.h"

small_mip_status glpk_mip_solve(const small_mip *m, double seconds, int max_nodes, double *obj)
{
    (void)m, (void)seconds, (void)max_nodes;
    *obj = NAN;
    return SMALL_MIP_UNSOLVED;
}
