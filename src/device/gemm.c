/* The device library's one product (kernel_ops.h), with register tiles
 * (an AVX2 clone on x86-64). */
#include "kernel_ops.h"

#if defined(__x86_64__)
enum { VL = 8, WIDE = 2 }; /* floats per vector: AVX2 (or two SSE registers); vectors in a wide tile */
#else
enum { VL = 4, WIDE = 1 }; /* a Cortex-M without SIMD */
#endif
typedef float vec __attribute__((vector_size(VL * sizeof(float))));
typedef float vecu __attribute__((vector_size(VL * sizeof(float)), aligned(4), may_alias)); /* unaligned */
enum { MR = 4 }; /* rows of a register tile */


static float init_of(const gemm_args *g, idx i, idx v)
{
    return g->bias ? g->bias[i] : g->accumulate ? g->c[i * g->ldc + v] : 0.0f;
}

/* A register tile of MR rows by MV vectors of columns, for MV = WIDE and 1.
 * With SIMD the columns are GCC vectors; without (a Cortex-M4), plain
 * floats that GCC keeps in the 32 single-precision registers, as it does
 * not for vectors it has to emulate. */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define GEMM_TARGETS __attribute__((target_clones("avx2", "default")))
#else
#define GEMM_TARGETS
#endif
#if defined(__x86_64__)
typedef vec lanes;
#define LOAD_LANES(p) (*(const vecu *)(p))
#define STORE_LANES(p, v) (*(vecu *)(p) = (v))
#define MULADD_LANES(acc, s, b) ((acc) += (s) * (b))
#else
typedef struct lanes {
    float l[VL];
} lanes;
static inline lanes load_lanes(const float *p)
{
    lanes v;
    for (int l = 0; l < VL; l++) v.l[l] = p[l];
    return v;
}
#define LOAD_LANES(p) load_lanes(p)
#define STORE_LANES(p, v) memcpy((p), (v).l, sizeof(v).l)
#define MULADD_LANES(acc, s, b)                                                                                  \
    do {                                                                                                         \
        for (int l_ = 0; l_ < VL; l_++) (acc).l[l_] += (s) * (b).l[l_];                                         \
    } while (0)
#endif
#define DEFINE_GEMM_TILE(name, MV)                                                                 \
    GEMM_TARGETS static void name(const gemm_args *g, idx i0, idx v0)                              \
    {                                                                                              \
        lanes acc[MR][MV];                                                                         \
        for (int i = 0; i < MR; i++)                                                               \
            for (int v = 0; v < MV; v++) {                                                         \
                float init[VL];                                                                    \
                for (int l = 0; l < VL; l++) init[l] = init_of(g, i0 + i, v0 + VL * v + l);        \
                acc[i][v] = LOAD_LANES(init);                                                      \
            }                                                                                      \
        const float *restrict a = g->a + i0 * g->ai, *restrict b = g->b + v0;                      \
        const idx ai = g->ai, ar = g->ar, ldb = g->ldb, nr = g->nr;                                \
        for (idx r = 0; r < nr; r++) {                                                             \
            lanes bv[MV];                                                                          \
            for (int v = 0; v < MV; v++) bv[v] = LOAD_LANES(b + r * ldb + VL * v);                 \
            for (int i = 0; i < MR; i++) {                                                         \
                float s = a[i * ai + r * ar];                                                      \
                for (int v = 0; v < MV; v++) MULADD_LANES(acc[i][v], s, bv[v]);                    \
            }                                                                                      \
        }                                                                                          \
        for (int i = 0; i < MR; i++)                                                               \
            for (int v = 0; v < MV; v++) STORE_LANES(g->c + (i0 + i) * g->ldc + v0 + VL * v, acc[i][v]); \
    }
DEFINE_GEMM_TILE(gemm_tile_wide, WIDE)
DEFINE_GEMM_TILE(gemm_tile_narrow, 1)

static void gemm_edge(const gemm_args *g, idx i0, idx ni, idx v0, idx nv)
{
    for (idx i = i0; i < i0 + ni; i++)
        for (idx v = v0; v < v0 + nv; v++) {
            float s = init_of(g, i, v);
            for (idx r = 0; r < g->nr; r++) s += g->a[i * g->ai + r * g->ar] * g->b[r * g->ldb + v * g->bs];
            g->c[i * g->ldc + v] = s;
        }
}

void kernel_gemm(const gemm_args *g, idx ni, idx nv)
{
    idx rows = g->bs == 1 ? ni / MR * MR : 0, wide = nv / (WIDE * VL) * (WIDE * VL), narrow = nv / VL * VL;
    for (idx i = 0; i < rows; i += MR) {
        for (idx v = 0; v < wide; v += WIDE * VL) gemm_tile_wide(g, i, v);
        if (wide < narrow) gemm_tile_narrow(g, i, wide);
    }
    if (rows < ni) gemm_edge(g, rows, ni - rows, 0, g->bs == 1 ? narrow : nv);
    if (g->bs == 1 && narrow < nv) gemm_edge(g, 0, ni, narrow, nv - narrow);
}
