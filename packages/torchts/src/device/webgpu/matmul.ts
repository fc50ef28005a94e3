// Tiled matmul: each 16x16 workgroup stages 16x16 tiles of A and B in workgroup memory and
// every thread accumulates a 2x2 block of outputs (a 32x32 output tile per workgroup), so each
// loaded value is reused 32 times. Batch dims (broadcast strides included) map to grid z.
import type { IRNode, ViewMeta } from "../../ir/prims.js";
import { storageType } from "./dtypes.js";
import type { Pass } from "./codegen.js";
import { storeVal } from "./wgsl_ops.js";

const T = 32; // output tile edge; threads are 16x16, each owning 2x2 outputs

export function matmulPass(n: IRNode<"matmul">): Pass {
  const [a, b] = n.inputs as [ViewMeta, ViewMeta];
  const nd = a.shape.length;
  const M = a.shape[nd - 2]!;
  const K = a.shape[nd - 1]!;
  const N = b.shape[nd - 1]!;
  const batch = n.out.shape.slice(0, nd - 2);
  const B = batch.reduce((x, y) => x * y, 1);
  const [sam, sak] = [a.strides[nd - 2]!, a.strides[nd - 1]!];
  const [sbk, sbn] = [b.strides[nd - 2]!, b.strides[nd - 1]!];
  const t = storageType(n.out.dtype);
  const zero = t === "f32" ? "0.0" : "0";
  // batch index -> element offsets of A and B (decomposed over the broadcast batch shape)
  let boff = "var r_ = i32(wg.z); var pa = off(0u); var pb = off(1u);";
  for (let d = batch.length - 1; d >= 0; d--) {
    const s = batch[d]!;
    boff += `{ let c_ = r_ % ${s}; r_ = r_ / ${s}; pa += c_ * ${a.strides[d]}; pb += c_ * ${b.strides[d]}; }`;
  }
  const store = (v: string) => storeVal({ e: v, t }, n.out.dtype);
  const body = `
var<workgroup> As: array<array<${t}, 17>, ${T}>;
var<workgroup> Bs: array<array<${t}, ${T}>, 16>;
@compute @workgroup_size(16, 16)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_id) l: vec3<u32>) {
  ${boff}
  let tx = i32(l.x); let ty = i32(l.y);
  let row0 = i32(wg.y) * ${T}; let col0 = i32(wg.x) * ${T};
  var acc00 = ${zero}; var acc01 = ${zero}; var acc10 = ${zero}; var acc11 = ${zero};
  for (var k0 = 0; k0 < ${K}; k0 += 16) {
    for (var h = 0; h < 2; h++) {
      let r = row0 + ty + 16 * h; let k = k0 + tx;
      var av = ${zero}; if (r < ${M} && k < ${K}) { av = I0[pa + r * ${sam} + k * ${sak}]; }
      As[ty + 16 * h][tx] = av;
      let kb = k0 + ty; let c = col0 + tx + 16 * h;
      var bv = ${zero}; if (kb < ${K} && c < ${N}) { bv = I1[pb + kb * ${sbk} + c * ${sbn}]; }
      Bs[ty][tx + 16 * h] = bv;
    }
    workgroupBarrier();
    for (var k = 0; k < 16; k++) {
      let a0 = As[ty][k]; let a1 = As[ty + 16][k];
      let b0 = Bs[k][tx]; let b1 = Bs[k][tx + 16];
      acc00 += a0 * b0; acc01 += a0 * b1; acc10 += a1 * b0; acc11 += a1 * b1;
    }
    workgroupBarrier();
  }
  let ob = i32(wg.z) * ${M * N};
  let r0 = row0 + ty; let r1 = r0 + 16; let c0 = col0 + tx; let c1 = c0 + 16;
  if (r0 < ${M} && c0 < ${N}) { O[ob + r0 * ${N} + c0] = ${store("acc00")}; }
  if (r0 < ${M} && c1 < ${N}) { O[ob + r0 * ${N} + c1] = ${store("acc01")}; }
  if (r1 < ${M} && c0 < ${N}) { O[ob + r1 * ${N} + c0] = ${store("acc10")}; }
  if (r1 < ${M} && c1 < ${N}) { O[ob + r1 * ${N} + c1] = ${store("acc11")}; }
}`;
  return {
    body,
    custom: true,
    bind: [0, 1],
    inTypes: [storageType(a.dtype), storageType(b.dtype)],
    outType: t,
    threads: B * M * N,
    grid: [Math.ceil(N / T), Math.ceil(M / T), B],
  };
}
