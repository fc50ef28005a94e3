// The im2col matrix of one image of a 2-d convolution, for the native GEMM (see im2col.h): row k
// = (ci, kh, kw) holds, for every output pixel (oh, ow), x[ci, oh*sh - ph + kh*dh, ow*sw - pw +
// kw*dw], or 0 outside the image. Rows are independent, so the pool's threads split them.
#include "im2col.h"

#include <string.h>

void tts_im2col(const tts_im2col_t* a, int lo, int hi) {
  for (int k = lo; k < hi; k++) {
    const int ci = k / (a->KH * a->KW), kh = (k / a->KW) % a->KH, kw = k % a->KW;
    const float* x = a->x + (int64_t)ci * a->H * a->W;
    float* d = a->cols + (int64_t)k * a->ldc;
    // the output columns whose input column lies inside the image
    const int off = kw * a->dw - a->pw;
    int ow0 = off >= 0 ? 0 : (-off + a->sw - 1) / a->sw;
    int ow1 = a->W - 1 - off < 0 ? -1 : (a->W - 1 - off) / a->sw; // last inside
    if (ow1 > a->OW - 1) ow1 = a->OW - 1;
    if (ow0 > a->OW) ow0 = a->OW;
    for (int oh = 0; oh < a->OH; oh++) {
      float* r = d + oh * a->OW;
      const int ih = oh * a->sh - a->ph + kh * a->dh;
      if (ih < 0 || ih >= a->H || ow1 < ow0) {
        memset(r, 0, sizeof(float) * a->OW);
        continue;
      }
      const float* row = x + (int64_t)ih * a->W; // input column of output column ow: off + ow * sw
      if (ow0 > 0) memset(r, 0, sizeof(float) * ow0);
      if (a->sw == 1) memcpy(r + ow0, row + off + ow0, sizeof(float) * (ow1 - ow0 + 1));
      else
        for (int ow = ow0; ow <= ow1; ow++) r[ow] = row[off + (int64_t)ow * a->sw];
      if (ow1 + 1 < a->OW) memset(r + ow1 + 1, 0, sizeof(float) * (a->OW - ow1 - 1));
    }
  }
}
