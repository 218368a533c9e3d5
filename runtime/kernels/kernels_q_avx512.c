/* kernels_q_avx512.c -- AVX-512 tiles for the quantized weight types. */
#include <immintrin.h>

#include "kernels/kernels_isa.h"
#include "kernels/quant.h"

#if defined(SB_Q_VNNI)
const sb_rt_qtile_fn sb_rt_qtiles_avx512vnni[SB_RT_DTYPE_MAX] = { 0 };
#else
const sb_rt_qtile_fn sb_rt_qtiles_avx512[SB_RT_DTYPE_MAX] = { 0 };
#endif
