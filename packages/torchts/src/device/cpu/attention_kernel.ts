// The cpu kernel of the `attention` composite: softmax(q k^T * scale + mask) v over
// q [B, Hq, L, E], k [B, Hk, S, E], v [B, Hk, S, Ev] (Hq a multiple of Hk: grouped-query heads),
// an optional additive float32 mask viewed as [B, Hq, L, S], causal (bottom-right aligned) or not.
// The wasm kernel (wasm/attention.ts) reads strided rows in place (slices of a KV cache
// included); a strided last dim, a head dim that is not a multiple of 4, operands outside the
// wasm memory, and key/value rows lying far apart that several tiles re-read (heads split out of
// one projection) are first copied densely into arena scratch (reused blocks). Without wasm a plain JS
// loop computes the same thing. With attrs.probs the output is the probability matrix
// [B, Hq, L, S] instead (what the op's backward would otherwise recompute with matmul + softmax).
// Where the native bridge's AVX-512 GEMM is in use, long queries go to its attention kernel and
// short ones (decode: at most 16 query rows per kv head, KV-cache segments read in place) to its
// decode kernel; the wasm kernel keeps the rest (probabilities, paged caches, other CPUs).
import type { IRNode } from "../../ir/prims.js";
import type { Arr, Kernel } from "./codegen.js";
import { AP, ATTN_PARAM_BYTES, CP, attnSlotBytes } from "./wasm/attention.js";
import { inArena } from "./wasm/ops.js";
import { wasmRuntime, type WasmRuntime } from "./wasm/runtime.js";
import {
  NATIVE_ATTN as NA, NATIVE_ATTN_DEC as ND, NATIVE_ATTN_DEC_MAX_DIM, NATIVE_ATTN_DEC_MAX_ROWS, NATIVE_ATTN_MAX_DIM, NATIVE_ATTN_MIN_L,
  NATIVE_ATTN_ROWS, nativeAttentionDecodeFn, nativeAttentionFn, nativeAttnDecStats, nativeAttnStats,
} from "./native/attention.js";

const QB_MAX = 16; // query rows per tile (even)
const BC = 64; // keys per block (multiple of 4)
const CHUNKS_PER_THREAD = 4; // the pool cuts a job into at most threads * 4 calls (the kernel traps past that)
const MIN_FLOPS_PER_THREAD = 2e5;
const COPY_ROWS_PER_THREAD = 65536; // floats

interface Operand {
  ptr: number;
  st: [number, number, number]; // byte strides of dims 0..2; the last dim is contiguous
  scratch: boolean;
}

/**
 * A 4-d view usable in place, or a dense copy whose last dim is zero-padded to `padTo`.
 * `gather` also copies rows that are contiguous but far apart (read again by every tile).
 */
