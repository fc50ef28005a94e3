// Test helper for the nn.functional tests: reads golden op cases (real PyTorch outputs and
// float64 gradients of sum(out_i * gw_i)) from test/fixtures/golden_ops with a minimal
// safetensors parser, runs a translation, and checks outputs and input gradients.
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import * as torch from "../../src/index.js";
import type { Tensor } from "../../src/index.js";

export interface GoldenCase {
  name: string;
  code: string;
  file: string;
  inputs: { name: string; key: string; dtype: string; requires_grad: boolean }[];
  outputs: { index: number; key: string; ref64_key?: string }[];
  grad: null | { weights: { output: number; key: string }[]; grads: { input: string; key: string }[] };
}

const DIR = new URL("../fixtures/golden_ops/", import.meta.url);
const manifest = JSON.parse(readFileSync(new URL("manifest.json", DIR), "utf8")) as { cases: GoldenCase[] };
export const goldenCases = manifest.cases;

const DT: Record<string, [torch.DType, number]> = {
  F32: ["float32", 4], F64: ["float64", 8], I64: ["int64", 8], I32: ["int32", 4], BOOL: ["bool", 1], U8: ["uint8", 1],
};

/** Parse a safetensors file into tensors (only the dtypes the op cases use). */
export function loadSafetensors(path: URL): Record<string, Tensor> {
  const buf = readFileSync(path);
  const n = Number(buf.readBigUInt64LE(0));
  const header = JSON.parse(buf.subarray(8, 8 + n).toString("utf8")) as Record<string, { dtype: string; shape: number[]; data_offsets: [number, number] }>;
  const base = 8 + n;
  const out: Record<string, Tensor> = {};
  for (const [k, h] of Object.entries(header)) {
    if (k === "__metadata__") continue;
    const [dtype] = DT[h.dtype] ?? assert.fail(`unsupported safetensors dtype ${h.dtype}`);
    const raw = buf.subarray(base + h.data_offsets[0], base + h.data_offsets[1]);
    const ab = raw.buffer.slice(raw.byteOffset, raw.byteOffset + raw.byteLength);
    let vals: number[];
    if (h.dtype === "F32") vals = Array.from(new Float32Array(ab));
    else if (h.dtype === "F64") vals = Array.from(new Float64Array(ab));
    else if (h.dtype === "I64") vals = Array.from(new BigInt64Array(ab), Number);
    else if (h.dtype === "I32") vals = Array.from(new Int32Array(ab));
    else vals = Array.from(new Uint8Array(ab));
    const flat = torch.tensor(vals, { dtype });
    out[k] = flat.reshape(h.shape);
  }
  return out;
}

export async function flat(t: Tensor): Promise<number[]> {
  return Array.from(await t.data(), Number);
}

export function assertClose(what: string, got: number[], refs: number[][], atol: number, rtol: number): void {
  assert.equal(got.length, refs[0]!.length, `${what}: ${got.length} values, expected ${refs[0]!.length}`);
  const bad: string[] = [];
  for (let i = 0; i < got.length; i++) {
    const a = got[i]!;
    const ok = refs.some((r) => {
      const e = r[i]!;
      if (Number.isNaN(e)) return Number.isNaN(a);
      if (a === e) return true;
      return Number.isFinite(a) && Math.abs(a - e) <= atol + rtol * Math.abs(e);
    });
    if (!ok && bad.length < 5) bad.push(`[${i}] got ${a}, expected ${refs.map((r) => r[i]).join(" or ")}`);
  }
  if (bad.length) assert.fail(`${what}:\n  ${bad.join("\n  ")}`);
}

export type Translation = (inp: Record<string, Tensor>) => Tensor | Tensor[];

/** Run one golden case: outputs vs PyTorch (float32 or float64 reference), then gradients. */
export async function runGolden(name: string, fn: Translation, atol = 1e-6, rtol = 1e-5): Promise<void> {
  const c = goldenCases.find((k) => k.name === name) ?? assert.fail(`no golden case ${name}`);
  const data = loadSafetensors(new URL(c.file, DIR));
  const wantGrad = new Set((c.grad?.grads ?? []).map((g) => g.input));
  const inputs: Record<string, Tensor> = {};
  for (const i of c.inputs) {
    const t = data[i.key]!;
    if (wantGrad.has(i.name)) t.requiresGrad = true;
    inputs[i.name] = t;
  }
  const res = fn(inputs);
  const outs = Array.isArray(res) ? res : [res];
  assert.equal(outs.length, c.outputs.length, `${c.code}: number of outputs`);
  for (const o of c.outputs) {
    const got = outs[o.index]!;
    const want = data[o.key]!;
    assert.deepEqual(got.shape, want.shape, `${c.code}: output ${o.index} shape`);
    const refs = [await flat(want)];
    if (o.ref64_key) refs.push(await flat(data[o.ref64_key]!));
    assertClose(`${c.code}: output ${o.index}`, await flat(got), refs, atol, rtol);
  }
  if (!c.grad) return;
  let loss: Tensor | null = null;
  for (const w of c.grad.weights) {
    const term = torch.sum(torch.mul(outs[w.output]!, data[w.key]!));
    loss = loss ? torch.add(loss, term) : term;
  }
  loss!.backward();
  for (const g of c.grad.grads) {
    const got = inputs[g.input]!.grad;
    assert.ok(got, `${c.code}: no gradient for ${g.input}`);
    assertClose(`${c.code}: grad of ${g.input}`, await flat(got), [await flat(data[g.key]!)], atol, rtol);
  }
}
