// torchts' own float32 GEMM for x86-64 CPUs with AVX2 and FMA but no AVX-512: row-major
// C = op(A) op(B) + beta C. Why: OpenBLAS' single-threaded calls (one per pool share, so that
// the sums never depend on the thread count) ran the small step's products at 9-17 GFLOP/s on an
// AVX2 EPYC (Zen 1, 2 GHz), under the wasm GEMM; this kernel is gemm_avx512.c's design on 256-bit
// registers. Built into the N-API bridge (blas.c) with per-function target attributes, so the
// file compiles with a plain `cc` and the code runs only where tts_avx2_usable() says so.
//
// BLIS-style: op(B) is packed in panels of A2_NR columns per A2_KC x A2_NC block (or, with few
// rows, B's rows are read in place); op(A) is read in place (plain or transposed rows), except the
// last M % A2_MR rows, packed zero-padded so no read leaves A; an A2_MR x A2_NR register tile
// (12 accumulators) sums each K block.
#include "gemm_avx2.h"
#include "thread_scratch.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#include <math.h>

#define A2_MR 6
#define A2_NR 16
#define A2_KC 256
#define A2_MC 96
#define A2_NC 512
#define A2_INPLACE_M 64 // fewer rows than this read a plain B in place
#define A2_TARGET __attribute__((target("avx2,fma")))


