// Register-tiled float32 GEMM, generated for a tile of MR rows x NV vectors. B is packed as
// column panels [jp][k][c] (4*NV floats per k); A's rows are read in place when k is contiguous,
// else packed as row panels [ip][k][r] (as is a panel cut by the M edge, zero-padded). Full
// tiles are written straight into C (the first K block starts from the bias, so C needs no
// zero fill); tiles cut by the M or N edge go through small scratch tiles copied out at the
// end. All parameters travel in an i32 block in memory (see P below).
//
// Why 4 x 2 vectors and no K unrolling: V8 hoists all loads of a loop iteration above its
// FMAs, so accumulators + loads of one iteration must fit in 15 xmm registers (xmm15 is V8's
// scratch). 8 accumulators + 6 loads do; 6 x 2 with unrolling spilled and ran at ~55% of peak.
// Splat addresses are computed with i32.add instead of memarg offsets: V8 otherwise hoists
// one base register per offset out of the loop and spills them.
import { Fn, I32, OP, SIMD, V128 } from "./emitter.js";

export interface GemmShape {
  MR: number;
  NV: number;
  KC: number;
  MC: number; // row panels per cache block
}

// KC: a B panel of 16 KiB stays in L1 with 4 rows of A; MC: an A block of 128 KiB stays in L2.
// (256 / 32 measured within 1-3% on the 2-core EPYC; fewer K blocks halve the C round trips.)
export const GEMM: GemmShape = { MR: 4, NV: 2, KC: 512, MC: 16 };

/** Byte offsets of the i32 parameter block shared by the pack, driver and conv functions. */
export const P = {
  ap: 0, bp: 4, c: 8, ldc: 12, M: 16, N: 20, K: 24, mp: 28, np: 32, edge: 36, bias: 40, biasStep: 44,
  srcA: 52, sam: 56, sak: 60, srcB: 64, sbk: 68, sbn: 72,
  // conv (im2col into B panels): x image base, then the geometry
  x: 76, H: 80, W: 84, OH: 88, OW: 92, KH: 96, KW: 100, sh: 104, sw: 108, ph: 112, pw: 116, dh: 120, dw: 124, Cg: 128,
  kc: 132, // K block (<= KC, equal blocks)
  aDirect: 136, // 1: A's full row panels are read in place
  nb: 140, aFirst: 144, // a pack pass: B panels [0, nb), then A panels from aFirst
  units: 148, // gemm_batch: the pack pass's units (nb + the A panels to pack)
  BYTES: 160,
} as const;

const i32eq = 0x46, i32ne = 0x47, i32gts = 0x4a, i32les = 0x4c, i32divs = 0x6d, i32rems = 0x6f, i32or = 0x72;
export const XOP = { i32eq, i32ne, i32gts, i32les, i32divs, i32rems, i32or } as const;

/** local = i32 field `off` of the parameter block at local `p`. */
export function field(f: Fn, p: number, off: number, local: number): void {
  f.get(p).mem(OP.i32load, 2, off).set(local);
}

/** if (cond on stack) { then } else { other } */
export function ifElse(f: Fn, then: () => void, other?: () => void): void {
  f.op(OP.if, 0x40);
  then();
  if (other) {
    f.op(OP.else);
    other();
  }
  f.op(OP.end);
}

/**
 * micro(a, b, c, kk, ldcBytes, bias, first, aRow, aK): C[MR x 4NV] = (first ? bias : C) + A * Bpanel,
 * A's row r at k being a + r*aRow + k*aK (a packed panel: 4, 16; rows read in place: row stride, 4).
 */