function operand(
  rt: WasmRuntime, a: Arr, off: number, shape: readonly number[], strides: readonly number[], padTo: number, gather = false,
): Operand {
  const [d0, d1, d2, d3] = shape as [number, number, number, number];
  const [s0, s1, s2, s3] = strides as [number, number, number, number];
  const rowsOk = inArena(rt, a) && (s3 === 1 || d3 === 1);
  if (rowsOk && padTo === d3 && !(gather && d2 > 1 && s2 !== d3)) {
    return { ptr: a.byteOffset + off * 4, st: [s0 * 4, s1 * 4, s2 * 4], scratch: false };
  }
  const rows = d0 * d1 * d2;
  const ptr = rt.arena.alloc(rows * padTo * 4);
  const st: [number, number, number] = [d1 * d2 * padTo * 4, d2 * padTo * 4, padTo * 4];
  if (rowsOk) {
    const cp = rt.arena.alloc(64);
    try {
      const P = rt.view(Int32Array, cp, 16);
      P[CP.src / 4] = a.byteOffset + off * 4; P[CP.dst / 4] = ptr; P[CP.d1 / 4] = d1; P[CP.d2 / 4] = d2;
      P[CP.s0 / 4] = s0 * 4; P[CP.s1 / 4] = s1 * 4; P[CP.s2 / 4] = s2 * 4; P[CP.rowBytes / 4] = d3 * 4; P[CP.pitch / 4] = padTo * 4;
      rt.pool.run(rt.fn.attn_copy_rows!, rows, [cp], 1, Math.ceil(COPY_ROWS_PER_THREAD / padTo));
    } finally {
      rt.arena.release(cp);
    }
    return { ptr, st, scratch: true };
  }
  const dst = rt.view(Float32Array, ptr, rows * padTo);
  if (padTo !== d3) dst.fill(0);
  let d = 0;
  for (let i0 = 0; i0 < d0; i0++)
    for (let i1 = 0; i1 < d1; i1++)
      for (let i2 = 0; i2 < d2; i2++, d += padTo) {
        const o = off + i0 * s0 + i1 * s1 + i2 * s2;
        if (s3 === 1 && a instanceof Float32Array) dst.set(a.subarray(o, o + d3), d);
        else for (let i3 = 0; i3 < d3; i3++) dst[d + i3] = a[o + i3 * s3]!;
      }
  return { ptr, st, scratch: true };
}

const up4 = (n: number) => Math.ceil(n / 4) * 4;

interface Attrs {
  causal: boolean;
  scale: number;
  mask: boolean;
  /** output the probabilities [B, Hq, L, S] instead of [B, Hq, L, Ev] (backward) */
  probs?: boolean;
  /**
   * Keys come in two segments: k, v hold keys [0, split) and two more inputs after the mask,
   * k2 [B, Hk, S - split, E] and v2, hold the rest (a KV cache's completed blocks and its tail,
   * attended without concatenating them).
   */
  split?: number;
}

/** The attrs, inputs and sizes of an attention node: q [B, Hq, L, E], k [B, Hk, S, E], v [B, Hk, S, Ev]. */
function attentionDims(n: IRNode<"composite">) {
  const attrs = n.params.attrs as unknown as Attrs;
  const [qv, kv, vv] = n.inputs;
  const mv = attrs.mask ? n.inputs[3] : undefined;
  const seg2 = attrs.split !== undefined ? (attrs.mask ? 4 : 3) : -1; // input index of k2 (v2 follows)
  const [B, Hq, L, E] = qv!.shape as [number, number, number, number];
  const [, Hk, S1] = kv!.shape as [number, number, number, number];
  const S = seg2 < 0 ? S1 : S1 + n.inputs[seg2]!.shape[2]!;
  return {
    ...attrs, probs: attrs.probs ?? false, qv: qv!, kv: kv!, vv: vv!, mv, seg2, k2v: seg2 < 0 ? undefined : n.inputs[seg2]!,
    v2v: seg2 < 0 ? undefined : n.inputs[seg2 + 1]!, split: seg2 < 0 ? S : S1, B, Hq, L, E, Hk, S, Ev: vv!.shape[3]!, nrep: Hq / Hk,
  };
}

