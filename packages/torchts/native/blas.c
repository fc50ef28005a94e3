// torchts' optional native BLAS bridge for Node: float32 GEMM through torchts' own AVX-512
// kernel (gemm_avx512.c) or AVX2 kernel (gemm_avx2.c), or the system's OpenBLAS, found at run time with
// dlopen, so building this needs only a C compiler and Node's headers (no BLAS headers), and a
// machine without OpenBLAS still loads it and reports why. Each call names its kernel
// (KERNEL_*). Operands are Float32Arrays (views of the wasm arena's shared memory, or plain
// arrays): the product reads and writes them in place, single-threaded on the calling thread
// (torchts' pool threads each call it on their own shares; OpenBLAS' own threads are set to 1).
#include "attention_avx512.h"
#include "attention_decode_avx512.h"
#include "gemm_avx2.h"
#include "gemm_avx512.h"
#include "im2col.h"
#include "qgemv_avx2.h"
#include "sgemv_avx512.h"
#include "w8a8_avx512.h"
#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <node_api.h>

// CBLAS' enums, as the reference header numbers them
enum { RowMajor = 101, NoTrans = 111, Trans = 112 };
// which GEMM a call runs
enum { KERNEL_OPENBLAS = 0, KERNEL_AVX512 = 1, KERNEL_AVX2 = 2 };
typedef void (*sgemm_t)(int, int, int, int, int, int, float, const float*, int, const float*, int, float, float*,
                        int);
typedef void (*set_threads_t)(int);
typedef char* (*config_t)(void);

static sgemm_t sgemm;
static set_threads_t set_threads;
static config_t get_config;
static config_t get_corename;
static char load_error[512];
static int avx512, avx2, vnni;

// 0 when the kernel can run, else 1 with the error thrown
static int kernel_arg(napi_env env, int64_t k, const char* fn) {
  char msg[640];
  if (k == KERNEL_OPENBLAS && sgemm) return 0;
  if (k == KERNEL_AVX512 && avx512) return 0;
  if (k == KERNEL_AVX2 && avx2) return 0;
  if (k == KERNEL_OPENBLAS) snprintf(msg, sizeof msg, "%s: %s", fn, load_error);
  else if (k == KERNEL_AVX512) snprintf(msg, sizeof msg, "%s: this CPU has no AVX-512 kernel", fn);
  else if (k == KERNEL_AVX2) snprintf(msg, sizeof msg, "%s: this CPU has no AVX2 kernel", fn);
  else snprintf(msg, sizeof msg, "%s: kernel must be 0 (OpenBLAS), 1 (AVX-512) or 2 (AVX2)", fn);
  napi_throw_range_error(env, NULL, msg);
  return 1;
}

// one single-threaded product on the chosen kernel (its arguments already checked)
static void run_gemm(int kernel, int ta, int tb, int M, int N, int K, const float* A, int lda, const float* B, int ldb,
                     float beta, float* C, int ldc) {
  if (kernel == KERNEL_AVX512) tts_sgemm_avx512(ta, tb, M, N, K, A, lda, B, ldb, beta, C, ldc);
  else if (kernel == KERNEL_AVX2) tts_sgemm_avx2(ta, tb, M, N, K, A, lda, B, ldb, beta, C, ldc);
  else sgemm(RowMajor, ta ? Trans : NoTrans, tb ? Trans : NoTrans, M, N, K, 1.0f, A, lda, B, ldb, beta, C, ldc);
}

// OpenBLAS reads these when it loads. They are set for that moment only and taken out again
// after, so the processes this one starts (a Python peer with its own OpenBLAS, numpy) see the
// environment the user gave: left set, the timeout stopped PyTorch's BLAS threads from spinning.
static int set_for_load(const char* name, const char* value) {
  if (getenv(name)) return 0; // the user's choice stands
  setenv(name, value, 0);
  return 1;
}

static void open_blas(void) {
  const char* env = getenv("TORCHTS_OPENBLAS");
  const char* names[] = {env, "libopenblas.so.0", "libopenblasp.so.0", "libopenblas.so", "libopenblas.dylib"};
  void* h = NULL;
  for (size_t i = 0; i < sizeof names / sizeof names[0] && !h; i++)
    if (names[i] && names[i][0]) h = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    snprintf(load_error, sizeof load_error, "OpenBLAS not found (%s)", dlerror());
    return;
  }
  sgemm = (sgemm_t)dlsym(h, "cblas_sgemm");
  set_threads = (set_threads_t)dlsym(h, "openblas_set_num_threads");
  get_config = (config_t)dlsym(h, "openblas_get_config");
  get_corename = (config_t)dlsym(h, "openblas_get_corename");
  if (!sgemm) snprintf(load_error, sizeof load_error, "OpenBLAS has no cblas_sgemm");
}