function micro(g: GemmShape, fma: boolean): Fn {
  const { MR, NV } = g;
  const f = new Fn("gemm_micro", [I32, I32, I32, I32, I32, I32, I32, I32, I32]);
  const [a, b, c, kk, ldc, bias, first, aRow, aK] = [0, 1, 2, 3, 4, 5, 6, 7, 8];
  const rows = Array.from({ length: MR }, () => f.local(I32));
  const aOff = Array.from({ length: MR }, () => f.local(I32));
  for (let r = 1; r < MR; r++) f.get(aRow).i32(r).op(OP.i32mul).set(aOff[r]!);
  const acc = Array.from({ length: MR * NV }, () => f.local(V128));
  const bv = Array.from({ length: NV }, () => f.local(V128));
  const av = f.local(V128);
  for (let r = 0; r < MR; r++) {
    if (r === 0) f.get(c).set(rows[0]!);
    else f.get(rows[r - 1]!).get(ldc).op(OP.i32add).set(rows[r]!);
  }
  // first K block: start from the bias (a zero block when there is none); later blocks add C
  // after the loop, where its load latency overlaps the last iterations instead of stalling
  // the first FMAs
  f.get(first);
  ifElse(
    f,
    () => {
      for (let r = 0; r < MR; r++) {
        f.get(bias).f32splatLoad(4 * r).set(av);
        for (let v = 0; v < NV; v++) f.get(av).set(acc[r * NV + v]!);
      }
    },
    () => {
      for (const t of acc) f.f32x4(0).set(t);
    },
  );
  f.loop(() => {
    for (let v = 0; v < NV; v++) f.get(b).v128load(16 * v).set(bv[v]!);
    for (let r = 0; r < MR; r++) {
      f.get(a);
      if (r) f.get(aOff[r]!).op(OP.i32add);
      f.f32splatLoad(0).set(av);
      for (let v = 0; v < NV; v++) {
        const t = acc[r * NV + v]!;
        if (fma) f.get(av).get(bv[v]!).get(t).simd(SIMD.relaxedMadd).set(t);
        else f.get(t).get(av).get(bv[v]!).simd(SIMD.f32x4mul).simd(SIMD.f32x4add).set(t);
      }
    }
    f.get(a).get(aK).op(OP.i32add).set(a);
    f.get(b).i32(16 * NV).op(OP.i32add).set(b);
    f.get(kk).i32(1).op(OP.i32sub).tee(kk).op(OP.brIf, 0);
  });
  f.get(first).op(OP.i32eqz);
  ifElse(f, () => {
    for (let r = 0; r < MR; r++)
      for (let v = 0; v < NV; v++) {
        const t = acc[r * NV + v]!;
        f.get(t).get(rows[r]!).v128load(16 * v).simd(SIMD.f32x4add).set(t);
      }
  });
  for (let r = 0; r < MR; r++)
    for (let v = 0; v < NV; v++) f.get(rows[r]!).get(acc[r * NV + v]!).v128store(16 * v);
  return f;
}

interface DriverLocals {
  ap: number; c: number; ldc: number; K: number; mp: number; edge: number; bias: number; biasStep: number;
  mEdge: number; nEdge: number; k0: number; kk: number; ip: number; jp: number; ct: number; ldt: number;
  srcA: number; sam: number; aDirect: number; direct: number;
}

/** Locals shared by both drivers, loaded from the parameter block. */
function driverLocals(f: Fn, g: GemmShape, p: number): DriverLocals & { bp: number; np: number; kc: number } {
  const { MR, NV } = g;
  const L = () => f.local(I32);
  const l = {
    ap: L(), bp: L(), c: L(), ldc: L(), K: L(), mp: L(), np: L(), edge: L(), bias: L(), biasStep: L(), kc: L(),
    mEdge: L(), nEdge: L(), k0: L(), kk: L(), ip: L(), jp: L(), ct: L(), ldt: L(),
    srcA: L(), sam: L(), aDirect: L(), direct: L(),
  };
  field(f, p, P.srcA, l.srcA); field(f, p, P.sam, l.sam); field(f, p, P.aDirect, l.aDirect);
  field(f, p, P.ap, l.ap); field(f, p, P.bp, l.bp); field(f, p, P.c, l.c); field(f, p, P.ldc, l.ldc);
  field(f, p, P.K, l.K); field(f, p, P.mp, l.mp); field(f, p, P.np, l.np); field(f, p, P.edge, l.edge);
  field(f, p, P.bias, l.bias); field(f, p, P.biasStep, l.biasStep); field(f, p, P.kc, l.kc);
  // mEdge = M % MR ? mp - 1 : -1 (same for N)
  f.get(l.mp).i32(1).op(OP.i32sub).i32(-1).get(p).mem(OP.i32load, 2, P.M).i32(MR - 1).op(OP.i32and).op(OP.select).set(l.mEdge);
  f.get(l.np).i32(1).op(OP.i32sub).i32(-1).get(p).mem(OP.i32load, 2, P.N).i32(4 * NV - 1).op(OP.i32and).op(OP.select).set(l.nEdge);
  return l;
}