export function attentionKernel(n: IRNode<"composite">): Kernel {
  const { causal, scale, mask: hasMask, probs, qv, kv, vv, mv, seg2, k2v, v2v, split, B, Hq, L, E, Hk, S, Ev, nrep } = attentionDims(n);
  const Ep = up4(E), Evp = up4(Ev), Sp = up4(S);
  // key blocks must not straddle the segments: the largest of 64, 32, ..., 4 dividing split
  let bcKeys = BC;
  while (split < S && split % bcKeys !== 0 && bcKeys > 4) bcKeys /= 2;
  if (split < S && split % bcKeys !== 0) throw new Error(`attention: a key segment of ${split} keys is not a multiple of 4`);
  const W = probs ? S : Ev, Wp = probs ? Sp : Evp; // output row width
  const R = nrep * L;
  const QB = Math.min(QB_MAX, R + (R & 1));
  const T = Math.ceil(R / QB);
  const units = B * Hk * T;
  const flopsPerUnit = 2 * QB * S * (Ep + Evp);
  const minUnits = Math.max(1, Math.ceil(MIN_FLOPS_PER_THREAD / flopsPerUnit));
  return (O, ins, offs) => {
    const rt = wasmRuntime();
    if (!rt) return attentionJs(n, O, ins, offs);
    const q = operand(rt, ins[0]!, offs[0]!, qv.shape, qv.strides, Ep);
    const k = operand(rt, ins[1]!, offs[1]!, kv.shape, kv.strides, Ep, T > 1);
    const v = operand(rt, ins[2]!, offs[2]!, vv.shape, vv.strides, Evp, T > 1);
    const m = hasMask ? operand(rt, ins[3]!, offs[3]!, mv!.shape, mv!.strides, S) : null;
    const k2 = k2v ? operand(rt, ins[seg2]!, offs[seg2]!, k2v.shape, k2v.strides, Ep, T > 1) : null;
    const v2 = v2v ? operand(rt, ins[seg2 + 1]!, offs[seg2 + 1]!, v2v.shape, v2v.strides, Evp, T > 1) : null;
    const direct = inArena(rt, O) && Wp === W;
    const outPtr = direct ? (O as Float32Array).byteOffset : rt.arena.alloc(B * Hq * L * Wp * 4);
    const nat = !probs && !k2 && L >= NATIVE_ATTN_MIN_L && Ep <= NATIVE_ATTN_MAX_DIM && Evp <= NATIVE_ATTN_MAX_DIM ? nativeAttentionFn(rt) : null;
    // short queries (decode: the few query rows of each kv head), the KV cache's two segments in place
    const dec = nat === null && !probs && R <= NATIVE_ATTN_DEC_MAX_ROWS && Ep <= NATIVE_ATTN_DEC_MAX_DIM && Evp <= NATIVE_ATTN_DEC_MAX_DIM ? nativeAttentionDecodeFn(rt) : null;
    if (nat !== null || dec !== null) {
      try {
        const d = { B, Hk, nrep, L, S, Ep, Evp, causal, scale };
        if (nat !== null) nativeAttention(rt, nat, q, k, v, m, outPtr, Wp, d);
        else nativeDecode(rt, dec!, q, k, v, m, k2 ?? k, v2 ?? v, split, outPtr, Wp, d);
        if (!direct) copyOut(rt, O, outPtr, B * Hq * L, W, Wp);
      } finally {
        if (!direct) rt.arena.release(outPtr);
        for (const o of [q, k, v, m, k2, v2]) if (o?.scratch) rt.arena.release(o.ptr);
      }
      return;
    }
    const slots = Math.min(units, rt.pool.threads * CHUNKS_PER_THREAD + 1);
    const slotBytes = attnSlotBytes(QB, bcKeys, Evp);
    const prm = rt.arena.alloc(ATTN_PARAM_BYTES);
    const scratch = rt.arena.alloc(slots * slotBytes);
    try {
      const P = rt.view(Int32Array, prm, ATTN_PARAM_BYTES / 4);
      const set = (off: number, val: number) => (P[off / 4] = val);
      set(AP.q, q.ptr); set(AP.k, k.ptr); set(AP.v, v.ptr); set(AP.mask, m ? m.ptr : 0); set(AP.out, outPtr);
      set(AP.Hk, Hk); set(AP.nrep, nrep); set(AP.L, L); set(AP.S, S); set(AP.E, Ep); set(AP.Ev, Evp);
      set(AP.qsb, q.st[0]); set(AP.qsh, q.st[1]); set(AP.qsl, q.st[2]);
      set(AP.ksb, k.st[0]); set(AP.ksh, k.st[1]); set(AP.kss, k.st[2]);
      set(AP.vsb, v.st[0]); set(AP.vsh, v.st[1]); set(AP.vss, v.st[2]);
      set(AP.msb, m ? m.st[0] : 0); set(AP.msh, m ? m.st[1] : 0); set(AP.msl, m ? m.st[2] : 0);
      set(AP.causal, causal ? 1 : 0); set(AP.slot, 0); set(AP.scratch, scratch); set(AP.slotBytes, slotBytes);
      set(AP.T, T); set(AP.QB, QB); set(AP.BC, bcKeys); set(AP.slots, slots);
      const [s2k, s2v] = [k2 ?? k, v2 ?? v];
      set(AP.split, split); set(AP.k2, s2k.ptr); set(AP.v2, s2v.ptr);
      set(AP.ksb2, s2k.st[0]); set(AP.ksh2, s2k.st[1]); set(AP.kss2, s2k.st[2]);
      set(AP.vsb2, s2v.st[0]); set(AP.vsh2, s2v.st[1]); set(AP.vss2, s2v.st[2]);
      set(AP.probs, probs ? 1 : 0); set(AP.outRow, Wp * 4);
      rt.view(Float32Array, prm + AP.scale, 1)[0] = scale;
      rt.pool.run(rt.fn.attn_fwd!, units, [prm], 1, minUnits);
      if (!direct) copyOut(rt, O, outPtr, B * Hq * L, W, Wp);
    } finally {
      rt.arena.release(scratch);
      rt.arena.release(prm);
      if (!direct) rt.arena.release(outPtr);
      for (const o of [q, k, v, m, k2, v2]) if (o?.scratch) rt.arena.release(o.ptr);
    }
  };
}

