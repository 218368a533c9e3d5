/* kernels_q_avx512vnni.c -- kernels_q_avx512.c compiled with AVX512-VNNI
 * (runtime/CMakeLists.txt adds -mavx512vnni to this file alone). */
#define SB_Q_VNNI 1
#include "kernels_q_avx512.c"