/** One micro call for tile (ip, jp) over K block [k0, k0 + kk); `bPtr` pushes the B panel address at k0. */
function emitTile(f: Fn, g: GemmShape, l: DriverLocals, microIndex: number, bPtr: () => void): void {
  const { MR, NV } = g;
  const NR = 4 * NV;
  const { i32eq, i32or } = XOP;
  // the tile: C itself, or the edge scratch tile (right column: by ip; bottom row: mp + jp)
  f.get(l.ip).get(l.mEdge).op(i32eq).get(l.jp).get(l.nEdge).op(i32eq).op(i32or);
  ifElse(
    f,
    () => {
      f.get(l.edge).get(l.mp).get(l.jp).op(OP.i32add).get(l.ip).get(l.ip).get(l.mEdge).op(i32eq).op(OP.select);
      f.i32(MR * NR * 4).op(OP.i32mul).op(OP.i32add).set(l.ct);
      f.i32(NR * 4).set(l.ldt);
    },
    () => {
      f.get(l.c).get(l.ip).i32(MR).op(OP.i32mul).get(l.ldc).op(OP.i32mul).op(OP.i32add);
      f.get(l.jp).i32(NR * 4).op(OP.i32mul).op(OP.i32add).set(l.ct);
      f.get(l.ldc).set(l.ldt);
    },
  );
  // A in place (rows of a full panel): srcA + ip*MR*sam + k0*4; packed: ap + (ip*K + k0)*MR*4
  f.get(l.aDirect).get(l.ip).get(l.mEdge).op(XOP.i32ne).op(OP.i32and).set(l.direct);
  f.get(l.srcA).get(l.ip).i32(MR).op(OP.i32mul).get(l.sam).op(OP.i32mul).op(OP.i32add).get(l.k0).i32(4).op(OP.i32mul).op(OP.i32add);
  f.get(l.ap).get(l.ip).get(l.K).op(OP.i32mul).get(l.k0).op(OP.i32add).i32(MR * 4).op(OP.i32mul).op(OP.i32add);
  f.get(l.direct).op(OP.select);
  bPtr();
  f.get(l.ct).get(l.kk).get(l.ldt);
  f.get(l.bias).get(l.ip).get(l.biasStep).op(OP.i32mul).op(OP.i32add);
  f.get(l.k0).op(OP.i32eqz);
  f.get(l.sam).i32(4).get(l.direct).op(OP.select);
  f.i32(4).i32(MR * 4).get(l.direct).op(OP.select);
  f.op(OP.call, microIndex);
}

/** kk = min(kc, K - k0) */
function emitKk(f: Fn, l: DriverLocals & { kc: number }): void {
  f.get(l.K).get(l.k0).op(OP.i32sub).tee(l.kk).get(l.kc).get(l.kk).get(l.kc).op(OP.i32lts).op(OP.select).set(l.kk);
}