/** Copies rows of Wp floats at outPtr (the kernel's output) to O's rows of W. */
function copyOut(rt: WasmRuntime, O: Arr, outPtr: number, rows: number, W: number, Wp: number): void {
  const res = rt.view(Float32Array, outPtr, rows * Wp);
  if (Wp === W && O instanceof Float32Array) O.set(res);
  else for (let r = 0; r < rows; r++) for (let e = 0; e < W; e++) O[r * W + e] = res[r * Wp + e]!;
}

type NativeDims = { B: number; Hk: number; nrep: number; L: number; S: number; Ep: number; Evp: number; causal: boolean; scale: number };

/** Float offsets and strides of an operand: its pointer, then its three outer strides. */
const rows4 = (o: Operand) => [o.ptr / 4, o.st[0] / 4, o.st[1] / 4, o.st[2] / 4];

/**
 * Runs native kernel `fn` over `units` with a parameter block of int32 `words` and the float32
 * scale at word `scaleAt`, the units split so each thread gets MIN_FLOPS_PER_THREAD or more.
 */
function runNative(rt: WasmRuntime, fn: number, words: number[], scaleAt: number, scale: number, units: number, flopsPerUnit: number): void {
  if (words.length !== scaleAt) throw new Error(`attention: a native parameter block of ${words.length} words, expected ${scaleAt}`);
  const pb = rt.arena.alloc((scaleAt + 1) * 4);
  try {
    rt.view(Int32Array, pb, words.length).set(words);
    rt.view(Float32Array, pb + scaleAt * 4, 1)[0] = scale;
    rt.pool.run(fn, units, [pb], 1, Math.max(1, Math.ceil(MIN_FLOPS_PER_THREAD / flopsPerUnit)));
  } finally {
    rt.arena.release(pb);
  }
}

/** One call of the native AVX-512 kernel (native/attention.ts) over the operands' rows. */
function nativeAttention(rt: WasmRuntime, fn: number, q: Operand, k: Operand, v: Operand, m: Operand | null, outPtr: number, Wp: number, d: NativeDims): void {
  const [qp, qsb, qsh, qsl] = rows4(q), [kp, ksb, ksh, kss] = rows4(k), [vp, vsb, vsh, vss] = rows4(v);
  const mask = m ? [1, ...rows4(m)] : [0, 0, 0, 0, 0];
  nativeAttnStats.calls++;
  runNative(
    rt, fn, [qp, kp, vp, outPtr / 4, d.B, d.Hk, d.nrep, d.L, d.S, d.Ep, d.Evp, qsb, qsh, qsl, ksb, ksh, kss, vsb, vsh, vss, Wp, d.causal ? 1 : 0, ...mask],
    NA.scale, d.scale, d.B * d.Hk * d.nrep * Math.ceil(d.L / NATIVE_ATTN_ROWS), 2 * NATIVE_ATTN_ROWS * d.S * (d.Ep + d.Evp),
  );
}

