// The float32 register tiles shared by torchts' AVX-512 kernels (gemm_avx512.c and
// attention_avx512.c): C (h x w, at most G_MR x G_NR) = or += a panel product, with op(A) read
// in place as rows (element (r, k) at a[r * lda + k]) or columns (a[k * lda + r]) and B as rows
// of G_NR floats ldb apart (a packed panel, or a matrix's own rows; lanes past w are not read).
// Included inside each file's x86-64 / GCC section; every function is static.
#pragma once
#include <immintrin.h>
#include <stdint.h>
#include "avx512_math.h"

#define G_MR 12
#define G_NR 32
#define G_TARGET __attribute__((target("avx512f,avx512dq,avx512bw,avx512vl,avx2,fma")))


// The G_MR x G_NR tile's store: C (h x w at C, ldc) = acc (mode 0), += acc (1), = beta C + acc (2);
// unrolled with constant indices (a loop bounded by h makes the compiler keep c in memory)
#define G_STORE(c)                                                                         \
  const __mmask16 m0 = x_mask(w), m1 = x_mask(w - 16);                                     \
  _Pragma("GCC unroll 12") for (int r = 0; r < G_MR; r++) if (r < h) {                    \
    float* p = C + r * ldc;                                                                \
    __m512 x0 = c[r][0], x1 = c[r][1];                                                     \
    if (mode == 1) {                                                                       \
      x0 = _mm512_add_ps(x0, _mm512_maskz_loadu_ps(m0, p));                                \
      x1 = _mm512_add_ps(x1, _mm512_maskz_loadu_ps(m1, p + 16));                           \
    } else if (mode == 2) {                                                                \
      x0 = _mm512_fmadd_ps(_mm512_set1_ps(beta), _mm512_maskz_loadu_ps(m0, p), x0);        \
      x1 = _mm512_fmadd_ps(_mm512_set1_ps(beta), _mm512_maskz_loadu_ps(m1, p + 16), x1);   \
    }                                                                                      \
    _mm512_mask_storeu_ps(p, m0, x0);                                                      \
    _mm512_mask_storeu_ps(p + 16, m1, x1);                                                 \
  }

// A read in place, element (r, k) at a[r * lda + k]: op(A) = A, G_MR full rows
G_TARGET static void g_kernel_rows(int kc, const float* a, int64_t lda, const float* bp, int64_t ldb, float* C,
                                   int64_t ldc, int h, int w, int mode, float beta) {
  const __mmask16 bm0 = x_mask(w), bm1 = x_mask(w - 16);
  __m512 c[G_MR][2];
#pragma GCC unroll 12
  for (int r = 0; r < G_MR; r++) c[r][0] = c[r][1] = _mm512_setzero_ps();
  const float *a0 = a, *a3 = a + 3 * lda, *a6 = a + 6 * lda, *a9 = a + 9 * lda;
  for (int k = 0; k < kc; k++) {
    const __m512 b0 = _mm512_maskz_loadu_ps(bm0, bp + k * ldb), b1 = _mm512_maskz_loadu_ps(bm1, bp + k * ldb + 16);
#define G_ROW(r, p, o)                                    \
  {                                                       \
    const __m512 x = _mm512_set1_ps(p[o * lda + k]);       \
    c[r][0] = _mm512_fmadd_ps(x, b0, c[r][0]);            \
    c[r][1] = _mm512_fmadd_ps(x, b1, c[r][1]);            \
  }
    G_ROW(0, a0, 0) G_ROW(1, a0, 1) G_ROW(2, a0, 2) G_ROW(3, a3, 0) G_ROW(4, a3, 1) G_ROW(5, a3, 2)
    G_ROW(6, a6, 0) G_ROW(7, a6, 1) G_ROW(8, a6, 2) G_ROW(9, a9, 0) G_ROW(10, a9, 1) G_ROW(11, a9, 2)
#undef G_ROW
  }
  G_STORE(c)
}

// element (r, k) at a[k * lda + r]: op(A) = A^T read in place, or a packed edge panel (lda = G_MR)
G_TARGET static void g_kernel_cols(int kc, const float* a, int64_t lda, const float* bp, int64_t ldb, float* C,
                                   int64_t ldc, int h, int w, int mode, float beta) {
  const __mmask16 bm0 = x_mask(w), bm1 = x_mask(w - 16);
  __m512 c[G_MR][2];
#pragma GCC unroll 12
  for (int r = 0; r < G_MR; r++) c[r][0] = c[r][1] = _mm512_setzero_ps();
  for (int k = 0; k < kc; k++) {
    const __m512 b0 = _mm512_maskz_loadu_ps(bm0, bp + k * ldb), b1 = _mm512_maskz_loadu_ps(bm1, bp + k * ldb + 16);
    const float* ak = a + k * lda;
#pragma GCC unroll 12
    for (int r = 0; r < G_MR; r++) {
      const __m512 x = _mm512_set1_ps(ak[r]);
      c[r][0] = _mm512_fmadd_ps(x, b0, c[r][0]);
      c[r][1] = _mm512_fmadd_ps(x, b1, c[r][1]);
    }
  }
  G_STORE(c)
}
