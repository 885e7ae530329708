/* Internal: the transcendental functions the kernels need, computed by poet
 * itself from +, -, *, / and bit operations, so that the host and every
 * device get the same bits whatever C library they link (docs/device.md).
 * About 1-2 ulp; freestanding. */
#ifndef POET_SRC_BASE_MATHF_H
#define POET_SRC_BASE_MATHF_H

float poet_expf(float x);
float poet_logf(float x);
float poet_tanhf(float x);
float poet_erff(float x);

/* IEEE 754 requires square roots correctly rounded, so the instruction
 * (vsqrt.f32, sqrtss) gives the same bits everywhere; -fno-math-errno keeps
 * it an instruction. */
static inline float poet_sqrtf(float x) { return __builtin_sqrtf(x); }

#endif
