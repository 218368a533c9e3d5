/* kernels.c -- dispatch to the best kernel table, the plain calls, and the
 * matmul driver shared by every ISA (kernels.h, kernels_isa.h).
 *
 * The driver cuts Y into row groups of MM_GROUP rows; each group is one pool
 * task, so threads never write the same cache line of W's output and the
 * split changes nothing but who computes what. Inside a task:
 *   1. for each chunk of MM_CHUNK tokens (X chunk stays in L2),
 *   2.   for each tile of tile_row rows (W tile stays in L1),
 *   3.     for each tile of tile_tok tokens: one tile call.
 * For a quantized W, X is quantized first (quant.h, "Activation blocks"):
 * on the caller's stack when small (decode), else into a heap buffer by a
 * parallel pass; should that allocation fail, each task quantizes the token
 * tiles it needs into its own stack buffer and loops tokens outside rows
 * instead (same bits: quantization is a pure function of the X row).
 */
#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/kernels_isa.h"
#include "kernels/quant.h"

#define MM_GROUP 32u            /* rows per pool task */
#define MM_CHUNK 72u            /* tokens per L2 chunk (a multiple of the tiles) */
#define MM_XQ_STACK 20480u      /* bytes of quantized X on the caller's stack */
#define MM_XQ_TILE_STACK 81920u /* bytes of quantized X a task may hold on its stack */

/* ---- the matmul driver ----------------------------------------------------- */

typedef struct mm_job {
    const sb_rt_mm_isa *isa;
    float *y;
    const float *x;
    const uint8_t *w;
    sb_rt_dtype wt;
    size_t n_tok, in, out;
    size_t w_row_bytes;
    sb_rt_qtile_fn qt;  /* quantized wt: its tile; NULL for F32/F16/BF16 */
    size_t xq_bytes;    /* quantized wt: bytes of one quantized X row */
    const uint8_t *xq;  /* X quantized, n_tok rows; NULL: per tile */
} mm_job;

static void mm_tile(const mm_job *j, size_t t0, unsigned nt, size_t r0, unsigned nr,
                    const uint8_t *xq)
{
    float *y = j->y + t0 * j->out + r0;
    const uint8_t *w = j->w + r0 * j->w_row_bytes;
    const float *x = j->x + t0 * j->in;
    switch (j->wt) {
    case SB_RT_F32:
        j->isa->f32(y, j->out, x, j->in, (const float *)(const void *)w, j->in, nt, nr);
        return;
    case SB_RT_F16:
        j->isa->f16(y, j->out, x, j->in, (const uint16_t *)(const void *)w, j->in, nt, nr);
        return;
    case SB_RT_BF16:
        j->isa->bf16(y, j->out, x, j->in, (const uint16_t *)(const void *)w, j->in, nt, nr);
        return;
    default:
        j->qt(y, j->out, xq, j->xq_bytes, w, j->in, nt, nr);
        return;
    }
}

static void mm_task(void *ctx, size_t task, unsigned thread)
{
    const mm_job *j = ctx;
    const unsigned T = j->qt ? j->isa->q_tok : j->isa->tile_tok;
    const unsigned R = j->qt ? j->isa->q_row : j->isa->tile_row;
    const unsigned R1 = j->qt ? j->isa->q_row_1 : j->isa->tile_row_1;
    size_t r_begin = task * MM_GROUP;
    size_t r_end = r_begin + MM_GROUP < j->out ? r_begin + MM_GROUP : j->out;
    (void)thread;
    if (j->qt && !j->xq) {
        /* The fallback: quantize each token tile here (1 <= tt <= T). */
        uint8_t buf[MM_XQ_TILE_STACK];
        size_t tt = MM_XQ_TILE_STACK / j->xq_bytes;
        if (tt > T)
            tt = T;
        for (size_t t0 = 0; t0 < j->n_tok; t0 += tt) {
            unsigned nt = (unsigned)(j->n_tok - t0 < tt ? j->n_tok - t0 : tt);
            for (unsigned t = 0; t < nt; t++)
                j->isa->xq(j->wt, j->x + (t0 + t) * j->in, buf + t * j->xq_bytes, j->in);
            for (size_t r0 = r_begin; r0 < r_end; r0 += R) {
                unsigned nr = (unsigned)(r_end - r0 < R ? r_end - r0 : R);
                mm_tile(j, t0, nt, r0, nr, buf);
            }
        }
        return;
    }
    for (size_t c0 = 0; c0 < j->n_tok; c0 += MM_CHUNK) {
        size_t c_end = c0 + MM_CHUNK < j->n_tok ? c0 + MM_CHUNK : j->n_tok;
        unsigned Rc = c_end - c0 == 1 ? R1 : R;
        for (size_t r0 = r_begin; r0 < r_end; r0 += Rc) {
            unsigned nr = (unsigned)(r_end - r0 < Rc ? r_end - r0 : Rc);
            for (size_t t0 = c0; t0 < c_end; t0 += T) {
                unsigned nt = (unsigned)(c_end - t0 < T ? c_end - t0 : T);
                mm_tile(j, t0, nt, r0, nr, j->xq ? j->xq + t0 * j->xq_bytes : NULL);
            }
        }
    }
}