/** Copies the edge tiles of rows [ip0, ip1) x columns [jp0, jp1) out: the right column, then the bottom row. */
function emitEdgesOut(f: Fn, l: DriverLocals, p: number, outIndex: number, ip0: number, ip1: number, jp0: number, jp1: number): void {
  f.get(l.nEdge).get(jp0).op(OP.i32ges).get(l.nEdge).get(jp1).op(OP.i32lts).op(OP.i32and);
  ifElse(f, () => {
    f.get(ip0).set(l.ip);
    f.forLt(l.ip, ip1, 1, () => {
      f.get(l.ip).get(l.nEdge).get(p).op(OP.call, outIndex);
    });
  });
  f.get(l.mEdge).get(ip0).op(OP.i32ges).get(l.mEdge).get(ip1).op(OP.i32lts).op(OP.i32and);
  ifElse(f, () => {
    f.get(jp0).set(l.jp);
    f.forLt(l.jp, jp1, 1, () => {
      f.get(l.mEdge).get(l.jp).get(p).op(OP.call, outIndex);
    });
  });
}

/**
 * gemm(lo, hi, P, byCols): row panels [lo, hi) x all column panels (byCols = 0), or all row
 * panels x column panels [lo, hi), on panels packed beforehand. Loop order: K block > row-panel
 * block (MC) > column panel > row panel, so one B panel (KC x 4NV) stays in L1 while the A block
 * (MC*MR x KC) stays in L2.
 */
function driver(g: GemmShape, microIndex: number, outIndex: number): Fn {
  const { NV, MC } = g;
  const NR = 4 * NV;
  const f = new Fn("gemm", [I32, I32, I32, I32]);
  const [lo, hi, p, byCols] = [0, 1, 2, 3];
  const l = driverLocals(f, g, p);
  const L = () => f.local(I32);
  const ip0 = L(), ip1 = L(), jp0 = L(), jp1 = L(), ib = L(), ibEnd = L();
  f.get(byCols);
  ifElse(
    f,
    () => {
      f.i32(0).set(ip0); f.get(l.mp).set(ip1); f.get(lo).set(jp0); f.get(hi).set(jp1);
    },
    () => {
      f.get(lo).set(ip0); f.get(hi).set(ip1); f.i32(0).set(jp0); f.get(l.np).set(jp1);
    },
  );
  f.i32(0).set(l.k0);
  f.loop(() => {
    emitKk(f, l);
    f.get(ip0).set(ib);
    f.loop(() => {
      f.get(ib).i32(MC).op(OP.i32add).tee(ibEnd).get(ip1).get(ibEnd).get(ip1).op(OP.i32lts).op(OP.select).set(ibEnd);
      f.get(jp0).set(l.jp);
      f.loop(() => {
        f.get(ib).set(l.ip);
        f.loop(() => {
          // b = bp + (jp*K + k0)*NR*4
          emitTile(f, g, l, microIndex, () =>
            f.get(l.bp).get(l.jp).get(l.K).op(OP.i32mul).get(l.k0).op(OP.i32add).i32(NR * 4).op(OP.i32mul).op(OP.i32add));
          f.get(l.ip).i32(1).op(OP.i32add).tee(l.ip).get(ibEnd).op(OP.i32lts).op(OP.brIf, 0);
        });
        f.get(l.jp).i32(1).op(OP.i32add).tee(l.jp).get(jp1).op(OP.i32lts).op(OP.brIf, 0);
      });
      f.get(ibEnd).tee(ib).get(ip1).op(OP.i32lts).op(OP.brIf, 0);
    });
    f.get(l.k0).get(l.kc).op(OP.i32add).tee(l.k0).get(l.K).op(OP.i32lts).op(OP.brIf, 0);
  });
  emitEdgesOut(f, l, p, outIndex, ip0, ip1, jp0, jp1);
  return f;
}

/**
 * <name>(lo, hi, P): all row panels (packed beforehand) x column panels [lo, hi), each B panel
 * packed right before its tiles by `packB(jp, dst, P)` into one slot per chunk, so it is still in
 * L1/L2 when read and never makes a round trip through memory (a convolution's im2col panels).
 * For short A (a few hundred rows) that stays in L2 across column panels.
 */
