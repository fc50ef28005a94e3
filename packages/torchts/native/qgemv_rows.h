// The body of torchts' native weight-only int8 products for few rows, written once for the AVX2
// (qgemv_avx2.c) and AVX-512 (qgemv_avx512.c) kernels: each file defines the vector type and
// operations below, then includes this inside its x86-64 / GCC section.
//   QR_TARGET, QR_W (lanes), QR_VEC, QR_ZERO(), QR_LOADX(p) (QR_W floats), QR_LOADW(q) (QR_W int8
//   weights widened to float), QR_FMA(a, b, c) = a * b + c, QR_ADD, QR_HSUM (a float), QR_ENTRY
// out[r, n] = sum_g s[n, g] * sum_{k in g} x[r, k] * q[n, k] (+ bias[n]): per group, QR_W-lane
// partial sums in C chains a row (4 for one row, so the FMA latency is covered; 2 for more),
// reduced, the group's tail added in scalar, then scaled into the row's total.

// Rows r0 .. r0 + R of x (R <= 4) against weight rows [lo, hi). R is a constant at each call, so
// the loops unroll and the accumulators stay in registers.
QR_TARGET static inline void qr_rows(const tts_q8gemv_t* g, int r0, int R, int lo, int hi) {
  const int K = g->K, gs = g->gs, G = K / gs, C = R == 1 ? 4 : 2;
  for (int n = lo; n < hi; n++) {
    const int8_t* qn = g->q + (int64_t)n * K;
    const float* sn = g->s + (int64_t)n * G;
    float tot[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    for (int k0 = 0; k0 < K; k0 += gs) {
      const int kend = k0 + gs, kc = k0 + ((kend - k0) / (QR_W * C)) * (QR_W * C);
      QR_VEC a[4][4];
#pragma GCC unroll 4
      for (int r = 0; r < 4; r++) a[r][0] = a[r][1] = a[r][2] = a[r][3] = QR_ZERO();
      int k = k0;
      for (; k < kc; k += QR_W * C) {
        QR_VEC w[4];
#pragma GCC unroll 4
        for (int c = 0; c < 4; c++)
          if (c < C) w[c] = QR_LOADW(qn + k + QR_W * c);
#pragma GCC unroll 4
        for (int r = 0; r < 4; r++)
          if (r < R) {
            const float* xr = g->x + (int64_t)(r0 + r) * g->ldx + k;
#pragma GCC unroll 4
            for (int c = 0; c < 4; c++)
              if (c < C) a[r][c] = QR_FMA(QR_LOADX(xr + QR_W * c), w[c], a[r][c]);
          }
      }
      for (; k + QR_W <= kend; k += QR_W) {
        const QR_VEC w0 = QR_LOADW(qn + k);
#pragma GCC unroll 4
        for (int r = 0; r < 4; r++)
          if (r < R) a[r][0] = QR_FMA(QR_LOADX(g->x + (int64_t)(r0 + r) * g->ldx + k), w0, a[r][0]);
      }
      const float sc = sn[k0 / gs];
#pragma GCC unroll 4
      for (int r = 0; r < 4; r++)
        if (r < R) {
          QR_VEC v = QR_ADD(a[r][0], a[r][1]);
          if (C == 4) v = QR_ADD(v, QR_ADD(a[r][2], a[r][3]));
          float d = QR_HSUM(v);
          const float* xr = g->x + (int64_t)(r0 + r) * g->ldx;
          for (int j = k; j < kend; j++) d += xr[j] * (float)qn[j];
          tot[r] += d * sc;
        }
    }
    const float b = g->bias ? g->bias[n] : 0.0f;
#pragma GCC unroll 4
    for (int r = 0; r < 4; r++)
      if (r < R) g->out[(int64_t)(r0 + r) * g->ldo + n] = tot[r] + b;
  }
}

QR_TARGET void QR_ENTRY(const tts_q8gemv_t* g, int lo, int hi) {
  int r0 = 0;
  // passes of 4 rows, then the rest (each pass streams the weight rows once)
  for (; r0 + 4 <= g->M; r0 += 4) qr_rows(g, r0, 4, lo, hi);
  switch (g->M - r0) {
    case 3: qr_rows(g, r0, 3, lo, hi); break;
    case 2: qr_rows(g, r0, 2, lo, hi); break;
    case 1: qr_rows(g, r0, 1, lo, hi); break;
    default: break;
  }
}
