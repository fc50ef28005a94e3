// Golden op cases under torch.compile: each case's forward and backward (the weighted-sum loss
// of ops.test.ts) are one compiled function; outputs and gradients must match PyTorch with the
// same tolerance table as eager. Each case runs three times: the first two calls run (and record)
// the function, the third replays the recorded kernels.
import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import * as torch from "../../src/index.js";
import type { Tensor } from "../../src/index.js";
import { CASES } from "./cases.js";
import { tolFor, type Tol } from "./tolerances.js";

interface CaseSpec {
  name: string;
  code: string;
  file: string;
  inputs: { name: string; key: string }[];
  outputs: { index: number; key: string; ref64_key?: string }[];
  grad: null | { weights: { output: number; key: string }[]; grads: { input: string; key: string }[] };
}

const DIR = new URL("../fixtures/golden_ops/", import.meta.url);
const manifest = JSON.parse(readFileSync(new URL("manifest.json", DIR), "utf8")) as { cases: CaseSpec[] };

function close(a: number, e: number, tol: Tol): boolean {
  if (Number.isNaN(a) || Number.isNaN(e)) return Number.isNaN(a) && Number.isNaN(e);
  if (a === e) return true;
  if (!Number.isFinite(a) || !Number.isFinite(e)) return false;
  return Math.abs(a - e) <= tol.atol + tol.rtol * Math.abs(e);
}

function compare(what: string, got: ArrayLike<number>, refs: ArrayLike<number>[], tol: Tol | null): void {
  for (let i = 0; i < got.length; i++) {
    const a = got[i]!;
    const ok = tol ? refs.some((r) => close(a, r[i]!, tol)) : a === refs[0]![i];
    if (!ok) assert.fail(`${what}: [${i}] got ${a}, expected ${refs.map((r) => r[i]).join(" or ")}`);
  }
}

async function runCase(c: CaseSpec): Promise<void> {
  const fn = CASES[c.name]!;
  const data = torch.safetensors.load(new Uint8Array(readFileSync(new URL(c.file, DIR))), c.file);
  const wantGrad = new Set((c.grad?.grads ?? []).map((g) => g.input));
  const inputs: Record<string, Tensor> = {};
  for (const inp of c.inputs) {
    const t = data[inp.key]!;
    if (wantGrad.has(inp.name)) t.requiresGrad = true;
    inputs[inp.name] = t;
  }
  const step = torch.compile(
    (ins: Record<string, Tensor>) => {
      const res = fn(ins, torch);
      const outs = Array.isArray(res) ? res : [res];
      if (c.grad) {
        let loss: Tensor | null = null;
        for (const w of c.grad.weights) {
          const term = outs[w.output]!.mul(data[w.key]!).sum();
          loss = loss ? loss.add(term) : term;
        }
        loss!.backward();
      }
      return outs.map((o) => o.detach());
    },
    { name: c.name },
  );
  for (let call = 0; call < 3; call++) {
    for (const x of Object.values(inputs)) x.grad = null;
    const outs = step(inputs);
    for (const o of c.outputs) {
      const got = outs[o.index]!;
      const want = await data[o.key]!.data();
      const isFloat = got.dtype.startsWith("float") || got.dtype === "bfloat16";
      const refs = o.ref64_key ? [await data[o.ref64_key]!.data(), want] : [want];
      compare(`${c.code} (call ${call}): output ${o.index}`, await got.data(), refs, isFloat ? tolFor(c.name, "out") : null);
    }
    for (const g of c.grad?.grads ?? []) {
      const x = inputs[g.input]!;
      const want = await data[g.key]!.data();
      const got = x.grad ? await x.grad.data() : new Float32Array(want.length);
      compare(`${c.code} (call ${call}): grad of ${g.input}`, got, [want], tolFor(c.name, "grad"));
    }
  }
}

for (const c of manifest.cases) test(`compile ${c.name}`, () => runCase(c));
