/* Multi-bit weights, the packed format (poet/alq.h). Freestanding. */
#include "poet/alq.h"

static uint64_t group_len(uint32_t cols, uint32_t group, uint32_t k)
{
    uint32_t start = k * group;
    return cols - start < group ? cols - start : group;
}

poet_alq_size poet_alq_layer_size(uint32_t rows, uint32_t cols, uint32_t group, const uint8_t *terms)
{
    poet_alq_size s = {0, 0, 0, 0};
    uint32_t per_row = (cols + group - 1) / group;
    for (uint32_t r = 0; r < rows; r++)
        for (uint32_t k = 0; k < per_row; k++) {
            uint64_t n = group_len(cols, group, k), t = terms[(uint64_t)r * per_row + k];
            s.alphas += t;
            s.bit_bytes += t * ((n + 7) / 8);
            s.sign_bits += t * n;
        }
    s.bytes = (uint64_t)rows * per_row + 4 * s.alphas + s.bit_bytes;
    return s;
}

poet_status poet_alq_check(const poet_alq_layer *l, poet_err *err)
{
    if (!l->rows || !l->cols || !l->group)
        return poet_fail(err, POET_ERR_INVALID, "multi-bit layer: %u x %u weights in groups of %u", (unsigned)l->rows,
                         (unsigned)l->cols, (unsigned)l->group);
    uint64_t groups = (uint64_t)l->rows * poet_alq_groups_per_row(l);
    for (uint64_t g = 0; g < groups; g++)
        if (l->terms[g] > POET_ALQ_MAX_TERMS)
            return poet_fail(err, POET_ERR_INVALID, "multi-bit layer: group %u has %u terms, at most %d", (unsigned)g,
                             (unsigned)l->terms[g], POET_ALQ_MAX_TERMS);
    return POET_OK;
}

/* sum over j of (bit j set ? x_j : -x_j) = 2 (sum of the set x_j) - sum x */
static float signed_sum(const uint8_t *bits, const float *x, uint64_t n, float total)
{
    float set = 0;
    for (uint64_t j = 0; j < n; j++)
        if (bits[j / 8] >> (j % 8) & 1) set += x[j];
    return 2 * set - total;
}

void poet_alq_forward(const poet_alq_layer *l, const float *x, uint32_t batch, float *y)
{
    uint32_t per_row = poet_alq_groups_per_row(l);
    for (uint32_t b = 0; b < batch; b++) {
        const float *xb = x + (uint64_t)b * l->cols;
        const float *alpha = l->alpha;
        const uint8_t *bits = l->bits, *terms = l->terms;
        for (uint32_t r = 0; r < l->rows; r++) {
            float s = 0;
            for (uint32_t k = 0; k < per_row; k++, terms++) {
                uint64_t n = group_len(l->cols, l->group, k);
                const float *xg = xb + (uint64_t)k * l->group;
                float total = 0;
                for (uint64_t j = 0; j < n && *terms; j++) total += xg[j];
                for (uint32_t i = 0; i < *terms; i++, alpha++, bits += (n + 7) / 8)
                    s += *alpha * signed_sum(bits, xg, n, total);
            }
            y[(uint64_t)b * l->rows + r] = l->bias ? s + l->bias[r] : s;
        }
    }
}

void poet_alq_dequantize(const poet_alq_layer *l, float *w)
{
    uint32_t per_row = poet_alq_groups_per_row(l);
    const float *alpha = l->alpha;
    const uint8_t *bits = l->bits, *terms = l->terms;
    for (uint32_t r = 0; r < l->rows; r++)
        for (uint32_t k = 0; k < per_row; k++, terms++) {
            uint64_t n = group_len(l->cols, l->group, k);
            float *wg = w + (uint64_t)r * l->cols + (uint64_t)k * l->group;
            for (uint64_t j = 0; j < n; j++) wg[j] = 0;
            for (uint32_t i = 0; i < *terms; i++, alpha++, bits += (n + 7) / 8)
                for (uint64_t j = 0; j < n; j++) wg[j] += (bits[j / 8] >> (j % 8) & 1) ? *alpha : -*alpha;
        }
}