/* The parallel quantization pass: task = one token row. */
static void mm_quant_task(void *ctx, size_t task, unsigned thread)
{
    const mm_job *j = ctx;
    (void)thread;
    j->isa->xq(j->wt, j->x + task * j->in, (uint8_t *)j->xq + task * j->xq_bytes, j->in);
}

static void mm_fill_nan(float *y, size_t n)
{
    for (size_t i = 0; i < n; i++)
        y[i] = NAN;
}

void sb_rt_mm_drive(const sb_rt_mm_isa *isa, sb_rt_pool *pool, float *y, const float *x,
                    const void *w, sb_rt_dtype wt, size_t n_tok, size_t in, size_t out)
{
    if (n_tok == 0 || out == 0)
        return;
    size_t rb = sb_rt_dtype_row_bytes(wt, in);
    if (rb == 0 && in != 0) {
        mm_fill_nan(y, n_tok * out);
        return;
    }
    if (in == 0) {
        memset(y, 0, n_tok * out * sizeof *y);
        return;
    }
    mm_job j = { isa, y, x, w, wt, n_tok, in, out, rb, NULL, 0, NULL };
    size_t n_groups = (out + MM_GROUP - 1) / MM_GROUP;
    if (wt == SB_RT_F32 || wt == SB_RT_F16 || wt == SB_RT_BF16) {
        sb_rt_pool_run(pool, n_groups, mm_task, &j);
        return;
    }
    j.qt = isa->q[wt];
    j.xq_bytes = sb_rt_xq_row_bytes(wt, in);
    uint8_t xs[MM_XQ_STACK];
    void *heap = NULL;
    if (n_tok * j.xq_bytes <= MM_XQ_STACK) {
        for (size_t t = 0; t < n_tok; t++)
            isa->xq(wt, x + t * in, xs + t * j.xq_bytes, in);
        j.xq = xs;
    } else if (n_tok <= SIZE_MAX / j.xq_bytes && (heap = malloc(n_tok * j.xq_bytes))) {
        j.xq = heap;
        sb_rt_pool_run(pool, n_tok, mm_quant_task, &j);
    } else if (j.xq_bytes > MM_XQ_TILE_STACK) {
        mm_fill_nan(y, n_tok * out);
        return;
    }
    sb_rt_pool_run(pool, n_groups, mm_task, &j);
    free(heap);
}

/* ---- dispatch -------------------------------------------------------------- */

#if defined(SB_RT_KERNELS_X86)
#include <cpuid.h>

/* F16C has no __builtin_cpu_supports name in every compiler: ask CPUID
 * (leaf 1, ECX bit 29). */
static int kern_has_f16c(void)
{
    unsigned a, b, c, d;
    if (!__get_cpuid(1, &a, &b, &c, &d))
        return 0;
    return (c >> 29) & 1u;
}

static int kern_has_avx2(void)
{
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && kern_has_f16c();
}

static int kern_has_avx512(void)
{
    __builtin_cpu_init();
    return kern_has_avx2() && __builtin_cpu_supports("avx512f") &&
           __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl");
}

/* AVX512-VNNI: CPUID leaf 7, ECX bit 11. */
static int kern_has_avx512vnni(void)
{
    unsigned a, b, c, d;
    if (!kern_has_avx512() || !__get_cpuid_count(7, 0, &a, &b, &c, &d))
        return 0;
    return (c >> 11) & 1u;
}
#endif

const sb_rt_kernels *sb_rt_kernels_get(sb_rt_isa isa)
{
    switch (isa) {
    case SB_RT_ISA_REF:
        return &sb_rt_kernels_ref;
#if defined(SB_RT_KERNELS_X86)
    case SB_RT_ISA_AVX2:
        return kern_has_avx2() ? &sb_rt_kernels_avx2 : NULL;
    case SB_RT_ISA_AVX512:
        return kern_has_avx512() ? &sb_rt_kernels_avx512 : NULL;
    case SB_RT_ISA_AVX512VNNI:
        return kern_has_avx512vnni() ? &sb_rt_kernels_avx512vnni : NULL;
#else
    case SB_RT_ISA_AVX2:
    case SB_RT_ISA_AVX512:
    case SB_RT_ISA_AVX512VNNI:
        return NULL;
#endif
    }
    return NULL;
}

/* The table SNAPBANK_ISA names, when it is set to one this CPU runs; else
 * NULL (with one line on stderr when it names something else). */
