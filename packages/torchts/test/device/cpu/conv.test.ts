// The cpu `conv2d` composite (im2col gathered into the wasm GEMM's panels; conv1d runs on it
// too) against the decomposition it replaces (setCompositeEnabled("conv2d", false)): outputs and gradients of
// input, weight and bias over strides, paddings (incl. asymmetric 'same'), dilations, groups,
// unbatched and non-contiguous inputs.
import { test } from "node:test";
import assert from "node:assert/strict";
import * as torch from "../../../src/index.js";
import type { Tensor } from "../../../src/index.js";
import type { ConvOpts } from "../../../src/nn/functional/conv.js";
import type { Conv2dGeom } from "../../../src/device/cpu/wasm/conv.js";

const F = torch.nn.functional;

interface Case {
  x: number[];
  w: number[];
  opts: ConvOpts;
  bias?: boolean;
  view?: "transposed" | "sliced"; // feed a non-contiguous view of the input
}

const CASES: Case[] = [
  { x: [1, 64, 20, 24], w: [32, 64, 3, 3], opts: { padding: 1 }, bias: true },
  { x: [2, 3, 17, 13], w: [8, 3, 3, 5], opts: { padding: [1, 2], stride: [2, 1] }, bias: true },
  { x: [2, 4, 11, 9], w: [6, 2, 3, 3], opts: { groups: 2, dilation: 2, padding: 2 }, bias: true },
  { x: [1, 5, 10, 23], w: [7, 5, 2, 4], opts: { padding: "same" } },
  { x: [3, 6, 7, 7], w: [6, 1, 3, 3], opts: { groups: 6, stride: 3 }, bias: true },
  { x: [1, 2, 9, 30], w: [3, 2, 1, 1], opts: {} },
  { x: [2, 4, 12, 10], w: [5, 4, 3, 2], opts: { stride: 2, dilation: [1, 3], padding: [0, 3] }, view: "transposed" },
  { x: [2, 3, 19, 16], w: [4, 3, 5, 5], opts: { padding: 2, stride: [1, 3] }, bias: true, view: "sliced" },
  { x: [3, 8, 8], w: [4, 3, 3, 3], opts: { padding: 1 }, bias: true }, // unbatched
  { x: [2, 3, 5, 5], w: [42, 3, 3, 3], opts: {}, bias: true }, // more channels than pixels: GEMM split over rows
  { x: [1, 64, 10, 12], w: [100, 64, 5, 5], opts: { padding: 2 } }, // long weights: im2col panels packed ahead
  { x: [2, 6, 33], w: [4, 3, 5], opts: { stride: 2, padding: 3, dilation: 2, groups: 2 }, bias: true }, // conv1d
  { x: [4, 9], w: [5, 4, 3], opts: { padding: "same" } }, // conv1d, unbatched
];

function rand(shape: number[], seed: number): Tensor {
  torch.manualSeed(seed);
  return torch.randn(shape);
}

function input(c: Case, seed: number): Tensor {
  if (c.view === "transposed") {
    const [n, ch, h, w] = c.x as [number, number, number, number];
    return rand([n, ch, w, h], seed).transpose(2, 3).detach().requiresGrad_();
  }
  if (c.view === "sliced") {
    const [n, ch, h, w] = c.x as [number, number, number, number];
    return torch.narrow(rand([n, ch, h, w + 3], seed), 3, 1, w).detach().requiresGrad_();
  }
  return rand(c.x, seed).requiresGrad_();
}

async function run(c: Case, composite: boolean): Promise<{ y: Float32Array; gx: Float32Array; gw: Float32Array; gb: Float32Array | null; fn: string }> {
  torch.backends.cpu.setCompositeEnabled("conv2d", composite);
  try {
    const x = input(c, 1);
    const w = rand(c.w, 2).requiresGrad_();
    const b = c.bias ? rand([c.w[0]!], 3).requiresGrad_() : null;
    const y = c.w.length === 3 ? F.conv1d(x, w, b, c.opts) : F.conv2d(x, w, b, c.opts);
    const fn = y.gradFn?.name ?? "";
    // a non-uniform upstream gradient, so every output position matters
    torch.mul(y, rand(y.shape as number[], 4)).sum().backward();
    return {
      y: (await y.data()) as Float32Array,
      gx: (await x.grad!.data()) as Float32Array,
      gw: (await w.grad!.data()) as Float32Array,
      gb: b ? ((await b.grad!.data()) as Float32Array) : null,
      fn,
    };
  } finally {
    torch.backends.cpu.setCompositeEnabled("conv2d", true);
  }
}

