// torchts' weight-only int8 product for few activation rows on CPUs with AVX2 and FMA:
// out[r, n] = sum_g s[n, g] * sum_{k in g} x[r, k] * q[n, k] (+ bias[n]), the formula of the wasm
// q8gemv kernels (wasm/qgemv.ts), streaming the int8 weight in place. Why: the wasm kernels read
// the weight once per 2 rows; this reads it once per 4 (8 weights are one sign-extending load, one
// convert and one FMA per row), and ran batched decode's 2-8 rows 1.2-1.7x faster on an AVX2 EPYC
// (Zen 1). The loops are qgemv_rows.h's (shared with the AVX-512 kernel, qgemv_avx512.c). Built
// into the N-API bridge (blas.c) with a per-function target attribute, so the file compiles with a
// plain `cc` and runs only where tts_avx2_usable() says so.
#include "qgemv_avx2.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>

#define QG_TARGET __attribute__((target("avx2,fma")))

QG_TARGET static inline float qg_hsum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

#define QR_TARGET QG_TARGET
#define QR_W 8
#define QR_VEC __m256
#define QR_ZERO() _mm256_setzero_ps()
#define QR_LOADX(p) _mm256_loadu_ps(p)
#define QR_LOADW(q) _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i*)(q))))
#define QR_FMA(a, b, c) _mm256_fmadd_ps(a, b, c)
#define QR_ADD(a, b) _mm256_add_ps(a, b)
#define QR_HSUM(v) qg_hsum(v)
#define QR_ENTRY tts_q8gemv_avx2
#include "qgemv_rows.h"
#else
void tts_q8gemv_avx2(const tts_q8gemv_t* g, int lo, int hi) { (void)g, (void)lo, (void)hi; }
#endif