export function fusedColsDriver(g: GemmShape, name: string, microIndex: number, outIndex: number, packBIndex: number): Fn {
  const { NV } = g;
  const NR = 4 * NV;
  const f = new Fn(name, [I32, I32, I32]);
  const [lo, hi, p] = [0, 1, 2];
  const l = driverLocals(f, g, p);
  const slot = f.local(I32), zero = f.local(I32);
  f.get(l.bp).get(lo).get(l.K).op(OP.i32mul).i32(NR * 4).op(OP.i32mul).op(OP.i32add).set(slot);
  f.get(lo).set(l.jp);
  f.forLt(l.jp, hi, 1, () => {
    f.get(l.jp).get(slot).get(p).op(OP.call, packBIndex);
    f.i32(0).set(l.k0);
    f.loop(() => {
      emitKk(f, l);
      f.i32(0).set(l.ip);
      f.loop(() => {
        emitTile(f, g, l, microIndex, () => f.get(slot).get(l.k0).i32(NR * 4).op(OP.i32mul).op(OP.i32add));
        f.get(l.ip).i32(1).op(OP.i32add).tee(l.ip).get(l.mp).op(OP.i32lts).op(OP.brIf, 0);
      });
      f.get(l.k0).get(l.kc).op(OP.i32add).tee(l.k0).get(l.K).op(OP.i32lts).op(OP.brIf, 0);
    });
  });
  f.i32(0).set(zero);
  emitEdgesOut(f, l, p, outIndex, zero, l.mp, lo, hi);
  return f;
}

/** gemm_tile_out(ip, jp, P): copies the valid part of an edge tile's scratch into C. */
function tileOut(g: GemmShape): Fn {
  const { MR, NV } = g;
  const NR = 4 * NV;
  const f = new Fn("gemm_tile_out", [I32, I32, I32]);
  const [ip, jp, p] = [0, 1, 2];
  const src = f.local(I32), dst = f.local(I32), rows = f.local(I32), cols = f.local(I32), r = f.local(I32), q = f.local(I32);
  const ldc = f.local(I32), mEdge = f.local(I32);
  field(f, p, P.ldc, ldc);
  // rows = min(MR, M - ip*MR), cols = min(NR, N - jp*NR)
  f.get(p).mem(OP.i32load, 2, P.M).get(ip).i32(MR).op(OP.i32mul).op(OP.i32sub).tee(rows).i32(MR).get(rows).i32(MR).op(OP.i32lts).op(OP.select).set(rows);
  f.get(p).mem(OP.i32load, 2, P.N).get(jp).i32(NR).op(OP.i32mul).op(OP.i32sub).tee(cols).i32(NR).get(cols).i32(NR).op(OP.i32lts).op(OP.select).set(cols);
  // the same tile choice as the driver: bottom row (M cut) wins over the right column
  f.get(p).mem(OP.i32load, 2, P.mp).i32(1).op(OP.i32sub).set(mEdge);
  f.get(p).mem(OP.i32load, 2, P.edge);
  f.get(p).mem(OP.i32load, 2, P.mp).get(jp).op(OP.i32add).get(ip).get(ip).get(mEdge).op(i32eq).get(rows).i32(MR).op(OP.i32lts).op(OP.i32and).op(OP.select);
  f.i32(MR * NR * 4).op(OP.i32mul).op(OP.i32add).set(src);
  f.get(p).mem(OP.i32load, 2, P.c).get(ip).i32(MR).op(OP.i32mul).get(ldc).op(OP.i32mul).op(OP.i32add).get(jp).i32(NR * 4).op(OP.i32mul).op(OP.i32add).set(dst);
  f.i32(0).set(r);
  f.forLt(r, rows, 1, () => {
    f.i32(0).set(q);
    f.forLt(q, cols, 1, () => {
      f.get(dst).get(q).i32(4).op(OP.i32mul).op(OP.i32add);
      f.get(src).get(q).i32(4).op(OP.i32mul).op(OP.i32add).mem(OP.f32load, 2, 0);
      f.mem(OP.f32store, 2, 0);
    });
    f.get(src).i32(NR * 4).op(OP.i32add).set(src);
    f.get(dst).get(ldc).op(OP.i32add).set(dst);
  });
  return f;
}

