/* Own expf, logf, tanhf, erff (see mathf.h). Every operation is a single
 * IEEE float operation in a fixed order; the build forbids contracting
 * a * b + c into one fused operation (-ffp-contract=off). */
#include "mathf.h"

#include <stdint.h>
#include <string.h>

static float from_bits(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

static uint32_t to_bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

static const float LN2_HI = 0.693359375f, LN2_LO = -2.12194440e-4f; /* hi has few bits: n * hi is exact */

/* 2^n for n in [-126, 127] */
static float pow2i(int n) { return from_bits((uint32_t)(n + 127) << 23); }

float poet_expf(float x)
{
    if (x != x) return x;
    if (x > 88.72283935546875f) return from_bits(0x7f800000u);
    if (x < -103.972084045410156f) return 0.0f;
    float t = x * 1.44269502162933349609f;
    int n = (int)(t + (t >= 0 ? 0.5f : -0.5f));
    float r = (x - (float)n * LN2_HI) - (float)n * LN2_LO; /* |r| <= ln2 / 2 */
    float p = 1.0f / 5040.0f;
    p = p * r + 1.0f / 720.0f;
    p = p * r + 1.0f / 120.0f;
    p = p * r + 1.0f / 24.0f;
    p = p * r + 1.0f / 6.0f;
    p = p * r + 0.5f;
    p = p * r + 1.0f;
    p = p * r + 1.0f;
    if (n > 127) return p * pow2i(127) * pow2i(n - 127);
    if (n < -126) return p * pow2i(-100) * pow2i(n + 100); /* the last product rounds into the subnormals */
    return p * pow2i(n);
}

float poet_logf(float x)
{
    if (x != x || x < 0) return from_bits(0x7fc00000u);
    if (x == 0) return from_bits(0xff800000u);
    uint32_t u = to_bits(x);
    if (u >= 0x7f800000u) return x; /* +inf */
    int e = 0;
    if (u < 0x00800000u) { /* subnormal: scale into the normal range */
        x *= 8388608.0f;
        u = to_bits(x);
        e = -23;
    }
    e += (int)(u >> 23) - 127;
    float m = from_bits((u & 0x007fffffu) | 0x3f800000u); /* [1, 2) */
    if (m > 1.41421356237f) {
        m *= 0.5f;
        e++;
    }
    float f = m - 1.0f, s = f / (2.0f + f), s2 = s * s; /* log(m) = 2 atanh(s) */
    float p = 2.0f / 9.0f;
    p = p * s2 + 2.0f / 7.0f;
    p = p * s2 + 2.0f / 5.0f;
    p = p * s2 + 2.0f / 3.0f;
    p = p * s2 + 2.0f;
    float lm = p * s;
    return (float)e * LN2_HI + (lm + (float)e * LN2_LO);
}

float poet_tanhf(float x)
{
    if (x != x) return x;
    float a = x < 0 ? -x : x, r;
    if (a > 9.0f) {
        r = 1.0f;
    } else if (a >= 0.5f) {
        r = 1.0f - 2.0f / (poet_expf(2.0f * a) + 1.0f);
    } else { /* Taylor series to x^15: below 1e-8 relative at 0.5 */
        float z = a * a;
        float p = -929569.0f / 638512875.0f;
        p = p * z + 21844.0f / 6081075.0f;
        p = p * z - 1382.0f / 155925.0f;
        p = p * z + 62.0f / 2835.0f;
        p = p * z - 17.0f / 315.0f;
        p = p * z + 2.0f / 15.0f;
        p = p * z - 1.0f / 3.0f;
        r = a + a * z * p;
    }
    return x < 0 ? -r : r;
}

/* erf by its Maclaurin series below 1, and above by erfc's continued
 * fraction exp(-a^2) / sqrt(pi) / (a + (1/2) / (a + 1 / (a + (3/2) / ...))),
 * evaluated from a fixed depth; 1.0 from 4 on, where erfc < 2e-8. */
float poet_erff(float x)
{
    if (x != x) return x;
    float a = x < 0 ? -x : x, r;
    if (a < 1.0f) { /* 2/sqrt(pi) sum (-1)^n a^(2n+1) / (n! (2n+1)) */
        float z = a * a, term = a, sum = a;
        for (int n = 1; n < 16; n++) {
            term = term * -z / (float)n;
            sum = sum + term / (float)(2 * n + 1);
        }
        r = 1.12837916709551257f * sum;
    } else if (a < 4.0f) {
        float t = a;
        for (int k = 60; k >= 1; k--) t = a + (0.5f * (float)k) / t;
        r = 1.0f - poet_expf(-a * a) * 0.564189583547756287f / t;
    } else {
        r = 1.0f;
    }
    return x < 0 ? -r : r;
}
