/* kernels_q_avx2.c -- AVX2 tiles for the quantized weight types. */
#include <immintrin.h>

#include "kernels/kernels_isa.h"
#include "kernels/quant.h"

const sb_rt_qtile_fn sb_rt_qtiles_avx2[SB_RT_DTYPE_MAX] = { 0 };
