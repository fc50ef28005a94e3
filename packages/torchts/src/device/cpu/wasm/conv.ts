// conv2d on the wasm GEMM: out[Cout, OH*OW] = W[Cout, Cg*KH*KW] x cols[Cg*KH*KW, OH*OW] per
// image and group, where the im2col matrix is never built: conv_pack gathers the input straight
// into the GEMM's packed B panels (8 output pixels x K), in parallel with the weight panels. The
// output is NCHW already (rows = output channels), and the bias seeds the accumulators.
// With a native GEMM kernel in use (native/blas.ts) an ungrouped convolution instead builds each
// image's im2col matrix natively and multiplies on that kernel (3-4x the wasm GEMM's rate), the
// bias as one more row of ones against a bias column of the weight.
import type { IRNode } from "../../../ir/prims.js";
import type { Arr, Kernel } from "../codegen.js";
import { Fn, I32, OP } from "./emitter.js";
import { GEMM, GEMM_FN, P, XOP, field, fusedColsDriver, ifElse, packUnits } from "./gemm.js";
import { gemmBlock, matmulF32, runGemm } from "./matmul.js";
import { IM2COL, IM2COL_MAX, nativeConvStats, nativeIm2colFn } from "../native/conv.js";
import { inArena } from "./ops.js";
import { wasmRuntime, type WasmRuntime } from "./runtime.js";

const NR = 4 * GEMM.NV;

/**
 * conv_pack_b(jp, dst, P): B panel jp of the im2col matrix, element (k = (ci, kh, kw), c) =
 * x[ci, oh*sh - ph + kh*dh, ow*sw - pw + kw*dw] for output pixel j = jp*NR + c (zero outside
 * the image or past the last pixel).
 */
