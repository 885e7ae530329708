/* Internal: device profiles as cJSON objects (also nested in graph files). */
#ifndef POET_SRC_COST_PROFILE_JSON_H
#define POET_SRC_COST_PROFILE_JSON_H

#include <cjson/cJSON.h>

#include "poet/cost.h"

poet_status profile_from_cjson(const cJSON *obj, poet_profile *out, const char *what, poet_err *err);
/* NULL when out of memory. */
cJSON *profile_to_cjson(const poet_profile *d);
/* POET's chipset dict (FLOPS, FLOPS_PER_WATT, ...) as in its reference files. */
poet_status profile_from_poet_chipset(const cJSON *chipset, const char *name, poet_profile *out, poet_err *err);

#endif
