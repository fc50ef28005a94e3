// torchts' int8 x int8 GEMM for the linearW8A8 composite's many-row calls (prefill), on CPUs
// with AVX-512 VNNI: out[i, n] = (sum_g f32(sum_{k in g} xq[i, k] q[n, k]) * s[n, g]) * sx[i]
// (+ bias[n]), the decode kernel's formula (wasm/qdot.ts) with the same integers and the same
// float32 steps, so a prompt's rows give bit for bit what one-row calls give. Why: the wasm
// prefill quantized the rows, dequantized the whole weight to float32 and ran the float GEMM;
// vpdpbusd does 64 byte multiply-adds an instruction where a float FMA does 16.
//
// vpdpbusd multiplies unsigned by signed bytes: activations are stored as xq + 128 (u8) and
// 128 * sum_{k in g} q[n, k] (column sums, from the packing) is subtracted from each group's
// int32 sum, exactly. A register tile is 12 rows x 32 columns of int32 sums (one column a lane);
// weights are packed per 32-column panel as [k / 4][32 columns][4 bytes].
#include "w8a8_avx512.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#include "avx512_math.h"
#include "thread_scratch.h"
#include <string.h>

#define W_TARGET __attribute__((target("avx512f,avx512dq,avx512bw,avx512vl,avx512vnni,fma")))
// GCC's partial redundancy elimination rotates the 24 int32 sums through the stack in the tile's
// loop (measured: 300 vs 620-840 GOP/s a core); clang has no such pass
#if defined(__clang__)
#define W_NO_PRE
#else
#define W_NO_PRE __attribute__((optimize("no-tree-pre")))
#endif
#define W_MR 12
#define W_NR 32