function packB(): Fn {
  if (NR !== 8) throw new Error("conv_pack_b assumes 8-column B panels");
  const f = new Fn("conv_pack_b", [I32, I32, I32]);
  const [jp, dst, p] = [0, 1, 2];
  const L = () => f.local(I32);
  const K = L(), N = L(), x = L(), H = L(), W = L(), OW = L(), KH = L(), KW = L();
  const sh = L(), sw = L(), ph = L(), pw = L(), dh = L(), dw = L(), Cg = L();
  const j0 = L(), oh = L(), ow = L(), ci = L(), kh = L(), kw = L(), ih = L(), iw = L(), row = L(), rowOk = L();
  const c = L(), j = L(), d = L(), ih0 = L(), iw0 = L(), ok = L(), end = L(), nr = L();
  field(f, p, P.K, K); field(f, p, P.N, N); field(f, p, P.x, x);
  field(f, p, P.H, H); field(f, p, P.W, W); field(f, p, P.OW, OW); field(f, p, P.KH, KH); field(f, p, P.KW, KW);
  field(f, p, P.sh, sh); field(f, p, P.sw, sw); field(f, p, P.ph, ph); field(f, p, P.pw, pw);
  field(f, p, P.dh, dh); field(f, p, P.dw, dw); field(f, p, P.Cg, Cg);
  const { i32eq, i32les, i32divs } = XOP;
  const mul = () => f.op(OP.i32mul), add = () => f.op(OP.i32add), sub = () => f.op(OP.i32sub);
  /** for (v = 0; v < n; v++) body (n > 0 assumed, as every extent here is) */
  const count = (v: number, n: number, body: () => void) => {
    f.i32(0).set(v);
    f.loop(() => {
      body();
      f.get(v).i32(1).op(OP.i32add).tee(v).get(n).op(OP.i32lts).op(OP.brIf, 0);
    });
  };
  /** push x[ci, ih, iw] if rowOk & iw in [0, W), else 0 (the address is clamped to x when out) */
  const gather = () => {
    f.get(rowOk).get(iw).get(W).op(OP.i32ltu).op(OP.i32and).set(ok);
    f.get(row).get(iw).i32(4); mul(); add();
    f.get(x).get(ok).op(OP.select).mem(OP.f32load, 2, 0);
    f.f32(0).get(ok).op(OP.select);
  };
  const setRow = () => {
    // ih = ih0 + kh*dh ; rowOk = 0 <= ih < H ; row = x + (ci*H + ih)*W*4
    f.get(ih0).get(kh).get(dh); mul(); add(); f.tee(ih).get(H).op(OP.i32ltu).set(rowOk);
    f.get(x).get(ci).get(H); mul(); f.get(ih); add(); f.get(W); mul(); f.i32(4); mul(); add(); f.set(row);
  };
  f.get(jp).i32(NR); mul(); f.set(j0);
  f.get(j0).get(OW).op(i32divs).set(oh);
  f.get(j0).get(oh).get(OW); mul(); sub(); f.set(ow);
  f.get(oh).get(sh); mul(); f.get(ph); sub(); f.set(ih0);
  // 8 pixels on one output row, unit stride: 8 consecutive inputs per (ci, kh, kw)
  f.get(sw).i32(1).op(i32eq).get(ow).i32(NR); add(); f.get(OW).op(i32les).op(OP.i32and);
  ifElse(
    f,
    () => {
      count(ci, Cg, () =>
        count(kh, KH, () => {
          setRow();
          f.get(ow).get(pw); sub(); f.set(iw);
          count(kw, KW, () => {
            // whole vector in the image: two loads; else lane by lane
            f.get(rowOk).get(iw).i32(0).op(OP.i32ges).op(OP.i32and).get(iw).i32(NR); add(); f.get(W).op(i32les).op(OP.i32and);
            ifElse(
              f,
              () => {
                f.get(row).get(iw).i32(4); mul(); add(); f.set(ok);
                f.get(dst).get(ok).v128load(0).v128store(0);
                f.get(dst).get(ok).v128load(16).v128store(16);
              },
              () => {
                for (let q = 0; q < NR; q++) {
                  f.get(dst);
                  gather();
                  f.mem(OP.f32store, 2, 4 * q);
                  f.get(iw).i32(1).op(OP.i32add).set(iw);
                }
                f.get(iw).i32(NR).op(OP.i32sub).set(iw);
              },
            );
            f.get(dst).i32(4 * NR).op(OP.i32add).set(dst);
            f.get(iw).get(dw).op(OP.i32add).set(iw);
          });
        }),
      );
    },
    () => {
      // general: one pixel (column of the panel) at a time
      f.i32(NR).set(nr);
      count(c, nr, () => {
        f.get(j0).get(c); add(); f.set(j);
        f.get(dst).get(c).i32(4); mul(); add(); f.set(d);
        f.get(j).get(N).op(OP.i32lts);
        ifElse(
          f,
          () => {
            f.get(j).get(OW).op(i32divs).set(oh);
            f.get(j).get(oh).get(OW); mul(); sub(); f.set(ow);
            f.get(oh).get(sh); mul(); f.get(ph); sub(); f.set(ih0);
            f.get(ow).get(sw); mul(); f.get(pw); sub(); f.set(iw0);
            count(ci, Cg, () =>
              count(kh, KH, () => {
                setRow();
                f.get(iw0).set(iw);
                count(kw, KW, () => {
                  f.get(d);
                  gather();
                  f.mem(OP.f32store, 2, 0);
                  f.get(d).i32(4 * NR).op(OP.i32add).set(d);
                  f.get(iw).get(dw).op(OP.i32add).set(iw);
                });
              }),
            );
          },
          () => {
            f.get(d).get(K).i32(4 * NR); mul(); add(); f.set(end);
            f.forLt(d, end, 4 * NR, () => {
              f.get(d).f32(0).mem(OP.f32store, 2, 0);
            });
          },
        );
      });
    },
  );
  return f;
}

/** conv_pack_b, the pack pass over weight and im2col panels, and the fused column driver. */
export function convFns(base: number): Fn[] {
  return [
    packB(),
    packUnits(GEMM, "conv_pack", GEMM_FN.packA, base),
    fusedColsDriver(GEMM, "conv_cols", GEMM_FN.micro, GEMM_FN.tileOut, base),
  ];
}

