// The webgpu kernel of the `pagedAttention` composite (nn/functional/paged_attention.ts): one thread per
// (new token, query head) walks its sequence's keys with an online softmax, reading cached positions in
// place through the block table and the sequence's own new keys after them (causal). Shapes and strides
// are baked into the source; view offsets come from the uniform block. Simple rather than fast: the
// point is that nothing of the context's size is gathered per step on this device either.
import type { IRNode, ViewMeta } from "../../ir/prims.js";
import type { Pass } from "./codegen.js";

export function pagedAttentionPass(n: IRNode<"composite">): Pass {
  const [q, k, v, kc, vc, tb, cu, ls] = n.inputs as ViewMeta[];
  const [T, Hq, E] = q!.shape as [number, number, number];
  const [Hk, Ev] = [k!.shape[1]!, v!.shape[2]!];
  const bs = kc!.shape[1]!;
  const B = tb!.shape[0]!;
  const nrep = Hq / Hk;
  const scale = n.params.attrs.scale as number;
  const [qs, ks, vs, kcs, vcs, ts, cs, lss] = [q!, k!, v!, kc!, vc!, tb!, cu!, ls!].map((x) => x.strides);
  const f = (x: number) => (Number.isInteger(x) ? `${x}.0` : `${x}`);
  const body = `
  let t = i / ${Hq}; let h = i % ${Hq}; let hk = h / ${nrep};
  var b = 0;
  for (var j = 0; j < ${B}; j++) { if (I6[off(6u) + (j + 1) * ${cs![0]}] <= t) { b = j + 1; } }
  let q0 = I6[off(6u) + b * ${cs![0]}];
  let cached = I7[off(7u) + b * ${lss![0]}];
  let S = cached + (t - q0) + 1;
  var qv: array<f32, ${E}>;
  for (var e = 0; e < ${E}; e++) { qv[e] = I0[off(0u) + t * ${qs![0]} + h * ${qs![1]} + e * ${qs![2]}]; }
  var acc: array<f32, ${Ev}>;
  var m = -3.0e38; var l = 0.0;
  for (var j = 0; j < S; j++) {
    var kb = 0; var vb = 0; var s = 0.0;
    if (j < cached) {
      let blk = I5[off(5u) + b * ${ts![0]} + (j / ${bs}) * ${ts![1]}];
      kb = off(3u) + blk * ${kcs![0]} + (j % ${bs}) * ${kcs![1]} + hk * ${kcs![2]};
      vb = off(4u) + blk * ${vcs![0]} + (j % ${bs}) * ${vcs![1]} + hk * ${vcs![2]};
      for (var e = 0; e < ${E}; e++) { s += qv[e] * I3[kb + e * ${kcs![3]}]; }
    } else {
      let r = q0 + j - cached;
      kb = off(1u) + r * ${ks![0]} + hk * ${ks![1]};
      vb = off(2u) + r * ${vs![0]} + hk * ${vs![1]};
      for (var e = 0; e < ${E}; e++) { s += qv[e] * I1[kb + e * ${ks![2]}]; }
    }
    s = s * ${f(scale)};
    let mn = max(m, s); let a = exp(m - mn); let p = exp(s - mn);
    l = l * a + p;
    if (j < cached) { for (var e = 0; e < ${Ev}; e++) { acc[e] = acc[e] * a + p * I4[vb + e * ${vcs![3]}]; } }
    else { for (var e = 0; e < ${Ev}; e++) { acc[e] = acc[e] * a + p * I2[vb + e * ${vs![2]}]; } }
    m = mn;
  }
  for (var e = 0; e < ${Ev}; e++) { O[i * ${Ev} + e] = acc[e] / l; }`;
  return {
    body,
    bind: [0, 1, 2, 3, 4, 5, 6, 7],
    inTypes: ["f32", "f32", "f32", "f32", "f32", "i32", "i32", "i32"],
    outType: "f32",
    threads: T * Hq,
  };
}
