// torchts' AVX2 and AVX-512 weight-only int8 products for few rows (qgemv_avx2.c, qgemv_avx512.c).
#pragma once
#include <stdint.h>

// out[r * ldo + n] = sum_g s[n * G + g] * sum_{k in g} x[r * ldx + k] * q[n * K + k] (+ bias[n]),
// G = K / gs groups; rows r < M; weight rows [lo, hi) per call. Strides in elements.
typedef struct {
  const float* x;
  int64_t ldx;
  int M, K, gs;
  const int8_t* q;
  const float* s;
  const float* bias; // NULL: none
  float* out;
  int64_t ldo;
} tts_q8gemv_t;

void tts_q8gemv_avx2(const tts_q8gemv_t* g, int lo, int hi);
void tts_q8gemv_avx512(const tts_q8gemv_t* g, int lo, int hi);
