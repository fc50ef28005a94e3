// torchts' AVX-512 attention forward for decode: softmax(q k^T * scale + mask) v when the query
// rows sharing one kv head are few (nrep * L <= 16: one new token of a grouped-query model, a
// few speculative tokens), over a KV cache read in place in its two segments (completed blocks
// and tail). Why: attention_avx512.c keeps 32 query rows of one head in its lanes, so a decode
// step would fill 1 of 32; the wasm flash kernel (wasm/attention.ts) computed the bench Llama's
// decode attention (3 query rows per kv head, 544 keys, E 64) at ~10 GFLOP/s, 119 us a layer on
// 2 threads, more than the layer's int8 weights took to stream. Here a unit is one kv head with
// all its query rows: each key row is loaded once for every query row (one score per row and
// key, a 16-wide dot product and a reduction), the online softmax runs along keys 16 lanes wide,
// and P V is a register tile of 4 query rows x 64 value columns fed one key row at a time.
#include "attention_decode_avx512.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include "avx512_math.h"
#include "thread_scratch.h"
#include <math.h>
#include <string.h>

#define D_TARGET __attribute__((target("avx512f,avx512dq,avx512bw,avx512vl,fma")))
#define D_KB 256 // keys per online-softmax step
#define D_R TTS_ATTN_DEC_MAX_ROWS
#define D_MAXD TTS_ATTN_DEC_MAX_DIM

// per-thread scratch: scores / probabilities [D_R][D_KB], the output accumulator [D_R][D_MAXD]
#define D_SCRATCH (D_R * D_KB + D_R * D_MAXD)

// key j's row: the first segment below split, the second from split on
static inline const float* d_row(const float* p1, int64_t s1, const float* p2, int64_t s2, int split, int j) {
  return j < split ? p1 + (int64_t)j * s1 : p2 + (int64_t)(j - split) * s2;
}

D_TARGET static float d_dot(const float* a, const float* b, int E) {
  __m512 s0 = _mm512_setzero_ps(), s1 = _mm512_setzero_ps();
  int e = 0;
  for (; e + 32 <= E; e += 32) {
    s0 = _mm512_fmadd_ps(_mm512_loadu_ps(a + e), _mm512_loadu_ps(b + e), s0);
    s1 = _mm512_fmadd_ps(_mm512_loadu_ps(a + e + 16), _mm512_loadu_ps(b + e + 16), s1);
  }
  for (; e < E; e += 16) {
    const __mmask16 mk = x_mask(E - e);
    s0 = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(mk, a + e), _mm512_maskz_loadu_ps(mk, b + e), s0);
  }
  return _mm512_reduce_add_ps(_mm512_add_ps(s0, s1));
}

