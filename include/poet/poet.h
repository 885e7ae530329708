/* poet: Private Optimal Energy Training. The public API, one header. */
#ifndef POET_POET_H
#define POET_POET_H

#include "poet/status.h"
#include "poet/graph.h"
#include "poet/cost.h"
#include "poet/schedule.h"
#include "poet/plan.h"
#include "poet/runtime.h"
#include "poet/file.h"
#include "poet/onnx.h"
#include "poet/update.h"
#include "poet/dress.h"
#include "poet/quantize.h"

#define POET_VERSION "0.1.0"

#endif
