// torchts' float32 product for few activation rows on CPUs with AVX-512 (sgemv_avx512.c).
#pragma once
#include <stdint.h>

// out[r * ldo + n] = sum_k x[r * ldx + k] * w[n * ldw + k]: rows r < M, weight rows [lo, hi) per
// call (x @ W^T with W's rows contiguous in k, nn.Linear's layout). Strides in elements.
typedef struct {
  const float* x;
  int64_t ldx;
  int M, K;
  const float* w;
  int64_t ldw;
  float* out;
  int64_t ldo;
  int N; // weight rows in all (the prefetch stays inside them)
} tts_sgemv_t;

void tts_sgemv_avx512(const tts_sgemv_t* g, int lo, int hi);
