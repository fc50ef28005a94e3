// The golden op cases on webgpu: inputs are moved to the device, every case function runs there
// in each eager mode, and outputs and gradients are compared with PyTorch's (tolerances.ts).
import { test } from "node:test";
import assert from "node:assert/strict";
import * as torch from "../../../src/index.js";
import type { Tensor } from "../../../src/index.js";
import { CASES } from "../../golden/cases.js";
import { cases, caseData, DTYPE, type CaseSpec } from "../../golden/manifest.js";
import { webgpuTol, WEBGPU_RAISES } from "./tolerances.js";
import { skip } from "./setup.js";

// "compiled": the case function wrapped in torch.compile (forward inside, backward after)
const MODES = (process.env.TORCHTS_WEBGPU_GOLDEN_MODES ?? "strict,fused,compiled,debug").split(",");

function close(a: number, e: number, rtol: number, atol: number): boolean {
  if (Number.isNaN(a) || Number.isNaN(e)) return Number.isNaN(a) && Number.isNaN(e);
  if (a === e) return true;
  if (!Number.isFinite(a) || !Number.isFinite(e)) return false;
  return Math.abs(a - e) <= atol + rtol * Math.abs(e);
}

function compare(what: string, got: ArrayLike<number>, refs: ArrayLike<number>[], tol: { rtol: number; atol: number }): void {
  const bad: string[] = [];
  for (let i = 0; i < got.length; i++) {
    if (refs.some((r) => close(got[i]!, r[i]!, tol.rtol, tol.atol))) continue;
    if (bad.length < 5) bad.push(`[${i}] got ${got[i]}, expected ${refs.map((r) => r[i]).join(" or ")}`);
  }
  if (bad.length) assert.fail(`${what}: mismatch (rtol ${tol.rtol}, atol ${tol.atol}):\n  ${bad.join("\n  ")}`);
}

// The case functions create some tensors themselves (masks, ranges): `torch` as they see it creates
// them on webgpu, as torch.set_default_device would.
const CREATORS = new Set(["ones", "zeros", "full", "empty", "arange", "linspace", "eye", "tensor", "rand", "randn", "randint", "onesLike", "zerosLike", "fullLike"]);
const onDevice = new Proxy(torch, {
  get(target, key, recv) {
    const v = Reflect.get(target, key, recv) as unknown;
    if (typeof key !== "string" || !CREATORS.has(key) || typeof v !== "function") return v;
    return (...args: unknown[]) => {
      const last = args[args.length - 1];
      const isOpts = typeof last === "object" && last !== null && !Array.isArray(last) && !(last instanceof torch.Tensor);
      if (isOpts) args[args.length - 1] = { device: "webgpu", ...(last as object) };
      else args.push({ device: "webgpu" });
      return (v as (...a: unknown[]) => unknown)(...args);
    };
  },
}) as typeof torch;

async function runCase(c: CaseSpec, compiled: boolean): Promise<void> {
  const data = caseData(c);
  const wantGrad = new Set((c.grad?.grads ?? []).map((g) => g.input));
  const inputs: Record<string, Tensor> = {};
  for (const inp of c.inputs) {
    const t = data[inp.key]!.to("webgpu");
    if (wantGrad.has(inp.name)) t.requiresGrad = true;
    inputs[inp.name] = t;
  }
  const fn = (ins: Record<string, Tensor>) => CASES[c.name]!(ins, onDevice);
  const res = compiled ? torch.compile(fn, { name: c.name })(inputs) : fn(inputs);
  const outs = Array.isArray(res) ? res : [res];
  assert.equal(outs.length, c.outputs.length);
  for (const o of c.outputs) {
    const got = outs[o.index]!;
    const what = `${c.code}: output ${o.index}`;
    assert.equal(got.device, "webgpu", `${what}: device`);
    assert.equal(got.dtype, DTYPE[o.dtype], `${what}: dtype`);
    assert.deepEqual(got.shape, o.shape, `${what}: shape`);
    const g = await got.data();
    const want = await data[o.key]!.data();
    if (got.dtype.startsWith("float") || got.dtype === "bfloat16") {
      const refs = o.ref64_key ? [await data[o.ref64_key]!.data(), want] : [want];
      compare(what, g, refs, webgpuTol(c.name, "out", got.dtype));
    } else compare(what, g, [want], { rtol: 0, atol: 0 });
  }
  if (!c.grad) return;
  let loss: Tensor | null = null;
  for (const w of c.grad.weights) {
    const term = outs[w.output]!.mul(data[w.key]!.to("webgpu")).sum();
    loss = loss ? loss.add(term) : term;
  }
  loss!.backward();
  for (const g of c.grad.grads) {
    const x = inputs[g.input]!;
    const want = await data[g.key]!.data();
    const got = x.grad ? await x.grad.data() : new Float32Array(want.length);
    compare(`${c.code}: grad of ${g.input}`, got, [want], webgpuTol(c.name, "grad", x.dtype));
  }
}

for (const mode of MODES)
  for (const c of cases) {
    const raises = WEBGPU_RAISES[c.name];
    test(`webgpu ${mode} ${c.name}`, { skip }, async () => {
      const compiled = mode === "compiled";
      await torch.withEagerMode(compiled ? "strict" : (mode as "strict"), async () => {
        if (raises) await assert.rejects(runCase(c, compiled), raises.error, raises.reason);
        else await runCase(c, compiled);
        await torch.webgpu.synchronize();
      });
    });
  }
