// Assembles a pass into a complete WGSL module and fills its uniform words.
import type { Pass } from "./codegen.js";
import { f16Helper, HELPERS } from "./wgsl_ops.js";

/** Uniform layout (32 u32 words): 0-15 input offsets, 16-19 scalars as f32, 20-23 scalars as
 * i32/u32, 24 thread count, 25 threads per grid row, 26 zero (keeps NaN/Inf out of constant folding). */
const UNIFORM_WORDS = 32;
export const UNIFORM_BYTES = UNIFORM_WORDS * 4;
export const MAX_OFFSETS = 16;

export function shaderSource(p: Pass, hasF16: boolean): string {
  const outs = p.outTypes ?? [p.outType];
  const lines: string[] = [];
  if (hasF16) lines.push("enable f16;");
  lines.push("struct U { w: array<vec4<u32>, 8> }");
  lines.push("@group(0) @binding(0) var<uniform> u: U;");
  lines.push("fn uw(k: u32) -> u32 { return u.w[k / 4u][k % 4u]; }");
  lines.push("fn off(k: u32) -> i32 { return bitcast<i32>(uw(k)); }");
  lines.push("fn sf(k: u32) -> f32 { return bitcast<f32>(uw(16u + k)); }");
  lines.push("fn si(k: u32) -> i32 { return bitcast<i32>(uw(20u + k)); }");
  lines.push("fn su(k: u32) -> u32 { return uw(20u + k); }");
  // single-output passes call their output O; fused kernels O0, O1, ...
  outs.forEach((t, q) =>
    lines.push(`@group(0) @binding(${q + 1}) var<storage, read_write> ${p.outTypes ? `O${q}` : "O"}: array<${t}>;`),
  );
  p.inTypes.forEach((t, k) => lines.push(`@group(0) @binding(${k + 1 + outs.length}) var<storage, read> I${k}: array<${t}>;`));
  lines.push(HELPERS, f16Helper(hasF16));
  if (p.extra) lines.push(p.extra);
  if (p.custom) lines.push(p.body);
  else
    lines.push(
      "@compute @workgroup_size(64)",
      "fn main(@builtin(global_invocation_id) g: vec3<u32>) {",
      "  let i = i32(g.x + g.y * uw(25u));",
      "  if (i >= i32(uw(24u))) { return; }",
      `  ${p.body}`,
      "}",
    );
  return lines.join("\n");
}

const f32 = new Float32Array(1);
const u32 = new Uint32Array(f32.buffer);

/** Uniform words for one dispatch; returns the grid too. */
export function uniformWords(
  p: Pass,
  offsets: readonly number[],
  scalars: readonly number[],
  out: Uint32Array,
): [number, number, number] {
  out.fill(0);
  p.bind.forEach((k, j) => (out[j] = offsets[k]! >>> 0));
  for (let k = 0; k < 4 && k < scalars.length; k++) {
    const v = scalars[k]!;
    f32[0] = v;
    out[16 + k] = u32[0]!;
    out[20 + k] = Number.isFinite(v) ? Math.trunc(v) >>> 0 : 0;
  }
  out[24] = p.threads;
  if (p.grid) return p.grid;
  const groups = Math.ceil(p.threads / 64);
  const x = Math.min(groups, 65535);
  out[25] = x * 64;
  return [x, Math.ceil(groups / x), 1];
}
