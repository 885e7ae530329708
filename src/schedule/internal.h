/* Internal to the schedule module (what the planners see is
 * accounting.h). */
#ifndef POET_SRC_SCHEDULE_INTERNAL_H
#define POET_SRC_SCHEDULE_INTERNAL_H

#include "poet/schedule.h"

#include "accounting.h"

poet_status mem_trace_push(poet_mem_trace *tr, int stage, int node, uint64_t bytes);

#endif
