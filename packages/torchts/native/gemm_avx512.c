// torchts' own float32 GEMM for x86-64 CPUs with AVX-512: row-major C = op(A) op(B) + beta C.
// Why: OpenBLAS before 0.3.22 (Debian 12's, PyTorch's here) runs its 256-bit Haswell kernels
// on AMD's AVX-512 cores, and an environment that pins OPENBLAS_CORETYPE keeps them there; this
// kernel runs the 512-bit units at ~240 GFLOP/s a core on such a machine, about 2x those kernels
// and level with OpenBLAS' SkylakeX ones. Built into the N-API bridge (blas.c) with per-function
// target attributes, so the file compiles with a plain `cc` and the code runs only where
// tts_avx512_usable() says the CPU (and the OS, for the zmm state) supports it.
//
// BLIS-style: op(B) is packed in panels of G_NR columns per G_KC x G_NC block; op(A) is read in
// place (plain or transposed rows, no packing), except the last M % G_MR rows, packed zero-padded
// so no read leaves A; a G_MR x G_NR register tile accumulates each K block.
#include "gemm_avx512.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include "avx512_tiles.h"
#include "thread_scratch.h"
#include <math.h>
#include <string.h>

#define G_KC 256
#define G_MC 192
#define G_NC 512
#ifndef G_INPLACE_M
#define G_INPLACE_M 128 // fewer rows than this read a plain B in place
#endif




