// torchts' AVX-512 attention forward (attention_avx512.c), used by the N-API bridge (blas.c).
#pragma once
#include <stdint.h>

// softmax(q k^T * scale) v over q [B, Hk * nrep, L, E], k [B, Hk, S, E], v [B, Hk, S, Ev] into
// out [B, Hk * nrep, L] rows of outRow floats, plus an additive mask [B, Hq, L, S] when mask is
// not NULL (key stride 1, 16 * msl inside int32); strides in floats, rows contiguous; causal is
// bottom-right aligned (row l sees keys j <= l + S - L). The caller has checked every extent.
typedef struct {
  const float *q, *k, *v, *mask;
  float* out;
  int B, Hk, nrep, L, S, E, Ev, causal;
  int64_t qsb, qsh, qsl, ksb, ksh, kss, vsb, vsh, vss, outRow, msb, msh, msl;
  float scale;
} tts_attn_t;

// work units of a call: (batch, query head, block of 32 query rows)
int tts_attn_units(const tts_attn_t* a);

// units [lo, hi) on this thread; 0 (nothing written) when E or Ev is over 1024 or scratch
// cannot be had, or without AVX-512 support compiled in
int tts_attn_avx512(const tts_attn_t* a, int lo, int hi);