/** One call of the native AVX-512 decode kernel: a unit per (batch, kv head), keys [0, split) from k, v and the rest from k2, v2. */
function nativeDecode(
  rt: WasmRuntime, fn: number, q: Operand, k: Operand, v: Operand, m: Operand | null, k2: Operand, v2: Operand, split: number, outPtr: number, Wp: number, d: NativeDims,
): void {
  const [qp, ...qs] = rows4(q), [kp, ...ks] = rows4(k), [vp, ...vs] = rows4(v), [k2p, ...k2s] = rows4(k2), [v2p, ...v2s] = rows4(v2);
  const mask = m ? [1, ...rows4(m)] : [0, 0, 0, 0, 0];
  nativeAttnDecStats.calls++;
  runNative(
    rt, fn, [qp, kp, vp, k2p, v2p, outPtr / 4, d.B, d.Hk, d.nrep, d.L, d.S, split, d.Ep, d.Evp, ...qs, ...ks, ...vs, ...k2s, ...v2s, Wp, d.causal ? 1 : 0, ...mask],
    ND.scale, d.scale, d.B * d.Hk, 2 * d.nrep * d.L * d.S * (d.Ep + d.Evp),
  );
}

/** The same computation in plain JS (TORCHTS_CPU_BACKEND=js): float64 scores, one row at a time. */
function attentionJs(n: IRNode<"composite">, O: Arr, ins: Arr[], offs: number[]): void {
  const { causal, scale, mask: hasMask, probs, qv, kv, vv, mv, seg2, k2v, v2v, split, B, Hq, L, E, S, Ev, nrep } = attentionDims(n);
  const Q = ins[0]!;
  const M = hasMask ? ins[3] : undefined;
  const qs = qv.strides, ms = mv?.strides;
  // per segment: the array, the offset of key 0 of the whole numbering (key j sits at o + j * stride), strides
  const segment = (at: number, view: { strides: readonly number[] }, first: number) =>
    ({ A: ins[at]!, st: view.strides, o: offs[at]! - first * view.strides[2]! });
  const keys = [segment(1, kv, 0), ...(k2v ? [segment(seg2, k2v, split)] : [])];
  const values = [segment(2, vv, 0), ...(v2v ? [segment(seg2 + 1, v2v, split)] : [])];
  const p = new Float64Array(S);
  const acc = new Float64Array(Ev);
  for (let b = 0; b < B; b++)
    for (let h = 0; h < Hq; h++) {
      const hk = Math.floor(h / nrep);
      for (let l = 0; l < L; l++) {
        const end = causal ? Math.max(0, Math.min(S, l + S - L + 1)) : S;
        const qo = offs[0]! + b * qs[0]! + h * qs[1]! + l * qs[2]!;
        let mx = -Infinity;
        for (let j = 0; j < S; j++) {
          if (j >= end) {
            p[j] = -Infinity;
            continue;
          }
          const { A: Kj, st: ks, o } = keys[j < split ? 0 : 1]!;
          const ko = o + b * ks[0]! + hk * ks[1]! + j * ks[2]!;
          let s = 0;
          for (let e = 0; e < E; e++) s += Q[qo + e * qs[3]!]! * Kj[ko + e * ks[3]!]!;
          s = Math.fround(s * scale);
          if (hasMask) s += M![offs[3]! + b * ms![0]! + h * ms![1]! + l * ms![2]! + j * ms![3]!]!;
          p[j] = s;
          if (!(s <= mx)) mx = s;
        }
        let sum = 0;
        for (let j = 0; j < S; j++) sum += p[j] = Math.exp(p[j]! - mx);
        if (probs) {
          const po = ((b * Hq + h) * L + l) * S;
          for (let j = 0; j < S; j++) O[po + j] = p[j]! / sum;
          continue;
        }
        acc.fill(0);
        for (let j = 0; j < S; j++) {
          const w = p[j]! / sum;
          const { A: Vj, st: vs, o } = values[j < split ? 0 : 1]!;
          const vo = o + b * vs[0]! + hk * vs[1]! + j * vs[2]!;
          for (let e = 0; e < Ev; e++) acc[e] += w * Vj[vo + e * vs[3]!]!;
        }
        const oo = ((b * Hq + h) * L + l) * Ev;
        for (let e = 0; e < Ev; e++) O[oo + e] = acc[e]!;
      }
    }
}

