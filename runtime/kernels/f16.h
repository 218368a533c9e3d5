/* f16.h -- IEEE half precision (binary16) to and from single precision,
 * one value at a time: exact widening (NaN payloads kept), and narrowing
 * rounded to nearest, ties to even (overflow to infinity, subnormals kept),
 * as F16C's VCVTPS2PH does. The array forms are the kernels' tables
 * (kernels.h: sb_rt_f16_to_f32, sb_rt_f32_to_f16).
 *
 * Thread safety: pure functions.
 */
#ifndef SB_RT_F16_H
#define SB_RT_F16_H

#include <stdint.h>

/* sb_rt_f16_to_f32_1 -- h widened exactly. */
float sb_rt_f16_to_f32_1(uint16_t h);

/* sb_rt_f32_to_f16_1 -- f rounded to the nearest half, ties to even. */
uint16_t sb_rt_f32_to_f16_1(float f);

#endif /* SB_RT_F16_H */
