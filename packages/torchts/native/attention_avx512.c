// torchts' AVX-512 scaled-dot-product attention forward (flash-style online softmax), for the
// `attention` composite's long-query calls (prefill, training): softmax(q k^T * scale) v, causal
// (bottom-right aligned) or not, grouped-query heads, an optional additive mask. Why: the wasm flash kernel does
// 4-wide dot products and a reduction per score; here a unit is 32 query rows of one head, kept
// transposed so that every step is 16 queries wide: scores come 12 keys x 32 queries at a time
// from a register tile, the running max / sum / rescale are lane-wise vector ops, and the P V
// product is a second register tile (12 queries x 32 value columns). Nothing of size L x S is
// ever stored. A mask (transformers pass causal masks as one) is read 16 queries at a time by
// gathers, and a block of keys it hides entirely from the unit's rows is skipped, so a causal
// mask costs what the causal flag does. The wasm kernel (wasm/attention.ts) keeps the
// probability-output, paged and two-segment calls, and every call on machines without AVX-512.
#include "attention_avx512.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include "avx512_tiles.h"
#include "avx512_math.h"
#include "thread_scratch.h"
#include <math.h>
#include <string.h>

#define A_TARGET __attribute__((target("avx512f,avx512dq,avx512bw,avx512vl,fma")))
#define A_QT 32 // query rows per unit (two vectors of lanes)
#define A_KR 12 // keys per score tile
#define A_KB 48 // keys per online-softmax step (4 score tiles)
#define A_MAXD 1024 // largest head dim (E, Ev) the scratch holds

// per-thread scratch: Qt [E][32], scores / probabilities [A_KB][32] (+ a tail the 12-row P V
// tile over-reads), a zero-padded key tile [12][E], the output accumulator [32][Ev], the mask
// block transposed [A_KB][32]
#define A_SCRATCH (A_MAXD * A_QT + A_KB * A_QT + 64 + A_KR * A_MAXD + A_QT * A_MAXD + A_KB * A_QT)

// The two products are the GEMM's register tiles (avx512_tiles.h): scores s[12 keys][32 queries]
// = K rows against Qt, the "rows" tile storing (mode 0); and o[12 queries][32 values] += P^T V,
// the "columns" tile (P is [key][query]) accumulating (mode 1) with V's rows read in place.

