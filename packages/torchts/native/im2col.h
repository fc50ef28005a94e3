// im2col for the native GEMM's 2-d convolutions (im2col.c), used by the N-API bridge (blas.c).
#pragma once
#include <stdint.h>

// x [Cg, H, W] contiguous; cols [Cg * KH * KW] rows of ldc >= OH * OW floats; pads, strides and
// dilations >= 0 / >= 1. The caller has checked every extent.
typedef struct {
  const float* x;
  float* cols;
  int Cg, H, W, KH, KW, OH, OW, sh, sw, ph, pw, dh, dw;
  int64_t ldc;
} tts_im2col_t;

// rows [lo, hi) of the matrix
void tts_im2col(const tts_im2col_t* a, int lo, int hi);
