// The cpu `layerNorm` / `layerNormBackward` composites (wasm row kernels for contiguous float32,
// JS rows otherwise) against the decomposition they replace (setCompositeEnabled("layerNorm",
// false)): outputs and the input's, weight's and bias's gradients over row lengths with and
// without a vector tail, with and without weight and bias, float32 and float64, in strict, fused
// and compiled (bit-identical to each other), on the JS backend too; a residual (the input's
// gradient summed into another while the weight's and bias's, views of the same buffer, are still
// to come), double backward and a non-contiguous gradient (the decomposition), gradcheck.
import { test } from "node:test";
import assert from "node:assert/strict";
import * as torch from "../../../src/index.js";
import type { Tensor } from "../../../src/index.js";

const F = torch.nn.functional;

interface Out {
  y: number[];
  dx: number[];
  dw: number[] | null;
  db: number[] | null;
  kernels: string[];
}

type Mode = "strict" | "fused" | "compiled";

async function run(shape: number[], dtype: "float32" | "float64", affine: [boolean, boolean], mode: Mode, residual = false): Promise<Out> {
  torch.manualSeed(7);
  const n = shape.at(-1)!;
  const x = torch.randn(shape, { dtype }).mul(3).add(0.25).requiresGrad_(true);
  const w = affine[0] ? torch.randn([n], { dtype }).requiresGrad_(true) : null;
  const b = affine[1] ? torch.randn([n], { dtype }).requiresGrad_(true) : null;
  const g = torch.randn(shape, { dtype });
  const fwd = (xx: Tensor) => {
    const y = F.layerNorm(xx, [n], w, b, 1e-5);
    return residual ? y.add(xx) : y;
  };
  const f = mode === "compiled" ? torch.compile(fwd) : fwd;
  return torch.withEagerMode(mode === "strict" ? "strict" : "fused", async () => {
    let y: Tensor | null = null;
    // compiled replays from its fourth call: the last of four is the one checked
    for (let i = 0; i < (mode === "compiled" ? 4 : 1); i++) {
      x.grad = null;
      if (w) w.grad = null;
      if (b) b.grad = null;
      y = f(x);
      y.backward(g);
    }
    const prof = torch.profiler.profile();
    const y2 = F.layerNorm(x.detach().requiresGrad_(true), [n], w, b, 1e-5);
    y2.backward(g);
    torch.sync();
    prof.stop();
    const arr = async (t: Tensor | null) => (t ? Array.from((await t.data()) as Float32Array | Float64Array) : null);
    return { y: (await arr(y))!, dx: (await arr(x.grad))!, dw: await arr(w?.grad ?? null), db: await arr(b?.grad ?? null), kernels: prof.events.map((e) => e.name) };
  });
}

async function decomposed<T>(fn: () => Promise<T>): Promise<T> {
  torch.backends.cpu.setCompositeEnabled("layerNorm", false);
  try {
    return await fn();
  } finally {
    torch.backends.cpu.setCompositeEnabled("layerNorm", true);
  }
}

function close(a: number[] | null, b: number[] | null, tol: number, what: string): void {
  assert.equal(a === null, b === null, what);
  if (!a || !b) return;
  assert.equal(a.length, b.length, what);
  let worst = 0;
  for (let i = 0; i < a.length; i++) worst = Math.max(worst, Math.abs(a[i]! - b[i]!) / (1 + Math.abs(b[i]!)));
  assert.ok(worst < tol, `${what}: differs by ${worst}`);
}

const SHAPES = [[4, 64, 128], [3, 5], [2, 7, 130], [6, 33], [1, 1], [5, 8]];
const AFFINE: [boolean, boolean][] = [[true, true], [false, false], [true, false], [false, true]];