export interface Conv2dGeom {
  N: number; Cin: number; H: number; W: number;
  Cout: number; KH: number; KW: number; OH: number; OW: number;
  stride: [number, number]; pad: [number, number]; dil: [number, number]; groups: number;
}

interface View {
  arr: Arr;
  off: number;
  shape: readonly number[];
  strides: readonly number[];
}

/** Byte address of a view whose dims from `from` on are contiguous, staged when not in place. */
function contiguousFrom(rt: WasmRuntime, v: View, from: number, held: number[]): { ptr: number; st0: number } {
  const { arr, off, shape, strides } = v;
  let ok = inArena(rt, arr);
  for (let d = shape.length - 1, s = 1; ok && d >= from; s *= shape[d]!, d--) if (shape[d]! > 1 && strides[d] !== s) ok = false;
  const inner = shape.slice(from).reduce((a, b) => a * b, 1);
  if (ok) return { ptr: (arr as Float32Array).byteOffset + off * 4, st0: from > 0 ? strides[0]! * 4 : 0 };
  const n = shape.reduce((a, b) => a * b, 1);
  const ptr = rt.arena.alloc(Math.max(n, 1) * 4);
  held.push(ptr);
  const dst = rt.view(Float32Array, ptr, n);
  let i = 0;
  const walk = (d: number, o: number) => {
    if (d === shape.length) dst[i++] = arr[o]!;
    else for (let q = 0; q < shape[d]!; q++) walk(d + 1, o + q * strides[d]!);
  };
  walk(0, off);
  return { ptr, st0: from > 0 ? inner * 4 : 0 };
}

/** out (contiguous NCHW) = conv2d(x, w) + bias on the native GEMM (ungrouped) or the wasm GEMM. */
export function conv2dWasm(rt: WasmRuntime, g: Conv2dGeom, x: View, w: View, bias: View | null, O: Arr): void {
  const { N, Cin, Cout, KH, KW, OH, OW, groups } = g;
  const K = (Cin / groups) * KH * KW, OHW = OH * OW;
  const held: number[] = [];
  try {
    const xs = contiguousFrom(rt, x, 1, held);
    const ws = contiguousFrom(rt, w, 1, held);
    const bs = bias ? contiguousFrom(rt, bias, 0, held) : null;
    const direct = inArena(rt, O);
    let out: number;
    if (direct) out = (O as Float32Array).byteOffset;
    else {
      out = rt.arena.alloc(Math.max(1, N * Cout * OHW) * 4);
      held.push(out);
    }
    const nat = groups === 1 && (K + 1) * OHW <= IM2COL_MAX && im2colFits(g) ? nativeIm2colFn(rt) : null;
    if (nat !== null) nativeConv(rt, nat, g, xs, ws, bs, out, held);
    else wasmConv(rt, g, xs, ws, bs, out);
    if (!direct) {
      const r = rt.view(Float32Array, out, N * Cout * OHW);
      if (O instanceof Float32Array) O.set(r);
      else for (let i = 0; i < r.length; i++) O[i] = r[i]!;
    }
  } finally {
    for (let i = held.length - 1; i >= 0; i--) rt.arena.release(held[i]!);
  }
}

type Ptr = { ptr: number; st0: number };

/** Whether every input coordinate im2col forms (oh * sh - ph + kh * dh, ...) stays inside int32. */
function im2colFits(g: Conv2dGeom): boolean {
  const lim = 2 ** 30;
  return [0, 1].every((d) => {
    const [O, Kk] = d === 0 ? [g.OH, g.KH] : [g.OW, g.KW];
    return (O - 1) * g.stride[d]! + (Kk - 1) * g.dil[d]! + g.pad[d]! < lim && g.stride[d]! < lim && g.dil[d]! < lim;
  });
}

