/* rt_ref.h -- pieces of the plain references the runtime's tests compare
 * the forward pass with: weights dequantized to floats, products summed in
 * double, norms in double, F16 rounding. No kernel of the runtime is used
 * but the scalar F16 conversion.
 *
 * Thread safety: pure functions.
 */
#ifndef SB_TEST_RT_REF_H
#define SB_TEST_RT_REF_H

#include <stdint.h>

#include "model/model.h"

/* rr_deq -- w's (out, in) elements as floats into out (out * in floats). */
void rr_deq(const sb_rt_mat *w, float *out);

/* rr_mv -- y = W x, double sums. Against Q8_0 weights x is first rounded
 * to Q8_0 blocks as kernels.h says the matmul does, so only the summation
 * order differs from the runtime's. */
void rr_mv(const sb_rt_mat *w, const float *x, float *y);

/* rr_rms -- y = x / sqrt(mean(x^2) + eps) * g over n values (g NULL: 1). */
void rr_rms(float *y, const float *x, const float *g, uint32_t n, float eps);

/* rr_f16 -- x rounded to F16 and back. */
float rr_f16(float x);

/* rr_attend -- attention at position p of one layer: k and v (n_kv_heads
 * * head_dim floats each) rounded to F16, as the bank keeps them, into row
 * p of Kl and Vl (rows of n_kv_heads * head_dim floats); then each query
 * head of q against rows 0..p (its KV head h / (n_heads / n_kv_heads)),
 * softmax of the scaled scores and the weighted V rows, in double. att
 * receives n_heads * head_dim floats; sc is p + 1 floats of scratch. */
void rr_attend(const sb_rt_hparams *hp, const float *q, const float *k, const float *v,
               float *Kl, float *Vl, size_t p, float *sc, float *att);

/* rr_max_rel_diff -- the largest difference between two runs' logits at
 * any of n positions of V values, relative to that position's largest |a|
 * + 1. */
double rr_max_rel_diff(const float *a, const float *b, size_t n, size_t V);

#endif /* SB_TEST_RT_REF_H */
