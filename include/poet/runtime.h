/* poet: the training runtime, by concern: poet/storage.h (where tensors
 * page to), poet/engine.h (the device image, the optimizer and the engine
 * that runs a schedule) and poet/train.h (data sets, checkpoints, the
 * training loop). */
#ifndef POET_RUNTIME_H
#define POET_RUNTIME_H

#include "poet/engine.h"
#include "poet/storage.h"
#include "poet/train.h"

#endif
