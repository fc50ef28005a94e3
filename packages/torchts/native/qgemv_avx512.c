// torchts' weight-only int8 product for few activation rows on CPUs with AVX-512: qgemv_rows.h's
// loops (those of the AVX2 kernel, qgemv_avx2.c) 16 weights a step: one sign-extending load, one
// convert and one FMA per row. Why: at one row (decode at batch 1) the AVX2 kernel and the wasm
// kernel both spend about four instructions per 8 weights and ran the bench Llama's int8 matrices
// at 23-30 GB/s on a Zen 5, compute-bound below the memory's rate; this spends half as many
// (bench/transformers/int8_gemv.ts: one row 2.1x, 8 rows 1.7x the AVX2 kernel).
#include "qgemv_avx2.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>

#define QR_TARGET __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,fma")))
#define QR_W 16
#define QR_VEC __m512
#define QR_ZERO() _mm512_setzero_ps()
#define QR_LOADX(p) _mm512_loadu_ps(p)
#define QR_LOADW(q) _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i*)(q))))
#define QR_FMA(a, b, c) _mm512_fmadd_ps(a, b, c)
#define QR_ADD(a, b) _mm512_add_ps(a, b)
#define QR_HSUM(v) _mm512_reduce_add_ps(v)
#define QR_ENTRY tts_q8gemv_avx512
#include "qgemv_rows.h"
#else
void tts_q8gemv_avx512(const tts_q8gemv_t* g, int lo, int hi) { (void)g, (void)lo, (void)hi; }
#endif
