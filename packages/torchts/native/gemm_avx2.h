// torchts' AVX2 float32 GEMM (gemm_avx2.c), used by the N-API bridge (blas.c) on CPUs with AVX2
// and FMA but no AVX-512.
#pragma once
#include <stdint.h>

// 1 when this CPU and OS run the kernel
int tts_avx2_usable(void);

// Row-major C = op(A) op(B) + beta C (op = transpose when ta / tb), single-threaded on the caller.
// Each element is the same k-ordered sum whatever the call's shape, so a product cut into row or
// column shares sums exactly as one call. Only called where tts_avx2_usable().
void tts_sgemm_avx2(int ta, int tb, int M, int N, int K, const float* A, int64_t lda, const float* B, int64_t ldb,
                    float beta, float* C, int64_t ldc);

// units x 4096 x 24 x 8 x 2 float32 FLOPs of independent 256-bit FMAs (the hardware limit the
// benchmarks report); the value is the chains' sum, returned so they are not optimized away.
double tts_fma_probe_avx2(int64_t units);