// 8 rows of 8 floats (s + i*ld) -> 8 rows of 8 (d + i*dl), transposed
G_TARGET static inline void g_t8(const float* s, int64_t ld, float* d, int64_t dl) {
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

// op(B) rows k0..k0+kc, cols j0..j0+nc -> panels of G_NR columns, [k][G_NR] each, zero-padded
G_TARGET static void g_pack_b(int tb, const float* B, int64_t ldb, int k0, int kc, int j0, int nc, float* dst) {
  for (int jp = 0; jp < nc; jp += G_NR) {
    const int w = nc - jp < G_NR ? nc - jp : G_NR;
    float* d = dst + (int64_t)jp * kc;
    if (!tb) {
      const __mmask16 m0 = x_mask(w), m1 = x_mask(w - 16);
      for (int k = 0; k < kc; k++) {
        const float* s = B + (int64_t)(k0 + k) * ldb + j0 + jp;
        _mm512_store_ps(d + k * G_NR, _mm512_maskz_loadu_ps(m0, s));
        _mm512_store_ps(d + k * G_NR + 16, _mm512_maskz_loadu_ps(m1, s + 16));
      }
      continue;
    }
    // B's rows are op(B)'s columns: 8 x 8 transposes, the ragged edges one by one
    const float* s = B + (int64_t)(j0 + jp) * ldb + k0;
    const int k8 = kc & ~7, w8 = w & ~7;
    for (int j = 0; j < w8; j += 8)
      for (int k = 0; k < k8; k += 8) g_t8(s + j * ldb + k, ldb, d + k * G_NR + j, G_NR);
    for (int j = 0; j < w8; j++)
      for (int k = k8; k < kc; k++) d[k * G_NR + j] = s[j * ldb + k];
    for (int k = 0; k < kc; k++) {
      for (int j = w8; j < w; j++) d[k * G_NR + j] = s[j * ldb + k];
      for (int j = w; j < G_NR; j++) d[k * G_NR + j] = 0.0f;
    }
  }
}


// C = op(A) op(B) + beta C. Every element is the same k-ordered sum (blocks of G_KC from k = 0)
// whatever the shape of the call, so a product cut into shares any way sums exactly as one call.
// 0 when the scratch cannot be had (nothing written).
G_TARGET static int g_sgemm(int ta, int tb, int M, int N, int K, const float* A, int64_t lda, const float* B,
                            int64_t ldb, float beta, float* C, int64_t ldc) {
  // this thread's scratch (each pool thread packs its own share): the B block, then an M-edge A panel
  float* const g_bp = tts_thread_scratch(TTS_SCRATCH_GEMM_AVX512, sizeof(float) * G_KC * (G_NC + G_MR));
  if (!g_bp) return 0;
  float* const g_ep = g_bp + G_KC * G_NC;
  if (K == 0) {
    for (int i = 0; i < M; i++)
      for (int j = 0; j < N; j++) C[i * ldc + j] = beta == 0.0f ? 0.0f : beta * C[i * ldc + j];
    return 1;
  }
  const int mfull = M - M % G_MR;
  // few rows: read op(B) = B's rows in place (a packed element would serve only M / 12 tiles);
  // the sums are the same either way
  const int inplace = !tb && M < G_INPLACE_M;
  const int64_t bl = inplace ? ldb : G_NR; // a panel's row stride
  for (int jc = 0; jc < N; jc += G_NC) {
    const int nc = N - jc < G_NC ? N - jc : G_NC;
    for (int pc = 0; pc < K; pc += G_KC) {
      const int kc = K - pc < G_KC ? K - pc : G_KC;
      const int mode = pc > 0 ? 1 : beta != 0.0f ? 2 : 0;
      if (!inplace) g_pack_b(tb, B, ldb, pc, kc, jc, nc, g_bp);
      // panel jr of this block: packed ([kc][G_NR] at jr * kc), or B's rows from (pc, jc + jr)
#define G_PANEL(jr) (inplace ? B + (int64_t)pc * ldb + jc + (jr) : g_bp + (int64_t)(jr) * kc)
      for (int ic = 0; ic < mfull; ic += G_MC) {
        const int mc = (mfull - ic < G_MC ? mfull - ic : G_MC);
        for (int jr = 0; jr < nc; jr += G_NR) {
          const int w = nc - jr < G_NR ? nc - jr : G_NR;
          for (int ir = ic; ir < ic + mc; ir += G_MR) {
            float* c = C + (int64_t)ir * ldc + jc + jr;
            if (ta) g_kernel_cols(kc, A + (int64_t)pc * lda + ir, lda, G_PANEL(jr), bl, c, ldc, G_MR, w, mode, beta);
            else g_kernel_rows(kc, A + (int64_t)ir * lda + pc, lda, G_PANEL(jr), bl, c, ldc, G_MR, w, mode, beta);
          }
        }
      }
      if (mfull < M) { // the last rows, packed zero-padded so no read leaves A
        const int h = M - mfull;
        for (int k = 0; k < kc; k++)
          for (int r = 0; r < G_MR; r++)
            g_ep[k * G_MR + r] = r < h ? (ta ? A[(int64_t)(pc + k) * lda + mfull + r] : A[(int64_t)(mfull + r) * lda + pc + k]) : 0.0f;
        for (int jr = 0; jr < nc; jr += G_NR)
          g_kernel_cols(kc, g_ep, G_MR, G_PANEL(jr), bl, C + (int64_t)mfull * ldc + jc + jr, ldc, h,
                        nc - jr < G_NR ? nc - jr : G_NR, mode, beta);
      }
#undef G_PANEL
    }
  }
  return 1;
}

// The 512-bit FMA units' limit, for the benchmarks' "% of peak": units x 4096 iterations of 24
// independent fused multiply-adds (enough to cover 4-cycle latency x 2 pipes, twice over).
G_TARGET double tts_fma_probe_avx512(int64_t units) {
  __m512 a[24];
  const __m512 m = _mm512_set1_ps(0.999999f), c = _mm512_set1_ps(1e-7f);
  for (int i = 0; i < 24; i++) a[i] = _mm512_set1_ps((float)i);
  for (int64_t it = 0; it < units * 4096; it++) {
#pragma GCC unroll 24
    for (int i = 0; i < 24; i++) a[i] = _mm512_fmadd_ps(a[i], m, c);
  }
  __m512 s = a[0];
  for (int i = 1; i < 24; i++) s = _mm512_add_ps(s, a[i]);
  return (double)_mm512_reduce_add_ps(s); // keeps the chains live
}

int tts_avx512_usable(void) {
  __builtin_cpu_init(); // libgcc's check also asks the OS (XGETBV) whether it saves the zmm state
  return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq") &&
         __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("fma");
}

// The kernel's sums one element at a time, in its order (fused multiply-adds from 0 within each
// G_KC block, blocks added in turn): what runs when the scratch cannot be allocated.
static void g_sgemm_scalar(int ta, int tb, int M, int N, int K, const float* A, int64_t lda, const float* B,
                           int64_t ldb, float beta, float* C, int64_t ldc) {
  for (int i = 0; i < M; i++)
    for (int j = 0; j < N; j++) {
      float* c = C + i * ldc + j;
      if (K == 0) *c = beta == 0.0f ? 0.0f : beta * *c;
      for (int pc = 0; pc < K; pc += G_KC) {
        float acc = 0.0f;
        for (int k = pc; k < K && k < pc + G_KC; k++)
          acc = fmaf(ta ? A[k * lda + i] : A[i * lda + k], tb ? B[j * ldb + k] : B[k * ldb + j], acc);
        *c = pc > 0 ? *c + acc : beta != 0.0f ? fmaf(beta, *c, acc) : acc;
      }
    }
}

void tts_sgemm_avx512(int ta, int tb, int M, int N, int K, const float* A, int64_t lda, const float* B, int64_t ldb,
                      float beta, float* C, int64_t ldc) {
  if (!g_sgemm(ta, tb, M, N, K, A, lda, B, ldb, beta, C, ldc)) g_sgemm_scalar(ta, tb, M, N, K, A, lda, B, ldb, beta, C, ldc);
}
#else
int tts_avx512_usable(void) { return 0; }
double tts_fma_probe_avx512(int64_t units) {
  (void)units;
  return 0.0;
}
void tts_sgemm_avx512(int ta, int tb, int M, int N, int K, const float* A, int64_t lda, const float* B, int64_t ldb,
                      float beta, float* C, int64_t ldc) {
  (void)ta, (void)tb, (void)M, (void)N, (void)K, (void)A, (void)lda, (void)B, (void)ldb, (void)beta, (void)C, (void)ldc;
}
#endif
