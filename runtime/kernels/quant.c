/* quant.c -- GGML block formats: type table, dequantization, make-model's
 * quantizer and the activation quantizers (quant.h). Scalar code shared by
 * every ISA: the activation quantizers must give the same bits everywhere,
 * and the others are not on a hot path (an embedding row per token, a
 * model's weights once). */
#include "kernels/quant.h"

#include <math.h>
#include <string.h>

#include "kernels/f16.h"
#include "kernels/kernels_isa.h"
#include "snapbank.h"

/* ---- the type table --------------------------------------------------------------- */

/* Every GGML type id (ggml.h), with its block size and bytes (ggml-common.h
 * block structs); ids GGML removed have block 0. */
static const struct ggml_type_info {
    const char *name;
    uint16_t block, bytes;
} ggml_types[] = {
    [0] = { "f32", 1, 4 },        [1] = { "f16", 1, 2 },        [2] = { "q4_0", 32, 18 },
    [3] = { "q4_1", 32, 20 },     [4] = { "q4_2 (removed)", 0, 0 },
    [5] = { "q4_3 (removed)", 0, 0 },                            [6] = { "q5_0", 32, 22 },
    [7] = { "q5_1", 32, 24 },     [8] = { "q8_0", 32, 34 },     [9] = { "q8_1", 32, 36 },
    [10] = { "q2_K", 256, 84 },   [11] = { "q3_K", 256, 110 },  [12] = { "q4_K", 256, 144 },
    [13] = { "q5_K", 256, 176 },  [14] = { "q6_K", 256, 210 },  [15] = { "q8_K", 256, 292 },
    [16] = { "iq2_xxs", 256, 66 }, [17] = { "iq2_xs", 256, 74 }, [18] = { "iq3_xxs", 256, 98 },
    [19] = { "iq1_s", 256, 50 },  [20] = { "iq4_nl", 32, 18 },  [21] = { "iq3_s", 256, 110 },
    [22] = { "iq2_s", 256, 82 },  [23] = { "iq4_xs", 256, 136 }, [24] = { "i8", 1, 1 },
    [25] = { "i16", 1, 2 },       [26] = { "i32", 1, 4 },       [27] = { "i64", 1, 8 },
    [28] = { "f64", 1, 8 },       [29] = { "iq1_m", 256, 56 },  [30] = { "bf16", 1, 2 },
    [31] = { "q4_0_4_4 (removed)", 0, 0 }, [32] = { "q4_0_4_8 (removed)", 0, 0 },
    [33] = { "q4_0_8_8 (removed)", 0, 0 }, [34] = { "tq1_0", 256, 54 },
    [35] = { "tq2_0", 256, 66 },  [36] = { "iq4_nl_4_4 (removed)", 0, 0 },
    [37] = { "iq4_nl_4_8 (removed)", 0, 0 }, [38] = { "iq4_nl_8_8 (removed)", 0, 0 },
    [39] = { "mxfp4", 32, 17 },   [40] = { "nvfp4", 64, 36 },   [41] = { "q1_0", 128, 18 },
    [42] = { "q2_0", 64, 18 },
};
#define N_GGML_TYPES (sizeof ggml_types / sizeof *ggml_types)

const char *sb_rt_ggml_type_name(uint32_t id)
{
    return id < N_GGML_TYPES && ggml_types[id].name ? ggml_types[id].name : "?";
}

bool sb_rt_ggml_type_size(uint32_t id, size_t *block, size_t *bytes)
{
    if (id >= N_GGML_TYPES || !ggml_types[id].block)
        return false;
    *block = ggml_types[id].block;
    *bytes = ggml_types[id].bytes;
    return true;
}

bool sb_rt_dtype_known(uint32_t id)
{
    switch (id) {
    case SB_RT_F32: case SB_RT_F16: case SB_RT_BF16: case SB_RT_Q4_0: case SB_RT_Q4_1:
    case SB_RT_Q5_0: case SB_RT_Q5_1: case SB_RT_Q8_0: case SB_RT_Q4_K: case SB_RT_Q5_K:
    case SB_RT_Q6_K:
        return true;
    }
    return false;
}

bool sb_rt_dtype_is_k(sb_rt_dtype t)
{
    return t == SB_RT_Q4_K || t == SB_RT_Q5_K || t == SB_RT_Q6_K;
}

