// torchts' AVX-512 VNNI int8 GEMM for linearW8A8 (w8a8_avx512.c), used by the N-API bridge (blas.c).
#pragma once
#include <stdint.h>

// 1 when this CPU and OS run the kernels below (AVX-512 with VNNI)
int tts_vnni_usable(void);

// rows [lo, hi) of x (row stride ldx floats, K columns) quantized per row as the decode kernel
// does: sx[i] = max(max|x| / 127, 2^-126) (NaN if the row has one), xq = clamp(round_half_even(x /
// sx), -127, 127) (0 for NaN), stored as xq + 128 bytes at xu + i * ldu, 128 (q = 0) up to Kp
void tts_q8_rows_avx512(const float* x, int64_t ldx, int K, uint8_t* xu, int64_t ldu, int Kp, float* sx, int lo,
                        int hi);

// out[i, n] (row stride ldo) = (sum_g f32(sum_{k in g} xq[i, k] q[n, k]) * s[n, g]) * sx[i] + (bias[n] or 0)
// for q [N, K] int8, s [N, K / gs] (gs a multiple of 4, or K); xu holds M rounded up to 12 rows
// of Kp = K rounded up to 4
typedef struct {
  const uint8_t* xu;
  const float* sx;
  const int8_t* q;
  const float *s, *bias;
  float* out;
  int M, N, K, Kp, gs;
  int64_t ldu, ldo;
} tts_w8a8_t;

// columns [n_lo, n_hi) on this thread; 0 (nothing written) when scratch cannot be had, or
// without AVX-512 support compiled in. The caller checks the CPU has VNNI (tts_vnni_usable).
int tts_w8a8_avx512(const tts_w8a8_t* a, int n_lo, int n_hi);
