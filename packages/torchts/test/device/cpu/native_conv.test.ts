// conv2d through the native bridge's im2col and GEMM (src/device/cpu/native/conv.ts,
// native/im2col.c, wasm/conv.ts): ungrouped convolutions take it while a native GEMM kernel is in
// use and match the wasm conv path (strides, paddings, dilations, bias, batches, a strided
// input); grouped ones and blas "off" stay on the wasm path; the bridge refuses a wrong im2col
// block without writing. conv.test.ts checks the composite against its decomposition.
import { test } from "node:test";
import assert from "node:assert/strict";
import * as torch from "../../../src/index.js";
import type { Tensor } from "../../../src/index.js";
import type { ConvOpts } from "../../../src/nn/functional/conv.js";
import { setCpuBlas } from "../../../src/device/cpu/native/blas.js";
import { IM2COL, nativeConvStats } from "../../../src/device/cpu/native/conv.js";
import { addon, hasKernel } from "./addon.js";

const F = torch.nn.functional;
const native = hasKernel();

async function conv(blas: "auto" | "off", x: Tensor, w: Tensor, b: Tensor | null, opts: ConvOpts): Promise<{ out: Float32Array; ran: number }> {
  setCpuBlas(blas);
  try {
    const c0 = nativeConvStats.calls;
    const out = (await F.conv2d(x, w, b, opts).data()) as Float32Array;
    return { out, ran: nativeConvStats.calls - c0 };
  } finally {
    setCpuBlas("auto");
  }
}

test("native conv2d: the im2col path matches the wasm conv path", { skip: !native }, async () => {
  torch.manualSeed(31);
  const cases: { x: number[]; w: number[]; opts: ConvOpts; bias: boolean; slice?: boolean }[] = [
    { x: [1, 16, 20, 24], w: [32, 16, 3, 3], opts: { padding: 1 }, bias: true },
    { x: [2, 3, 17, 13], w: [8, 3, 3, 5], opts: { padding: [1, 2], stride: [2, 1] }, bias: true },
    { x: [2, 4, 12, 10], w: [5, 4, 3, 2], opts: { stride: 2, dilation: [1, 3], padding: [0, 3] }, bias: false },
    { x: [1, 5, 10, 23], w: [7, 5, 2, 4], opts: { padding: "same" }, bias: false },
    { x: [1, 2, 9, 30], w: [3, 2, 1, 1], opts: {}, bias: true },
    { x: [2, 3, 19, 16], w: [4, 3, 5, 5], opts: { padding: 2, stride: [1, 3] }, bias: true, slice: true },
    { x: [1, 3, 6, 6], w: [2, 3, 7, 7], opts: { padding: 3 }, bias: true }, // kernel wider than the image
  ];
  for (const c of cases) {
    let x = torch.randn(c.slice ? [c.x[0]!, c.x[1]!, c.x[2]!, c.x[3]! + 5] : c.x);
    if (c.slice) x = x.narrow(3, 2, c.x[3]!);
    const w = torch.randn(c.w), b = c.bias ? torch.randn([c.w[0]!]) : null;
    const nat = await conv("auto", x, w, b, c.opts), wasm = await conv("off", x, w, b, c.opts);
    assert.equal(nat.ran, 1, `${JSON.stringify(c)}: the native path ran`);
    assert.equal(wasm.ran, 0, `${JSON.stringify(c)}: blas off: the wasm path ran`);
    assert.equal(nat.out.length, wasm.out.length);
    for (let i = 0; i < nat.out.length; i++)
      assert.ok(Math.abs(nat.out[i]! - wasm.out[i]!) <= 1e-4 * (1 + Math.abs(wasm.out[i]!)), `${JSON.stringify(c)} [${i}]: ${nat.out[i]} vs ${wasm.out[i]}`);
  }
  // strides and dilations whose coordinates leave int32 (the op fuzzer's 2^31) keep the wasm path
  const huge = await conv("auto", torch.randn([1, 2, 5, 5]), torch.randn([3, 2, 3, 3]), null, { stride: [2 ** 31, 2 ** 31] });
  assert.equal(huge.ran, 0, "stride 2^31");
  // grouped convolutions keep the wasm path
  const g = await conv("auto", torch.randn([1, 4, 8, 8]), torch.randn([6, 2, 3, 3]), null, { groups: 2 });
  assert.equal(g.ran, 0, "groups 2");
});

test("native conv2d: the bridge refuses a wrong im2col block without writing", { skip: !native }, () => {
  const b = addon!;
  const mem = new Float32Array(1024);
  const P = new Int32Array(mem.buffer);
  const I = IM2COL;
  // x [1, 4, 4] at 64, 3x3 kernel, pad 1, cols [9][16] at 256
  const block = (over: Record<number, number> = {}) => {
    const w: number[] = [];
    w[I.x] = 64; w[I.Cg] = 1; w[I.H] = 4; w[I.W] = 4; w[I.KH] = 3; w[I.KW] = 3; w[I.OH] = 4; w[I.OW] = 4; w[I.sh] = 1; w[I.sw] = 1;
    w[I.ph] = 1; w[I.pw] = 1; w[I.dh] = 1; w[I.dw] = 1; w[I.cols] = 256; w[I.ldc] = 16;
    P.set(w);
    for (const [k, v] of Object.entries(over)) P[Number(k)] = v;
    for (let i = 0; i < 16; i++) mem[64 + i] = i + 1;
    mem.fill(-7, 256, 256 + 144);
  };
  block();
  b.im2col(mem, 0, 9, 0);
  // the centre tap (row 4) is the image itself
  assert.deepEqual([...mem.subarray(256 + 4 * 16, 256 + 5 * 16)], Array.from({ length: 16 }, (_, i) => i + 1));
  // the top-left tap (row 0): pixel (0, 0) sees the padding, pixel (1, 1) sees x[0, 0]
  assert.equal(mem[256], 0);
  assert.equal(mem[256 + 5], 1);
  for (const over of <Record<number, number>[]>[
    { [I.sh]: 0 }, { [I.ldc]: 15 }, { [I.x]: 1020 }, { [I.cols]: 900 }, { [I.OW]: 0 }, { [I.ph]: -1 },
    { [I.sh]: 2 ** 30 }, { [I.dw]: 2 ** 29 }, // coordinates past int32
  ]) {
    block(over);
    assert.throws(() => b.im2col(mem, 0, 1, 0), /im2col: parameter block or rows out of range/, JSON.stringify(over));
    assert.ok(mem.subarray(256, 400).every((v) => v === -7), `${JSON.stringify(over)}: nothing written`);
  }
  block();
  assert.throws(() => b.im2col(mem, 0, 10, 0), /out of range/, "rows past K");
  assert.throws(() => b.im2col(mem, 0, 1, 4096), /out of range/, "a block past the end");
});
