/* ALQ's group arithmetic (poet/quantize.h). */
#include "poet/quantize.h"

#include <math.h>
#include <string.h>

static double code_of(const int8_t *codes, uint32_t I, uint32_t j, uint32_t i) { return codes[(uint64_t)j * I + i]; }

/* Solves the I x I system m a = v in place (Gaussian elimination with
 * partial pivoting); a pivot below tol makes its unknown 0. */
static bool solve(double m[POET_ALQ_MAX_TERMS][POET_ALQ_MAX_TERMS], double *v, uint32_t I, double tol, double *a)
{
    bool ok = true;
    bool dead[POET_ALQ_MAX_TERMS] = {false};
    for (uint32_t c = 0; c < I; c++) {
        uint32_t p = c;
        for (uint32_t r = c + 1; r < I; r++)
            if (fabs(m[r][c]) > fabs(m[p][c])) p = r;
        if (fabs(m[p][c]) <= tol) {
            dead[c] = true, ok = false;
            continue;
        }
        if (p != c) {
            for (uint32_t k = 0; k < I; k++) {
                double t = m[c][k];
                m[c][k] = m[p][k], m[p][k] = t;
            }
            double t = v[c];
            v[c] = v[p], v[p] = t;
        }
        for (uint32_t r = 0; r < I; r++) {
            if (r == c || m[r][c] == 0) continue;
            double f = m[r][c] / m[c][c];
            for (uint32_t k = c; k < I; k++) m[r][k] -= f * m[c][k];
            v[r] -= f * v[c];
        }
    }
    for (uint32_t c = 0; c < I; c++) a[c] = dead[c] ? 0 : v[c] / m[c][c];
    return ok;
}

bool poet_alq_refit(const int8_t *codes, uint32_t n, uint32_t I, const float *t, const float *h, double *alpha)
{
    double m[POET_ALQ_MAX_TERMS][POET_ALQ_MAX_TERMS] = {{0}}, v[POET_ALQ_MAX_TERMS] = {0}, scale = 0;
    for (uint32_t j = 0; j < n; j++) {
        double hj = h ? h[j] : 1.0;
        scale += hj;
        for (uint32_t i = 0; i < I; i++) {
            v[i] += hj * code_of(codes, I, j, i) * t[j];
            for (uint32_t k = 0; k < I; k++) m[i][k] += hj * code_of(codes, I, j, i) * code_of(codes, I, j, k);
        }
    }
    return solve(m, v, I, 1e-9 * (scale > 0 ? scale : 1), alpha);
}

/* Scales positive: a negative one and its term's signs change together. */
static void make_positive(int8_t *codes, uint32_t n, uint32_t I, double *alpha)
{
    for (uint32_t i = 0; i < I; i++)
        if (alpha[i] < 0) {
            alpha[i] = -alpha[i];
            for (uint32_t j = 0; j < n; j++) codes[(uint64_t)j * I + i] = (int8_t)-codes[(uint64_t)j * I + i];
        }
}

static double residual(const float *w, const int8_t *codes, uint32_t I, const double *alpha, uint32_t terms, uint32_t j)
{
    double s = w[j];
    for (uint32_t k = 0; k < terms; k++) s -= alpha[k] * code_of(codes, I, j, k);
    return s;
}

uint32_t poet_alq_init_group(const float *w, uint32_t n, uint32_t I, int8_t *codes, double *alpha)
{
    uint32_t used = 0;
    for (uint32_t i = 0; i < I; i++) alpha[i] = 0;
    memset(codes, 1, (size_t)n * I);
    for (uint32_t i = 0; i < I; i++) {
        double largest = 0;
        for (uint32_t j = 0; j < n; j++) {
            double r = residual(w, codes, I, alpha, i, j);
            codes[(uint64_t)j * I + i] = r >= 0 ? 1 : -1;
            largest = fmax(largest, fabs(r));
        }
        if (largest <= 1e-30) break;
        /* the least-squares refit of the first i + 1 scales (rows of codes are I wide) */
        double m[POET_ALQ_MAX_TERMS][POET_ALQ_MAX_TERMS] = {{0}}, v[POET_ALQ_MAX_TERMS] = {0};
        for (uint32_t j = 0; j < n; j++)
            for (uint32_t p = 0; p <= i; p++) {
                v[p] += code_of(codes, I, j, p) * w[j];
                for (uint32_t q = 0; q <= i; q++) m[p][q] += code_of(codes, I, j, p) * code_of(codes, I, j, q);
            }
        solve(m, v, i + 1, 1e-9 * n, alpha);
        used = i + 1;
    }
    for (uint32_t j = 0; j < n; j++)
        for (uint32_t i = used; i < I; i++) codes[(uint64_t)j * I + i] = 1;
    make_positive(codes, n, I, alpha);
    return used;
}

/* ---- nearest codes ---- */

static double code_value(const double *alpha, uint32_t I, unsigned mask)
{
    double s = 0;
    for (uint32_t i = 0; i < I; i++) s += (mask >> i & 1) ? alpha[i] : -alpha[i];
    return s;
}

void poet_alq_nearest_codes(const double *alpha, uint32_t I, const float *t, uint32_t n, int8_t *codes,
                            double *values, uint8_t *masks)
{
    unsigned count = 1u << I;
    for (unsigned m = 0; m < count; m++) { /* insertion sort by value: at most 64 codes */
        double v = code_value(alpha, I, m);
        unsigned k = m;
        for (; k > 0 && values[k - 1] > v; k--) values[k] = values[k - 1], masks[k] = masks[k - 1];
        values[k] = v, masks[k] = (uint8_t)m;
    }
    for (uint32_t j = 0; j < n; j++) {
        unsigned lo = 0, hi = count; /* first value >= t */
        while (lo < hi) {
            unsigned mid = (lo + hi) / 2;
            if (values[mid] < t[j]) lo = mid + 1;
            else hi = mid;
        }
        unsigned best = lo == count ? count - 1 : lo;
        if (lo > 0 && (lo == count || t[j] - values[lo - 1] <= values[lo] - t[j])) best = lo - 1;
        for (uint32_t i = 0; i < I; i++) codes[(uint64_t)j * I + i] = (masks[best] >> i & 1) ? 1 : -1;
    }
}

/* ---- pruning ---- */

static bool prune_before(const double *dl, uint64_t a, uint64_t b) { return dl[a] < dl[b] || (dl[a] == dl[b] && a < b); }

static void sift(const double *dl, uint64_t *h, uint64_t at, uint64_t n)
{
    for (;;) {
        uint64_t c = 2 * at + 1;
        if (c >= n) return;
        if (c + 1 < n && prune_before(dl, h[c], h[c + 1])) c++;
        if (!prune_before(dl, h[at], h[c])) return;
        uint64_t t = h[at];
        h[at] = h[c], h[c] = t;
        at = c;
    }
}

uint64_t poet_alq_pick_prune(const double *dl, uint64_t n, uint64_t count, uint8_t *remove, uint64_t *order)
{
    for (uint64_t i = 0; i < n; i++) order[i] = i, remove[i] = 0;
    for (uint64_t i = n / 2; i-- > 0;) sift(dl, order, i, n);
    for (uint64_t m = n; m > 1; m--) {
        uint64_t t = order[0];
        order[0] = order[m - 1], order[m - 1] = t;
        sift(dl, order, 0, m - 1);
    }
    uint64_t k = count < n ? count : n;
    for (uint64_t i = 0; i < k; i++) remove[order[i]] = 1;
    return k;
}
