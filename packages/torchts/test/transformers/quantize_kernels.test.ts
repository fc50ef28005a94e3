// The cpu kernels of the quantized linears (composites linearInt8 / linearInt4) against their
// decomposition (dequantize with ops, then F.linear) and a float64 reference: decode-sized and
// prefill-sized inputs, per-channel and group-wise int8, int4 groups of 32/64/128, bias, 3-d inputs.
// Inputs that need gradients take the decomposition (the kernels are inference-only).
import { test } from "node:test";
import assert from "node:assert/strict";
import * as torch from "../../src/index.js";
import { Int4Linear, Int8Linear, quantizeWeight } from "../../src/transformers/index.js";
import { dequantizeInt4, dequantizeInt8, linearInt4, linearInt8 } from "../../src/nn/functional/quantized.js";
import { CPU_COMPOSITES } from "../../src/device/cpu/composites.js";
import type { Tensor } from "../../src/index.js";
import { linearF64 } from "./helpers.js";

/** Counts kernel builds of a composite (each new shape compiles once). */
function countBuilds(name: "linearInt8" | "linearInt4"): { n: number; restore(): void } {
  const orig = CPU_COMPOSITES[name]!;
  const c = { n: 0, restore: () => void (CPU_COMPOSITES[name] = orig) };
  CPU_COMPOSITES[name] = (node) => {
    c.n++;
    return orig(node);
  };
  return c;
}

async function both(f: () => Tensor): Promise<[Float32Array, Float32Array]> {
  const a = (await f().data()) as Float32Array;
  torch.backends.cpu.setCompositeEnabled("all", false);
  try {
    return [a, (await f().data()) as Float32Array];
  } finally {
    torch.backends.cpu.setCompositeEnabled("all", true);
  }
}

const CASES: { bits: 8 | 4; gs: number | undefined; K: number }[] = [
  { bits: 8, gs: undefined, K: 96 }, // per channel
  { bits: 8, gs: undefined, K: 70 }, // per channel, K not a multiple of 16
  { bits: 8, gs: 32, K: 96 },
  { bits: 8, gs: 40, K: 120 }, // groups with a tail of 8
  { bits: 4, gs: 32, K: 96 },
  { bits: 4, gs: 64, K: 128 },
  { bits: 4, gs: 128, K: 256 },
];

test("linearInt8 / linearInt4 kernels match the decomposition and float64 (decode and prefill rows, bias, 3-d)", async () => {
  torch.manualSeed(11);
  for (const { bits, gs, K } of CASES) {
    const name = bits === 8 ? "linearInt8" : "linearInt4";
    const builds = countBuilds(name);
    try {
      for (const [lead, N] of [[[1], 37], [[3], 16], [[2, 3], 9], [[8], 40], [[2, 20], 12]] as const) {
        const w = torch.randn(N, K);
        const { q, scale } = await quantizeWeight(w, bits, gs);
        const G = scale.shape[1]!;
        const wd = bits === 8 ? dequantizeInt8(q, scale) : dequantizeInt4(q, scale, K, K / G);
        for (const bias of [null, torch.randn(N)]) {
          const x = torch.randn(...lead, K);
          const f = () => (bits === 8 ? linearInt8(x, q, scale, bias) : linearInt4(x, q, scale, bias, K, K / G));
          assert.deepEqual(f().shape, [...lead, N]);
          const [fast, ref] = await both(f);
          const r64 = await linearF64(x, wd, bias);
          const what = `int${bits} gs=${gs ?? "row"} K=${K} x=[${lead}] N=${N} bias=${bias !== null}`;
          for (let i = 0; i < r64.length; i++) {
            const tol = 2e-6 * Math.sqrt(K) * (1 + Math.abs(r64[i]!));
            assert.ok(Math.abs(fast[i]! - r64[i]!) <= tol, `${what} [${i}] kernel ${fast[i]} vs ${r64[i]}`);
            assert.ok(Math.abs(fast[i]! - ref[i]!) <= tol, `${what} [${i}] kernel ${fast[i]} vs decomposition ${ref[i]}`);
          }
        }
      }
      assert.ok(builds.n > 0, `the ${name} kernel was not used`);
    } finally {
      builds.restore();
    }
  }
});

test("quantized linears: inputs that require grad take the differentiable decomposition", async () => {
  torch.manualSeed(12);
  const w = torch.randn(8, 64);
  for (const bits of [8, 4] as const) {
    const { q, scale } = await quantizeWeight(w, bits, bits === 8 ? undefined : 32);
    const layer = bits === 8 ? new Int8Linear(q, scale, null) : new Int4Linear(q, scale, null, 64, 32);
    const x = torch.randn(2, 64, { requiresGrad: true });
    const y = layer.forward(x);
    assert.ok(y.requiresGrad);
    y.sum().backward();
    const expect = (await layer.dequantize().sum(0).data()) as Float32Array;
    const g = (await x.grad!.data()) as Float32Array;
    for (let k = 0; k < 64; k++) assert.ok(Math.abs(g[k]! - expect[k]!) < 1e-5, `int${bits} grad[${k}]`);
    // without grad the same layer runs the kernel and agrees
    const y2 = torch.noGrad(() => layer.forward(x));
    const [a, b] = [(await y.data()) as Float32Array, (await y2.data()) as Float32Array];
    for (let i = 0; i < a.length; i++) assert.ok(Math.abs(a[i]! - b[i]!) < 1e-4, `int${bits} [${i}]`);
  }
});

test("quantized linears check their operands", async () => {
  const { q, scale } = await quantizeWeight(torch.randn(4, 32), 8);
  assert.throws(() => linearInt8(torch.randn(2, 31), q, scale), /linearInt8: mat1 and mat2 shapes cannot be multiplied \(2x31 and 32x4\)/);
  assert.throws(() => linearInt8(torch.randn(2, 32), q.to("int32"), scale), /linearInt8: expected an int8 weight/);
  const p = await quantizeWeight(torch.randn(4, 64), 4, 32);
  assert.throws(() => linearInt4(torch.randn(1, 64), p.q, p.scale, null, 64, 16), /linearInt4: scales \[4, 2\] do not fit 4x64 in groups of 16/);
});
