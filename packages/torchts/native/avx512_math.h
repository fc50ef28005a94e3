// Small AVX-512 helpers shared by torchts' native kernels: lane masks for a row's tail (GEMM tiles,
// attention, int8 GEMM) and e^x for the attention kernels' softmax (attention_avx512.c for long
// queries, attention_decode_avx512.c for decode), where every argument is a score minus its row's
// running max. Included inside each file's x86-64 / GCC section; static.
#pragma once
#include <immintrin.h>

// lanes [0, w) of a 16-lane mask (none for w <= 0, all for w >= 16)
static inline __mmask16 x_mask(int w) { return w >= 16 ? 0xffff : w <= 0 ? 0 : (__mmask16)((1u << w) - 1); }

#define X_TARGET __attribute__((target("avx512f,avx512dq,avx512bw,avx512vl,fma")))

// e^x for x <= 0 (or -inf; NaN stays NaN): 2^n * 2^f with |f| <= 1/2, f's power series to degree 6
// (relative error ~1e-7); x below -104 gives exactly 0
X_TARGET static inline __m512 x_exp(__m512 x) {
  x = _mm512_max_ps(_mm512_set1_ps(-104.0f), x); // maxps returns its second operand for a NaN: NaN stays NaN
  const __m512 t = _mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f));
  const __m512 n = _mm512_roundscale_ps(t, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  const __m512 f = _mm512_sub_ps(t, n);
  __m512 p = _mm512_set1_ps(1.5403530393381608e-4f);
  p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(1.3333558146428443e-3f));
  p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(9.6181291076284772e-3f));
  p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(5.5504108664821580e-2f));
  p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(2.4022650695910071e-1f));
  p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(6.9314718055994531e-1f));
  p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(1.0f));
  return _mm512_scalef_ps(p, n);
}
