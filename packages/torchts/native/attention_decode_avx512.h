// torchts' AVX-512 attention forward for short queries (attention_decode_avx512.c), used by the
// N-API bridge (blas.c).
#pragma once
#include <stdint.h>

// Most query rows one unit holds: nrep * L, the query rows sharing one kv head.
#define TTS_ATTN_DEC_MAX_ROWS 16
// Largest head dim (E, Ev) the scratch holds.
#define TTS_ATTN_DEC_MAX_DIM 1024

// softmax(q k^T * scale + mask) v over q [B, Hk * nrep, L, E] and keys/values in two segments
// along the sequence: keys [0, split) from k, v [B, Hk, split, E / Ev], keys [split, S) from k2, v2
// [B, Hk, S - split, E / Ev] (a KV cache's completed blocks and its tail; split == S: one segment).
// Output rows of outRow floats in out [B, Hk * nrep, L]; an additive mask [B, Hq, L, S] when mask
// is not NULL (key stride 1). Strides in floats, rows contiguous; causal is bottom-right aligned
// (row l sees keys j <= l + S - L). The caller has checked every extent and nrep * L <= 16.
typedef struct {
  const float *q, *k, *v, *k2, *v2, *mask;
  float* out;
  int B, Hk, nrep, L, S, split, E, Ev, causal;
  int64_t qsb, qsh, qsl, ksb, ksh, kss, vsb, vsh, vss, ksb2, ksh2, kss2, vsb2, vsh2, vss2, outRow, msb, msh, msl;
  float scale;
} tts_attn_dec_t;

// work units of a call: one per (batch, kv head), all of that kv head's query rows
int tts_attn_dec_units(const tts_attn_dec_t* a);

// units [lo, hi) on this thread; 0 (nothing written) when the rows, E or Ev are over the limits
// or scratch cannot be had, or without AVX-512 support compiled in
int tts_attn_dec_avx512(const tts_attn_dec_t* a, int lo, int hi);