/** Per image: the im2col matrix (native, the pool's threads), then one product on the native GEMM. */
function nativeConv(rt: WasmRuntime, fn: number, g: Conv2dGeom, xs: Ptr, ws: Ptr, bs: Ptr | null, out: number, held: number[]): void {
  const { N, Cin, H, W, Cout, KH, KW, OH, OW } = g;
  const K = Cin * KH * KW, OHW = OH * OW, Kb = K + (bs ? 1 : 0);
  // the weight's rows [Cout, K], and with a bias one more column holding it
  let wp = ws.ptr, lda = ws.st0 / 4;
  if (bs) {
    wp = rt.arena.alloc(Cout * Kb * 4);
    held.push(wp);
    const src = rt.view(Float32Array, ws.ptr, (Cout - 1) * lda + K), dst = rt.view(Float32Array, wp, Cout * Kb);
    const b = rt.view(Float32Array, bs.ptr, Cout);
    for (let co = 0; co < Cout; co++) {
      dst.set(src.subarray(co * lda, co * lda + K), co * Kb);
      dst[co * Kb + K] = b[co]!;
    }
    lda = Kb;
  }
  const cols = rt.arena.alloc(Kb * OHW * 4);
  held.push(cols);
  if (bs) rt.view(Float32Array, cols + K * OHW * 4, OHW).fill(1);
  const pb = rt.arena.alloc(IM2COL.words * 4);
  held.push(pb);
  const P = rt.view(Int32Array, pb, IM2COL.words);
  P.set([0, Cin, H, W, KH, KW, OH, OW, g.stride[0], g.stride[1], g.pad[0], g.pad[1], g.dil[0], g.dil[1], cols / 4, OHW]);
  const A = rt.view(Float32Array, wp, (Cout - 1) * lda + Kb), B = rt.view(Float32Array, cols, Kb * OHW);
  const C = rt.view(Float32Array, out, N * Cout * OHW);
  nativeConvStats.calls++;
  for (let n = 0; n < N; n++) {
    P[IM2COL.x] = (xs.ptr + n * xs.st0) / 4;
    rt.pool.run(fn, K, [pb], 1, Math.ceil(16384 / OHW));
    matmulF32(Cout, Kb, OHW, A, 0, lda, 1, B, 0, OHW, 1, C, n * Cout * OHW);
  }
}

/** Per image and group: the wasm GEMM with conv_pack gathering the input into its panels. */
function wasmConv(rt: WasmRuntime, g: Conv2dGeom, xs: Ptr, ws: Ptr, bs: Ptr | null, out: number): void {
  const { Cin, Cout, KH, KW, OH, OW, groups } = g;
  // the GEMM's parameter block and panels, for one group's product
  const blk = gemmBlock(rt, Cout / groups, (Cin / groups) * KH * KW, OH * OW, true);
  try {
    convGemms(rt, g, blk.g, xs, ws, bs, out);
  } finally {
    blk.release();
  }
}

function convGemms(rt: WasmRuntime, g: Conv2dGeom, p: Int32Array, xs: Ptr, ws: Ptr, bs: Ptr | null, out: number): void {
  const { N, Cin, H, W, Cout, KH, KW, OH, OW, groups } = g;
  const Cg = Cin / groups, Cog = Cout / groups, K = Cg * KH * KW, OHW = OH * OW;
  const set = (off: number, v: number) => (p[off / 4] = v);
  set(P.sam, ws.st0); set(P.sak, 4); set(P.ldc, OHW * 4);
  set(P.H, H); set(P.W, W); set(P.OH, OH); set(P.OW, OW); set(P.KH, KH); set(P.KW, KW); set(P.Cg, Cg);
  set(P.sh, g.stride[0]); set(P.sw, g.stride[1]); set(P.ph, g.pad[0]); set(P.pw, g.pad[1]); set(P.dh, g.dil[0]); set(P.dw, g.dil[1]);
  if (bs) set(P.biasStep, GEMM.MR * 4);
  const zero = p[P.bias / 4]!;
  const fns = { pack: rt.fn.conv_pack!, cols: rt.fn.conv_cols! };
  for (let n = 0; n < N; n++)
    for (let gi = 0; gi < groups; gi++) {
      set(P.x, xs.ptr + n * xs.st0 + gi * Cg * H * W * 4);
      set(P.srcA, ws.ptr + gi * Cog * ws.st0);
      set(P.c, out + (n * Cout + gi * Cog) * OHW * 4);
      set(P.bias, bs ? bs.ptr + gi * Cog * 4 : zero);
      runGemm(rt, p, Cog, K, OHW, fns);
    }
}

