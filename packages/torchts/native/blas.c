// torchts' optional native BLAS bridge for Node: float32 GEMM through the system's OpenBLAS,
// found at run time with dlopen, so building this file needs only a C compiler and Node's
// headers (no BLAS headers), and a machine without OpenBLAS still loads it and reports why.
// Operands are Float32Arrays (views of the wasm arena's shared memory, or plain arrays): the
// product reads and writes them in place, single-threaded on the calling thread (torchts' pool
// threads each call it on their own shares; OpenBLAS' own threads are set to 1).
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <node_api.h>

// CBLAS' enums, as the reference header numbers them
enum { RowMajor = 101, NoTrans = 111, Trans = 112 };
typedef void (*sgemm_t)(int, int, int, int, int, int, float, const float*, int, const float*, int, float, float*,
                        int);
typedef void (*set_threads_t)(int);
typedef char* (*config_t)(void);

static sgemm_t sgemm;
static set_threads_t set_threads;
static config_t get_config;
static config_t get_corename;
static char load_error[512];

static void load_blas(void) {
  // The server threads OpenBLAS starts when it loads spin 2^timeout cycles before sleeping (default
  // 2^28, ~0.1 s), taking a core from the wasm workers; torchts never gives them work (setThreads(1)),
  // so let them sleep at once unless the user chose otherwise.
  setenv("OPENBLAS_THREAD_TIMEOUT", "4", 0);
#if defined(__x86_64__)
  // OpenBLAS before 0.3.22 takes AMD's AVX-512 cores (Zen 4) for Zen 2 and runs its 256-bit
  // Haswell kernels; its SkylakeX kernels are the ones those cores can run (about 1.7x here).
  __builtin_cpu_init();
  if (__builtin_cpu_is("amd") && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
      __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl"))
    setenv("OPENBLAS_CORETYPE", "SkylakeX", 0);
#endif
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

static int f32_arg(napi_env env, napi_value v, float** data, size_t* len) {
  napi_typedarray_type t;
  void* p;
  napi_value ab;
  size_t off;
  if (napi_get_typedarray_info(env, v, &t, len, &p, &ab, &off) != napi_ok || t != napi_float32_array) {
    napi_throw_type_error(env, NULL, "sgemm: expected a Float32Array");
    return 0;
  }
  *data = (float*)p;
  return 1;
}

static int int_arg(napi_env env, napi_value v, int64_t* out) {
  if (napi_get_value_int64(env, v, out) != napi_ok) {
    napi_throw_type_error(env, NULL, "sgemm: expected a number");
    return 0;
  }
  return 1;
}

// The last element a row-major op(X) of rows x cols with leading dimension ld touches, plus one.
static int64_t extent(int trans, int64_t rows, int64_t cols, int64_t ld) {
  if (rows == 0 || cols == 0) return 0;
  return trans ? (cols - 1) * ld + rows : (rows - 1) * ld + cols;
}

// sgemm(transA, transB, M, N, K, A, aOff, lda, B, bOff, ldb, beta, C, cOff, ldc):
// C = op(A) op(B) + beta C, row-major, offsets and leading dimensions in elements.
static napi_value js_sgemm(napi_env env, napi_callback_info info) {
  size_t argc = 15;
  napi_value a[15];
  napi_get_cb_info(env, info, &argc, a, NULL, NULL);
  if (argc != 15) {
    napi_throw_type_error(env, NULL, "sgemm: expected 15 arguments");
    return NULL;
  }
  if (!sgemm) {
    napi_throw_error(env, NULL, load_error);
    return NULL;
  }
  int64_t ta, tb, M, N, K, ao, lda, bo, ldb, co, ldc;
  double beta;
  float *A, *B, *C;
  size_t na, nb, nc;
  if (!int_arg(env, a[0], &ta) || !int_arg(env, a[1], &tb) || !int_arg(env, a[2], &M) || !int_arg(env, a[3], &N) ||
      !int_arg(env, a[4], &K) || !f32_arg(env, a[5], &A, &na) || !int_arg(env, a[6], &ao) ||
      !int_arg(env, a[7], &lda) || !f32_arg(env, a[8], &B, &nb) || !int_arg(env, a[9], &bo) ||
      !int_arg(env, a[10], &ldb) || !f32_arg(env, a[12], &C, &nc) || !int_arg(env, a[13], &co) ||
      !int_arg(env, a[14], &ldc))
    return NULL;
  if (napi_get_value_double(env, a[11], &beta) != napi_ok) {
    napi_throw_type_error(env, NULL, "sgemm: beta must be a number");
    return NULL;
  }
  // never let a wrong call read or write outside its arrays
  const int64_t lim = 1LL << 31;
  if (M < 0 || N < 0 || K < 0 || M >= lim || N >= lim || K >= lim || ao < 0 || bo < 0 || co < 0 ||
      lda < (ta ? (M > 1 ? M : 1) : (K > 1 ? K : 1)) || ldb < (tb ? (K > 1 ? K : 1) : (N > 1 ? N : 1)) ||
      ldc < (N > 1 ? N : 1) || lda >= lim || ldb >= lim || ldc >= lim ||
      ao + extent(ta, M, K, lda) > (int64_t)na || bo + extent(tb, K, N, ldb) > (int64_t)nb ||
      co + extent(0, M, N, ldc) > (int64_t)nc) {
    napi_throw_range_error(env, NULL, "sgemm: shape, offset or leading dimension out of range");
    return NULL;
  }
  if (M > 0 && N > 0)
    sgemm(RowMajor, ta ? Trans : NoTrans, tb ? Trans : NoTrans, (int)M, (int)N, (int)K, 1.0f, A + ao, (int)lda,
          B + bo, (int)ldb, (float)beta, C + co, (int)ldc);
  return NULL;
}

// gemmSlab(mem, lo, hi, pb): shares lo..hi of the products described by a parameter block in
// the wasm memory (int32 words at byte pb, laid out as P_* below), run by whichever pool
// thread claimed them. A share is `share` rows (or columns) of one product: share u is product
// u / shares, rows u % shares. Each share is one single-threaded sgemm, so the pool's own
// threads split the work (no OpenBLAS thread to wake, which is slow on a VM's idle vCPU, or to
// fight the pool for a core), and the shares depend on the shape alone: the sums do not change
// with the thread count or with how the pool cuts the job.
enum { P_TA, P_TB, P_M, P_N, P_K, P_LDA, P_LDB, P_LDC, P_BYCOLS, P_SHARE, P_NB, P_CO, P_CSTRIDE, P_OFFS };

static napi_value js_gemm_slab(napi_env env, napi_callback_info info) {
  size_t argc = 4;
  napi_value a[4];
  napi_get_cb_info(env, info, &argc, a, NULL, NULL);
  float* mem;
  size_t n;
  int64_t lo, hi, pb;
  if (argc != 4 || !f32_arg(env, a[0], &mem, &n) || !int_arg(env, a[1], &lo) || !int_arg(env, a[2], &hi) ||
      !int_arg(env, a[3], &pb))
    return NULL;
  if (!sgemm) {
    napi_throw_error(env, NULL, load_error);
    return NULL;
  }
  const int64_t words = (int64_t)n; // float and int32 words are the same size
  if (pb < 0 || pb % 4 || pb / 4 + P_OFFS > words) goto bad;
  const int32_t* p = (const int32_t*)mem + pb / 4;
  const int64_t ta = p[P_TA], tb = p[P_TB], M = p[P_M], N = p[P_N], K = p[P_K], lda = p[P_LDA], ldb = p[P_LDB],
                ldc = p[P_LDC], bycols = p[P_BYCOLS], share = p[P_SHARE], nb = p[P_NB], co = p[P_CO],
                cs = p[P_CSTRIDE];
  if (M < 1 || N < 1 || K < 1 || nb < 1 || share < 1 || (ta != 0 && ta != 1) || (tb != 0 && tb != 1) ||
      (bycols != 0 && bycols != 1) || lda < (ta ? M : K) || ldb < (tb ? K : N) || ldc < N || co < 0 || cs < 0 ||
      pb / 4 + P_OFFS + 2 * nb > words)
    goto bad;
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
    sgemm(RowMajor, ta ? Trans : NoTrans, tb ? Trans : NoTrans, (int)m, (int)nn, (int)K, 1.0f, A, (int)lda, B, (int)ldb,
          0.0f, C, (int)ldc);
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
  if (argc != 1 || !int_arg(env, a[0], &n)) return NULL;
  if (set_threads && n >= 1 && n <= 1024) set_threads((int)n);
  return NULL;
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
      {"error", NULL, js_error, NULL, NULL, NULL, napi_default, NULL},
      {"config", NULL, js_config, NULL, NULL, NULL, napi_default, NULL},
  };
  napi_define_properties(env, exports, sizeof d / sizeof d[0], d);
  return exports;
}

NAPI_MODULE(NODE_GYP_MODULE_NAME, init)