// lanes [0, w) of a 256-bit mask
A2_TARGET static inline __m256i a2_mask(int w) {
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(w), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

// The tile's store: C (h x w) = acc (mode 0), += acc (1), = beta C + acc (2). Unrolled with
// constant row indices so the accumulators stay in registers.
#define A2_STORE(c)                                                                                       \
  const __m256i m0 = a2_mask(w), m1 = a2_mask(w - 8);                                                     \
  _Pragma("GCC unroll 6") for (int r = 0; r < A2_MR; r++) if (r < h) {                                    \
    float* p = C + r * ldc;                                                                               \
    __m256 x0 = c[r][0], x1 = c[r][1];                                                                    \
    if (w == A2_NR) {                                                                                     \
      if (mode == 1) {                                                                                    \
        x0 = _mm256_add_ps(x0, _mm256_loadu_ps(p));                                                       \
        x1 = _mm256_add_ps(x1, _mm256_loadu_ps(p + 8));                                                   \
      } else if (mode == 2) {                                                                             \
        x0 = _mm256_fmadd_ps(_mm256_set1_ps(beta), _mm256_loadu_ps(p), x0);                               \
        x1 = _mm256_fmadd_ps(_mm256_set1_ps(beta), _mm256_loadu_ps(p + 8), x1);                           \
      }                                                                                                   \
      _mm256_storeu_ps(p, x0);                                                                            \
      _mm256_storeu_ps(p + 8, x1);                                                                        \
    } else {                                                                                              \
      if (mode == 1) {                                                                                    \
        x0 = _mm256_add_ps(x0, _mm256_maskload_ps(p, m0));                                                \
        x1 = _mm256_add_ps(x1, _mm256_maskload_ps(p + 8, m1));                                            \
      } else if (mode == 2) {                                                                             \
        x0 = _mm256_fmadd_ps(_mm256_set1_ps(beta), _mm256_maskload_ps(p, m0), x0);                        \
        x1 = _mm256_fmadd_ps(_mm256_set1_ps(beta), _mm256_maskload_ps(p + 8, m1), x1);                    \
      }                                                                                                   \
      _mm256_maskstore_ps(p, m0, x0);                                                                     \
      _mm256_maskstore_ps(p + 8, m1, x1);                                                                 \
    }                                                                                                     \
  }

// B's row k of the panel: full loads where all A2_NR lanes are there, else masked (lanes past w
// are never read: B may be a matrix's own rows)
#define A2_LOAD_B                                                                                         \
  __m256 b0, b1;                                                                                          \
  if (full) {                                                                                             \
    b0 = _mm256_loadu_ps(bp + k * ldb);                                                                   \
    b1 = _mm256_loadu_ps(bp + k * ldb + 8);                                                               \
  } else {                                                                                                \
    b0 = _mm256_maskload_ps(bp + k * ldb, bm0);                                                           \
    b1 = _mm256_maskload_ps(bp + k * ldb + 8, bm1);                                                       \
  }

// A read in place, element (r, k) at a[r * lda + k]: op(A) = A, A2_MR full rows
A2_TARGET static void a2_kernel_rows(int kc, const float* a, int64_t lda, const float* bp, int64_t ldb, float* C,
                                     int64_t ldc, int h, int w, int mode, float beta) {
  const __m256i bm0 = a2_mask(w), bm1 = a2_mask(w - 8);
  const int full = w == A2_NR;
  __m256 c[A2_MR][2];
#pragma GCC unroll 6
  for (int r = 0; r < A2_MR; r++) c[r][0] = c[r][1] = _mm256_setzero_ps();
  const float *a0 = a, *a3 = a + 3 * lda;
  for (int k = 0; k < kc; k++) {
    A2_LOAD_B
#define A2_ROW(r, p, o)                                   \
  {                                                       \
    const __m256 x = _mm256_broadcast_ss(p + o * lda + k); \
    c[r][0] = _mm256_fmadd_ps(x, b0, c[r][0]);            \
    c[r][1] = _mm256_fmadd_ps(x, b1, c[r][1]);            \
  }
    A2_ROW(0, a0, 0) A2_ROW(1, a0, 1) A2_ROW(2, a0, 2) A2_ROW(3, a3, 0) A2_ROW(4, a3, 1) A2_ROW(5, a3, 2)
#undef A2_ROW
  }
  A2_STORE(c)
}

// element (r, k) at a[k * lda + r]: op(A) = A^T read in place, or a packed edge panel (lda = A2_MR)
A2_TARGET static void a2_kernel_cols(int kc, const float* a, int64_t lda, const float* bp, int64_t ldb, float* C,
                                     int64_t ldc, int h, int w, int mode, float beta) {
  const __m256i bm0 = a2_mask(w), bm1 = a2_mask(w - 8);
  const int full = w == A2_NR;
  __m256 c[A2_MR][2];
#pragma GCC unroll 6
  for (int r = 0; r < A2_MR; r++) c[r][0] = c[r][1] = _mm256_setzero_ps();
  for (int k = 0; k < kc; k++) {
    A2_LOAD_B
    const float* ak = a + k * lda;
#pragma GCC unroll 6
    for (int r = 0; r < A2_MR; r++) {
      const __m256 x = _mm256_broadcast_ss(ak + r);
      c[r][0] = _mm256_fmadd_ps(x, b0, c[r][0]);
      c[r][1] = _mm256_fmadd_ps(x, b1, c[r][1]);
    }
  }
  A2_STORE(c)
}

// 8 rows of 8 floats (s + i*ld) -> 8 rows of 8 (d + i*dl), transposed
A2_TARGET static inline void a2_t8(const float* s, int64_t ld, float* d, int64_t dl) {
  __m256 r0 = _mm256_loadu_ps(s), r1 = _mm256_loadu_ps(s + ld), r2 = _mm256_loadu_ps(s + 2 * ld),
         r3 = _mm256_loadu_ps(s + 3 * ld), r4 = _mm256_loadu_ps(s + 4 * ld), r5 = _mm256_loadu_ps(s + 5 * ld),
         r6 = _mm256_loadu_ps(s + 6 * ld), r7 = _mm256_loadu_ps(s + 7 * ld);
  __m256 t0 = _mm256_unpacklo_ps(r0, r1), t1 = _mm256_unpackhi_ps(r0, r1), t2 = _mm256_unpacklo_ps(r2, r3),
         t3 = _mm256_unpackhi_ps(r2, r3), t4 = _mm256_unpacklo_ps(r4, r5), t5 = _mm256_unpackhi_ps(r4, r5),
         t6 = _mm256_unpacklo_ps(r6, r7), t7 = _mm256_unpackhi_ps(r6, r7);
  __m256 u0 = _mm256_shuffle_ps(t0, t2, 0x44), u1 = _mm256_shuffle_ps(t0, t2, 0xee), u2 = _mm256_shuffle_ps(t1, t3, 0x44),
         u3 = _mm256_shuffle_ps(t1, t3, 0xee), u4 = _mm256_shuffle_ps(t4, t6, 0x44), u5 = _mm256_shuffle_ps(t4, t6, 0xee),
         u6 = _mm256_shuffle_ps(t5, t7, 0x44), u7 = _mm256_shuffle_ps(t5, t7, 0xee);
  _mm256_storeu_ps(d, _mm256_permute2f128_ps(u0, u4, 0x20));
  _mm256_storeu_ps(d + dl, _mm256_permute2f128_ps(u1, u5, 0x20));
  _mm256_storeu_ps(d + 2 * dl, _mm256_permute2f128_ps(u2, u6, 0x20));
  _mm256_storeu_ps(d + 3 * dl, _mm256_permute2f128_ps(u3, u7, 0x20));
  _mm256_storeu_ps(d + 4 * dl, _mm256_permute2f128_ps(u0, u4, 0x31));
  _mm256_storeu_ps(d + 5 * dl, _mm256_permute2f128_ps(u1, u5, 0x31));
  _mm256_storeu_ps(d + 6 * dl, _mm256_permute2f128_ps(u2, u6, 0x31));
  _mm256_storeu_ps(d + 7 * dl, _mm256_permute2f128_ps(u3, u7, 0x31));
}

// op(B) rows k0..k0+kc, cols j0..j0+nc -> panels of A2_NR columns, [k][A2_NR] each, zero-padded
A2_TARGET static void a2_pack_b(int tb, const float* B, int64_t ldb, int k0, int kc, int j0, int nc, float* dst) {
  for (int jp = 0; jp < nc; jp += A2_NR) {
    const int w = nc - jp < A2_NR ? nc - jp : A2_NR;
    float* d = dst + (int64_t)jp * kc;
    if (!tb) {
      const __m256i m0 = a2_mask(w), m1 = a2_mask(w - 8);
      for (int k = 0; k < kc; k++) {
        const float* s = B + (int64_t)(k0 + k) * ldb + j0 + jp;
        if (w == A2_NR) {
          _mm256_storeu_ps(d + k * A2_NR, _mm256_loadu_ps(s));
          _mm256_storeu_ps(d + k * A2_NR + 8, _mm256_loadu_ps(s + 8));
        } else {
          _mm256_storeu_ps(d + k * A2_NR, _mm256_maskload_ps(s, m0));
          _mm256_storeu_ps(d + k * A2_NR + 8, _mm256_maskload_ps(s + 8, m1));
        }
      }
      continue;
    }
    // B's rows are op(B)'s columns: 8 x 8 transposes, the ragged edges one by one
    const float* s = B + (int64_t)(j0 + jp) * ldb + k0;
    const int k8 = kc & ~7, w8 = w & ~7;
    for (int j = 0; j < w8; j += 8)
      for (int k = 0; k < k8; k += 8) a2_t8(s + j * ldb + k, ldb, d + k * A2_NR + j, A2_NR);
    for (int j = 0; j < w8; j++)
      for (int k = k8; k < kc; k++) d[k * A2_NR + j] = s[j * ldb + k];
    for (int k = 0; k < kc; k++) {
      for (int j = w8; j < w; j++) d[k * A2_NR + j] = s[j * ldb + k];
      for (int j = w; j < A2_NR; j++) d[k * A2_NR + j] = 0.0f;
    }
  }
}

// C = op(A) op(B) + beta C. Every element is the same k-ordered sum (fused multiply-adds from 0
// within each A2_KC block, blocks added in turn) whatever the shape of the call, so a product cut
// into shares any way sums exactly as one call. 0 when the scratch cannot be had (nothing written).
A2_TARGET static int a2_sgemm(int ta, int tb, int M, int N, int K, const float* A, int64_t lda, const float* B,
                              int64_t ldb, float beta, float* C, int64_t ldc) {
  // this thread's scratch (each pool thread packs its own share): the B block, then an M-edge A panel
  float* const a2_bp = tts_thread_scratch(TTS_SCRATCH_GEMM_AVX2, sizeof(float) * A2_KC * (A2_NC + A2_MR));
  if (!a2_bp) return 0;
  float* const a2_ep = a2_bp + A2_KC * A2_NC;
  if (K == 0) {
    for (int i = 0; i < M; i++)
      for (int j = 0; j < N; j++) C[i * ldc + j] = beta == 0.0f ? 0.0f : beta * C[i * ldc + j];
    return 1;
  }
  const int mfull = M - M % A2_MR;
  // few rows: read op(B) = B's rows in place (a packed element would serve only M / 6 tiles);
  // the sums are the same either way
  const int inplace = !tb && M < A2_INPLACE_M;
  const int64_t bl = inplace ? ldb : A2_NR; // a panel's row stride
  for (int jc = 0; jc < N; jc += A2_NC) {
    const int nc = N - jc < A2_NC ? N - jc : A2_NC;
    for (int pc = 0; pc < K; pc += A2_KC) {
      const int kc = K - pc < A2_KC ? K - pc : A2_KC;
      const int mode = pc > 0 ? 1 : beta != 0.0f ? 2 : 0;
      if (!inplace) a2_pack_b(tb, B, ldb, pc, kc, jc, nc, a2_bp);
#define A2_PANEL(jr) (inplace ? B + (int64_t)pc * ldb + jc + (jr) : a2_bp + (int64_t)(jr) * kc)
      for (int ic = 0; ic < mfull; ic += A2_MC) {
        const int mc = (mfull - ic < A2_MC ? mfull - ic : A2_MC);
        for (int jr = 0; jr < nc; jr += A2_NR) {
          const int w = nc - jr < A2_NR ? nc - jr : A2_NR;
          for (int ir = ic; ir < ic + mc; ir += A2_MR) {
            float* c = C + (int64_t)ir * ldc + jc + jr;
            if (ta) a2_kernel_cols(kc, A + (int64_t)pc * lda + ir, lda, A2_PANEL(jr), bl, c, ldc, A2_MR, w, mode, beta);
            else a2_kernel_rows(kc, A + (int64_t)ir * lda + pc, lda, A2_PANEL(jr), bl, c, ldc, A2_MR, w, mode, beta);
          }
        }
      }
      if (mfull < M) { // the last rows, packed zero-padded so no read leaves A
        const int h = M - mfull;
        for (int k = 0; k < kc; k++)
          for (int r = 0; r < A2_MR; r++)
            a2_ep[k * A2_MR + r] = r < h ? (ta ? A[(int64_t)(pc + k) * lda + mfull + r] : A[(int64_t)(mfull + r) * lda + pc + k]) : 0.0f;
        for (int jr = 0; jr < nc; jr += A2_NR)
          a2_kernel_cols(kc, a2_ep, A2_MR, A2_PANEL(jr), bl, C + (int64_t)mfull * ldc + jc + jr, ldc, h,
                         nc - jr < A2_NR ? nc - jr : A2_NR, mode, beta);
      }
#undef A2_PANEL
    }
  }
  return 1;
}

// The 256-bit FMA units' limit, for the benchmarks' "% of peak": units x 4096 iterations of 24
// independent fused multiply-adds (enough to cover the latency of two pipes).
A2_TARGET double tts_fma_probe_avx2(int64_t units) {
  __m256 a[24];
  const __m256 m = _mm256_set1_ps(0.999999f), c = _mm256_set1_ps(1e-7f);
  for (int i = 0; i < 24; i++) a[i] = _mm256_set1_ps((float)i);
  for (int64_t it = 0; it < units * 4096; it++) {
#pragma GCC unroll 24
    for (int i = 0; i < 24; i++) a[i] = _mm256_fmadd_ps(a[i], m, c);
  }
  __m256 s = a[0];
  for (int i = 1; i < 24; i++) s = _mm256_add_ps(s, a[i]);
  float l[8];
  _mm256_storeu_ps(l, s);
  return (double)(l[0] + l[1] + l[2] + l[3] + l[4] + l[5] + l[6] + l[7]); // keeps the chains live
}

int tts_avx2_usable(void) {
  __builtin_cpu_init(); // libgcc's check also asks the OS (XGETBV) whether it saves the ymm state
  return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
}

// The kernel's sums one element at a time, in its order: what runs when the scratch cannot be allocated.
static void a2_sgemm_scalar(int ta, int tb, int M, int N, int K, const float* A, int64_t lda, const float* B,
                            int64_t ldb, float beta, float* C, int64_t ldc) {
  for (int i = 0; i < M; i++)
    for (int j = 0; j < N; j++) {
      float* c = C + i * ldc + j;
      if (K == 0) *c = beta == 0.0f ? 0.0f : beta * *c;
      for (int pc = 0; pc < K; pc += A2_KC) {
        float acc = 0.0f;
        for (int k = pc; k < K && k < pc + A2_KC; k++)
          acc = fmaf(ta ? A[k * lda + i] : A[i * lda + k], tb ? B[j * ldb + k] : B[k * ldb + j], acc);
        *c = pc > 0 ? *c + acc : beta != 0.0f ? fmaf(beta, *c, acc) : acc;
      }
    }
}

void tts_sgemm_avx2(int ta, int tb, int M, int N, int K, const float* A, int64_t lda, const float* B, int64_t ldb,
                    float beta, float* C, int64_t ldc) {
  if (!a2_sgemm(ta, tb, M, N, K, A, lda, B, ldb, beta, C, ldc)) a2_sgemm_scalar(ta, tb, M, N, K, A, lda, B, ldb, beta, C, ldc);
}
#else
int tts_avx2_usable(void) { return 0; }
double tts_fma_probe_avx2(int64_t units) {
  (void)units;
  return 0.0;
}
void tts_sgemm_avx2(int ta, int tb, int M, int N, int K, const float* A, int64_t lda, const float* B, int64_t ldb,
                    float beta, float* C, int64_t ldc) {
  (void)ta, (void)tb, (void)M, (void)N, (void)K, (void)A, (void)lda, (void)B, (void)ldb, (void)beta, (void)C, (void)ldc;
}
#endif
