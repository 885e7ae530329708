/* Internal: the costed graph as a cJSON object, for files that embed it. */
#ifndef POET_SRC_COST_INSTANCE_JSON_H
#define POET_SRC_COST_INSTANCE_JSON_H

#include <cjson/cJSON.h>

#include "poet/cost.h"

/* poet's own graph format; NULL when out of memory. */
cJSON *instance_to_cjson(const poet_instance *inst);
/* Either format; validated. */
poet_status instance_from_cjson(const cJSON *doc, poet_instance *out, poet_err *err);

#endif