/** The sizes of a pagedAttention node: q [T, Hq, E], k/v [T, Hk, E|Ev], caches [NB, bs, Hk, E|Ev], table [B, MB]. */
function pagedDims(n: IRNode<"composite">) {
  const [qv, kv, vv, kcv, vcv, tv] = n.inputs;
  const [T, Hq, E] = qv!.shape as [number, number, number];
  const [NB, bs, Hk] = kcv!.shape as [number, number, number, number];
  const [B, MB] = tv!.shape as [number, number];
  return { qv: qv!, kv: kv!, vv: vv!, kcv: kcv!, vcv: vcv!, T, Hq, E, Ev: vv!.shape[2]!, NB, bs, Hk, B, MB, nrep: Hq / Hk, scale: n.params.attrs.scale as number };
}

/**
 * Reads the host values of the table, cuSeqlensQ and cacheSeqlens inputs and checks them (a bad table
 * would read another sequence's keys or past the cache): [qStart, qLen, cached] per sequence.
 */
function pagedInfo(n: IRNode<"composite">, ins: Arr[], offs: number[]): { info: Int32Array; table: Int32Array; maxL: number } {
  const { T, NB, bs, B, MB } = pagedDims(n);
  const [ts, cs, ls] = [n.inputs[5]!.strides, n.inputs[6]!.strides, n.inputs[7]!.strides];
  const info = new Int32Array(B * 3);
  const table = new Int32Array(B * MB);
  const fail = (m: string) => {
    throw new RangeError(`pagedAttention(): ${m}`);
  };
  let maxL = 0;
  for (let b = 0; b < B; b++) {
    const q0 = ins[6]![offs[6]! + b * cs[0]!]!, q1 = ins[6]![offs[6]! + (b + 1) * cs[0]!]!;
    const cached = ins[7]![offs[7]! + b * ls[0]!]!;
    if (!(q0 >= 0 && q1 >= q0 && q1 <= T)) fail(`cuSeqlensQ must be non-decreasing in [0, ${T}], got ${q0}, ${q1} at sequence ${b}`);
    if (b === 0 && q0 !== 0) fail(`cuSeqlensQ[0] must be 0, got ${q0}`);
    if (!(cached >= 0 && cached <= MB * bs)) fail(`cacheSeqlens[${b}] = ${cached} is outside [0, ${MB * bs}] (the block table holds ${MB} blocks of ${bs})`);
    info[b * 3] = q0; info[b * 3 + 1] = q1 - q0; info[b * 3 + 2] = cached;
    maxL = Math.max(maxL, q1 - q0);
    for (let j = 0; j < Math.ceil(cached / bs); j++) {
      const id = ins[5]![offs[5]! + b * ts[0]! + j * ts[1]!]!;
      if (!(id >= 0 && id < NB)) fail(`blockTable[${b}][${j}] = ${id} is not a block of the cache (${NB} blocks)`);
      table[b * MB + j] = id;
    }
  }
  return { info, table, maxL };
}