size_t sb_rt_dtype_block(sb_rt_dtype t)
{
    return sb_rt_dtype_known(t) ? ggml_types[t].block : 0;
}

size_t sb_rt_dtype_block_bytes(sb_rt_dtype t)
{
    return sb_rt_dtype_known(t) ? ggml_types[t].bytes : 0;
}

size_t sb_rt_dtype_row_bytes(sb_rt_dtype t, size_t n)
{
    size_t b = sb_rt_dtype_block(t), by = sb_rt_dtype_block_bytes(t);
    if (!b || n % b || n / b > SIZE_MAX / by)
        return 0;
    return n / b * by;
}

/* ---- small helpers --------------------------------------------------------------- */

static inline float h2f(const uint8_t *p)
{
    uint16_t h;
    memcpy(&h, p, 2);
    return sb_rt_f16_to_f32_1(h);
}

static inline void f2h(uint8_t *p, float f)
{
    uint16_t h = sb_rt_f32_to_f16_1(f);
    memcpy(p, &h, 2);
}

/* The f16 nearest f at or above it (f >= 0 finite): a scale that must not
 * shrink when stored. */
static uint16_t f16_up(float f)
{
    uint16_t h = sb_rt_f32_to_f16_1(f);
    if (sb_rt_f16_to_f32_1(h) < f && h < 0x7bffu)
        h++;
    return h;
}

uint16_t sb_rt_f32_to_bf16_1(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    if ((u & 0x7fffffffu) > 0x7f800000u) /* NaN: keep it quiet */
        return (uint16_t)((u >> 16) | 0x40u);
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}

static inline int clampi(float r, int lo, int hi)
{
    return r < (float)lo ? lo : r > (float)hi ? hi : (int)r;
}

/* ---- dequantization --------------------------------------------------------------- */

static void dq_k(const uint8_t *b, float *y, bool five)
{
    float d = h2f(b), dmin = h2f(b + 2);
    const uint8_t *s = b + SB_RT_QK_SCALES;
    const uint8_t *qs = b + (five ? SB_RT_Q5_K_QS : SB_RT_Q4_K_QS), *qh = b + SB_RT_Q5_K_QH;
    for (unsigned j = 0; j < 8; j++) {
        uint8_t sc, m;
        sb_rt_qk_scale_min(s, j, &sc, &m);
        float ds = d * (float)sc, dm = dmin * (float)m;
        for (unsigned l = 0; l < 32; l++) {
            const uint8_t byte = qs[32 * (j / 2) + l];
            int q = j % 2 ? byte >> 4 : byte & 15;
            if (five)
                q |= ((qh[l] >> j) & 1) << 4;
            y[32 * j + l] = ds * (float)q - dm;
        }
    }
}

void sb_rt_dequant_row(sb_rt_dtype t, const void *wv, float *y, size_t n)
{
    const uint8_t *w = wv;
    size_t bb = sb_rt_dtype_block_bytes(t), nb = sb_rt_dtype_block(t) ? n / sb_rt_dtype_block(t) : 0;
    switch (t) {
    case SB_RT_F32:
        memcpy(y, w, n * 4);
        return;
    case SB_RT_F16:
        for (size_t i = 0; i < n; i++)
            y[i] = h2f(w + 2 * i);
        return;
    case SB_RT_BF16:
        for (size_t i = 0; i < n; i++) {
            uint16_t h;
            memcpy(&h, w + 2 * i, 2);
            y[i] = sb_rt_bf16_to_f32_1(h);
        }
        return;
    case SB_RT_Q4_0: case SB_RT_Q4_1: case SB_RT_Q5_0: case SB_RT_Q5_1:
        for (size_t b = 0; b < nb; b++, w += bb) {
            bool one = t == SB_RT_Q4_1 || t == SB_RT_Q5_1, five = t == SB_RT_Q5_0 || t == SB_RT_Q5_1;
            float d = h2f(w), m = one ? h2f(w + 2) : 0;
            uint32_t qh = 0;
            if (five)
                memcpy(&qh, w + (one ? 4 : 2), 4);
            const uint8_t *qs = w + (one ? 4 : 2) + (five ? 4 : 0);
            int off = one ? 0 : five ? 16 : 8;
            for (unsigned i = 0; i < 32; i++) {
                float q = (float)(sb_rt_q32_val(qs, qh, i) - off);
                y[b * 32 + i] = one ? d * q + m : d * q;
            }
        }
        return;
    case SB_RT_Q8_0:
        for (size_t b = 0; b < nb; b++, w += bb) {
            float d = h2f(w);
            for (unsigned i = 0; i < 32; i++)
                y[b * 32 + i] = d * (float)(int8_t)w[2 + i];
        }
        return;
    case SB_RT_Q4_K: case SB_RT_Q5_K:
        for (size_t b = 0; b < nb; b++, w += bb)
            dq_k(w, y + 256 * b, t == SB_RT_Q5_K);
        return;
    case SB_RT_Q6_K:
        for (size_t b = 0; b < nb; b++, w += bb) {
            float d = h2f(w + SB_RT_Q6_K_D);
            for (unsigned i = 0; i < 256; i++)
                y[256 * b + i] = d * (float)(int8_t)w[SB_RT_Q6_K_SC + i / 16] *
                                 (float)(sb_rt_q6k_val(w, i) - 32);
        }
        return;
    }
    for (size_t i = 0; i < n; i++)
        y[i] = NAN;
}