// once per process: each worker thread that requires the addon runs init() again, and must not
// set and unset variables while another thread reads the environment
static void load_blas_once(void) {
  // The server threads OpenBLAS starts when it loads spin 2^timeout cycles before sleeping (default
  // 2^28, ~0.1 s), taking a core from the wasm workers; torchts never gives them work (setThreads(1)),
  // so let them sleep at once unless the user chose otherwise.
  int timeout = set_for_load("OPENBLAS_THREAD_TIMEOUT", "4");
  int coretype = 0;
#if defined(__x86_64__)
  // OpenBLAS before 0.3.22 takes AMD's AVX-512 cores (Zen 4) for Zen 2 and runs its 256-bit
  // Haswell kernels; its SkylakeX kernels are the ones those cores can run (about 1.7x here).
  __builtin_cpu_init();
  if (__builtin_cpu_is("amd") && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
      __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl"))
    coretype = set_for_load("OPENBLAS_CORETYPE", "SkylakeX");
#endif
  avx512 = tts_avx512_usable();
  avx2 = tts_avx2_usable();
  vnni = tts_vnni_usable();
  open_blas();
  if (timeout) unsetenv("OPENBLAS_THREAD_TIMEOUT");
  if (coretype) unsetenv("OPENBLAS_CORETYPE");
}

static pthread_once_t blas_once = PTHREAD_ONCE_INIT;
static void load_blas(void) { pthread_once(&blas_once, load_blas_once); }

// argument i of fn as a Float32Array / a number; 0 with a TypeError naming both when it is not
static int f32_arg(napi_env env, const char* fn, int i, napi_value v, float** data, size_t* len) {
  napi_typedarray_type t;
  void* p;
  napi_value ab;
  size_t off;
  if (napi_get_typedarray_info(env, v, &t, len, &p, &ab, &off) != napi_ok || t != napi_float32_array) {
    char msg[96];
    snprintf(msg, sizeof msg, "%s: argument %d: expected a Float32Array", fn, i);
    napi_throw_type_error(env, NULL, msg);
    return 0;
  }
  *data = (float*)p;
  return 1;
}

static int int_arg(napi_env env, const char* fn, int i, napi_value v, int64_t* out) {
  if (napi_get_value_int64(env, v, out) != napi_ok) {
    char msg[96];
    snprintf(msg, sizeof msg, "%s: argument %d: expected a number", fn, i);
    napi_throw_type_error(env, NULL, msg);
    return 0;
  }
  return 1;
}

// The last element a row-major op(X) of rows x cols with leading dimension ld touches, plus one.
static int64_t extent(int trans, int64_t rows, int64_t cols, int64_t ld) {
  if (rows == 0 || cols == 0) return 0;
  return trans ? (cols - 1) * ld + rows : (rows - 1) * ld + cols;
}

// The (memory, lo, hi, block) arguments every pool function of the bridge takes; 0 (with the
// error thrown) when they are not a Float32Array and three numbers.
static int pool_args(napi_env env, napi_callback_info info, const char* fn, float** mem, size_t* n, int64_t* lo,
                     int64_t* hi, int64_t* pb) {
  size_t argc = 4;
  napi_value a[4];
  napi_get_cb_info(env, info, &argc, a, NULL, NULL);
  if (argc != 4) {
    char msg[96];
    snprintf(msg, sizeof msg, "%s: expected (memory, lo, hi, block)", fn);
    napi_throw_type_error(env, NULL, msg);
    return 0;
  }
  return f32_arg(env, fn, 0, a[0], mem, n) && int_arg(env, fn, 1, a[1], lo) && int_arg(env, fn, 2, a[2], hi) &&
         int_arg(env, fn, 3, a[3], pb);
}

// sgemm(transA, transB, M, N, K, A, aOff, lda, B, bOff, ldb, beta, C, cOff, ldc, kernel):
// C = op(A) op(B) + beta C, row-major, offsets and leading dimensions in elements.
static napi_value js_sgemm(napi_env env, napi_callback_info info) {
  size_t argc = 16;
  napi_value a[16];
  napi_get_cb_info(env, info, &argc, a, NULL, NULL);
  if (argc != 16) {
    napi_throw_type_error(env, NULL, "sgemm: expected 16 arguments");
    return NULL;
  }
  int64_t ta, tb, M, N, K, ao, lda, bo, ldb, co, ldc, kern;
  if (!int_arg(env, "sgemm", 15, a[15], &kern) || kernel_arg(env, kern, "sgemm")) return NULL;
  double beta;
  float *A, *B, *C;
  size_t na, nb, nc;
  if (!int_arg(env, "sgemm", 0, a[0], &ta) || !int_arg(env, "sgemm", 1, a[1], &tb) || !int_arg(env, "sgemm", 2, a[2], &M) || !int_arg(env, "sgemm", 3, a[3], &N) ||
      !int_arg(env, "sgemm", 4, a[4], &K) || !f32_arg(env, "sgemm", 5, a[5], &A, &na) || !int_arg(env, "sgemm", 6, a[6], &ao) ||
      !int_arg(env, "sgemm", 7, a[7], &lda) || !f32_arg(env, "sgemm", 8, a[8], &B, &nb) || !int_arg(env, "sgemm", 9, a[9], &bo) ||
      !int_arg(env, "sgemm", 10, a[10], &ldb) || !f32_arg(env, "sgemm", 12, a[12], &C, &nc) || !int_arg(env, "sgemm", 13, a[13], &co) ||
      !int_arg(env, "sgemm", 14, a[14], &ldc))
    return NULL;
  if (napi_get_value_double(env, a[11], &beta) != napi_ok) {
    napi_throw_type_error(env, NULL, "sgemm: beta must be a number");
    return NULL;
  }
  // never let a wrong call read or write outside its arrays
  const int64_t lim = 1LL << 31;
  if ((ta != 0 && ta != 1) || (tb != 0 && tb != 1) || M < 0 || N < 0 || K < 0 || M >= lim || N >= lim || K >= lim || ao < 0 || bo < 0 || co < 0 ||
      lda < (ta ? (M > 1 ? M : 1) : (K > 1 ? K : 1)) || ldb < (tb ? (K > 1 ? K : 1) : (N > 1 ? N : 1)) ||
      ldc < (N > 1 ? N : 1) || lda >= lim || ldb >= lim || ldc >= lim ||
      ao + extent(ta, M, K, lda) > (int64_t)na || bo + extent(tb, K, N, ldb) > (int64_t)nb ||
      co + extent(0, M, N, ldc) > (int64_t)nc) {
    napi_throw_range_error(env, NULL, "sgemm: shape, offset or leading dimension out of range");
    return NULL;
  }
  if (M > 0 && N > 0)
    run_gemm((int)kern, (int)ta, (int)tb, (int)M, (int)N, (int)K, A + ao, (int)lda, B + bo, (int)ldb, (float)beta,
             C + co, (int)ldc);
  return NULL;
}

// gemmSlab(mem, lo, hi, pb): shares lo..hi of the products described by a parameter block in
// the wasm memory (int32 words at byte pb, laid out as P_* below), run by whichever pool
// thread claimed them. A share is `share` rows (or columns) of one product: share u is product
// u / shares, rows u % shares. Each share is one single-threaded sgemm, so the pool's own
// threads split the work (no OpenBLAS thread to wake, which is slow on a VM's idle vCPU, or to
// fight the pool for a core), and the shares depend on the shape alone: the sums do not change
// with the thread count or with how the pool cuts the job.
enum { P_TA, P_TB, P_M, P_N, P_K, P_LDA, P_LDB, P_LDC, P_BYCOLS, P_SHARE, P_NB, P_CO, P_CSTRIDE, P_KERNEL, P_OFFS };

static napi_value js_gemm_slab(napi_env env, napi_callback_info info) {
  float* mem;
  size_t n;
  int64_t lo, hi, pb;
  if (!pool_args(env, info, "gemmSlab", &mem, &n, &lo, &hi, &pb)) return NULL;
  const int64_t words = (int64_t)n; // float and int32 words are the same size
  if (pb < 0 || pb % 4 || pb / 4 + P_OFFS > words) goto bad;
  const int32_t* p = (const int32_t*)mem + pb / 4;
  const int64_t ta = p[P_TA], tb = p[P_TB], M = p[P_M], N = p[P_N], K = p[P_K], lda = p[P_LDA], ldb = p[P_LDB],
                ldc = p[P_LDC], bycols = p[P_BYCOLS], share = p[P_SHARE], nb = p[P_NB], co = p[P_CO],
                cs = p[P_CSTRIDE], kern = p[P_KERNEL];
  if (M < 1 || N < 1 || K < 1 || nb < 1 || share < 1 || (ta != 0 && ta != 1) || (tb != 0 && tb != 1) ||
      (bycols != 0 && bycols != 1) || lda < (ta ? M : K) || ldb < (tb ? K : N) || ldc < N || co < 0 || cs < 0 ||
      pb / 4 + P_OFFS + 2 * nb > words)
    goto bad;
  if (kernel_arg(env, kern, "gemmSlab")) return NULL;
  const int64_t dim = bycols ? N : M, shares = (dim + share - 1) / share;
  if (lo < 0 || hi > nb * shares || lo >= hi) goto bad;
  // every product's operands and output inside the memory
  for (int64_t b = 0; b < nb; b++) {
    int64_t ao = p[P_OFFS + 2 * b], bo = p[P_OFFS + 2 * b + 1];
    if (ao < 0 || bo < 0 || ao + extent(ta, M, K, lda) > words || bo + extent(tb, K, N, ldb) > words ||
        co + b * cs + extent(0, M, N, ldc) > words)
      goto bad;
  }
  for (int64_t u = lo; u < hi; u++) {
    const int64_t b = u / shares, r0 = (u % shares) * share, r1 = r0 + share < dim ? r0 + share : dim;
    const float* A = mem + p[P_OFFS + 2 * b];
    const float* B = mem + p[P_OFFS + 2 * b + 1];
    float* C = mem + co + b * cs;
    int64_t m = M, nn = N;
    if (bycols) {
      B += tb ? r0 * ldb : r0;
      C += r0;
      nn = r1 - r0;
    } else {
      A += ta ? r0 : r0 * lda;
      C += r0 * ldc;
      m = r1 - r0;
    }
    run_gemm((int)kern, (int)ta, (int)tb, (int)m, (int)nn, (int)K, A, (int)lda, B, (int)ldb, 0.0f, C, (int)ldc);
  }
  return NULL;
bad:
  napi_throw_range_error(env, NULL, "gemmSlab: parameter block or share out of range");
  return NULL;
}

static napi_value js_set_threads(napi_env env, napi_callback_info info) {
  size_t argc = 1;
  napi_value a[1];
  int64_t n;
  napi_get_cb_info(env, info, &argc, a, NULL, NULL);
  if (argc != 1 || !int_arg(env, "setThreads", 0, a[0], &n)) return NULL;
  if (set_threads && n >= 1 && n <= 1024) set_threads((int)n);
  return NULL;
}

// attnFwd(mem, lo, hi, pb): units [lo, hi) of the attention whose parameter block (int32 words
// at byte pb of mem, laid out as AT_* below; offsets and strides in floats) is in the memory
// (attention_avx512.c). Every field and extent is checked against the memory first.
enum { AT_Q, AT_K, AT_V, AT_OUT, AT_B, AT_HK, AT_NREP, AT_L, AT_S, AT_E, AT_EV, AT_QSB, AT_QSH, AT_QSL, AT_KSB, AT_KSH,
       AT_KSS, AT_VSB, AT_VSH, AT_VSS, AT_OUTROW, AT_CAUSAL, AT_HASMASK, AT_MASK, AT_MSB, AT_MSH, AT_MSL, AT_SCALE,
       AT_WORDS };

static napi_value js_attn(napi_env env, napi_callback_info info) {
  float* mem;
  size_t n;
  int64_t lo, hi, pb;
  if (!pool_args(env, info, "attnFwd", &mem, &n, &lo, &hi, &pb)) return NULL;
  if (!avx512) {
    napi_throw_range_error(env, NULL, "attnFwd: this CPU has no AVX-512 kernel");
    return NULL;
  }
  const int64_t words = (int64_t)n;
  if (pb < 0 || pb % 4 || pb / 4 + AT_WORDS > words) goto bad;
  const int32_t* p = (const int32_t*)mem + pb / 4;
  for (int i = 0; i < AT_SCALE; i++)
    if (p[i] < 0) goto bad;
  const int64_t B = p[AT_B], Hk = p[AT_HK], nrep = p[AT_NREP], L = p[AT_L], S = p[AT_S], E = p[AT_E], Ev = p[AT_EV];
  if (B < 1 || Hk < 1 || nrep < 1 || L < 1 || S < 1 || E < 1 || Ev < 1 || E > 1024 || Ev > 1024 ||
      p[AT_CAUSAL] > 1 || p[AT_HASMASK] > 1 || p[AT_MSL] >= (1 << 26) || p[AT_OUTROW] < Ev ||
      B * Hk * nrep * ((L + 31) / 32) >= (1LL << 31))
    goto bad;
  const int64_t Hq = Hk * nrep;
  if (p[AT_Q] + (B - 1) * p[AT_QSB] + (Hq - 1) * p[AT_QSH] + (L - 1) * p[AT_QSL] + E > words ||
      p[AT_K] + (B - 1) * p[AT_KSB] + (Hk - 1) * p[AT_KSH] + (S - 1) * p[AT_KSS] + E > words ||
      p[AT_V] + (B - 1) * p[AT_VSB] + (Hk - 1) * p[AT_VSH] + (S - 1) * p[AT_VSS] + Ev > words ||
      p[AT_OUT] + (B * Hq * L - 1) * p[AT_OUTROW] + Ev > words ||
      (p[AT_HASMASK] && p[AT_MASK] + (B - 1) * p[AT_MSB] + (Hq - 1) * p[AT_MSH] + (L - 1) * p[AT_MSL] + S > words))
    goto bad;
  float scale;
  memcpy(&scale, p + AT_SCALE, sizeof scale);
  tts_attn_t at = {mem + p[AT_Q], mem + p[AT_K], mem + p[AT_V], p[AT_HASMASK] ? mem + p[AT_MASK] : NULL,
                   mem + p[AT_OUT], (int)B, (int)Hk, (int)nrep, (int)L, (int)S, (int)E, (int)Ev, p[AT_CAUSAL],
                   p[AT_QSB], p[AT_QSH], p[AT_QSL], p[AT_KSB], p[AT_KSH], p[AT_KSS], p[AT_VSB], p[AT_VSH], p[AT_VSS],
                   p[AT_OUTROW], p[AT_MSB], p[AT_MSH], p[AT_MSL], scale};
  if (lo < 0 || lo >= hi || hi > tts_attn_units(&at)) goto bad;
  if (!tts_attn_avx512(&at, (int)lo, (int)hi)) {
    napi_throw_error(env, NULL, "attnFwd: no scratch memory for the kernel");
    return NULL;
  }
  return NULL;
bad:
  napi_throw_range_error(env, NULL, "attnFwd: parameter block or units out of range");
  return NULL;
}

// attnDecode(mem, lo, hi, pb): units [lo, hi) of the short-query attention whose parameter block
// (int32 words at byte pb of mem, laid out as AD_* below; offsets and strides in floats) is in the
// memory (attention_decode_avx512.c). Every field and extent is checked against the memory first.
enum { AD_Q, AD_K, AD_V, AD_K2, AD_V2, AD_OUT, AD_B, AD_HK, AD_NREP, AD_L, AD_S, AD_SPLIT, AD_E, AD_EV, AD_QSB, AD_QSH,
       AD_QSL, AD_KSB, AD_KSH, AD_KSS, AD_VSB, AD_VSH, AD_VSS, AD_KSB2, AD_KSH2, AD_KSS2, AD_VSB2, AD_VSH2, AD_VSS2,
       AD_OUTROW, AD_CAUSAL, AD_HASMASK, AD_MASK, AD_MSB, AD_MSH, AD_MSL, AD_SCALE, AD_WORDS };

static napi_value js_attn_dec(napi_env env, napi_callback_info info) {
  float* mem;
  size_t n;
  int64_t lo, hi, pb;
  if (!pool_args(env, info, "attnDecode", &mem, &n, &lo, &hi, &pb)) return NULL;
  if (!avx512) {
    napi_throw_range_error(env, NULL, "attnDecode: this CPU has no AVX-512 kernel");
    return NULL;
  }
  const int64_t words = (int64_t)n;
  if (pb < 0 || pb % 4 || pb / 4 + AD_WORDS > words) goto bad;
  const int32_t* p = (const int32_t*)mem + pb / 4;
  for (int i = 0; i < AD_SCALE; i++)
    if (p[i] < 0) goto bad;
  const int64_t B = p[AD_B], Hk = p[AD_HK], nrep = p[AD_NREP], L = p[AD_L], S = p[AD_S], split = p[AD_SPLIT],
                E = p[AD_E], Ev = p[AD_EV], Hq = Hk * nrep;
  if (B < 1 || Hk < 1 || nrep < 1 || L < 1 || S < 1 || split > S || E < 1 || Ev < 1 || E > TTS_ATTN_DEC_MAX_DIM ||
      Ev > TTS_ATTN_DEC_MAX_DIM || nrep * L > TTS_ATTN_DEC_MAX_ROWS || p[AD_CAUSAL] > 1 || p[AD_HASMASK] > 1 ||
      p[AD_OUTROW] < Ev || B * Hk >= (1LL << 31))
    goto bad;
  // the keys and values of each segment that has any
  if (p[AD_Q] + (B - 1) * p[AD_QSB] + (Hq - 1) * p[AD_QSH] + (L - 1) * p[AD_QSL] + E > words ||
      (split > 0 && (p[AD_K] + (B - 1) * p[AD_KSB] + (Hk - 1) * p[AD_KSH] + (split - 1) * p[AD_KSS] + E > words ||
                     p[AD_V] + (B - 1) * p[AD_VSB] + (Hk - 1) * p[AD_VSH] + (split - 1) * p[AD_VSS] + Ev > words)) ||
      (split < S &&
       (p[AD_K2] + (B - 1) * p[AD_KSB2] + (Hk - 1) * p[AD_KSH2] + (S - split - 1) * p[AD_KSS2] + E > words ||
        p[AD_V2] + (B - 1) * p[AD_VSB2] + (Hk - 1) * p[AD_VSH2] + (S - split - 1) * p[AD_VSS2] + Ev > words)) ||
      p[AD_OUT] + (B * Hq * L - 1) * p[AD_OUTROW] + Ev > words ||
      (p[AD_HASMASK] && p[AD_MASK] + (B - 1) * p[AD_MSB] + (Hq - 1) * p[AD_MSH] + (L - 1) * p[AD_MSL] + S > words))
    goto bad;
  float scale;
  memcpy(&scale, p + AD_SCALE, sizeof scale);
  tts_attn_dec_t at = {mem + p[AD_Q], mem + p[AD_K], mem + p[AD_V], mem + p[AD_K2], mem + p[AD_V2],
                       p[AD_HASMASK] ? mem + p[AD_MASK] : NULL, mem + p[AD_OUT], (int)B, (int)Hk, (int)nrep, (int)L,
                       (int)S, (int)split, (int)E, (int)Ev, p[AD_CAUSAL], p[AD_QSB], p[AD_QSH], p[AD_QSL], p[AD_KSB],
                       p[AD_KSH], p[AD_KSS], p[AD_VSB], p[AD_VSH], p[AD_VSS], p[AD_KSB2], p[AD_KSH2], p[AD_KSS2],
                       p[AD_VSB2], p[AD_VSH2], p[AD_VSS2], p[AD_OUTROW], p[AD_MSB], p[AD_MSH], p[AD_MSL], scale};
  if (lo < 0 || lo >= hi || hi > tts_attn_dec_units(&at)) goto bad;
  if (!tts_attn_dec_avx512(&at, (int)lo, (int)hi)) {
    napi_throw_error(env, NULL, "attnDecode: no scratch memory for the kernel");
    return NULL;
  }
  return NULL;
bad:
  napi_throw_range_error(env, NULL, "attnDecode: parameter block or units out of range");
  return NULL;
}

// The int8 prefill of linearW8A8 (w8a8_avx512.c). Parameter blocks are int32 words at byte pb of
// mem; offsets are bytes (float32 arrays 4-aligned), row strides as named. Everything is checked
// against the memory before a byte is read or written.
// q8Rows(mem, lo, hi, pb): rows [lo, hi) of x quantized into xu (bytes) and sx
enum { QR_X, QR_LDX, QR_K, QR_XU, QR_LDU, QR_KP, QR_SX, QR_M, QR_WORDS };
// w8a8Slab(mem, lo, hi, pb): column shares [lo, hi) of the product (share u: columns u * share ..)
enum { WS_XU, WS_LDU, WS_KP, WS_M, WS_MP, WS_N, WS_K, WS_GS, WS_Q, WS_S, WS_HASBIAS, WS_BIAS, WS_OUT, WS_LDO, WS_SX,
       WS_SHARE, WS_WORDS };

// Throws "<fn>: parameter block or <unit> out of range" (unit: what lo and hi count).
static void range_error(napi_env env, const char* fn, const char* unit) {
  char msg[96];
  snprintf(msg, sizeof msg, "%s: parameter block or %s out of range", fn, unit);
  napi_throw_range_error(env, NULL, msg);
}

// The (memory, lo, hi, block) arguments of a pool function whose parameter block is `words` int32
// words, inside the memory and none negative; NULL with the error thrown otherwise, or when the CPU
// lacks its kernel (`usable` 0: "<fn>: this CPU has no <kernel> kernel").
static const int32_t* block_arg(napi_env env, napi_callback_info info, const char* fn, int words, int usable,
                                const char* kernel, const char* unit, uint8_t** mem, int64_t* bytes, int64_t* lo,
                                int64_t* hi) {
  float* m;
  size_t n;
  int64_t pb;
  if (!pool_args(env, info, fn, &m, &n, lo, hi, &pb)) return NULL;
  if (!usable) {
    char msg[96];
    snprintf(msg, sizeof msg, "%s: this CPU has no %s kernel", fn, kernel);
    napi_throw_range_error(env, NULL, msg);
    return NULL;
  }
  *mem = (uint8_t*)m;
  *bytes = (int64_t)n * 4;
  if (pb < 0 || pb % 4 || pb + 4LL * words > *bytes) {
    range_error(env, fn, unit);
    return NULL;
  }
  const int32_t* p = (const int32_t*)(*mem + pb);
  for (int i = 0; i < words; i++)
    if (p[i] < 0) {
      range_error(env, fn, unit);
      return NULL;
    }
  return p;
}

static napi_value js_q8_rows(napi_env env, napi_callback_info info) {
  uint8_t* mem;
  int64_t bytes, lo, hi;
  const int32_t* p = block_arg(env, info, "q8Rows", QR_WORDS, vnni, "AVX-512 VNNI", "units", &mem, &bytes, &lo, &hi);
  if (!p) return NULL;
  const int64_t K = p[QR_K], Kp = p[QR_KP], M = p[QR_M], ldx = p[QR_LDX], ldu = p[QR_LDU];
  if (K < 1 || M < 1 || Kp != (K + 3) / 4 * 4 || ldx < K || ldu < Kp || p[QR_X] % 4 || p[QR_SX] % 4 ||
      p[QR_X] / 4 + (M - 1) * ldx + K > bytes / 4 || p[QR_XU] + (M - 1) * ldu + Kp > bytes || p[QR_SX] + M * 4 > bytes ||
      lo < 0 || lo >= hi || hi > M) {
    range_error(env, "q8Rows", "units");
    return NULL;
  }
  tts_q8_rows_avx512((const float*)(mem + p[QR_X]), ldx, (int)K, mem + p[QR_XU], ldu, (int)Kp, (float*)(mem + p[QR_SX]),
                     (int)lo, (int)hi);
  return NULL;
}

static napi_value js_w8a8(napi_env env, napi_callback_info info) {
  uint8_t* mem;
  int64_t bytes, lo, hi;
  const int32_t* p = block_arg(env, info, "w8a8Slab", WS_WORDS, vnni, "AVX-512 VNNI", "units", &mem, &bytes, &lo, &hi);
  if (!p) return NULL;
  const int64_t K = p[WS_K], Kp = p[WS_KP], M = p[WS_M], Mp = p[WS_MP], N = p[WS_N], gs = p[WS_GS], ldu = p[WS_LDU],
                ldo = p[WS_LDO], share = p[WS_SHARE];
  const int64_t G = gs > 0 ? K / gs : 0;
  // an int32 group sum of (q + 128) x w stays exact while gs * 255 * 127 < 2^31. Float extents are
  // compared in floats: every term is below 2^62, so no sum overflows
  if (K < 1 || M < 1 || N < 1 || Kp != (K + 3) / 4 * 4 || gs < 1 || (gs % 4 && gs != K) || K % gs || gs > 65536 ||
      Mp < (M + 11) / 12 * 12 || ldu < Kp || ldo < N || share < 32 || share % 32 || p[WS_HASBIAS] > 1 ||
      p[WS_S] % 4 || p[WS_BIAS] % 4 || p[WS_OUT] % 4 || p[WS_SX] % 4 || p[WS_XU] + (Mp - 1) * ldu + Kp > bytes ||
      p[WS_SX] + M * 4 > bytes || p[WS_Q] + N * K > bytes || p[WS_S] / 4 + N * G > bytes / 4 ||
      (p[WS_HASBIAS] && p[WS_BIAS] / 4 + N > bytes / 4) || p[WS_OUT] / 4 + (M - 1) * ldo + N > bytes / 4 || lo < 0 ||
      lo >= hi || hi > (N + share - 1) / share) {
    range_error(env, "w8a8Slab", "units");
    return NULL;
  }
  tts_w8a8_t w = {mem + p[WS_XU], (const float*)(mem + p[WS_SX]), (const int8_t*)(mem + p[WS_Q]),
                  (const float*)(mem + p[WS_S]), p[WS_HASBIAS] ? (const float*)(mem + p[WS_BIAS]) : NULL,
                  (float*)(mem + p[WS_OUT]), (int)M, (int)N, (int)K, (int)Kp, (int)gs, ldu, ldo};
  const int64_t n1 = hi * share < N ? hi * share : N;
  if (!tts_w8a8_avx512(&w, (int)(lo * share), (int)n1)) {
    napi_throw_error(env, NULL, "w8a8Slab: no scratch memory for the kernel");
    return NULL;
  }
  return NULL;
}

// q8Gemv(mem, lo, hi, pb): weight rows [lo, hi) of the int8 weight-only product for few rows
// (qgemv_avx2.c, qgemv_avx512.c). The block's int32 words are QG_* below: offsets in bytes, ldx and ldo in floats.
// Everything is checked against the memory before a byte is read or written.
enum { QG_X, QG_LDX, QG_M, QG_K, QG_GS, QG_Q, QG_S, QG_HASBIAS, QG_BIAS, QG_OUT, QG_LDO, QG_N, QG_KERNEL, QG_WORDS };

static napi_value js_q8_gemv(napi_env env, napi_callback_info info) {
  uint8_t* mem;
  int64_t bytes, lo, hi;
  const int32_t* p = block_arg(env, info, "q8Gemv", QG_WORDS, avx2, "AVX2", "rows", &mem, &bytes, &lo, &hi);
  if (!p) return NULL;
  const int64_t M = p[QG_M], K = p[QG_K], gs = p[QG_GS], N = p[QG_N], ldx = p[QG_LDX], ldo = p[QG_LDO];
  // QG_KERNEL: 0 the AVX2 kernel, 1 the AVX-512 one (where this CPU has it). Extents are compared in
  // floats (bytes for q): every term is below 2^62, so no sum overflows
  if (M < 1 || K < 1 || N < 1 || gs < 1 || K % gs || ldx < K || ldo < N || p[QG_HASBIAS] > 1 || p[QG_KERNEL] > 1 ||
      (p[QG_KERNEL] == 1 && !avx512) || p[QG_X] % 4 ||
      p[QG_S] % 4 || p[QG_BIAS] % 4 || p[QG_OUT] % 4 || p[QG_X] / 4 + (M - 1) * ldx + K > bytes / 4 ||
      p[QG_Q] + N * K > bytes || p[QG_S] / 4 + N * (K / gs) > bytes / 4 || (p[QG_HASBIAS] && p[QG_BIAS] / 4 + N > bytes / 4) ||
      p[QG_OUT] / 4 + (M - 1) * ldo + N > bytes / 4 || lo < 0 || lo >= hi || hi > N) {
    range_error(env, "q8Gemv", "rows");
    return NULL;
  }
  tts_q8gemv_t g = {(const float*)(mem + p[QG_X]), ldx, (int)M, (int)K, (int)gs, (const int8_t*)(mem + p[QG_Q]),
                    (const float*)(mem + p[QG_S]), p[QG_HASBIAS] ? (const float*)(mem + p[QG_BIAS]) : NULL,
                    (float*)(mem + p[QG_OUT]), ldo};
  if (p[QG_KERNEL] == 1) tts_q8gemv_avx512(&g, (int)lo, (int)hi);
  else tts_q8gemv_avx2(&g, (int)lo, (int)hi);
  return NULL;
}

// sgemv(mem, lo, hi, pb): weight rows [lo, hi) of the float32 product for few rows
// (sgemv_avx512.c). The block's int32 words are SV_* below: offsets in bytes, strides in floats.
// Everything is checked against the memory before a byte is read or written.
enum { SV_X, SV_LDX, SV_M, SV_K, SV_W, SV_LDW, SV_OUT, SV_LDO, SV_N, SV_WORDS };

static napi_value js_sgemv(napi_env env, napi_callback_info info) {
  uint8_t* mem;
  int64_t bytes, lo, hi;
  const int32_t* p = block_arg(env, info, "sgemv", SV_WORDS, avx512, "AVX-512", "rows", &mem, &bytes, &lo, &hi);
  if (!p) return NULL;
  const int64_t M = p[SV_M], K = p[SV_K], N = p[SV_N], ldx = p[SV_LDX], ldw = p[SV_LDW], ldo = p[SV_LDO];
  // extents in floats: every term is below 2^62, so no sum overflows
  const int64_t floats = bytes / 4;
  if (M < 1 || K < 1 || N < 1 || ldx < K || ldw < K || ldo < N || p[SV_X] % 4 || p[SV_W] % 4 || p[SV_OUT] % 4 ||
      p[SV_X] / 4 + (M - 1) * ldx + K > floats || p[SV_W] / 4 + (N - 1) * ldw + K > floats ||
      p[SV_OUT] / 4 + (M - 1) * ldo + N > floats || lo < 0 || lo >= hi || hi > N) {
    range_error(env, "sgemv", "rows");
    return NULL;
  }
  tts_sgemv_t g = {(const float*)(mem + p[SV_X]), ldx, (int)M, (int)K, (const float*)(mem + p[SV_W]), ldw,
                   (float*)(mem + p[SV_OUT]), ldo, (int)N};
  tts_sgemv_avx512(&g, (int)lo, (int)hi);
  return NULL;
}

// im2col(mem, lo, hi, pb): rows [lo, hi) of one image's im2col matrix (im2col.c); the block's
// int32 words are IC_* below, offsets in floats. Runs on any CPU (the GEMM that follows picks its kernel).
enum { IC_X, IC_CG, IC_H, IC_W, IC_KH, IC_KW, IC_OH, IC_OW, IC_SH, IC_SW, IC_PH, IC_PW, IC_DH, IC_DW, IC_COLS, IC_LDC,
       IC_WORDS };

static napi_value js_im2col(napi_env env, napi_callback_info info) {
  float* mem;
  size_t n;
  int64_t lo, hi, pb;
  if (!pool_args(env, info, "im2col", &mem, &n, &lo, &hi, &pb)) return NULL;
  const int64_t words = (int64_t)n;
  if (pb < 0 || pb % 4 || pb / 4 + IC_WORDS > words) goto bad;
  const int32_t* p = (const int32_t*)mem + pb / 4;
  for (int i = 0; i < IC_WORDS; i++)
    if (p[i] < 0) goto bad;
  const int64_t Cg = p[IC_CG], H = p[IC_H], W = p[IC_W], KH = p[IC_KH], KW = p[IC_KW], OH = p[IC_OH], OW = p[IC_OW];
  const int64_t K = Cg * KH * KW;
  if (Cg < 1 || H < 1 || W < 1 || KH < 1 || KW < 1 || OH < 1 || OW < 1 || p[IC_SH] < 1 || p[IC_SW] < 1 ||
      p[IC_DH] < 1 || p[IC_DW] < 1 || p[IC_LDC] < OH * OW || p[IC_X] + Cg * H * W > words ||
      p[IC_COLS] + (K - 1) * p[IC_LDC] + OH * OW > words || K >= (1LL << 31) || lo < 0 || lo >= hi || hi > K ||
      // every coordinate the kernel forms (oh * sh - ph + kh * dh, ...) inside int32
      (OH - 1) * p[IC_SH] + (KH - 1) * p[IC_DH] + p[IC_PH] >= (1LL << 30) ||
      (OW - 1) * p[IC_SW] + (KW - 1) * p[IC_DW] + p[IC_PW] >= (1LL << 30) || p[IC_PH] >= (1 << 30) ||
      p[IC_PW] >= (1 << 30))
    goto bad;
  // every read inside x: the kernel only reads rows 0 <= ih < H and columns 0 <= iw < W
  tts_im2col_t ic = {mem + p[IC_X], mem + p[IC_COLS], (int)Cg, (int)H, (int)W, (int)KH, (int)KW, (int)OH, (int)OW,
                     p[IC_SH], p[IC_SW], p[IC_PH], p[IC_PW], p[IC_DH], p[IC_DW], p[IC_LDC]};
  tts_im2col(&ic, (int)lo, (int)hi);
  return NULL;
bad:
  napi_throw_range_error(env, NULL, "im2col: parameter block or rows out of range");
  return NULL;
}

// vnni(): whether this CPU runs the int8 kernels
static napi_value js_vnni(napi_env env, napi_callback_info info) {
  (void)info;
  napi_value r;
  napi_get_boolean(env, vnni, &r);
  return r;
}

// fmaProbe(mem, lo, hi, kernel): (hi - lo) x 4096 x 24 FMAs on this thread, 512-bit (kernel 1,
// the default) or 256-bit (kernel 2, AVX2): the benchmarks' peak. A pool function's signature,
// so the pool's threads can each run a share of the units.
static napi_value js_fma_probe(napi_env env, napi_callback_info info) {
  size_t argc = 4;
  napi_value a[4];
  int64_t lo, hi, kern = KERNEL_AVX512;
  napi_get_cb_info(env, info, &argc, a, NULL, NULL);
  if (argc < 3 || !int_arg(env, "fmaProbe", 1, a[1], &lo) || !int_arg(env, "fmaProbe", 2, a[2], &hi)) return NULL;
  if (argc >= 4 && !int_arg(env, "fmaProbe", 3, a[3], &kern)) return NULL;
  if (kern != KERNEL_AVX512 && kern != KERNEL_AVX2) {
    napi_throw_range_error(env, NULL, "fmaProbe: kernel must be 1 (AVX-512) or 2 (AVX2)");
    return NULL;
  }
  const int there = kern == KERNEL_AVX2 ? avx2 : avx512;
  if (!there || lo < 0 || hi < lo || hi - lo > (1LL << 20)) {
    napi_throw_range_error(env, NULL, !there ? (kern == KERNEL_AVX2 ? "fmaProbe: this CPU has no AVX2 kernel" : "fmaProbe: this CPU has no AVX-512 kernel") : "fmaProbe: units out of range");
    return NULL;
  }
  napi_value r;
  napi_create_double(env, kern == KERNEL_AVX2 ? tts_fma_probe_avx2(hi - lo) : tts_fma_probe_avx512(hi - lo), &r);
  return r;
}

// the kernels this machine runs, comma-separated ("avx512,avx2,openblas", "avx2,openblas", "openblas", "")
static napi_value js_kernels(napi_env env, napi_callback_info info) {
  (void)info;
  char s[32];
  snprintf(s, sizeof s, "%s%s%s%s%s", avx512 ? "avx512" : "", avx512 && (avx2 || sgemm) ? "," : "", avx2 ? "avx2" : "",
           avx2 && sgemm ? "," : "", sgemm ? "openblas" : "");
  napi_value r;
  napi_create_string_utf8(env, s, NAPI_AUTO_LENGTH, &r);
  return r;
}

// null when OpenBLAS loaded, else the reason it did not
static napi_value js_error(napi_env env, napi_callback_info info) {
  (void)info;
  napi_value r;
  if (sgemm) napi_get_null(env, &r);
  else napi_create_string_utf8(env, load_error, NAPI_AUTO_LENGTH, &r);
  return r;
}

// the build string and, after " core ", the kernels it chose for this CPU
static napi_value js_config(napi_env env, napi_callback_info info) {
  (void)info;
  char s[512];
  snprintf(s, sizeof s, "%s%s%s", get_config ? get_config() : (sgemm ? "cblas" : ""), get_corename ? " core " : "",
           get_corename ? get_corename() : "");
  napi_value r;
  napi_create_string_utf8(env, s, NAPI_AUTO_LENGTH, &r);
  return r;
}

static napi_value init(napi_env env, napi_value exports) {
  load_blas();
  napi_property_descriptor d[] = {
      {"sgemm", NULL, js_sgemm, NULL, NULL, NULL, napi_default, NULL},
      {"gemmSlab", NULL, js_gemm_slab, NULL, NULL, NULL, napi_default, NULL},
      {"setThreads", NULL, js_set_threads, NULL, NULL, NULL, napi_default, NULL},
      {"q8Rows", NULL, js_q8_rows, NULL, NULL, NULL, napi_default, NULL},
      {"w8a8Slab", NULL, js_w8a8, NULL, NULL, NULL, napi_default, NULL},
      {"im2col", NULL, js_im2col, NULL, NULL, NULL, napi_default, NULL},
      {"q8Gemv", NULL, js_q8_gemv, NULL, NULL, NULL, napi_default, NULL},
      {"sgemv", NULL, js_sgemv, NULL, NULL, NULL, napi_default, NULL},
      {"vnni", NULL, js_vnni, NULL, NULL, NULL, napi_default, NULL},
      {"attnFwd", NULL, js_attn, NULL, NULL, NULL, napi_default, NULL},
      {"attnDecode", NULL, js_attn_dec, NULL, NULL, NULL, napi_default, NULL},
      {"fmaProbe", NULL, js_fma_probe, NULL, NULL, NULL, napi_default, NULL},
      {"kernels", NULL, js_kernels, NULL, NULL, NULL, napi_default, NULL},
      {"error", NULL, js_error, NULL, NULL, NULL, napi_default, NULL},
      {"config", NULL, js_config, NULL, NULL, NULL, napi_default, NULL},
  };
  napi_define_properties(env, exports, sizeof d / sizeof d[0], d);
  return exports;
}

NAPI_MODULE(NODE_GYP_MODULE_NAME, init)
