// torchts' weight-only int8 product for few activation rows on CPUs with AVX-512: the formula and
// loop structure of qgemv_avx2.c (per group, partial sums in C chains a row, reduced, scaled into
// the row's total), 16 weights a step: one sign-extending load, one convert and one FMA per row.
// Why: at one row (decode at batch 1) the AVX2 kernel and the wasm kernel both spend about four
// instructions per 8 weights and ran the bench Llama's int8 matrices at 23-30 GB/s on a Zen 5,
// compute-bound below the memory's rate; this spends half as many. Group tails are masked loads.
#include "qgemv_avx2.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>

#define Q5_TARGET __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,fma")))

static inline __mmask16 q5_mask(int w) { return w >= 16 ? 0xffff : w <= 0 ? 0 : (__mmask16)((1u << w) - 1); }

Q5_TARGET static inline __m512 q5_w16(const int8_t* q) {
  return _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i*)q)));
}

Q5_TARGET static inline __m512 q5_w16m(const int8_t* q, __mmask16 m) {
  return _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_maskz_loadu_epi8(m, q)));
}

// Rows r0 .. r0 + R of x (R <= 4) against weight rows [lo, hi); R is a constant at each call, so
// the loops unroll and the accumulators stay in registers (4 rows x 2 chains, or 1 row x 4).
Q5_TARGET static inline void q5_rows(const tts_q8gemv_t* g, int r0, int R, int lo, int hi) {
  const int K = g->K, gs = g->gs, G = K / gs, C = R == 1 ? 4 : 2;
  for (int n = lo; n < hi; n++) {
    const int8_t* qn = g->q + (int64_t)n * K;
    const float* sn = g->s + (int64_t)n * G;
    float tot[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    for (int k0 = 0; k0 < K; k0 += gs) {
      const int kend = k0 + gs, kc = k0 + ((kend - k0) / (16 * C)) * (16 * C);
      __m512 a[4][4];
#pragma GCC unroll 4
      for (int r = 0; r < 4; r++) a[r][0] = a[r][1] = a[r][2] = a[r][3] = _mm512_setzero_ps();
      int k = k0;
      for (; k < kc; k += 16 * C) {
        __m512 w[4];
#pragma GCC unroll 4
        for (int c = 0; c < 4; c++)
          if (c < C) w[c] = q5_w16(qn + k + 16 * c);
#pragma GCC unroll 4
        for (int r = 0; r < 4; r++)
          if (r < R) {
            const float* xr = g->x + (int64_t)(r0 + r) * g->ldx + k;
#pragma GCC unroll 4
            for (int c = 0; c < 4; c++)
              if (c < C) a[r][c] = _mm512_fmadd_ps(_mm512_loadu_ps(xr + 16 * c), w[c], a[r][c]);
          }
      }
      for (; k < kend; k += 16) {
        const __mmask16 m = q5_mask(kend - k);
        const __m512 w0 = q5_w16m(qn + k, m);
#pragma GCC unroll 4
        for (int r = 0; r < 4; r++)
          if (r < R) a[r][0] = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m, g->x + (int64_t)(r0 + r) * g->ldx + k), w0, a[r][0]);
      }
      const float sc = sn[k0 / gs];
#pragma GCC unroll 4
      for (int r = 0; r < 4; r++)
        if (r < R) {
          __m512 v = _mm512_add_ps(a[r][0], a[r][1]);
          if (C == 4) v = _mm512_add_ps(v, _mm512_add_ps(a[r][2], a[r][3]));
          tot[r] += _mm512_reduce_add_ps(v) * sc;
        }
    }
    const float b = g->bias ? g->bias[n] : 0.0f;
#pragma GCC unroll 4
    for (int r = 0; r < 4; r++)
      if (r < R) g->out[(int64_t)(r0 + r) * g->ldo + n] = tot[r] + b;
  }
}

Q5_TARGET void tts_q8gemv_avx512(const tts_q8gemv_t* g, int lo, int hi) {
  int r0 = 0;
  // passes of 4 rows, then the rest (each pass streams the weight rows once)
  for (; r0 + 4 <= g->M; r0 += 4) q5_rows(g, r0, 4, lo, hi);
  switch (g->M - r0) {
    case 3: q5_rows(g, r0, 3, lo, hi); break;
    case 2: q5_rows(g, r0, 2, lo, hi); break;
    case 1: q5_rows(g, r0, 1, lo, hi); break;
    default: break;
  }
}
#else
void tts_q8gemv_avx512(const tts_q8gemv_t* g, int lo, int hi) { (void)g, (void)lo, (void)hi; }
#endif