/* ---- make-model's quantizer --------------------------------------------------------- */

/* Q4_0 / Q5_0 (levels 16 or 32, zero point at the middle). */
static void q_sym32(const float *x, uint8_t *b, bool five)
{
    float v = 0, amax = 0;
    for (unsigned i = 0; i < 32; i++)
        if (fabsf(x[i]) > amax)
            amax = fabsf(x[i]), v = x[i];
    int mid = five ? 16 : 8, top = five ? 31 : 15;
    float d = v / (float)-mid;
    f2h(b, d);
    float dq = h2f(b), inv = dq != 0 ? 1.0f / dq : 0;
    uint32_t qh = 0;
    uint8_t *qs = b + (five ? 6 : 2);
    memset(qs, 0, 16);
    for (unsigned i = 0; i < 32; i++) {
        int q = clampi(nearbyintf(x[i] * inv) + (float)mid, 0, top);
        qs[i % 16] |= (uint8_t)((q & 15) << (i < 16 ? 0 : 4));
        qh |= (uint32_t)(q >> 4) << i;
    }
    if (five)
        memcpy(b + 2, &qh, 4);
}

/* Q4_1 / Q5_1 (min and step). */
static void q_min32(const float *x, uint8_t *b, bool five)
{
    float mn = x[0], mx = x[0];
    for (unsigned i = 1; i < 32; i++)
        mn = fminf(mn, x[i]), mx = fmaxf(mx, x[i]);
    int top = five ? 31 : 15;
    f2h(b, (mx - mn) / (float)top);
    f2h(b + 2, mn);
    float dq = h2f(b), mq = h2f(b + 2), inv = dq != 0 ? 1.0f / dq : 0;
    uint32_t qh = 0;
    uint8_t *qs = b + (five ? 8 : 4);
    memset(qs, 0, 16);
    for (unsigned i = 0; i < 32; i++) {
        int q = clampi(nearbyintf((x[i] - mq) * inv), 0, top);
        qs[i % 16] |= (uint8_t)((q & 15) << (i < 16 ? 0 : 4));
        qh |= (uint32_t)(q >> 4) << i;
    }
    if (five)
        memcpy(b + 4, &qh, 4);
}

static void q8_0(const float *x, uint8_t *b)
{
    float amax = 0;
    for (unsigned i = 0; i < 32; i++)
        amax = fmaxf(amax, fabsf(x[i]));
    f2h(b, amax / 127.0f);
    float dq = h2f(b), inv = dq != 0 ? 1.0f / dq : 0;
    for (unsigned i = 0; i < 32; i++)
        b[2 + i] = (uint8_t)(int8_t)clampi(nearbyintf(x[i] * inv), -127, 127);
}

/* ceil(a / b) in [0, 63] (b > 0). */
static uint8_t ceil63(float a, float b)
{
    float r = ceilf(a / b);
    return (uint8_t)(r > 63 ? 63 : r < 0 ? 0 : r);
}