/** The same convolution in plain JS (no wasm): float64 accumulation per output plane. */
export function conv2dJs(g: Conv2dGeom, x: View, w: View, bias: View | null, O: Arr): void {
  const { N, Cin, H, W, Cout, KH, KW, OH, OW, groups } = g;
  const [sh, sw] = g.stride, [ph, pw] = g.pad, [dh, dw] = g.dil;
  const Cg = Cin / groups, Cog = Cout / groups;
  const [xn, xc, xh, xw] = x.strides as [number, number, number, number];
  const [wo, wc, wh, ww] = w.strides as [number, number, number, number];
  const acc = new Float64Array(OH * OW);
  const X = x.arr;
  for (let n = 0; n < N; n++)
    for (let co = 0; co < Cout; co++) {
      const gi = Math.floor(co / Cog);
      acc.fill(bias ? bias.arr[bias.off + co * bias.strides[0]!]! : 0);
      for (let c = 0; c < Cg; c++)
        for (let kh = 0; kh < KH; kh++)
          for (let kw = 0; kw < KW; kw++) {
            const wv = w.arr[w.off + co * wo + c * wc + kh * wh + kw * ww]!;
            const xb = x.off + n * xn + (gi * Cg + c) * xc;
            // output columns whose input column is inside the image: no test in the inner loop
            const ow0 = Math.max(0, Math.ceil((pw - kw * dw) / sw));
            const ow1 = Math.min(OW - 1, Math.floor((W - 1 + pw - kw * dw) / sw));
            const xs = sw * xw;
            for (let oh = 0; oh < OH; oh++) {
              const ih = oh * sh - ph + kh * dh;
              if (ih < 0 || ih >= H) continue;
              let xi = xb + ih * xh + (ow0 * sw - pw + kw * dw) * xw;
              for (let q = oh * OW + ow0, qe = oh * OW + ow1; q <= qe; q++, xi += xs) acc[q] += wv * X[xi]!;
            }
          }
      const o = (n * Cout + co) * OH * OW;
      for (let q = 0; q < OH * OW; q++) O[o + q] = acc[q]!;
    }
}

/** The cpu kernel of the `conv2d` composite: inputs x [N, Cin, H, W], w [Cout, Cg, KH, KW], bias? [Cout]. */
export function conv2dKernel(node: IRNode<"composite">): Kernel {
  const a = node.params.attrs as { stride: number[]; padding: number[]; dilation: number[]; groups: number; bias: boolean };
  const [xv, wv, bv] = node.inputs;
  const [N, Cin, H, W] = xv!.shape as [number, number, number, number];
  const [Cout, , KH, KW] = wv!.shape as [number, number, number, number];
  const [, , OH, OW] = node.out.shape as [number, number, number, number];
  const g: Conv2dGeom = {
    N, Cin, H, W, Cout, KH, KW, OH, OW, groups: a.groups,
    stride: [a.stride[0]!, a.stride[1]!], pad: [a.padding[0]!, a.padding[1]!], dil: [a.dilation[0]!, a.dilation[1]!],
  };
  return (O, ins, offs) => {
    const x: View = { arr: ins[0]!, off: offs[0]!, shape: xv!.shape, strides: xv!.strides };
    const w: View = { arr: ins[1]!, off: offs[1]!, shape: wv!.shape, strides: wv!.strides };
    const b: View | null = a.bias ? { arr: ins[2]!, off: offs[2]!, shape: bv!.shape, strides: bv!.strides } : null;
    if (N * Cout * OH * OW === 0) return;
    const rt = wasmRuntime();
    if (rt) conv2dWasm(rt, g, x, w, b, O);
    else conv2dJs(g, x, w, b, O);
  };
}