static const sb_rt_kernels *kern_from_env(void)
{
    const char *v = getenv("SNAPBANK_ISA");
    if (!v || !*v)
        return NULL;
    static const char *const names[SB_RT_ISA_COUNT] = { "ref", "avx2", "avx512", "avx512vnni" };
    for (int i = 0; i < SB_RT_ISA_COUNT; i++)
        if (!strcmp(v, names[i])) {
            const sb_rt_kernels *k = sb_rt_kernels_get((sb_rt_isa)i);
            if (!k)
                fprintf(stderr, "snapbank: SNAPBANK_ISA=%s: this CPU or build lacks it; "
                                "using the best it has\n", v);
            return k;
        }
    fprintf(stderr, "snapbank: SNAPBANK_ISA=%s: unknown (ref, avx2, avx512, avx512vnni); using the best "
                    "this CPU has\n", v);
    return NULL;
}

const sb_rt_kernels *sb_rt_kernels_best(void)
{
    /* Chosen once: every thread that races here computes the same pointer
     * (the environment is read at most a few times, before any thread of
     * ours could change it). */
    static _Atomic(const sb_rt_kernels *) best;
    const sb_rt_kernels *k = atomic_load_explicit(&best, memory_order_acquire);
    if (!k) {
        k = kern_from_env();
        if (!k)
            k = sb_rt_kernels_get(SB_RT_ISA_AVX512VNNI);
        if (!k)
            k = sb_rt_kernels_get(SB_RT_ISA_AVX512);
        if (!k)
            k = sb_rt_kernels_get(SB_RT_ISA_AVX2);
        if (!k)
            k = &sb_rt_kernels_ref;
        atomic_store_explicit(&best, k, memory_order_release);
    }
    return k;
}

/* ---- the plain calls --------------------------------------------------------- */

void sb_rt_f16_to_f32(const uint16_t *x, float *y, size_t n)
{
    sb_rt_kernels_best()->f16_to_f32(x, y, n);
}

void sb_rt_f32_to_f16(const float *x, uint16_t *y, size_t n)
{
    sb_rt_kernels_best()->f32_to_f16(x, y, n);
}

void sb_rt_matmul(sb_rt_pool *pool, float *y, const float *x, const void *w, sb_rt_dtype wt,
                  size_t n_tok, size_t in, size_t out)
{
    sb_rt_kernels_best()->matmul(pool, y, x, w, wt, n_tok, in, out);
}

void sb_rt_rmsnorm(float *y, const float *x, const float *w, size_t n, float eps)
{
    sb_rt_kernels_best()->rmsnorm(y, x, w, n, eps);
}

void sb_rt_softmax(float *x, size_t n)
{
    sb_rt_kernels_best()->softmax(x, n);
}

void sb_rt_silu_mul(float *a, const float *b, size_t n)
{
    sb_rt_kernels_best()->silu_mul(a, b, n);
}

void sb_rt_add(float *y, const float *x, size_t n)
{
    sb_rt_kernels_best()->add(y, x, n);
}

float sb_rt_dot_f32(const float *a, const float *b, size_t n)
{
    return sb_rt_kernels_best()->dot_f32(a, b, n);
}

float sb_rt_dot_f16(const uint16_t *a, const float *b, size_t n)
{
    return sb_rt_kernels_best()->dot_f16(a, b, n);
}

void sb_rt_axpy_f32(float *y, float a, const float *x, size_t n)
{
    sb_rt_kernels_best()->axpy_f32(y, a, x, n);
}

void sb_rt_axpy_f16(float *y, float a, const uint16_t *x, size_t n)
{
    sb_rt_kernels_best()->axpy_f16(y, a, x, n);
}

void sb_rt_dots_f16(float *out, const uint16_t *a, size_t stride, size_t rows, const float *b,
                    size_t n)
{
    sb_rt_kernels_best()->dots_f16(out, a, stride, rows, b, n);
}

void sb_rt_axpys_f16(float *y, const float *a, const uint16_t *x, size_t stride, size_t rows,
                     size_t n)
{
    sb_rt_kernels_best()->axpys_f16(y, a, x, stride, rows, n);
}

void sb_rt_qk_f16(float *s, size_t lds, const float *q, size_t ldq, size_t nq, const uint16_t *k,
                  size_t ldk, size_t rows, size_t n)
{
    sb_rt_kernels_best()->qk_f16(s, lds, q, ldq, nq, k, ldk, rows, n);
}

void sb_rt_av_f16(float *o, size_t ldo, const float *s, size_t lds, size_t nq, const uint16_t *v,
                  size_t ldv, size_t rows, size_t n)
{
    sb_rt_kernels_best()->av_f16(o, ldo, s, lds, nq, v, ldv, rows, n);
}
