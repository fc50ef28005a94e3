// Run-time generated wasm kernels: each supported op against the JS kernel's semantics bit for
// bit (special values included), fused wasm kernels bit-identical to strict eager over the index
// patterns they handle (contiguous, broadcast, strided, masks, row/column/full reductions),
// staging of operands outside the shared memory, threads, and the disk-cache source round trip.
import { test } from "node:test";
import assert from "node:assert/strict";
import * as torch from "../../../src/index.js";
import { wasmFusedStats, wasmSingle, buildWasmFused } from "../../../src/device/cpu/wasm/fused_wasm.js";
import { fusedSource, loadFused } from "../../../src/device/cpu/fused.js";
import { setNumThreads, getNumThreads, wasmRuntime } from "../../../src/device/cpu/wasm/index.js";
import type { IRNode } from "../../../src/ir/prims.js";
import type { FusedGraph } from "../../../src/runtime/fused_graph.js";

const on = process.env.TORCHTS_CPU_BACKEND !== "js";
const F = torch.nn.functional;

const SPECIAL = [0, -0, 1, -1, 0.5, -2.5, 3.5, 1e-30, -1e-30, 1e30, -1e30, 88.5, -104, 9.5, -9.5, Infinity, -Infinity, NaN, 3e-39];
function data(n: number, seed: number): Float32Array {
  const a = new Float32Array(n);
  let s = seed;
  for (let i = 0; i < n; i++) {
    s = (s * 1103515245 + 12345) >>> 0;
    a[i] = i < SPECIAL.length ? SPECIAL[i]! : ((s / 4294967296) * 2 - 1) * 12;
  }
  return a;
}
const same = (a: ArrayLike<number>, b: ArrayLike<number>) => {
  assert.equal(a.length, b.length);
  for (let i = 0; i < a.length; i++) if (!Object.is(a[i], b[i]) && !(a[i] !== a[i] && b[i] !== b[i])) return `element ${i}: ${a[i]} vs ${b[i]}`;
  return "";
};
const view = (shape: number[], strides?: number[]) => ({ shape, strides: strides ?? contiguous(shape), dtype: "float32" as const });
function contiguous(s: number[]): number[] {
  const st: number[] = [];
  let acc = 1;
  for (let i = s.length - 1; i >= 0; i--) {
    st[i] = acc;
    acc *= s[i]!;
  }
  return st;
}

test("wasm elementwise ops compute exactly what the JS kernels compute", { skip: !on }, () => {
  const n = 1027; // a scalar tail after the vectors
  const x = data(n, 1), y = data(n, 2).reverse();
  const rt = wasmRuntime()!;
  const fr = Math.fround;
  const unary: Record<string, (v: number) => number> = {
    neg: (v) => -v, abs: Math.abs, sqrt: Math.sqrt, rsqrt: (v) => 1 / Math.sqrt(v), reciprocal: (v) => 1 / v,
    floor: Math.floor, ceil: Math.ceil, trunc: Math.trunc, identity: (v) => v,
    round: (v) => (Number.isFinite(v) && Math.abs(v - Math.trunc(v)) === 0.5 ? 2 * Math.round(v / 2) : Math.round(v)),
    exp: rt.exports.vm_exp!, tanh: rt.exports.vm_tanh!, sigmoid: rt.exports.vm_sigmoid!,
  };
  for (const [op, ref] of Object.entries(unary)) {
    const k = wasmSingle({ prim: "unary", params: { op }, inputs: [view([n])], out: view([n]) } as IRNode);
    assert.ok(k, op);
    const out = new Float32Array(n);
    assert.ok(k([out], [x], [0]));
    assert.equal(same(out, Array.from(x, (v) => fr(ref(v)))), "", op);
  }
  const binary: Record<string, (a: number, b: number) => number> = {
    add: (a, b) => a + b, sub: (a, b) => a - b, mul: (a, b) => a * b, div: (a, b) => a / b,
    maximum: (a, b) => (a !== a || b !== b ? NaN : a > b ? a : b),
    minimum: (a, b) => (a !== a || b !== b ? NaN : a < b ? a : b),
  };
  for (const [op, ref] of Object.entries(binary)) {
    const k = wasmSingle({ prim: "binary", params: { op }, inputs: [view([n]), view([n])], out: view([n]) } as IRNode)!;
    const out = new Float32Array(n);
    assert.ok(k([out], [x, y], [0, 0]));
    assert.equal(same(out, Array.from(x, (v, i) => fr(ref(v, y[i]!)))), "", op);
  }
  for (const [op, ref] of Object.entries({ eq: (a: number, b: number) => a === b, ne: (a: number, b: number) => a !== b,
    lt: (a: number, b: number) => a < b, le: (a: number, b: number) => a <= b, gt: (a: number, b: number) => a > b, ge: (a: number, b: number) => a >= b })) {
    const k = wasmSingle({ prim: "binary", params: { op }, inputs: [view([n]), view([n])], out: { ...view([n]), dtype: "bool" } } as IRNode)!;
    const out = new Uint8Array(n);
    assert.ok(k([out], [x, x.map((v, i) => (i % 3 ? y[i]! : v))], [0, 0]));
    assert.equal(same(out, Array.from(x, (v, i) => (ref(v, i % 3 ? y[i]! : v) ? 1 : 0))), "", op);
  }
  // signed zeros: JS max(+0, -0) keeps the second operand
  const k = wasmSingle({ prim: "binary", params: { op: "maximum" }, inputs: [view([4]), view([4])], out: view([4]) } as IRNode)!;
  const out = new Float32Array(4);
  k([out], [new Float32Array([0, -0, -0, 0]), new Float32Array([-0, 0, -0, 0])], [0, 0]);
  assert.deepEqual(Array.from(out).map((v) => Object.is(v, -0)), [true, false, true, false]);
});