// one unit: query rows l0 .. l0 + nq of head h of batch b (pointers already at the head's rows)
A_TARGET static void a_unit(const tts_attn_t* a, const float* q, const float* k, const float* v, const float* mask,
                            float* out, int l0, int nq, float* buf) {
  const int E = a->E, Ev = a->Ev, S = a->S, L = a->L;
  float *qt = buf, *s = qt + A_MAXD * A_QT, *kpad = s + A_KB * A_QT + 64, *o = kpad + A_KR * A_MAXD;
  float* mt = o + A_QT * A_MAXD;
  const __mmask16 rows[2] = {x_mask(nq), x_mask(nq - 16)};
  // lane i's mask entry is mask[(l0 + i) * msl + j]: the caller keeps 16 * msl inside int32
  const __m512i mix = _mm512_mullo_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
                                         _mm512_set1_epi32((int)a->msl));
  // Qt: the unit's queries transposed, zero past nq
  for (int e = 0; e < E; e++)
    for (int i = 0; i < A_QT; i++) qt[e * A_QT + i] = i < nq ? q[(int64_t)(l0 + i) * a->qsl + e] : 0.0f;
  memset(o, 0, sizeof(float) * A_QT * Ev);
  memset(s + A_KB * A_QT, 0, 64 * sizeof(float));
  // keys row i sees: j < end_i (causal: l + S - L + 1, clamped to [0, S])
  __m512i end[2];
  int kend = S;
  for (int hlf = 0; hlf < 2; hlf++) {
    __m512i l = _mm512_add_epi32(_mm512_set1_epi32(l0 + 16 * hlf),
                                 _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15));
    __m512i e = _mm512_add_epi32(l, _mm512_set1_epi32(S - L + 1));
    e = _mm512_min_epi32(_mm512_max_epi32(e, _mm512_setzero_si512()), _mm512_set1_epi32(S));
    end[hlf] = a->causal ? e : _mm512_set1_epi32(S);
  }
  if (a->causal) {
    kend = l0 + nq - 1 + S - L + 1;
    kend = kend < 0 ? 0 : kend > S ? S : kend;
  }
  const __m512 scale = _mm512_set1_ps(a->scale), ninf = _mm512_set1_ps(-INFINITY);
  __m512 m[2] = {ninf, ninf}, lsum[2] = {_mm512_setzero_ps(), _mm512_setzero_ps()};
  float alpha[A_QT];
  for (int j0 = 0; j0 < kend; j0 += A_KB) {
    const int nk = kend - j0 < A_KB ? kend - j0 : A_KB;
    if (mask) { // the block's mask, transposed; nothing to do where it hides every key from every row
      __mmask16 seen = 0;
      const float* mr = mask + (int64_t)l0 * a->msl + j0;
      for (int r = 0; r < nk; r++)
        for (int hlf = 0; hlf < 2; hlf++) {
          const __m512 x = _mm512_mask_i32gather_ps(ninf, rows[hlf], mix, mr + 16 * hlf * a->msl + r, 4);
          _mm512_store_ps(mt + r * A_QT + 16 * hlf, x);
          seen |= _mm512_mask_cmp_ps_mask(rows[hlf], x, ninf, _CMP_NEQ_UQ);
        }
      if (!seen) continue;
    }
    for (int g = 0; g < nk; g += A_KR) {
      const float* kr = k + (int64_t)(j0 + g) * a->kss;
      int64_t ks = a->kss;
      if (nk - g < A_KR) { // the last keys, zero-padded so no read leaves k
        memset(kpad, 0, sizeof(float) * A_KR * E);
        for (int r = 0; r < nk - g; r++) memcpy(kpad + r * E, kr + r * a->kss, sizeof(float) * E);
        kr = kpad;
        ks = E;
      }
      g_kernel_rows(E, kr, ks, qt, A_QT, s + g * A_QT, A_QT, A_KR, A_QT, 0, 0.0f);
    }
    // scale, hide what the rows do not see, the block's max
    __m512 bm[2] = {ninf, ninf};
    for (int r = 0; r < nk; r++)
      for (int hlf = 0; hlf < 2; hlf++) {
        const __mmask16 vis = _mm512_cmpgt_epi32_mask(end[hlf], _mm512_set1_epi32(j0 + r));
        __m512 x = _mm512_mul_ps(_mm512_load_ps(s + r * A_QT + 16 * hlf), scale);
        if (mask) x = _mm512_add_ps(x, _mm512_load_ps(mt + r * A_QT + 16 * hlf));
        x = _mm512_mask_mov_ps(ninf, vis, x);
        _mm512_store_ps(s + r * A_QT + 16 * hlf, x);
        bm[hlf] = _mm512_max_ps(bm[hlf], x);
      }
    for (int hlf = 0; hlf < 2; hlf++) {
      const __m512 mn = _mm512_max_ps(m[hlf], bm[hlf]);
      // a row with nothing visible yet subtracts 0 (exp(-inf) = 0), not -inf (NaN)
      const __m512 mu = _mm512_mask_mov_ps(mn, _mm512_cmp_ps_mask(mn, ninf, _CMP_EQ_OQ), _mm512_setzero_ps());
      const __m512 al = x_exp(_mm512_sub_ps(m[hlf], mu));
      __m512 sum = _mm512_setzero_ps();
      for (int r = 0; r < nk; r++) {
        const __m512 p = x_exp(_mm512_sub_ps(_mm512_load_ps(s + r * A_QT + 16 * hlf), mu));
        _mm512_store_ps(s + r * A_QT + 16 * hlf, p);
        sum = _mm512_add_ps(sum, p);
      }
      lsum[hlf] = _mm512_fmadd_ps(lsum[hlf], al, sum);
      m[hlf] = mn;
      _mm512_storeu_ps(alpha + 16 * hlf, al);
    }
    // rescale the accumulator rows whose max moved, then add P V
    for (int i = 0; i < nq; i++)
      if (alpha[i] != 1.0f) {
        const __m512 al = _mm512_set1_ps(alpha[i]);
        for (int e = 0; e < Ev; e += 16) {
          const __mmask16 mk = x_mask(Ev - e);
          _mm512_mask_storeu_ps(o + i * Ev + e, mk, _mm512_mul_ps(_mm512_maskz_loadu_ps(mk, o + i * Ev + e), al));
        }
      }
    const float* vb = v + (int64_t)j0 * a->vss;
    for (int i0 = 0; i0 < nq; i0 += A_KR)
      for (int e0 = 0; e0 < Ev; e0 += 32)
        g_kernel_cols(nk, s + i0, A_QT, vb + e0, a->vss, o + i0 * Ev + e0, Ev, nq - i0 < A_KR ? nq - i0 : A_KR,
                      Ev - e0 < 32 ? Ev - e0 : 32, 1, 0.0f);
  }
  // normalize (0 / 0 gives NaN for a row with no visible key, as softmax over only -inf does)
  float ls[A_QT];
  _mm512_storeu_ps(ls, lsum[0]);
  _mm512_storeu_ps(ls + 16, lsum[1]);
  for (int i = 0; i < nq; i++) {
    const __m512 inv = _mm512_set1_ps(1.0f / ls[i]);
    float* dst = out + (int64_t)(l0 + i) * a->outRow;
    for (int e = 0; e < Ev; e += 16) {
      const __mmask16 mk = x_mask(Ev - e);
      _mm512_mask_storeu_ps(dst + e, mk, _mm512_mul_ps(_mm512_maskz_loadu_ps(mk, o + i * Ev + e), inv));
    }
  }
}

int tts_attn_units(const tts_attn_t* a) { return a->B * a->Hk * a->nrep * ((a->L + A_QT - 1) / A_QT); }

int tts_attn_avx512(const tts_attn_t* a, int lo, int hi) {
  if (a->E > A_MAXD || a->Ev > A_MAXD) return 0;
  float* buf = tts_thread_scratch(TTS_SCRATCH_ATTN, sizeof(float) * A_SCRATCH);
  if (!buf) return 0;
  const int qbn = (a->L + A_QT - 1) / A_QT, Hq = a->Hk * a->nrep;
  for (int u = lo; u < hi; u++) {
    const int qb = u % qbn, t = u / qbn, h = t % Hq, b = t / Hq, hk = h / a->nrep;
    const int l0 = qb * A_QT, nq = a->L - l0 < A_QT ? a->L - l0 : A_QT;
    a_unit(a, a->q + b * a->qsb + h * a->qsh, a->k + b * a->ksb + hk * a->ksh, a->v + b * a->vsb + hk * a->vsh,
           a->mask ? a->mask + b * a->msb + h * a->msh : NULL, a->out + ((int64_t)b * Hq + h) * a->L * a->outRow, l0, nq, buf);
  }
  return 1;
}
#else
int tts_attn_units(const tts_attn_t* a) {
  (void)a;
  return 0;
}
int tts_attn_avx512(const tts_attn_t* a, int lo, int hi) {
  (void)a, (void)lo, (void)hi;
  return 0;
}
#endif