W_TARGET void tts_q8_rows_avx512(const float* x, int64_t ldx, int K, uint8_t* xu, int64_t ldu, int Kp, float* sx,
                                 int lo, int hi) {
  const float MIN_SCALE = 1.17549435e-38f; // 2^-126, the scale's floor (an all-zero row quantizes to 0)
  for (int i = lo; i < hi; i++) {
    const float* r = x + i * ldx;
    __m512 m = _mm512_setzero_ps();
    __mmask16 nan = 0;
    for (int k = 0; k < K; k += 16) {
      const __m512 v = _mm512_maskz_loadu_ps(x_mask(K - k), r + k);
      nan |= _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
      m = _mm512_max_ps(m, _mm512_abs_ps(v));
    }
    // a NaN anywhere makes the scale NaN (wasm's f32.max propagates it); its q are 0
    float s = _mm512_reduce_max_ps(m) / 127.0f;
    s = nan ? __builtin_nanf("") : s < MIN_SCALE ? MIN_SCALE : s;
    sx[i] = s;
    const __m512 sv = _mm512_set1_ps(s);
    uint8_t* d = xu + i * ldu;
    for (int k = 0; k < Kp; k += 16) {
      const __mmask16 mk = x_mask(K - k);
      __m512 t = _mm512_div_ps(_mm512_maskz_loadu_ps(mk, r + k), sv);
      t = _mm512_roundscale_ps(t, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
      t = _mm512_mask_mov_ps(t, _mm512_cmp_ps_mask(t, t, _CMP_UNORD_Q), _mm512_setzero_ps());
      t = _mm512_min_ps(_mm512_max_ps(t, _mm512_set1_ps(-127.0f)), _mm512_set1_ps(127.0f));
      // q + 128 as a byte; past K (up to Kp) q is 0
      const __m512i q = _mm512_add_epi32(_mm512_maskz_mov_epi32(mk, _mm512_cvttps_epi32(t)), _mm512_set1_epi32(128));
      _mm_mask_storeu_epi8(d + k, x_mask(Kp - k), _mm512_cvtepi32_epi8(q));
    }
  }
}

// the panel of columns n0 .. n0 + w (w <= 32) of q [N, K]: bytes [t][32][4] for t < Kp / 4, zero
// past w and K; then per group g, int32 column sums cs[g][32] and float32 scales sc[g][32]
W_TARGET static void w_pack(const int8_t* q, int K, int Kp, int gs, const float* s, int G, int n0, int w, uint8_t* p) {
  const int T = Kp / 4;
  int32_t* cs = (int32_t*)(p + (int64_t)T * 128);
  float* sc = (float*)(cs + G * W_NR);
  const __m512i lanes = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
  const __m512i ones = _mm512_set1_epi8(1);
  for (int h = 0; h < 2; h++) {
    const __mmask16 cm = x_mask(w - 16 * h);
    const __m512i idx = _mm512_mullo_epi32(lanes, _mm512_set1_epi32(K));
    const int8_t* base = q + (int64_t)(n0 + 16 * h) * K;
    const int tf = K / 4; // whole quads inside every row
    const int tg = G == 1 ? T : gs / 4; // quads per group (one group: all of Kp, K need not be a multiple of 4)
    for (int g = 0; g < G; g++) {
      __m512i sum = _mm512_setzero_si512();
      for (int t = g * tg; t < (g + 1) * tg; t++) {
        __m512i b;
        if (t < tf) b = _mm512_mask_i32gather_epi32(_mm512_setzero_si512(), cm, idx, base + 4 * t, 1);
        else { // the last, partial quad: its bytes one by one, zeros past K
          int32_t tmp[16];
          for (int j = 0; j < 16; j++) {
            uint32_t v = 0;
            for (int e = 0; e < 4 && 4 * t + e < K; e++)
              if (j < w - 16 * h) v |= (uint32_t)(uint8_t)base[(int64_t)j * K + 4 * t + e] << (8 * e);
            tmp[j] = (int32_t)v;
          }
          b = _mm512_loadu_si512(tmp);
        }
        _mm512_store_si512(p + (int64_t)t * 128 + 64 * h, b);
        sum = _mm512_dpbusd_epi32(sum, ones, b);
      }
      _mm512_storeu_si512(cs + g * W_NR + 16 * h, sum);
      for (int j = 0; j < 16; j++) sc[g * W_NR + 16 * h + j] = j < w - 16 * h ? s[(int64_t)(n0 + 16 * h + j) * G + g] : 0.0f;
    }
  }
}

// rows i0 .. i0 + h (h <= 12) x the panel's w columns (xu holds 12 rows from i0: the caller pads M)
W_TARGET W_NO_PRE static void w_tile(const tts_w8a8_t* a, const uint8_t* p, int i0, int h, int n0, int w) {
  const int T = a->Kp / 4, G = a->K / a->gs, tg = G == 1 ? T : a->gs / 4;
  const int32_t* cs = (const int32_t*)(p + (int64_t)T * 128);
  const float* sc = (const float*)(cs + G * W_NR);
  const uint8_t* x0 = a->xu + (int64_t)i0 * a->ldu;
  const int64_t ld = a->ldu;
  // the float sums over groups live in memory (L1): with the 24 int32 sums in registers there is
  // no room for them, and a compiler left to choose spills the int32 sums inside the loop instead
  float tot[W_MR * W_NR] __attribute__((aligned(64)));
  memset(tot, 0, sizeof tot);
  for (int g = 0; g < G; g++) {
    __m512i c[W_MR][2];
#pragma GCC unroll 12
    for (int r = 0; r < W_MR; r++) c[r][0] = c[r][1] = _mm512_setzero_si512();
    for (int t = g * tg; t < (g + 1) * tg; t++) {
      const __m512i b0 = _mm512_load_si512(p + (int64_t)t * 128), b1 = _mm512_load_si512(p + (int64_t)t * 128 + 64);
      const uint8_t *x0k = x0 + 4 * t, *x3k = x0k + 3 * ld, *x6k = x0k + 6 * ld, *x9k = x0k + 9 * ld;
      int32_t xv;
#define W_ROW(r, p, o)                                   \
  {                                                      \
    memcpy(&xv, p + o * ld, 4);                          \
    const __m512i xa = _mm512_set1_epi32(xv);            \
    c[r][0] = _mm512_dpbusd_epi32(c[r][0], xa, b0);      \
    c[r][1] = _mm512_dpbusd_epi32(c[r][1], xa, b1);      \
  }
      W_ROW(0, x0k, 0) W_ROW(1, x0k, 1) W_ROW(2, x0k, 2) W_ROW(3, x3k, 0) W_ROW(4, x3k, 1) W_ROW(5, x3k, 2)
      W_ROW(6, x6k, 0) W_ROW(7, x6k, 1) W_ROW(8, x6k, 2) W_ROW(9, x9k, 0) W_ROW(10, x9k, 1) W_ROW(11, x9k, 2)
#undef W_ROW
    }
    // tot += f32(f32(sum - 128 colsum) * s): the decode kernel's float32 steps, in group order
    const __m512i k0 = _mm512_slli_epi32(_mm512_loadu_si512(cs + g * W_NR), 7);
    const __m512i k1 = _mm512_slli_epi32(_mm512_loadu_si512(cs + g * W_NR + 16), 7);
    const __m512 s0 = _mm512_loadu_ps(sc + g * W_NR), s1 = _mm512_loadu_ps(sc + g * W_NR + 16);
#pragma GCC unroll 12
    for (int r = 0; r < W_MR; r++) {
      float* tr = tot + r * W_NR;
      _mm512_store_ps(tr, _mm512_add_ps(_mm512_load_ps(tr), _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_sub_epi32(c[r][0], k0)), s0)));
      _mm512_store_ps(tr + 16, _mm512_add_ps(_mm512_load_ps(tr + 16), _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_sub_epi32(c[r][1], k1)), s1)));
    }
  }
  const __mmask16 m0 = x_mask(w), m1 = x_mask(w - 16);
  __m512 b0 = _mm512_setzero_ps(), b1 = _mm512_setzero_ps();
  if (a->bias) b0 = _mm512_maskz_loadu_ps(m0, a->bias + n0), b1 = _mm512_maskz_loadu_ps(m1, a->bias + n0 + 16);