test("tanh saturates to exactly +-1 like Math.tanh", { skip: !on }, () => {
  const rt = wasmRuntime()!;
  for (const v of [9.5, 20, 1e30, Infinity]) {
    assert.equal(rt.exports.vm_tanh!(v), 1);
    assert.equal(rt.exports.vm_tanh!(-v), -1);
  }
  for (const v of [7.95, 8, 8.5, -8.9]) assert.ok(Math.abs(rt.exports.vm_tanh!(v) - Math.tanh(v)) < 1.2e-7, `tanh(${v})`);
});

async function strictVsFused(name: string, f: () => torch.Tensor): Promise<void> {
  const s = await torch.withEagerMode("strict", () => f()).data();
  const runs = wasmFusedStats.runs;
  const fu = await torch.withEagerMode("fused", () => {
    const r = f();
    torch.sync();
    return r;
  }).data();
  assert.equal(same(s, fu), "", name);
  if (on) assert.ok(wasmFusedStats.runs > runs, `${name}: the fused kernel ran in wasm`);
}

test("fused wasm kernels are bit-identical to strict eager", async () => {
  torch.manualSeed(3);
  const a = torch.randn([64, 513]).mul(4), b = torch.randn([513]), c = torch.randn([64, 1]), d = torch.randn([513, 64]).t();
  const s = torch.randn([7]);
  const x3 = torch.randn([8, 64, 67]), b3 = torch.randn([67]), c3 = torch.randn([8, 64, 1]);
  const mask = torch.ones([64, 513]).tril().eq(0), mrow = torch.randn([513]).gt(0);
  const cases: [string, () => torch.Tensor][] = [
    ["affine tanh", () => a.mul(1.7).add(0.3).tanh()],
    ["broadcast", () => a.add(b).mul(c).exp().sigmoid()],
    ["strided", () => a.sub(d).abs().sqrt().reciprocal().rsqrt()],
    ["max/min", () => torch.maximum(a, d).sub(torch.minimum(a, c)).div(b)],
    ["small", () => s.mul(2).exp().tanh().neg()],
    ["rounding", () => a.floor().add(a.ceil()).add(a.mul(2.5).round()).add(a.trunc())],
    ["masked fill", () => a.mul(0.125).maskedFill(mask, -Infinity).exp()],
    ["where row mask", () => torch.where(mrow, a, a.mul(2)).add(1)],
    ["where transposed mask", () => torch.where(mask.t().t(), a.exp(), a.neg())],
    ["relu", () => F.relu(a.mul(2).sub(1))],
    ["relu backward", () => {
      const t = a.mul(1).requiresGrad_();
      F.relu(t).mul(b).sum().backward();
      return t.grad!;
    }],
    ["computed masks", () => torch.where(a.gt(b).logicalNot?.() ?? a.le(b), a.exp(), c).add(a.ge(0).float())],
    ["bool outputs", () => a.mul(3).lt(c).float()],
    ["to bool and back", () => a.floor().bool().float().mul(a)],
    ["row sum (float32 lanes)", () => a.mul(b).sum(-1)],
    ["full sum (float64 order)", () => a.abs().mul(a).sum()],
    ["row sum + epilogue", () => a.mul(c).exp().sum(-1, true).div(3).add(c)],
    ["row max", () => a.mul(b).amax(-1)],
    ["layer norm stats", () => a.sub(c).mul(a.sub(c)).mean(-1, true).add(1e-5).rsqrt()],
    ["strided row sum", () => d.mul(2).sum(-1)],
    ["column sum", () => x3.mul(b3).sum([0, 1])],
    ["column sum + epilogue", () => x3.mul(x3).sum([0, 1], true).mul(b3).sqrt()],
    ["column min", () => x3.mul(c3).amin([0, 1])],
    ["row prod", () => x3.mul(0.9).prod(-1)],
    ["decomposed logSoftmax (log: the JS fused kernel, float32 lanes)", () => {
      torch.backends.cpu.setCompositeEnabled("logSoftmax", false);
      try {
        return F.logSoftmax(a, -1);
      } finally {
        torch.backends.cpu.setCompositeEnabled("logSoftmax", true);
      }
    }],
    ["decomposed softmax", () => {
      torch.backends.cpu.setCompositeEnabled("softmax", false);
      try {
        return torch.softmax(a, -1);
      } finally {
        torch.backends.cpu.setCompositeEnabled("softmax", true);
      }
    }],
  ];
  for (const [name, f] of cases) await strictVsFused(name, f);
  // a materialized prologue value and the reduction in one kernel
  await torch.withEagerMode("fused", async () => {
    const e = a.mul(c).exp();
    const r = e.sum(-1);
    torch.sync();
    const [se, sr] = torch.withEagerMode("strict", () => [a.mul(c).exp(), a.mul(c).exp().sum(-1)]);
    assert.equal(same(await e.data(), await se!.data()), "");
    assert.equal(same(await r.data(), await sr!.data()), "");
  });
});