// one unit: all R query rows of kv head hk of batch b
D_TARGET static void d_unit(const tts_attn_dec_t* a, int b, int hk, float* buf) {
  const int L = a->L, R = a->nrep * L, S = a->S, E = a->E, Ev = a->Ev, split = a->split, Hq = a->Hk * a->nrep;
  const int R4 = (R + 3) & ~3;
  float *s = buf, *o = buf + D_R * D_KB;
  const float* qr[D_R];
  const float* mr[D_R];
  float* orow[D_R];
  int end[D_R];
  float m[D_R], lsum[D_R];
  int kend = 0;
  for (int r = 0; r < R; r++) {
    const int g = r / L, l = r % L, h = hk * a->nrep + g;
    qr[r] = a->q + b * a->qsb + h * a->qsh + l * a->qsl;
    mr[r] = a->mask ? a->mask + b * a->msb + h * a->msh + l * a->msl : NULL;
    orow[r] = a->out + (((int64_t)b * Hq + h) * L + l) * a->outRow;
    int e = S;
    if (a->causal) {
      e = l + S - L + 1;
      e = e < 0 ? 0 : e > S ? S : e;
    }
    end[r] = e;
    kend = e > kend ? e : kend;
    m[r] = -INFINITY;
    lsum[r] = 0.0f;
  }
  // rows R..R4 of the P V tile: zero probabilities (never written), so they add nothing
  memset(s + R * D_KB, 0, sizeof(float) * (R4 - R) * D_KB);
  memset(o, 0, sizeof(float) * R4 * Ev);
  const float *k1 = a->k + b * a->ksb + hk * a->ksh, *k2 = a->k2 + b * a->ksb2 + hk * a->ksh2;
  const float *v1 = a->v + b * a->vsb + hk * a->vsh, *v2 = a->v2 + b * a->vsb2 + hk * a->vsh2;
  const __m512 ninf = _mm512_set1_ps(-INFINITY);
  const __m512i iota = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
  for (int j0 = 0; j0 < kend; j0 += D_KB) {
    const int nk = kend - j0 < D_KB ? kend - j0 : D_KB;
    // raw scores: each key row once for every query row (it stays in L1 between them)
    for (int jj = 0; jj < nk; jj++) {
      const float* kj = d_row(k1, a->kss, k2, a->kss2, split, j0 + jj);
      for (int r = 0; r < R; r++) s[r * D_KB + jj] = d_dot(qr[r], kj, E);
    }
    // per row: scale, mask, hide keys past the row's end, online softmax, rescale the accumulator
    for (int r = 0; r < R; r++) {
      float* sr = s + r * D_KB;
      const __m512i endv = _mm512_set1_epi32(end[r]);
      const __m512 scale = _mm512_set1_ps(a->scale);
      __m512 bm = ninf;
      for (int c = 0; c < nk; c += 16) {
        const __mmask16 mk = x_mask(nk - c);
        __m512 x = _mm512_mul_ps(_mm512_maskz_loadu_ps(mk, sr + c), scale);
        if (mr[r]) x = _mm512_add_ps(x, _mm512_maskz_loadu_ps(mk, mr[r] + j0 + c));
        const __mmask16 vis = mk & _mm512_cmpgt_epi32_mask(endv, _mm512_add_epi32(_mm512_set1_epi32(j0 + c), iota));
        x = _mm512_mask_mov_ps(ninf, vis, x);
        _mm512_mask_storeu_ps(sr + c, mk, x);
        bm = _mm512_max_ps(bm, x);
      }
      const float mx = _mm512_reduce_max_ps(bm), mn = m[r] > mx ? m[r] : mx;
      // a row with nothing visible yet subtracts 0 (exp(-inf) = 0), not -inf (NaN)
      const float mu = mn == -INFINITY ? 0.0f : mn;
      const __m512 muv = _mm512_set1_ps(mu);
      __m512 sum = _mm512_setzero_ps();
      for (int c = 0; c < nk; c += 16) {
        const __mmask16 mk = x_mask(nk - c);
        const __m512 p = _mm512_maskz_mov_ps(mk, x_exp(_mm512_sub_ps(_mm512_maskz_loadu_ps(mk, sr + c), muv)));
        _mm512_mask_storeu_ps(sr + c, mk, p);
        sum = _mm512_add_ps(sum, p);
      }
      float al;
      _mm_store_ss(&al, _mm512_castps512_ps128(x_exp(_mm512_set1_ps(m[r] - mu))));
      lsum[r] = lsum[r] * al + _mm512_reduce_add_ps(sum);
      m[r] = mn;
      if (al != 1.0f) {
        const __m512 alv = _mm512_set1_ps(al);
        for (int e = 0; e < Ev; e += 16) {
          const __mmask16 mk = x_mask(Ev - e);
          _mm512_mask_storeu_ps(o + r * Ev + e, mk, _mm512_mul_ps(_mm512_maskz_loadu_ps(mk, o + r * Ev + e), alv));
        }
      }
    }
    // o[rows r0..r0+4][cols e0..e0+64] += P V, one value row at a time
    for (int r0 = 0; r0 < R4; r0 += 4)
      for (int e0 = 0; e0 < Ev; e0 += 64) {
        __mmask16 mk[4];
        __m512 acc[4][4];
#pragma GCC unroll 4
        for (int t = 0; t < 4; t++) mk[t] = x_mask(Ev - e0 - 16 * t);
#pragma GCC unroll 4
        for (int i = 0; i < 4; i++)
#pragma GCC unroll 4
          for (int t = 0; t < 4; t++) acc[i][t] = _mm512_maskz_loadu_ps(mk[t], o + (r0 + i) * Ev + e0 + 16 * t);
        const float* p = s + r0 * D_KB;
        for (int jj = 0; jj < nk; jj++) {
          const float* vj = d_row(v1, a->vss, v2, a->vss2, split, j0 + jj) + e0;
          __m512 vv[4];
#pragma GCC unroll 4
          for (int t = 0; t < 4; t++) vv[t] = _mm512_maskz_loadu_ps(mk[t], vj + 16 * t);
#pragma GCC unroll 4
          for (int i = 0; i < 4; i++) {
            const __m512 pi = _mm512_set1_ps(p[i * D_KB + jj]);
#pragma GCC unroll 4
            for (int t = 0; t < 4; t++) acc[i][t] = _mm512_fmadd_ps(pi, vv[t], acc[i][t]);
          }
        }
#pragma GCC unroll 4
        for (int i = 0; i < 4; i++)
#pragma GCC unroll 4
          for (int t = 0; t < 4; t++) _mm512_mask_storeu_ps(o + (r0 + i) * Ev + e0 + 16 * t, mk[t], acc[i][t]);
      }
  }
  // normalize (0 / 0 gives NaN for a row with no visible key, as softmax over only -inf does)
  for (int r = 0; r < R; r++) {
    const __m512 inv = _mm512_set1_ps(1.0f / lsum[r]);
    for (int e = 0; e < Ev; e += 16) {
      const __mmask16 mk = x_mask(Ev - e);
      _mm512_mask_storeu_ps(orow[r] + e, mk, _mm512_mul_ps(_mm512_maskz_loadu_ps(mk, o + r * Ev + e), inv));
    }
  }
}

int tts_attn_dec_units(const tts_attn_dec_t* a) { return a->B * a->Hk; }

int tts_attn_dec_avx512(const tts_attn_dec_t* a, int lo, int hi) {
  if (a->E > D_MAXD || a->Ev > D_MAXD || a->nrep * a->L > D_R) return 0;
  float* buf = tts_thread_scratch(TTS_SCRATCH_ATTN_DECODE, sizeof(float) * D_SCRATCH);
  if (!buf) return 0;
  for (int u = lo; u < hi; u++) d_unit(a, u / a->Hk, u % a->Hk, buf);
  return 1;
}
#else
int tts_attn_dec_units(const tts_attn_dec_t* a) {
  (void)a;
  return 0;
}
int tts_attn_dec_avx512(const tts_attn_dec_t* a, int lo, int hi) {
  (void)a, (void)lo, (void)hi;
  return 0;
}
#endif