function close(got: Float32Array, want: Float32Array, what: string): void {
  assert.equal(got.length, want.length, `${what}: length`);
  let scale = 1;
  for (const v of want) scale = Math.max(scale, Math.abs(v));
  for (let i = 0; i < want.length; i++)
    assert.ok(Math.abs(got[i]! - want[i]!) <= 1e-5 * scale, `${what}[${i}]: ${got[i]} vs ${want[i]}`);
}

for (const c of CASES) {
  test(`conv2d composite = decomposition: x ${c.x} w ${c.w} ${JSON.stringify(c.opts)}${c.bias ? " bias" : ""}${c.view ? ` ${c.view}` : ""}`, async () => {
    const want = await run(c, false);
    const got = await run(c, true);
    if (c.x.length === 4 && c.w.length === 4) assert.equal(got.fn, "ConvolutionBackward0", "the composite ran");
    close(got.y, want.y, "output");
    close(got.gx, want.gx, "grad input");
    close(got.gw, want.gw, "grad weight");
    if (want.gb) close(got.gb!, want.gb, "grad bias");
  });
}

test("conv2d composite under no_grad and float64 input (decomposed)", async () => {
  const x = rand([2, 3, 9, 9], 5), w = rand([4, 3, 3, 3], 6);
  const y = torch.noGrad(() => F.conv2d(x, w, null, { padding: 1 }));
  torch.backends.cpu.setCompositeEnabled("conv2d", false);
  const want = await F.conv2d(x, w, null, { padding: 1 }).data();
  torch.backends.cpu.setCompositeEnabled("conv2d", true);
  close((await y.data()) as Float32Array, want as Float32Array, "no_grad output");
  const y64 = F.conv2d(x.double(), w.double(), null, { padding: 1 });
  assert.equal(y64.dtype, "float64");
  close(Float32Array.from(await y64.data()), want as Float32Array, "float64 output");
});

test("wasm conv from and into plain arrays (staged) matches the JS loops", { skip: process.env.TORCHTS_CPU_BACKEND === "js" }, async () => {
  const { conv2dJs, conv2dWasm } = await import("../../../src/device/cpu/wasm/conv.js");
  const { wasmRuntime } = await import("../../../src/device/cpu/wasm/runtime.js");
  const rt = wasmRuntime()!;
  const geom: Conv2dGeom = { N: 2, Cin: 4, H: 9, W: 11, Cout: 6, KH: 3, KW: 2, OH: 5, OW: 11, stride: [2, 1], pad: [1, 1], dil: [1, 1], groups: 2 };
  const xs = [2, 4, 9, 11], ws = [6, 2, 3, 2];
  const x = Float32Array.from({ length: 2 * 4 * 9 * 11 }, (_, i) => Math.sin(i));
  const w = Float32Array.from({ length: 6 * 2 * 3 * 2 }, (_, i) => Math.cos(i));
  const b = Float32Array.from({ length: 6 }, (_, i) => i - 2);
  const view = (arr: Float32Array, shape: number[]) => {
    const strides = shape.map((_, d) => shape.slice(d + 1).reduce((p, q) => p * q, 1));
    return { arr, off: 0, shape, strides };
  };
  const got = new Float32Array(2 * 6 * 5 * 11), want = new Float32Array(got.length);
  conv2dWasm(rt, geom, view(x, xs), view(w, ws), view(b, [6]), got);
  conv2dJs(geom, view(x, xs), view(w, ws), view(b, [6]), want);
  close(got, want, "staged conv");
});