/**
 * The cpu kernel of the `pagedAttention` composite (nn/functional/attention.ts): the wasm attn_paged reads
 * the caches in place through the block table. Caches must be dense, E and Ev multiples of 4 and in the
 * wasm memory (else the JS loop runs); queries/new keys of another layout are copied densely first.
 */
export function pagedAttentionKernel(n: IRNode<"composite">): Kernel {
  const { qv, kv, vv, kcv, vcv, T, Hq, E, Ev, bs, Hk, B, nrep, scale } = pagedDims(n);
  const dense = (v: { shape: readonly number[]; strides: readonly number[] }) => {
    let s = 1;
    for (let d = v.shape.length - 1; d >= 0; d--) {
      if (v.shape[d] !== 1 && v.strides[d] !== s) return false;
      s *= v.shape[d]!;
    }
    return true;
  };
  const wasmOk = E % 4 === 0 && Ev % 4 === 0 && dense(kcv) && dense(vcv);
  const as4 = (v: { shape: readonly number[]; strides: readonly number[] }) =>
    ({ shape: [1, ...v.shape], strides: [0, ...v.strides] });
  return (O, ins, offs) => {
    const rt = wasmRuntime();
    const { info, table, maxL } = pagedInfo(n, ins, offs);
    if (!rt || !wasmOk || !inArena(rt, ins[3]!) || !inArena(rt, ins[4]!)) return pagedAttentionJs(n, O, ins, offs, info, table);
    if (T === 0 || maxL === 0) return;
    const q4 = as4(qv), k4 = as4(kv), v4 = as4(vv);
    const q = operand(rt, ins[0]!, offs[0]!, q4.shape, q4.strides, E);
    const k = operand(rt, ins[1]!, offs[1]!, k4.shape, k4.strides, E);
    const v = operand(rt, ins[2]!, offs[2]!, v4.shape, v4.strides, Ev);
    const R = nrep * maxL;
    const QB = Math.min(QB_MAX, R + (R & 1));
    const tiles = Math.ceil(R / QB);
    const units = B * Hk * tiles;
    const direct = inArena(rt, O);
    const outPtr = direct ? (O as Float32Array).byteOffset : rt.arena.alloc(T * Hq * Ev * 4);
    const slots = Math.min(units, rt.pool.threads * CHUNKS_PER_THREAD + 1);
    const slotBytes = attnSlotBytes(QB, BC, Ev);
    const prm = rt.arena.alloc(ATTN_PARAM_BYTES);
    const scratch = rt.arena.alloc(slots * slotBytes);
    const meta = rt.arena.alloc((info.length + table.length) * 4);
    try {
      rt.view(Int32Array, meta, info.length).set(info);
      rt.view(Int32Array, meta + info.length * 4, table.length).set(table);
      const P = rt.view(Int32Array, prm, ATTN_PARAM_BYTES / 4);
      P.fill(0);
      const set = (off: number, val: number) => (P[off / 4] = val);
      const row = Hk * E * 4, rowV = Hk * Ev * 4;
      set(AP.q, q.ptr); set(AP.k, (ins[3] as Float32Array).byteOffset + offs[3]! * 4); set(AP.v, (ins[4] as Float32Array).byteOffset + offs[4]! * 4);
      set(AP.out, outPtr); set(AP.Hk, Hk); set(AP.nrep, nrep); set(AP.E, E); set(AP.Ev, Ev);
      set(AP.qsl, q.st[1]); set(AP.qsh, q.st[2]);
      set(AP.ksh, E * 4); set(AP.kss, row); set(AP.vsh, Ev * 4); set(AP.vss, rowV);
      set(AP.causal, 1); set(AP.scratch, scratch); set(AP.slotBytes, slotBytes);
      set(AP.T, tiles); set(AP.QB, QB); set(AP.BC, BC); set(AP.slots, slots); set(AP.outRow, Ev * 4);
      set(AP.k2, k.ptr); set(AP.v2, v.ptr);
      set(AP.ksb2, k.st[1]); set(AP.ksh2, k.st[2]); set(AP.kss2, k.st[1]);
      set(AP.vsb2, v.st[1]); set(AP.vsh2, v.st[2]); set(AP.vss2, v.st[1]);
      set(AP.info, meta); set(AP.table, meta + info.length * 4); set(AP.tsb, (table.length / B) * 4);
      set(AP.bsz, bs); set(AP.bstride, bs * row);
      if (bs * rowV !== bs * row) throw new Error("pagedAttention: key and value caches must share a layout (E = Ev)");
      rt.view(Float32Array, prm + AP.scale, 1)[0] = scale;
      rt.pool.run(rt.fn.attn_paged!, units, [prm], 1, Math.max(1, Math.ceil(MIN_FLOPS_PER_THREAD / (2 * QB * 64 * (E + Ev)))));
      if (!direct) (O as Float32Array).set(rt.view(Float32Array, outPtr, T * Hq * Ev));
    } finally {
      rt.arena.release(meta);
      rt.arena.release(scratch);
      rt.arena.release(prm);
      if (!direct) rt.arena.release(outPtr);
      for (const o of [q, k, v]) if (o.scratch) rt.arena.release(o.ptr);
    }
  };
}