/** The copy loop of one panel: `w` lines (rows of A / columns of B), K elements each, zeros past `lim`. */
function emitPanel(f: Fn, g: GemmShape, l: { K: number; src: number; rs: number; ks: number; dst: number; lim: number; w: number; fast: number }): void {
  const NV = g.NV, NR = 4 * NV;
  const L = () => f.local(I32);
  const r = L(), i = L(), e = L(), end = L();
  const { K, src, rs, ks, dst, lim, w, fast } = l;
  f.get(fast);
  ifElse(
    f,
    () => {
      // contiguous full B panel: two vector copies per k
      f.get(dst).get(K).i32(NR * 4).op(OP.i32mul).op(OP.i32add).set(end);
      f.forLt(dst, end, NR * 4, () => {
        for (let v = 0; v < NV; v++) f.get(dst).get(src).v128load(16 * v).v128store(16 * v);
        f.get(src).get(ks).op(OP.i32add).set(src);
      });
    },
    () => {
      f.i32(0).set(r);
      f.forLt(r, w, 1, () => {
        f.get(dst).get(r).i32(4).op(OP.i32mul).op(OP.i32add).set(i);
        f.get(i).get(K).get(w).op(OP.i32mul).i32(4).op(OP.i32mul).op(OP.i32add).set(end);
        f.get(r).get(lim).op(OP.i32lts);
        ifElse(
          f,
          () => {
            f.get(src).get(r).get(rs).op(OP.i32mul).op(OP.i32add).set(e);
            f.forLt(i, end, 0, () => {
              f.get(i).get(e).mem(OP.f32load, 2, 0).mem(OP.f32store, 2, 0);
              f.get(e).get(ks).op(OP.i32add).set(e);
              f.get(i).get(w).i32(4).op(OP.i32mul).op(OP.i32add).set(i); // forLt steps by 0
            });
          },
          () => {
            f.forLt(i, end, 0, () => {
              f.get(i).f32(0).mem(OP.f32store, 2, 0);
              f.get(i).get(w).i32(4).op(OP.i32mul).op(OP.i32add).set(i);
            });
          },
        );
      });
    },
  );
}

/** gemm_pack_a(ip, P): row panel ip of A (rows strided by sam, elements by sak, in bytes) into ap (unless read in place). */
function packA(g: GemmShape): Fn {
  const { MR } = g;
  const f = new Fn("gemm_pack_a", [I32, I32]);
  const [ip, p] = [0, 1];
  const L = () => f.local(I32);
  const l = { K: L(), src: L(), rs: L(), ks: L(), dst: L(), lim: L(), w: L(), fast: L() };
  field(f, p, P.K, l.K); field(f, p, P.sam, l.rs); field(f, p, P.sak, l.ks);
  f.get(p).mem(OP.i32load, 2, P.srcA).get(ip).i32(MR).op(OP.i32mul).get(l.rs).op(OP.i32mul).op(OP.i32add).set(l.src);
  f.get(p).mem(OP.i32load, 2, P.ap).get(ip).get(l.K).op(OP.i32mul).i32(MR * 4).op(OP.i32mul).op(OP.i32add).set(l.dst);
  f.get(p).mem(OP.i32load, 2, P.M).get(ip).i32(MR).op(OP.i32mul).op(OP.i32sub).set(l.lim);
  f.i32(MR).set(l.w);
  f.i32(0).set(l.fast);
  // rows read in place by the micro kernel: only a panel cut by the M edge needs its zero padding
  f.get(p).mem(OP.i32load, 2, P.aDirect).get(l.lim).i32(MR).op(OP.i32ges).op(OP.i32and).op(OP.brIf, 0);
  emitPanel(f, g, l);
  return f;
}

