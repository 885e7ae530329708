/* poet emulate's per-node measurements of the board's training steps (the
 * firmware's --times file under --profile): what a calibration fits a
 * profile to, and what the plan's per-op prediction is compared with. */
#ifndef POET_TOOLS_BOARD_TIMES_H
#define POET_TOOLS_BOARD_TIMES_H

#include "session.h"

/* The emulated STM32F405's clock: QEMU counts instructions, not cycles, so
 * a calibration takes one instruction a cycle (docs/devices.md). */
#define BOARD_INSTRUCTIONS_PER_S 168e6
/* RAM the firmware's per-node timers take (--profile): a compute and a transfer time, as doubles. */
#define BOARD_TIMER_BYTES_PER_NODE (2 * sizeof(double))

/* Per step: seconds at BOARD_INSTRUCTIONS_PER_S, and the schedule's counts. */
typedef struct board_times {
    int T;
    double *compute_s, *transfer_s; /* per node */
    int *computes, *transfers;      /* per node: computations; page-outs and page-ins */
    double update_s, other_s, step_s;
} board_times;

/* Reads the firmware's file at path for session s's schedule trained for
 * `steps` steps in step_ticks ticks of instructions_per_tick instructions;
 * 0 or an exit code. */
int board_times_read(const char *path, const session *s, long steps, double step_ticks, double instructions_per_tick,
                     board_times *out);
void board_times_free(board_times *t);

/* "op_instructions": per cost kind (poet_cost_kind; gradients as KIND_grad), the instructions a step
 * the board measured and those the session's profile predicts; and
 * "predicted_instructions_per_step". */
void add_op_instructions_json(cJSON *o, const session *s, const board_times *t);

/* The profile of the session's device calibrated on these measurements,
 * written to path (atomically); 0 or an exit code. */
int write_calibrated_profile(const session *s, const board_times *t, const char *path);

#endif
