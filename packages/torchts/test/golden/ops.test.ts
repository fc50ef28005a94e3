// Golden op cases: every case of fixtures/golden_ops/manifest.json (real PyTorch outputs and
// float64 gradients) in each eager mode. One test per case per mode, named "<mode> <case>".
import { test } from "node:test";
import assert from "node:assert/strict";
import * as torch from "../../src/index.js";
import type { Tensor } from "../../src/index.js";
import { CASES } from "./cases.js";
import { tolFor, type Tol } from "./tolerances.js";
import { cases, caseData, DTYPE, type CaseSpec } from "./manifest.js";

const MODES = ["debug", "strict", "fused"] as const;

function close(a: number, e: number, tol: Tol): boolean {
  if (Number.isNaN(a) || Number.isNaN(e)) return Number.isNaN(a) && Number.isNaN(e);
  if (a === e) return true;
  if (!Number.isFinite(a) || !Number.isFinite(e)) return false;
  return Math.abs(a - e) <= tol.atol + tol.rtol * Math.abs(e);
}

/** Elementwise: each value must be close to ref64 or to PyTorch's float32 result. */
function compareFloat(what: string, got: ArrayLike<number>, refs: ArrayLike<number>[], tol: Tol): void {
  const bad: string[] = [];
  let worst = 0;
  for (let i = 0; i < got.length; i++) {
    const a = got[i]!;
    if (refs.some((r) => close(a, r[i]!, tol))) continue;
    const e = refs[0]![i]!;
    worst = Math.max(worst, Math.abs(a - e));
    if (bad.length < 5) bad.push(`[${i}] got ${a}, expected ${refs.map((r) => r[i]).join(" or ")}`);
  }
  if (bad.length)
    assert.fail(`${what}: mismatch (rtol ${tol.rtol}, atol ${tol.atol}, max |diff| ${worst.toExponential(3)}):\n  ${bad.join("\n  ")}`);
}

function compareExact(what: string, got: ArrayLike<number>, want: ArrayLike<number>): void {
  const bad: string[] = [];
  for (let i = 0; i < want.length; i++)
    if (got[i] !== want[i] && bad.length < 5) bad.push(`[${i}] got ${got[i]}, expected ${want[i]}`);
  if (bad.length) assert.fail(`${what}: values differ (integer/bool outputs must match exactly):\n  ${bad.join("\n  ")}`);
}

async function runCase(c: CaseSpec): Promise<void> {
  const fn = CASES[c.name];
  assert.ok(fn, `no translation for case ${c.name}`);
  const data = caseData(c);
  const wantGrad = new Set((c.grad?.grads ?? []).map((g) => g.input));
  const inputs: Record<string, Tensor> = {};
  for (const inp of c.inputs) {
    const t = data[inp.key]!;
    if (wantGrad.has(inp.name)) t.requiresGrad = true;
    inputs[inp.name] = t;
  }
  const res = fn(inputs, torch);
  const outs = Array.isArray(res) ? res : [res];
  assert.equal(outs.length, c.outputs.length, `${c.code}: expected ${c.outputs.length} outputs, got ${outs.length}`);

  for (const o of c.outputs) {
    const got = outs[o.index]!;
    const what = `${c.code}: output ${o.index}`;
    assert.equal(got.dtype, DTYPE[o.dtype], `${what}: dtype`);
    assert.deepEqual(got.shape, o.shape, `${what}: shape`);
    const g = await got.data();
    const want = await data[o.key]!.data();
    if (got.dtype.startsWith("float") || got.dtype === "bfloat16") {
      const refs = o.ref64_key ? [await data[o.ref64_key]!.data(), want] : [want];
      compareFloat(what, g, refs, tolFor(c.name, "out"));
    } else compareExact(what, g, want);
  }

  if (!c.grad) return;
  let loss: Tensor | null = null;
  for (const w of c.grad.weights) {
    const term = outs[w.output]!.mul(data[w.key]!).sum();
    loss = loss ? loss.add(term) : term;
  }
  assert.ok(loss?.requiresGrad, `${c.code}: the loss does not require grad (its outputs lost their autograd graph)`);
  loss.backward();
  for (const g of c.grad.grads) {
    const x = inputs[g.input]!;
    const want = await data[g.key]!.data();
    // an input that the graph reaches with no gradient contribution has grad None in PyTorch only
    // when unused; here the reference stores zeros, so a missing grad is read as zeros
    const got = x.grad ? await x.grad.data() : new Float32Array(want.length);
    if (x.grad) assert.deepEqual(x.grad.shape, x.shape, `${c.code}: grad of ${g.input}: shape`);
    compareFloat(`${c.code}: grad of ${g.input}`, got, [want], tolFor(c.name, "grad"));
  }
}

for (const mode of MODES)
  for (const c of cases)
    test(`${mode} ${c.name}`, async () => {
      const prev = torch.getEagerMode();
      torch.setEagerMode(mode);
      try {
        await runCase(c);
      } finally {
        torch.setEagerMode(prev);
      }
    });