test("operands outside the shared memory are staged; threads agree with one thread", { skip: !on }, async () => {
  const n = 200003;
  const node = { prim: "binary", params: { op: "mul" }, inputs: [view([n]), view([n])], out: view([n]) } as IRNode<"binary">;
  const tanh = { prim: "unary", params: { op: "tanh" }, inputs: [view([n])], out: view([n]) } as IRNode<"unary">;
  const g: FusedGraph = { kind: "elementwise", reduceAt: -1, nodes: [node, tanh], srcs: [[{ ext: 0 }, { ext: 1 }], [{ node: 0 }]], outputs: [1] };
  const k = buildWasmFused(g)!;
  const x = data(n + 5, 4), y = data(n, 5);
  const ref = new Float32Array(n);
  const js = loadFused(fusedSource(g).replace(/^\/\/wasm:[^\n]*\n/, "")); // the JS kernel alone
  js([ref], [x, y], [5, 0]);
  const threads = getNumThreads();
  try {
    for (const t of [1, 2]) {
      setNumThreads(t);
      const out = new Float32Array(n); // plain arrays: copied in and out
      assert.ok(k([out], [x, y], [5, 0]));
      assert.equal(same(out, ref), "", `threads ${t}`);
    }
    // workers start on first need: once one is up, it loads this module when handed a chunk
    for (let i = 0; i < 200 && torch.backends.cpu.info().workersReady < 1; i++) await new Promise((r) => setTimeout(r, 20));
    if (torch.backends.cpu.info().cores > 1) assert.ok(torch.backends.cpu.info().workersReady >= 1, "a worker started");
    const k2 = buildWasmFused(g)!; // a module created after the worker started: posted to it
    for (const kk of [k, k2]) {
      const out = new Float32Array(n);
      assert.ok(kk([out], [x, y], [5, 0]));
      assert.equal(same(out, ref), "", "with a worker");
    }
  } finally {
    setNumThreads(threads);
  }
});