/** pagedAttention in plain JS (float64 scores), and where the caches cannot be read in place by wasm. */
function pagedAttentionJs(n: IRNode<"composite">, O: Arr, ins: Arr[], offs: number[], info: Int32Array, table: Int32Array): void {
  const { qv, kv, vv, kcv, vcv, Hq, E, Ev, bs, B, MB, nrep, scale } = pagedDims(n);
  const [qs, ks, vs, kcs, vcs] = [qv.strides, kv.strides, vv.strides, kcv.strides, vcv.strides];
  const [Q, K, V, KC, VC] = ins as [Arr, Arr, Arr, Arr, Arr];
  const p = new Float64Array(MB * bs + (qv.shape[0] ?? 0));
  const acc = new Float64Array(Ev);
  for (let b = 0; b < B; b++) {
    const [q0, L, cached] = [info[b * 3]!, info[b * 3 + 1]!, info[b * 3 + 2]!];
    for (let l = 0; l < L; l++)
      for (let h = 0; h < Hq; h++) {
        const hk = Math.floor(h / nrep);
        const S = cached + l + 1;
        const qo = offs[0]! + (q0 + l) * qs[0]! + h * qs[1]!;
        // key j: cached (through the table) or new token j - cached of this sequence
        const keyAt = (j: number, C: Arr, cs: readonly number[], X: Arr, xs: readonly number[], xo: number): [Arr, number, number] =>
          j < cached
            ? [C, xo + table[b * MB + Math.floor(j / bs)]! * cs[0]! + (j % bs) * cs[1]! + hk * cs[2]!, cs[3]!]
            : [X, offs[C === KC ? 1 : 2]! + (q0 + j - cached) * xs[0]! + hk * xs[1]!, xs[2]!];
        let mx = -Infinity;
        for (let j = 0; j < S; j++) {
          const [A, o, st] = keyAt(j, KC, kcs, K, ks, offs[3]!);
          let s = 0;
          for (let e = 0; e < E; e++) s += Q[qo + e * qs[2]!]! * A[o + e * st]!;
          p[j] = Math.fround(s * scale);
          if (p[j]! > mx) mx = p[j]!;
        }
        let sum = 0;
        for (let j = 0; j < S; j++) sum += p[j] = Math.exp(p[j]! - mx);
        acc.fill(0);
        for (let j = 0; j < S; j++) {
          const [A, o, st] = keyAt(j, VC, vcs, V, vs, offs[4]!);
          const w = p[j]! / sum;
          for (let e = 0; e < Ev; e++) acc[e] += w * A[o + e * st]!;
        }
        const oo = ((q0 + l) * Hq + h) * Ev;
        for (let e = 0; e < Ev; e++) O[oo + e] = acc[e]!;
      }
  }
}
