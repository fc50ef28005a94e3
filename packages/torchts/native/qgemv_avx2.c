// torchts' weight-only int8 product for few activation rows on CPUs with AVX2 and FMA:
// out[r, n] = sum_g s[n, g] * sum_{k in g} x[r, k] * q[n, k] (+ bias[n]), the formula of the wasm
// q8gemv kernels (wasm/qgemv.ts), streaming the int8 weight in place. Why: the wasm kernels read
// the weight once per 2 rows; this reads it once per 4 (8 weights are one sign-extending load, one
// convert and one FMA per row), and ran batched decode's 2-8 rows 1.2-1.7x faster on an AVX2 EPYC
// (Zen 1). Built into the N-API bridge (blas.c) with a per-function target attribute, so the file
// compiles with a plain `cc` and runs only where tts_avx2_usable() says so.
#include "qgemv_avx2.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>

#define QG_TARGET __attribute__((target("avx2,fma")))

QG_TARGET static inline __m256 qg_w8(const int8_t* q) {
  return _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i*)q)));
}

QG_TARGET static inline float qg_hsum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

// Rows r0 .. r0 + R of x (R <= 4) against weight rows [lo, hi): per group, eight-lane partial sums
// in C chains a row (4 for one row, so the FMA latency is covered; 2 for more), reduced, then
// scaled into the row's total. R is a constant at each call, so the loops unroll and the
// accumulators stay in registers.
QG_TARGET static inline void qg_rows(const tts_q8gemv_t* g, int r0, int R, int lo, int hi) {
  const int K = g->K, gs = g->gs, G = K / gs, C = R == 1 ? 4 : 2;
  for (int n = lo; n < hi; n++) {
    const int8_t* qn = g->q + (int64_t)n * K;
    const float* sn = g->s + (int64_t)n * G;
    float tot[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    for (int k0 = 0; k0 < K; k0 += gs) {
      const int kend = k0 + gs, kc = k0 + ((kend - k0) / (8 * C)) * (8 * C);
      __m256 a[4][4];
#pragma GCC unroll 4
      for (int r = 0; r < 4; r++) a[r][0] = a[r][1] = a[r][2] = a[r][3] = _mm256_setzero_ps();
      int k = k0;
      for (; k < kc; k += 8 * C) {
        __m256 w[4];
#pragma GCC unroll 4
        for (int c = 0; c < 4; c++)
          if (c < C) w[c] = qg_w8(qn + k + 8 * c);
#pragma GCC unroll 4
        for (int r = 0; r < 4; r++)
          if (r < R) {
            const float* xr = g->x + (int64_t)(r0 + r) * g->ldx + k;
#pragma GCC unroll 4
            for (int c = 0; c < 4; c++)
              if (c < C) a[r][c] = _mm256_fmadd_ps(_mm256_loadu_ps(xr + 8 * c), w[c], a[r][c]);
          }
      }
      for (; k + 8 <= kend; k += 8) {
        const __m256 w0 = qg_w8(qn + k);
#pragma GCC unroll 4
        for (int r = 0; r < 4; r++)
          if (r < R) a[r][0] = _mm256_fmadd_ps(_mm256_loadu_ps(g->x + (int64_t)(r0 + r) * g->ldx + k), w0, a[r][0]);
      }
      const float sc = sn[k0 / gs];
#pragma GCC unroll 4
      for (int r = 0; r < 4; r++)
        if (r < R) {
          __m256 v = _mm256_add_ps(a[r][0], a[r][1]);
          if (C == 4) v = _mm256_add_ps(v, _mm256_add_ps(a[r][2], a[r][3]));
          float d = qg_hsum(v);
          const float* xr = g->x + (int64_t)(r0 + r) * g->ldx;
          for (int j = k; j < kend; j++) d += xr[j] * (float)qn[j];
          tot[r] += d * sc;
        }
    }
    const float b = g->bias ? g->bias[n] : 0.0f;
#pragma GCC unroll 4
    for (int r = 0; r < 4; r++)
      if (r < R) g->out[(int64_t)(r0 + r) * g->ldo + n] = tot[r] + b;
  }
}

QG_TARGET void tts_q8gemv_avx2(const tts_q8gemv_t* g, int lo, int hi) {
  int r0 = 0;
  // passes of 4 rows, then the rest (each pass streams the weight rows once)
  for (; r0 + 4 <= g->M; r0 += 4) qg_rows(g, r0, 4, lo, hi);
  switch (g->M - r0) {
    case 3: qg_rows(g, r0, 3, lo, hi); break;
    case 2: qg_rows(g, r0, 2, lo, hi); break;
    case 1: qg_rows(g, r0, 1, lo, hi); break;
    default: break;
  }
}
#else
void tts_q8gemv_avx2(const tts_q8gemv_t* g, int lo, int hi) { (void)g, (void)lo, (void)hi; }
#endif