test("a fused kernel's stored source regenerates the wasm kernel (disk cache)", { skip: !on }, () => {
  const n = 4099;
  const node = { prim: "unary", params: { op: "exp" }, inputs: [view([n])], out: view([n]) } as IRNode<"unary">;
  const neg = { prim: "unary", params: { op: "neg" }, inputs: [view([n])], out: view([n]) } as IRNode<"unary">;
  const g: FusedGraph = { kind: "elementwise", reduceAt: -1, nodes: [node, neg], srcs: [[{ ext: 0 }], [{ node: 0 }]], outputs: [1] };
  const src = fusedSource(g);
  assert.match(src, /^\/\/wasm:/);
  const built = wasmFusedStats.built;
  const k = loadFused(JSON.parse(JSON.stringify(src)) as string);
  assert.equal(wasmFusedStats.built, built + 1);
  const x = data(n, 6), out = new Float32Array(n);
  k([out], [x], [0]);
  const rt = wasmRuntime()!;
  assert.equal(same(out, Array.from(x, (v) => -rt.exports.vm_exp!(v))), "");
});

test("softmax / logSoftmax composites match the decomposition, values and gradients", async () => {
  torch.manualSeed(5);
  for (const shape of [[37, 1031], [3, 5, 7], [6]]) {
    const x = torch.randn(shape).mul(6);
    x.requiresGrad = true;
    const w = torch.randn(shape);
    for (const fn of [(t: torch.Tensor) => torch.softmax(t, -1), (t: torch.Tensor) => F.logSoftmax(t, -1)]) {
      const run = async (composite: boolean) => {
        torch.backends.cpu.setCompositeEnabled("all", composite);
        try {
          x.grad = null;
          const y = fn(x);
          y.mul(w).sum().backward();
          return { y: Array.from(await y.data()), g: Array.from(await x.grad!.data()) };
        } finally {
          torch.backends.cpu.setCompositeEnabled("all", true);
        }
      };
      const c = await run(true), dcmp = await run(false);
      for (let i = 0; i < c.y.length; i++) {
        assert.ok(Math.abs(c.y[i]! - dcmp.y[i]!) <= 1e-6 + 1e-5 * Math.abs(dcmp.y[i]!), `value ${i}: ${c.y[i]} vs ${dcmp.y[i]}`);
        assert.ok(Math.abs(c.g[i]! - dcmp.g[i]!) <= 1e-5 + 1e-4 * Math.abs(dcmp.g[i]!), `grad ${i}: ${c.g[i]} vs ${dcmp.g[i]}`);
      }
    }
  }
  // a softmax over a non-last dim decomposes (no composite kernel)
  const x = torch.randn([4, 6]);
  const prof = torch.profiler.profile();
  torch.softmax(x, 0);
  torch.softmax(x, 1);
  prof.stop();
  assert.equal(prof.events.filter((e) => e.name === "composite").length, 1);
  // extreme logits stay finite
  const big = torch.tensor([[1000, 0, -1000]], { dtype: "float32" });
  assert.deepEqual(await F.logSoftmax(big, -1).tolist(), [[0, -1000, -2000]]);
  assert.deepEqual(await torch.softmax(big, -1).tolist(), [[1, 0, 0]]);
});

test("kernels that differ only in length (or outer rows) share one compiled module", { skip: !on }, () => {
  const fns = () => (wasmRuntime()!.pool as unknown as { fns: unknown[] }).fns.length;
  const graph = (shape: number[], bStrides: number[]): FusedGraph => {
    const n = { prim: "binary", params: { op: "add" }, inputs: [view(shape), view(shape, bStrides)], out: view(shape) } as IRNode<"binary">;
    const t = { prim: "unary", params: { op: "sigmoid" }, inputs: [view(shape)], out: view(shape) } as IRNode<"unary">;
    return { kind: "elementwise", reduceAt: -1, nodes: [n, t], srcs: [[{ ext: 0 }, { ext: 1 }], [{ node: 0 }]], outputs: [1] };
  };
  for (const [mk, sizes] of [
    [(r: number) => graph([r * 7], [1]), [10, 50, 300]],
    [(r: number) => graph([r, 7], [0, 1]), [10, 50, 300]], // a row-broadcast bias over a growing number of rows
  ] as const) {
    const before = fns();
    for (const r of sizes) {
      const g = mk(r);
      const k = buildWasmFused(g)!;
      const x = data(r * 7, r), b = data(r * 7, 2 * r), out = new Float32Array(r * 7), ref = new Float32Array(r * 7);
      k([out], [x, b], [0, 0]);
      loadFused(fusedSource(g).replace(/^\/\/wasm:[^\n]*\n/, ""))([ref], [x, b], [0, 0]);
      assert.equal(same(out, ref), "");
    }
    assert.ok(fns() - before <= 1, `${fns() - before} modules for one pattern`);
  }
});
