// Test helper for the nn.functional tests: reads golden op cases (real PyTorch outputs and
// float64 gradients of sum(out_i * gw_i)) from test/fixtures/golden_ops, runs a translation, and
// checks outputs and input gradients.
import assert from "node:assert/strict";
import * as torch from "../../src/index.js";
import type { Tensor } from "../../src/index.js";
import { cases, caseData } from "../golden/manifest.js";

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
  const c = cases.find((k) => k.name === name) ?? assert.fail(`no golden case ${name}`);
  const data = caseData(c);
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