test("layerNorm composite: outputs and gradients match the decomposition; strict, fused and compiled are bit-identical", async () => {
  for (const shape of SHAPES)
    for (const dtype of ["float32", "float64"] as const)
      for (const affine of AFFINE) {
        const what = `${JSON.stringify(shape)} ${dtype} weight ${affine[0]} bias ${affine[1]}`;
        const ref = await decomposed(() => run(shape, dtype, affine, "strict"));
        const strict = await run(shape, dtype, affine, "strict");
        const tol = dtype === "float32" ? 2e-5 : 1e-12;
        close(strict.y, ref.y, tol, `${what}: y`);
        close(strict.dx, ref.dx, tol, `${what}: dx`);
        close(strict.dw, ref.dw, tol, `${what}: dw`);
        close(strict.db, ref.db, tol, `${what}: db`);
        // the composites ran (forward and backward)
        assert.deepEqual(strict.kernels.filter((k) => k === "composite").length, 2, `${what}: ${strict.kernels.join(" ")}`);
        assert.ok(!ref.kernels.includes("composite"), `${what}: the decomposition ran no composite`);
        for (const mode of ["fused", "compiled"] as const) {
          const o = await run(shape, dtype, affine, mode);
          assert.deepEqual(o.y, strict.y, `${what}: ${mode} y`);
          assert.deepEqual(o.dx, strict.dx, `${what}: ${mode} dx`);
          assert.deepEqual(o.dw, strict.dw, `${what}: ${mode} dw`);
          assert.deepEqual(o.db, strict.db, `${what}: ${mode} db`);
        }
      }
});

test("layerNorm composite: the JS backend's rows agree with the wasm rows", async () => {
  const wasm = await run([3, 37], "float32", [true, true], "strict");
  torch.backends.cpu.setBackend("js");
  try {
    const js = await run([3, 37], "float32", [true, true], "strict");
    // the JS rows ran: they accumulate in float64, so some values round differently
    assert.ok(js.y.some((v, i) => v !== wasm.y[i]) && js.dx.some((v, i) => v !== wasm.dx[i]), "the JS rows ran");
    close(js.y, wasm.y, 2e-6, "y");
    close(js.dx, wasm.dx, 2e-6, "dx");
    close(js.dw, wasm.dw, 2e-6, "dw");
    close(js.db, wasm.db, 2e-6, "db");
  } finally {
    torch.backends.cpu.setBackend("auto");
  }
});

test("layerNorm composite: a residual sums the input's gradient into another before the weight's and bias's, views of the same buffer, are accumulated", async () => {
  for (const mode of ["strict", "fused"] as const) {
    const ref = await decomposed(() => run([4, 16, 24], "float32", [true, true], mode, true));
    const o = await run([4, 16, 24], "float32", [true, true], mode, true);
    close(o.y, ref.y, 2e-5, `${mode} y`);
    close(o.dx, ref.dx, 2e-5, `${mode} dx`);
    close(o.dw, ref.dw, 2e-5, `${mode} dw`);
    close(o.db, ref.db, 2e-5, `${mode} db`);
  }
});

test("layerNorm composite: double backward and a non-contiguous gradient take the decomposition", async () => {
  const second = async () => {
    torch.manualSeed(3);
    const x = torch.randn([5, 6], { dtype: "float64" }).requiresGrad_(true);
    const w = torch.randn([6], { dtype: "float64" }).requiresGrad_(true);
    const y = F.layerNorm(x, [6], w);
    const [gx] = torch.autograd.grad(y.pow(3).sum(), [x], { createGraph: true });
    const [ggx] = torch.autograd.grad(gx!.pow(2).sum(), [x]);
    return Array.from((await ggx!.data()) as Float64Array);
  };
  close(await second(), await decomposed(second), 1e-10, "grad of grad");
  const strided = async () => {
    torch.manualSeed(4);
    const x = torch.randn([6, 9]).requiresGrad_(true);
    const y = F.layerNorm(x, [9]);
    y.backward(torch.randn([9, 6]).t()); // a transposed gradient
    return Array.from((await x.grad!.data()) as Float32Array);
  };
  close(await strided(), await decomposed(strided), 2e-5, "non-contiguous gradient");
});

test("layerNorm composite: gradcheck (float64: the JS rows)", () => {
  torch.manualSeed(5);
  const x = torch.randn([3, 7], { dtype: "float64" }).requiresGrad_(true);
  const w = torch.randn([7], { dtype: "float64" }).requiresGrad_(true);
  const b = torch.randn([7], { dtype: "float64" }).requiresGrad_(true);
  assert.ok(torch.autograd.gradcheck((a: Tensor, c: Tensor, d: Tensor) => F.layerNorm(a, [7], c, d), [x, w, b]));
});