#pragma GCC unroll 12
  for (int r = 0; r < W_MR; r++)
    if (r < h) {
      const __m512 sv = _mm512_set1_ps(a->sx[i0 + r]);
      float* o = a->out + (int64_t)(i0 + r) * a->ldo + n0;
      // + (bias or 0) always, as the one-row kernel (-0 becomes +0 there too)
      const __m512 y0 = _mm512_add_ps(_mm512_mul_ps(_mm512_load_ps(tot + r * W_NR), sv), b0);
      const __m512 y1 = _mm512_add_ps(_mm512_mul_ps(_mm512_load_ps(tot + r * W_NR + 16), sv), b1);
      _mm512_mask_storeu_ps(o, m0, y0);
      _mm512_mask_storeu_ps(o + 16, m1, y1);
    }
}

int tts_vnni_usable(void) {
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl") &&
         __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vnni");
}

int tts_w8a8_avx512(const tts_w8a8_t* a, int n_lo, int n_hi) {
  const int G = a->K / a->gs;
  const int64_t need = (int64_t)a->Kp / 4 * 128 + (int64_t)G * W_NR * 8 + 64;
  // this thread's packed panel [Kp / 4][32][4], then column sums and scales per group
  uint8_t* const w_buf = tts_thread_scratch(TTS_SCRATCH_W8A8, (size_t)need);
  if (!w_buf) return 0;
  for (int n0 = n_lo; n0 < n_hi; n0 += W_NR) {
    const int w = n_hi - n0 < W_NR ? n_hi - n0 : W_NR;
    w_pack(a->q, a->K, a->Kp, a->gs, a->s, G, n0, w, w_buf);
    for (int i0 = 0; i0 < a->M; i0 += W_MR)
      w_tile(a, w_buf, i0, a->M - i0 < W_MR ? a->M - i0 : W_MR, n0, w);
  }
  return 1;
}
#else
int tts_vnni_usable(void) { return 0; }
void tts_q8_rows_avx512(const float* x, int64_t ldx, int K, uint8_t* xu, int64_t ldu, int Kp, float* sx, int lo,
                        int hi) {
  (void)x, (void)ldx, (void)K, (void)xu, (void)ldu, (void)Kp, (void)sx, (void)lo, (void)hi;
}
int tts_w8a8_avx512(const tts_w8a8_t* a, int n_lo, int n_hi) {
  (void)a, (void)n_lo, (void)n_hi;
  return 0;
}
#endif
