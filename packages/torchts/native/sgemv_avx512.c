// torchts' float32 product for few activation rows (decode at batch 1-16, wasm/matmul.ts) on CPUs with AVX-512:
// x @ W^T with W's rows read in place, no packing. Why: the wasm kernel (wasm/gemv.ts) streams the
// weight once per 4 rows with 128-bit vectors, and the bench Llama's f32 decode at batch 8 read its
// weights at ~9 GB/s through it (from 9 rows the AVX-512 GEMM ran, packing the weights on every
// call). Here each weight row is read from memory once for every row of x
// (passes of 4 rows; the later ones read it from L1), and the row 3 on is fetched meanwhile.
//
// Every output is the same sum whatever M, the weight rows' split across threads or the pass it
// lands in: four 16-lane chains over k (64-float steps, 16 to each chain; the full 16s left to
// chains 0, 1, 2; the K % 16 tail to chain 3), added pairwise, then reduced across lanes. So a
// sequence decoded alone and in a batch gets the same bits.
#include "sgemv_avx512.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>

#define SV_TARGET __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,fma")))
#ifndef SV_AHEAD
#define SV_AHEAD 3
#endif

// rows r0 .. r0 + R of x (R <= 4) against weight row n; R is a constant at each call, so the loops
// unroll and the 4 * R accumulators stay in registers
SV_TARGET static inline __attribute__((always_inline)) void sv_tile(const tts_sgemv_t* g, int r0, int R, int n) {
  const int K = g->K, k64 = K & ~63, k16 = K & ~15, tail = K - k16;
  const __mmask16 tm = (__mmask16)((1u << tail) - 1u);
  const float* w = g->w + (int64_t)n * g->ldw;
  const float* x[4];
#pragma GCC unroll 4
  for (int r = 0; r < 4; r++) x[r] = g->x + (int64_t)(r0 + (r < R ? r : 0)) * g->ldx;
  __m512 a[4][4];
#pragma GCC unroll 4
  for (int r = 0; r < 4; r++) a[r][0] = a[r][1] = a[r][2] = a[r][3] = _mm512_setzero_ps();
  int k = 0;
  // the first pass fetches the weight row SV_AHEAD rows on into the caches (the rows follow each
  // other in memory when ldw == K): later passes compute from L1 with nothing in flight otherwise
  const float* pf = g->w + (int64_t)(n + SV_AHEAD < g->N ? n + SV_AHEAD : n) * g->ldw;
  for (; k < k64; k += 64) {
    if (r0 == 0) {
      _mm_prefetch((const char*)(pf + k), _MM_HINT_T0);
      _mm_prefetch((const char*)(pf + k + 16), _MM_HINT_T0);
      _mm_prefetch((const char*)(pf + k + 32), _MM_HINT_T0);
      _mm_prefetch((const char*)(pf + k + 48), _MM_HINT_T0);
    }
    __m512 wv[4];
#pragma GCC unroll 4
    for (int c = 0; c < 4; c++) wv[c] = _mm512_loadu_ps(w + k + 16 * c);
#pragma GCC unroll 4
    for (int r = 0; r < 4; r++)
      if (r < R)
#pragma GCC unroll 4
        for (int c = 0; c < 4; c++) a[r][c] = _mm512_fmadd_ps(_mm512_loadu_ps(x[r] + k + 16 * c), wv[c], a[r][c]);
  }
  // the full 16s left go to chains 0, 1, 2 in turn; the K % 16 tail, zero-filled by masked loads
  // that read nothing past the row, to chain 3
  for (int c = 0; k < k16; k += 16, c++) {
    const __m512 wv = _mm512_loadu_ps(w + k);
#pragma GCC unroll 4
    for (int r = 0; r < 4; r++)
      if (r < R) a[r][c] = _mm512_fmadd_ps(_mm512_loadu_ps(x[r] + k), wv, a[r][c]);
  }
  if (tail) {
    const __m512 wv = _mm512_maskz_loadu_ps(tm, w + k);
#pragma GCC unroll 4
    for (int r = 0; r < 4; r++)
      if (r < R) a[r][3] = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(tm, x[r] + k), wv, a[r][3]);
  }
#pragma GCC unroll 4
  for (int r = 0; r < 4; r++)
    if (r < R)
      g->out[(int64_t)(r0 + r) * g->ldo + n] =
          _mm512_reduce_add_ps(_mm512_add_ps(_mm512_add_ps(a[r][0], a[r][1]), _mm512_add_ps(a[r][2], a[r][3])));
}

// every row of x against weight row n: passes of 4 rows (the row is read from memory in the
// first, from L1 in the others), the rest in one
SV_TARGET void tts_sgemv_avx512(const tts_sgemv_t* g, int lo, int hi) {
  // up to 8 rows of x: one weight row at a time (its later passes read it from L1). More: blocks of
  // 8 weight rows, each pass of 4 rows of x over the block, so x's rows stay in L1 across the block
  // instead of all of x being read again for every weight row. The order of the loops does not
  // change any output's sum.
  const int blk = g->M <= 8 ? 1 : 8;
  for (int nb = lo; nb < hi; nb += blk) {
    const int ne = nb + blk < hi ? nb + blk : hi;
    int r0 = 0;
    for (; r0 + 4 <= g->M; r0 += 4)
      for (int n = nb; n < ne; n++) sv_tile(g, r0, 4, n);
    switch (g->M - r0) {
      case 3: for (int n = nb; n < ne; n++) sv_tile(g, r0, 3, n); break;
      case 2: for (int n = nb; n < ne; n++) sv_tile(g, r0, 2, n); break;
      case 1: for (int n = nb; n < ne; n++) sv_tile(g, r0, 1, n); break;
      default: break;
    }
  }
}
#else
void tts_sgemv_avx512(const tts_sgemv_t* g, int lo, int hi) { (void)g, (void)lo, (void)hi; }
#endif