/** gemm_pack_b(jp, dst, P): column panel jp of B (columns strided by sbn, elements by sbk) to dst. */
function packB(g: GemmShape): Fn {
  const NR = 4 * g.NV;
  const f = new Fn("gemm_pack_b", [I32, I32, I32]);
  const [jp, dst, p] = [0, 1, 2];
  const L = () => f.local(I32);
  const l = { K: L(), src: L(), rs: L(), ks: L(), dst, lim: L(), w: L(), fast: L() };
  field(f, p, P.K, l.K); field(f, p, P.sbn, l.rs); field(f, p, P.sbk, l.ks);
  f.get(p).mem(OP.i32load, 2, P.srcB).get(jp).i32(NR).op(OP.i32mul).get(l.rs).op(OP.i32mul).op(OP.i32add).set(l.src);
  f.get(p).mem(OP.i32load, 2, P.N).get(jp).i32(NR).op(OP.i32mul).op(OP.i32sub).set(l.lim);
  f.i32(NR).set(l.w);
  f.get(l.rs).i32(4).op(XOP.i32eq).get(l.lim).i32(NR).op(OP.i32ges).op(OP.i32and).set(l.fast);
  // a full panel of B^T (columns contiguous in k, as x @ W^T): 4 x 4 transposes
  f.get(l.ks).i32(4).op(XOP.i32eq).get(l.lim).i32(NR).op(OP.i32ges).op(OP.i32and);
  ifElse(f, () => emitTransposedPanel(f, g, l), () => emitPanel(f, g, l));
  return f;
}

const lanes = (...words: number[]) => words.flatMap((w) => [4 * w, 4 * w + 1, 4 * w + 2, 4 * w + 3]);
const SHUF = 0x0d; // i8x16.shuffle
/** (a0 b0 a1 b1), (a2 b2 a3 b3), then (x0 x1 y0 y1), (x2 x3 y2 y3) of two interleaved pairs */
const LO = lanes(0, 4, 1, 5), HI = lanes(2, 6, 3, 7), LO64 = lanes(0, 1, 4, 5), HI64 = lanes(2, 3, 6, 7);

/** B panel from NR columns that are contiguous in k (byte stride rs between columns). */
function emitTransposedPanel(f: Fn, g: GemmShape, l: { K: number; src: number; rs: number; dst: number }): void {
  const NR = 4 * g.NV;
  const col = Array.from({ length: NR }, () => f.local(I32));
  const r = Array.from({ length: 4 }, () => f.local(V128));
  const t = Array.from({ length: 4 }, () => f.local(V128));
  const k = f.local(I32), k4 = f.local(I32), d = f.local(I32);
  for (let c = 0; c < NR; c++) f.get(l.src).get(l.rs).i32(c).op(OP.i32mul).op(OP.i32add).set(col[c]!);
  f.get(l.K).i32(-4).op(OP.i32and).i32(4).op(OP.i32mul).set(k4); // bytes of k covered by whole quads
  f.get(l.dst).set(d);
  f.i32(0).set(k);
  f.forLt(k, k4, 16, () => {
    for (let h = 0; h < NR / 4; h++) {
      for (let c = 0; c < 4; c++) f.get(col[4 * h + c]!).get(k).op(OP.i32add).v128load(0).set(r[c]!);
      f.get(r[0]!).get(r[1]!).op(0xfd, SHUF, ...LO).set(t[0]!);
      f.get(r[0]!).get(r[1]!).op(0xfd, SHUF, ...HI).set(t[1]!);
      f.get(r[2]!).get(r[3]!).op(0xfd, SHUF, ...LO).set(t[2]!);
      f.get(r[2]!).get(r[3]!).op(0xfd, SHUF, ...HI).set(t[3]!);
      // row q of the quad: k + q, columns 4h..4h+3
      f.get(d).get(t[0]!).get(t[2]!).op(0xfd, SHUF, ...LO64).v128store(16 * h);
      f.get(d).get(t[0]!).get(t[2]!).op(0xfd, SHUF, ...HI64).v128store(NR * 4 + 16 * h);
      f.get(d).get(t[1]!).get(t[3]!).op(0xfd, SHUF, ...LO64).v128store(2 * NR * 4 + 16 * h);
      f.get(d).get(t[1]!).get(t[3]!).op(0xfd, SHUF, ...HI64).v128store(3 * NR * 4 + 16 * h);
    }
    f.get(d).i32(4 * NR * 4).op(OP.i32add).set(d);
  });
  // the last K % 4 rows one element at a time
  f.get(l.K).i32(4).op(OP.i32mul).set(k4);
  f.forLt(k, k4, 4, () => {
    for (let c = 0; c < NR; c++) f.get(d).get(col[c]!).get(k).op(OP.i32add).mem(OP.f32load, 2, 0).mem(OP.f32store, 2, 4 * c);
    f.get(d).i32(NR * 4).op(OP.i32add).set(d);
  });
}