/* Pack 6-bit sc[8], m[8] into scales[12] (quant.h). */
static void pack_scales(uint8_t *s, const uint8_t *sc, const uint8_t *m)
{
    for (unsigned j = 0; j < 4; j++) {
        s[j] = (uint8_t)((sc[j] & 63) | (sc[j + 4] >> 4) << 6);
        s[j + 4] = (uint8_t)((m[j] & 63) | (m[j + 4] >> 4) << 6);
        s[j + 8] = (uint8_t)((sc[j + 4] & 15) | (m[j + 4] & 15) << 4);
    }
}

static void q_k(const float *x, uint8_t *b, bool five)
{
    int top = five ? 31 : 15;
    float off[8], hi[8], step[8], max_off = 0, max_step = 0;
    for (unsigned j = 0; j < 8; j++) {
        float mn = x[32 * j], mx = x[32 * j];
        for (unsigned l = 1; l < 32; l++)
            mn = fminf(mn, x[32 * j + l]), mx = fmaxf(mx, x[32 * j + l]);
        off[j] = mn < 0 ? -mn : 0;
        hi[j] = mx > 0 ? mx : 0;
        max_off = fmaxf(max_off, off[j]);
    }
    uint16_t hmin = f16_up(max_off / 63.0f);
    memcpy(b + 2, &hmin, 2);
    float dmin = sb_rt_f16_to_f32_1(hmin);
    uint8_t sc[8], m[8];
    float o[8];
    for (unsigned j = 0; j < 8; j++) {
        m[j] = dmin > 0 ? ceil63(off[j], dmin) : 0;
        o[j] = dmin * (float)m[j];
        step[j] = (hi[j] + o[j]) / (float)top;
        max_step = fmaxf(max_step, step[j]);
    }
    uint16_t hd = f16_up(max_step / 63.0f);
    memcpy(b, &hd, 2);
    float d = sb_rt_f16_to_f32_1(hd);
    for (unsigned j = 0; j < 8; j++)
        sc[j] = d > 0 ? ceil63(step[j], d) : 0;
    pack_scales(b + SB_RT_QK_SCALES, sc, m);
    uint8_t *qs = b + (five ? SB_RT_Q5_K_QS : SB_RT_Q4_K_QS), *qh = b + SB_RT_Q5_K_QH;
    memset(qs, 0, 128);
    if (five)
        memset(qh, 0, 32);
    for (unsigned j = 0; j < 8; j++) {
        float st = d * (float)sc[j], inv = st != 0 ? 1.0f / st : 0;
        for (unsigned l = 0; l < 32; l++) {
            int q = clampi(nearbyintf((x[32 * j + l] + o[j]) * inv), 0, top);
            qs[32 * (j / 2) + l] |= (uint8_t)((q & 15) << (j % 2 ? 4 : 0));
            if (five)
                qh[l] |= (uint8_t)((q >> 4) << j);
        }
    }
}

static void q6_k(const float *x, uint8_t *b)
{
    float step[16], max_step = 0;
    for (unsigned k = 0; k < 16; k++) {
        float amax = 0;
        for (unsigned l = 0; l < 16; l++)
            amax = fmaxf(amax, fabsf(x[16 * k + l]));
        step[k] = amax / 31.0f;
        max_step = fmaxf(max_step, step[k]);
    }
    uint16_t hd = f16_up(max_step / 127.0f);
    memcpy(b + SB_RT_Q6_K_D, &hd, 2);
    float d = sb_rt_f16_to_f32_1(hd);
    memset(b, 0, SB_RT_Q6_K_SC);
    for (unsigned k = 0; k < 16; k++) {
        float r = d > 0 ? ceilf(step[k] / d) : 0;
        int sc = r > 127 ? 127 : (int)r;
        b[SB_RT_Q6_K_SC + k] = (uint8_t)(int8_t)sc;
        float st = d * (float)sc, inv = st != 0 ? 1.0f / st : 0;
        for (unsigned l = 0; l < 16; l++) {
            unsigned i = 16 * k + l;
            int q = clampi(nearbyintf(x[i] * inv), -32, 31) + 32;
            unsigned h = i / 128, r2 = i % 128, quarter = r2 / 32, ll = r2 % 32;
            uint8_t *L = b + 64 * h + (quarter & 1 ? 32 : 0), *H = b + SB_RT_Q6_K_QH + 32 * h;
            L[ll] |= (uint8_t)((q & 15) << (quarter >= 2 ? 4 : 0));
            H[ll] |= (uint8_t)((q >> 4) << (2 * quarter));
        }
    }
}