/**
 * <name>(lo, hi, P): units u < nb pack column panel u of B (into its place in bp) with
 * `packBIndex` (the matrix's or a convolution's im2col), the others row panel aFirst + u - nb
 * of A. The pass lists only panels that need packing, so threads split real work.
 */
export function packUnits(g: GemmShape, name: string, packAIndex: number, packBIndex: number): Fn {
  const NR = 4 * g.NV;
  const f = new Fn(name, [I32, I32, I32]);
  const [lo, hi, p] = [0, 1, 2];
  const u = f.local(I32), nb = f.local(I32);
  field(f, p, P.nb, nb);
  f.get(lo).set(u);
  f.forLt(u, hi, 1, () => {
    f.get(u).get(nb).op(OP.i32lts);
    ifElse(
      f,
      () => {
        f.get(u);
        f.get(p).mem(OP.i32load, 2, P.bp).get(u).get(p).mem(OP.i32load, 2, P.K).op(OP.i32mul).i32(NR * 4).op(OP.i32mul).op(OP.i32add);
        f.get(p).op(OP.call, packBIndex);
      },
      () => {
        f.get(p).mem(OP.i32load, 2, P.aFirst).get(u).op(OP.i32add).get(nb).op(OP.i32sub);
        f.get(p).op(OP.call, packAIndex);
      },
    );
  });
  return f;
}

/**
 * gemm_batch(lo, hi, base, stride): products [lo, hi) of a batch, each whole on this thread: the
 * pack pass, then every tile, of the product whose parameter block is at base + i*stride. Small
 * batched products (attention's per-head [T, d] @ [d, T]) are then one pool job split by product,
 * instead of one job per product too small to split well.
 */
function batchDriver(packIndex: number, driverIndex: number): Fn {
  const f = new Fn("gemm_batch", [I32, I32, I32, I32]);
  const [lo, hi, base, stride] = [0, 1, 2, 3];
  const i = f.local(I32), p = f.local(I32);
  f.get(lo).set(i);
  f.forLt(i, hi, 1, () => {
    f.get(base).get(i).get(stride).op(OP.i32mul).op(OP.i32add).set(p);
    f.i32(0).get(p).mem(OP.i32load, 2, P.units).get(p).op(OP.call, packIndex);
    f.i32(0).get(p).mem(OP.i32load, 2, P.mp).get(p).i32(0).op(OP.call, driverIndex);
  });
  return f;
}

/** Function order in the module (gemm must be added first, at index 0). */
export const GEMM_FN = { micro: 0, driver: 1, tileOut: 2, packA: 3, packB: 4, pack: 5, cols: 6, batch: 7 } as const;

export function gemmFns(g: GemmShape, fma: boolean): Fn[] {
  const F = GEMM_FN;
  return [
    micro(g, fma), driver(g, F.micro, F.tileOut), tileOut(g), packA(g), packB(g),
    packUnits(g, "gemm_pack", F.packA, F.packB), fusedColsDriver(g, "gemm_cols", F.micro, F.tileOut, F.packB),
    batchDriver(F.pack, F.driver),
  ];
}