int sb_rt_quant_row(sb_rt_dtype t, const float *x, void *wv, size_t n)
{
    uint8_t *w = wv;
    size_t blk = sb_rt_dtype_block(t), bb = sb_rt_dtype_block_bytes(t);
    if (!blk || n % blk)
        return SB_ERR_INVAL;
    size_t nb = n / blk;
    for (size_t b = 0; b < nb; b++, w += bb) {
        const float *v = x + b * blk;
        switch (t) {
        case SB_RT_F32:
            memcpy(w, v, 4);
            break;
        case SB_RT_F16:
            f2h(w, *v);
            break;
        case SB_RT_BF16: {
            uint16_t h = sb_rt_f32_to_bf16_1(*v);
            memcpy(w, &h, 2);
            break;
        }
        case SB_RT_Q4_0: q_sym32(v, w, false); break;
        case SB_RT_Q5_0: q_sym32(v, w, true); break;
        case SB_RT_Q4_1: q_min32(v, w, false); break;
        case SB_RT_Q5_1: q_min32(v, w, true); break;
        case SB_RT_Q8_0: q8_0(v, w); break;
        case SB_RT_Q4_K: q_k(v, w, false); break;
        case SB_RT_Q5_K: q_k(v, w, true); break;
        case SB_RT_Q6_K: q6_k(v, w); break;
        }
    }
    return SB_OK;
}

/* ---- activations -------------------------------------------------------------------- */

size_t sb_rt_xq_row_bytes(sb_rt_dtype t, size_t n)
{
    switch (t) {
    case SB_RT_Q4_0: case SB_RT_Q4_1: case SB_RT_Q5_0: case SB_RT_Q5_1: case SB_RT_Q8_0:
        return n % 32 ? 0 : n + n / 32 * 4;
    case SB_RT_Q4_K: case SB_RT_Q5_K: case SB_RT_Q6_K:
        return n % 256 ? 0 : n + n / 256 * 4 + n / 16 * 2;
    default:
        return 0;
    }
}

/* One block of len values: q, the 16-value sums when asked, and the scale
 * (quant.h); a block with a NaN or an infinity gets q = 0 and d = NaN. */
static float xq_block(const float *x, int8_t *q, unsigned len, int16_t *sums)
{
    float amax = 0;
    for (unsigned i = 0; i < len; i++) {
        float a = fabsf(x[i]);
        if (!(a <= 3.4028235e38f)) { /* NaN or inf */
            memset(q, 0, len);
            if (sums)
                memset(sums, 0, len / 16 * sizeof *sums);
            return NAN;
        }
        amax = a > amax ? a : amax;
    }
    float d = amax / 127.0f, inv = d != 0 ? 1.0f / d : 0.0f;
    for (unsigned i = 0; i < len; i++)
        q[i] = (int8_t)clampi(nearbyintf(x[i] * inv), -127, 127); /* ties to even */
    for (unsigned g = 0; sums && g < len / 16; g++) {
        int s = 0;
        for (unsigned i = 0; i < 16; i++)
            s += q[16 * g + i];
        sums[g] = (int16_t)s;
    }
    return d;
}

void sb_rt_xq_rows(sb_rt_dtype t, const float *x, uint8_t *xq, size_t n, sb_rt_xq_block_fn block)
{
    int8_t *q = (int8_t *)xq;
    if (sb_rt_dtype_is_k(t)) {
        size_t nk = n / 256;
        for (size_t b = 0; b < nk; b++) {
            int16_t sums[16];
            float d = block(x + 256 * b, q + 256 * b, 256, sums);
            memcpy(xq + n + 4 * b, &d, 4);
            memcpy(xq + n + 4 * nk + 32 * b, sums, sizeof sums);
        }
        return;
    }
    for (size_t b = 0; b < n / 32; b++) {
        float d = block(x + 32 * b, q + 32 * b, 32, NULL);
        memcpy(xq + n + 4 * b, &d, 4);
    }
}

void sb_rt_xq_quant_ref(sb_rt_dtype t, const float *x, uint8_t *xq, size_t n)
{
    sb_rt_xq_rows(t, x, xq, n, xq_block);
}
